"""The two forms of each step that engine/plain_core.weights and the plain VJP's former copy of
softmax's operations took, timed alone, interleaved round by round (which runs first
alternating): the bias added into the scores or into a new array; the mask written over every
key or only over the keys from the first to the last that some query masks (rows of more than
128 keys); the mask's shape checked by numpy.broadcast_shapes or numpy.broadcast; the row max's
fix-ups always or only where some max is infinite or NaN; the row sums by ndarray.sum or
numpy.add.reduce. float32, SmolLM2's shapes (9 query heads, 128 queries).

    python benchmarks/ab_weights_steps.py [--rounds 201]

Prints each form's median and the median and IQR of the per-round ratios new / old.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import footer, header  # noqa: E402


def ab(label, old, new, args_of, rounds):
    times = ([], [])
    for rnd in range(rounds):
        for i in ((0, 1) if rnd % 2 else (1, 0)):
            args = args_of()
            start = time.perf_counter()
            (old, new)[i](*args)
            times[i].append(time.perf_counter() - start)
    o, n = np.array(times[0]), np.array(times[1])
    q1, median, q3 = np.percentile(n / o, [25, 50, 75])
    print(f"{label}: old {np.median(o) * 1e6:.1f} us, new {np.median(n) * 1e6:.1f} us, "
          f"new/old {median:.2f} (IQR {q1:.2f}-{q3:.2f})")


def masked_keys_only(s, keep):
    hidden = ~keep
    columns = hidden.any(axis=tuple(range(hidden.ndim - 1))) if hidden.ndim > 1 else hidden
    masked = columns.nonzero()[0]
    if masked.size:
        keys = slice(int(masked[0]), int(masked[-1]) + 1)
        np.copyto(s[..., keys], -np.inf, where=hidden[..., keys])


def every_key(s, keep):
    if np.broadcast_shapes(keep.shape, s.shape) == s.shape:
        np.copyto(s, -np.inf, where=np.logical_not(keep))


def checked_by_broadcast(s, keep):
    if not (keep.ndim > s.ndim or np.broadcast(s, keep).shape != s.shape):
        np.copyto(s, -np.inf, where=~keep)


def always(x_max):
    x_max[x_max == -np.inf] = 0.0
    x_max[x_max == np.inf] = np.nan


def where_infinite(x_max):
    if not np.logical_and.reduce(np.isfinite(x_max), axis=None):
        always(x_max)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=201)
    rounds = parser.parse_args().rounds
    rng = np.random.default_rng(0)
    f32 = np.float32
    scores = rng.standard_normal((8, 9, 128, 128), dtype=f32)
    bias = rng.standard_normal((9, 128, 128), dtype=f32)
    block = rng.standard_normal((1, 9, 128, 512), dtype=f32)
    causal_block = np.tril(np.ones((512, 512), bool))[384:]
    grouped = rng.standard_normal((8, 3, 3, 128, 128), dtype=f32)
    causal = np.tril(np.ones((128, 128), bool))
    x_max = rng.standard_normal((8, 3, 3, 128, 1), dtype=f32)
    header(0)
    ab("bias [9,128,128] on [8,9,128,128]: a new array / in place", lambda s, b: s + b,
       lambda s, b: np.add(s, b, out=s), lambda: (scores.copy(), bias), rounds)
    ab("mask [1,9,128,512], a causal block's: every key / the masked keys only", every_key,
       masked_keys_only, lambda: (block.copy(), causal_block), rounds)
    ab("mask [8,3,3,128,128] causal: broadcast_shapes / broadcast, then every key", every_key,
       checked_by_broadcast, lambda: (grouped.copy(), causal), rounds)
    ab("row max's fix-ups [8,3,3,128,1]: always / where some max is infinite", always,
       where_infinite, lambda: (x_max.copy(),), rounds)
    ab("row sums [8,3,3,128,128]: ndarray.sum / numpy.add.reduce",
       lambda s: s.sum(axis=-1, keepdims=True),
       lambda s: np.add.reduce(s, axis=-1, keepdims=True), lambda: (grouped,), rounds)
    footer()


if __name__ == "__main__":
    main()
