"""The command line.

    python -m minattn                      the tour: worked example, training, attention map
    python -m minattn similarity S1 S2 ... cosine similarities from a real pretrained encoder
    python -m minattn attention "a sentence" --layer 0 --head 0
    python -m minattn exercises DIR        copy the exercise stubs into DIR
    python -m minattn check FILE.py        grade your functions by minattn's properties
    python -m minattn check --pitfall NAME the worked example: a classic bug being caught
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np

EXAMPLE_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # used as both Q and K (W^Q = W^K = identity)
EXAMPLE_V = [[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]]


def worked_example():
    from . import scaled_dot_product_attention

    q, v = np.array(EXAMPLE_Q), np.array(EXAMPLE_V)
    out, weights = scaled_dot_product_attention(q, q, v)
    scores = q @ q.T / 2.0 ** 0.5
    with np.printoptions(precision=4, suppress=True):
        print("1. The worked example: three tokens, queries and keys both =")
        print(q, "\n   V =", v.tolist())
        print("scores = Q K^T / sqrt(d_k), d_k = 2:\n", scores, sep="")
        print("weights = softmax(scores), each row sums to 1:\n", weights, sep="")
        print("output = weights @ V:\n", out, sep="")


def _check_plot_available():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install matplotlib (or, in your minattn "
                         "clone, pip install '.[plot]')") from None


def tour(args):
    from tqdm import tqdm

    from .models import count_task as train
    from .display.terminal import heatmap_text

    if args.plot:
        _check_plot_available()
    to_device, to_host = _device(args.device)
    worked_example()
    print(f"\n2. Training a {train.N_HEADS}-head encoder to count: for each token, how many times "
          f"does it occur in its sequence? (seed {args.seed})")
    with tqdm(total=args.steps, unit="step", ncols=80, mininterval=0.5, file=sys.stdout) as bar:
        def progress(step, loss):
            bar.update(1)
            if step % 10 == 0 or step == args.steps - 1:
                bar.set_postfix(loss=f"{loss:.3f}")

        params = to_host(train.train_count_model(seed=args.seed, steps=args.steps,
                                                 callback=progress, to_device=to_device))
    tokens, targets = train.make_count_task(np.random.default_rng([args.seed, 1]), 1000,
                                            train.LENGTH, train.VOCAB_SIZE)
    acc = train.accuracy(params, tokens, targets)
    _, weights = train.count_model(params, tokens[:1], return_weights=True)
    heads = weights[0][0]  # [H, L, L]: layer 0, first held-out example
    head = train.most_readable_head(heads, tokens[0])
    labels = [train.ALPHABET[t] for t in tokens[0]]
    print(f"\n3. Attention of head {head} on a held-out sequence (rows: queries, columns: keys); "
          "of the heads, the one whose weights on equal tokens add up highest; equal tokens get "
          "equal rows:")
    print(heatmap_text(heads[head], labels, labels))
    if args.plot:
        from .display.plot import save_heatmaps

        save_heatmaps(args.plot, heads, labels, labels, titles=[f"head {h}" for h in range(len(heads))],
                      suptitle="count task: attention per head, one held-out sequence")
        print(f"saved per-head heatmaps to {args.plot}")
    print(f"held-out accuracy: {100 * acc:.1f}% of tokens counted correctly "
          f"({tokens.size} tokens in {len(tokens)} unseen sequences)")
    return 0


def generate(args):
    from tqdm import tqdm

    from .models import sorting_lm as train_lm

    prompts = [_digit_prompt(text) for text in args.digits]
    n = train_lm.N_DIGITS
    print(f"Training a {train_lm.CONFIG['n_heads']}-head causal LM to sort {n}-digit strings "
          f"(seed {args.seed}):")
    with tqdm(total=args.train_steps, unit="step", ncols=80, mininterval=0.5,
              file=sys.stdout) as bar:
        def progress(step, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)

        params = train_lm.train_sort_model(seed=args.seed, steps=args.train_steps,
                                           callback=progress)
    held_out = train_lm.make_sort_task(np.random.default_rng([args.seed, 1]), 1000)
    print("Generating the answers token by token through the KV cache:")
    bar = lambda steps: tqdm(steps, unit="token", ncols=80, file=sys.stdout)
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


def _digit_prompt(text):
    from .models import sorting_lm as train_lm

    if len(text) != train_lm.N_DIGITS or not text.isdigit():
        raise ValueError(f"--digits takes exactly {train_lm.N_DIGITS} digits, got {text!r}")
    return [int(c) for c in text] + [train_lm.SEPARATOR]


def _tree(f):
    return lambda tree: {k: _tree(f)(v) for k, v in tree.items()} if isinstance(tree, dict) \
        else [_tree(f)(v) for v in tree] if isinstance(tree, (list, tuple)) else f(tree)


def _device(name):
    # -> (to_device, to_host) for the tour's training; CuPy only when asked for, and checked
    # before any work so that a missing GPU is one line, not a traceback after the example.
    if name == "cpu":
        return None, lambda tree: tree
    try:
        import cupy
    except ImportError:
        raise SystemExit("--device gpu needs CuPy: pip install cupy-cuda12x or cupy-cuda13x, "
                         "matching your CUDA (nvidia-smi shows it)") from None
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # no driver, or no device: CuPy raises CUDARuntimeError
        raise SystemExit(f"--device gpu: CuPy sees no CUDA device ({error})") from None
    if n_devices == 0:
        raise SystemExit("--device gpu: CuPy sees no CUDA device")
    from .engine import cupy_autograd

    cupy_autograd.register(cupy.ndarray)
    return _tree(cupy.asarray), _tree(cupy.asnumpy)


def similarity(args):
    from .models.pretrained import load_sentence_encoder, similarity_matrix

    encoder = load_sentence_encoder(args.model)
    sims = similarity_matrix(encoder, args.sentences)
    short = [f"[{i}]" for i in range(len(args.sentences))]
    for i, s in enumerate(args.sentences):
        print(f"{short[i]:>4} {s}")
    print(" " * 5 + " ".join(f"{c:>6}" for c in short))
    for i, row in enumerate(sims):
        print(f"{short[i]:>4} " + " ".join(f"{x:6.3f}" for x in row))
    return 0


def attention(args):
    from .display.terminal import heatmap_text
    from .models.pretrained import load_sentence_encoder

    if args.plot:
        _check_plot_available()
    encoder = load_sentence_encoder(args.model)
    tokens, weights = encoder.attention(args.sentence)
    n_layers, n_heads = len(weights), weights[0].shape[0]
    if not 0 <= args.layer < n_layers:
        raise SystemExit(f"--layer must be in [0, {n_layers - 1}], got {args.layer}")
    if not 0 <= args.head < n_heads:
        raise SystemExit(f"--head must be in [0, {n_heads - 1}], got {args.head}")
    print(heatmap_text(weights[args.layer][args.head], tokens, tokens,
                       title=f"layer {args.layer}, head {args.head} (rows: queries, columns: keys)"))
    if args.plot:
        from .display.plot import save_heatmaps

        save_heatmaps(args.plot, weights[args.layer], tokens, tokens,
                      titles=[f"head {h}" for h in range(n_heads)],
                      suptitle=f"layer {args.layer}: {args.sentence}")
        print(f"saved the layer's {n_heads} heads to {args.plot}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python -m minattn",
        description="minattn: attention in NumPy. With no command, runs the tour: the worked "
                    "example, training a tiny encoder, and its attention map.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"minattn {__version__}")
    parser.add_argument("--seed", type=int, default=0, help="seed of the tour's training (default 0)")
    parser.add_argument("--steps", type=positive_int, default=1000,
                        help="training steps in the tour (default 1000)")
    parser.add_argument("--plot", metavar="FILE.png", type=writable_file,
                        help="also save per-head heatmaps (matplotlib); checked before training")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="train on the CPU (NumPy, the default) or on a GPU (CuPy)")
    parser.set_defaults(run=tour)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    sim = commands.add_parser("similarity", help="cosine similarities of sentences (all-MiniLM-L6-v2)")
    sim.add_argument("sentences", nargs="+", metavar="SENTENCE")
    sim.add_argument("--model", metavar="DIR", help="model directory (default: the packaged model)")
    sim.set_defaults(run=similarity)
    att = commands.add_parser("attention", help="one layer's/head's attention over a sentence's word pieces")
    att.add_argument("sentence")
    att.add_argument("--layer", type=non_negative_int, default=0,
                     help="which layer's attention, from 0 (all-MiniLM-L6-v2: 0 to 5; default 0)")
    att.add_argument("--head", type=non_negative_int, default=0,
                     help="which head of that layer, from 0 (all-MiniLM-L6-v2: 0 to 11; default 0)")
    att.add_argument("--plot", metavar="FILE.png", type=writable_file,
                     help="save the layer's heads as heatmaps (matplotlib)")
    att.add_argument("--model", metavar="DIR", help="model directory (default: the packaged model)")
    att.set_defaults(run=attention)
    gen = commands.add_parser("generate", help="train a tiny causal LM to sort digit strings, "
                                               "then generate through the KV cache")
    gen.add_argument("--train-steps", type=positive_int, default=300,
                     help="Adam steps (default 300)")
    gen.add_argument("--seed", type=int, default=0, help="seed of the training (default 0)")
    gen.add_argument("--digits", action="append", default=[], metavar="DIGITS",
                     help="a 6-digit string to sort (repeatable)")
    gen.set_defaults(run=generate)
    ex = commands.add_parser("exercises", help="copy the exercise stubs into a folder")
    ex.add_argument("folder", metavar="DIR")
    ex.set_defaults(run=lambda args: _grader().copy_exercises(args.folder))
    chk = commands.add_parser("check", help="grade your functions (FILE.py) by minattn's properties")
    which = chk.add_mutually_exclusive_group(required=True)
    which.add_argument("file", nargs="?", metavar="FILE.py",
                       help="a file defining some of minattn's functions, by their names")
    which.add_argument("--pitfall", metavar="NAME",
                       help="grade one of minattn.course.pitfalls instead: a bug being caught")
    chk.add_argument("--examples", type=positive_int, default=20,
                     help="examples hypothesis tries per property (default 20)")
    chk.set_defaults(run=check)
    return parser


def _grader():
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise SystemExit("the grader needs hypothesis: pip install hypothesis (or, in your "
                         "minattn clone, pip install '.[check]')") from None
    from .course import grader

    return grader


def check(args):
    grader = _grader()
    if args.pitfall:
        return grader.check_pitfall(args.pitfall, args.examples)
    return grader.check_file(args.file, args.examples)


# argparse types. Each raises ArgumentTypeError with a sentence, so a user reads "must be a
# positive integer, got 'abc'" (argparse would show a ValueError as "invalid <function name>").
def positive_int(text, least=1, what="a positive integer"):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def non_negative_int(text):
    return positive_int(text, least=0, what="an integer >= 0")


def writable_file(text):
    # Checked when the arguments are read, not after a whole training run.
    path = Path(text)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file name")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return text


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except (ImportError, OSError, ValueError) as error:  # a message for the user, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 1
