"""`python -m minattn generate`: train a tiny causal LM to sort digit strings, then generate
the answers token by token through the KV cache."""
import argparse
import sys

import numpy as np

from .arguments import digit_string, non_negative_int, positive_int
from .common import examples


def add_command(commands):
    gen = commands.add_parser("generate", help="train a tiny causal LM to sort digit strings, "
                                               "then generate through the KV cache",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=examples("python -m minattn generate --digits 314159 "
                                              "--digits 271828"))
    gen.add_argument("--train-steps", type=positive_int, default=300,
                     help="Adam steps (default 300)")
    gen.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of the training (default 0)")
    gen.add_argument("--digits", action="append", default=[], metavar="DIGITS", type=digit_string,
                     help="a 6-digit string to sort (repeatable)")
    gen.set_defaults(run=run)


def run(args):
    from tqdm import tqdm

    from ..models import sorting_lm as train_lm

    prompts = [_digit_prompt(text) for text in args.digits]
    n = train_lm.N_DIGITS
    print(f"Training a {train_lm.CONFIG['n_heads']}-head causal LM to sort {n}-digit strings "
          f"(seed {args.seed}):")
    with tqdm(total=args.train_steps, unit="step", ncols=80, mininterval=0.5,
              file=sys.stderr) as bar:
        def progress(step, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

        params = train_lm.train_sort_model(seed=args.seed, steps=args.train_steps,
                                           callback=progress)
    held_out = train_lm.make_sort_task(np.random.default_rng([args.seed, 1]), 1000)
    print("Generating the answers token by token through the KV cache:")
    bar = lambda steps: tqdm(steps, unit="token", ncols=80, file=sys.stderr)
    acc = train_lm.sort_accuracy(params, held_out, progress=bar)
    shown = np.concatenate([np.array(prompts, dtype=np.int64).reshape(-1, n + 1),
                            held_out[:3, :n + 1]]) if prompts else held_out[:5, :n + 1]
    out = train_lm.generate(params, shown, n, **train_lm.CONFIG)
    for row in out:
        digits, answer = "".join(map(str, row[:n])), "".join(map(str, row[n + 1:]))
        mark = "right" if answer == "".join(sorted(digits)) else "WRONG"
        print(f"  {digits} | {answer}   {mark}")
    print(f"held-out accuracy: {100 * acc:.1f}% of {len(held_out)} unseen strings sorted "
          "exactly")
    return 0


def _digit_prompt(text, option="--digits"):
    from ..models import sorting_lm as train_lm

    return [int(c) for c in digit_string(text, option)] + [train_lm.SEPARATOR]

