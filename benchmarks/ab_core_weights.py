"""Two checkouts of minattn in one process: the attention core's weights on NumPy itself, as the
plain VJP recomputes them where the tape did not keep them (the old checkout's
engine/plain_vjps._recomputed_weights, or engine/plain_core.weights where it has one) and as
plain_core.forward computes them with the output, interleaved round by round.

    python benchmarks/ab_core_weights.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 41]

Cases, float32 on one BLAS thread: the LoRA fine-tuning step's core (SmolLM2's 9 query heads
over 3 kv heads, batch 8 x 128, causal), the sentence encoder's (B=32 H=8 L=128, no mask; and a
padding mask), an ALiBi-like bias [9, 128, 128], and a prompt's block of 128 queries over 512
keys (rows of more than 128 keys, causal). Prints each median with its IQR and the median and
IQR of the per-round ratios new / old, the order of the two alternating round by round.
"""
import argparse
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import alternating, checkout, footer, header, report_ab  # noqa: E402


def cases(rng):
    f32 = np.float32
    causal = np.tril(np.ones((128, 128), bool))
    q9 = rng.standard_normal((8, 3, 3, 128, 64), dtype=f32)
    k3 = rng.standard_normal((8, 3, 1, 128, 64), dtype=f32)
    q8, k8 = (rng.standard_normal((32, 8, 128, 64), dtype=f32) for _ in range(2))
    padding = np.arange(128)[None, :] < rng.integers(64, 129, size=32)[:, None]
    bias = rng.standard_normal((9, 128, 128), dtype=f32)
    qb = rng.standard_normal((1, 9, 128, 64), dtype=f32)
    kb = rng.standard_normal((1, 9, 512, 64), dtype=f32)
    block = np.arange(512)[None, :] <= np.arange(384, 512)[:, None]
    scale = 0.125
    return {
        "fine-tuning core [8,3,3,128,128] causal": (q9, k3, causal, None, scale),
        "encoder [32,8,128,128] no mask": (q8, k8, None, None, scale),
        "encoder [32,8,128,128] padding": (q8, k8, padding[:, None, None, :], None, scale),
        "bias [9,128,128] on [8,9,128,128]": (q9.reshape(8, 9, 128, 64),
                                              np.repeat(k3, 3, axis=2).reshape(8, 9, 128, 64),
                                              None, bias, scale),
        "prompt block [1,9,128,512] causal": (qb, kb, block, None, scale),
    }


def weights_of(m):
    # (m: a checkout, its engine.plain_core and engine.plain_vjps imported with it)
    core = m.engine.plain_core
    if hasattr(core, "weights"):
        return core.weights, core.forward
    return m.engine.plain_vjps._recomputed_weights, core.forward


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=41)
    args = parser.parse_args()
    old = checkout(args.old, "engine.plain_core", "engine.plain_vjps")
    old_fs = weights_of(old)
    new = checkout(args.new, "engine.plain_core", "engine.plain_vjps")
    new_fs = weights_of(new)
    work = cases(np.random.default_rng(0))

    def works(fs):
        weights, forward = fs
        out = {}
        for label, (q, k, keep, bias, scale) in work.items():
            v = k  # (the values: k again)
            out[f"weights: {label}"] = lambda q=q, k=k, keep=keep, bias=bias, scale=scale: \
                weights(q, k, keep, bias, scale)
            out[f"forward: {label}"] = lambda q=q, k=k, v=v, keep=keep, bias=bias, scale=scale: \
                forward(q, k, v, keep, bias, scale)
        return out

    header(0)
    with threadpool_limits(1, user_api="blas"):
        for label, f in works(new_fs).items():  # the same bits
            got, want = f(), works(old_fs)[label]()
            for x, y in zip(*(r if isinstance(r, tuple) else (r,) for r in (got, want))):
                np.testing.assert_array_equal(x, y)
        times = alternating(works(old_fs), works(new_fs), args.rounds)
    print(f"BLAS threads 1, {args.rounds} rounds, float32; old {args.old}, new {args.new}")
    report_ab(times)
    footer()


if __name__ == "__main__":
    main()
