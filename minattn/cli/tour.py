"""`python -m minattn` with no command: the tour. The worked example of section 3 by hand, a
tiny encoder trained to count (on the CPU, or on a GPU through CuPy), and one head's attention."""
import sys

import numpy as np

from .arguments import image_file, non_negative_int, positive_int
from .common import UsageError, _check_plot_available


def add_options(parser):
    """The tour's options, on the top-level parser (the tour runs when no command is given)."""
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seed of the tour's training (default 0)")
    parser.add_argument("--steps", type=positive_int, default=1000,
                        help="training steps in the tour (default 1000)")
    parser.add_argument("--plot", metavar="FILE.png", type=image_file,
                        help="also save per-head heatmaps (matplotlib; .png, .svg or .pdf); "
                             "checked before training")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="train on the CPU (NumPy, the default) or on a GPU (CuPy)")
    parser.set_defaults(run=tour)


EXAMPLE_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]  # used as both Q and K (W^Q = W^K = identity)
EXAMPLE_V = [[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]]


def worked_example():
    from .. import scaled_dot_product_attention

    q, v = np.array(EXAMPLE_Q), np.array(EXAMPLE_V)
    out, weights = scaled_dot_product_attention(q, q, v)
    scores = q @ q.T / 2.0 ** 0.5
    with np.printoptions(precision=4, suppress=True):
        print("1. The worked example: three tokens, queries and keys both =")
        print(q, "\n   V =", v.tolist())
        print("scores = Q K^T / sqrt(d_k), d_k = 2:\n", scores, sep="")
        print("weights = softmax(scores), each row sums to 1:\n", weights, sep="")
        print("output = weights @ V:\n", out, sep="")


def tour(args):
    from tqdm import tqdm

    from ..models import count_task as train
    from ..display.terminal import heatmap_text

    if args.plot:
        _check_plot_available("--plot")
    to_device, to_host = _device(args.device)
    worked_example()
    print(f"\n2. Training a {train.N_HEADS}-head encoder to count: for each token, how many times "
          f"does it occur in its sequence? (seed {args.seed})")
    with tqdm(total=args.steps, unit="step", ncols=80, mininterval=0.5, file=sys.stderr) as bar:
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
        from ..display.plot import save_heatmaps

        save_heatmaps(args.plot, heads, labels, labels, titles=[f"head {h}" for h in range(len(heads))],
                      suptitle="count task: attention per head, one held-out sequence")
        print(f"saved per-head heatmaps to {args.plot}")
    print(f"held-out accuracy: {100 * acc:.1f}% of tokens counted correctly "
          f"({tokens.size} tokens in {len(tokens)} unseen sequences)")
    return 0


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
        raise UsageError("--device gpu needs CuPy: pip install cupy-cuda12x or cupy-cuda13x, "
                         "matching your CUDA (nvidia-smi shows it)", see_help=False) from None
    try:
        n_devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # no driver, or no device: CuPy raises CUDARuntimeError
        raise UsageError(f"--device gpu: CuPy sees no CUDA device ({error})",
                         see_help=False) from None
    if n_devices == 0:
        raise UsageError("--device gpu: CuPy sees no CUDA device", see_help=False)
    from ..engine import cupy_autograd

    cupy_autograd.register(cupy.ndarray)
    return _tree(cupy.asarray), _tree(cupy.asnumpy)

