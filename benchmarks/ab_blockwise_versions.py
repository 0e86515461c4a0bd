"""Two checkouts of minattn in one process: blockwise_attention's forward, causal, at a long
sequence in large blocks (the issue's case) and at a short one in small blocks over many heads
(tiles that group several heads), interleaved round by round, for a before/after comparison of
the blockwise forward (issue 65).

    python benchmarks/ab_blockwise_versions.py OLD_CHECKOUT NEW_CHECKOUT [--length 8192]
        [--block-size 512] [--rounds 7] [--threads 2]

e.g. `git worktree add /tmp/old <commit>` for OLD. --threads: the BLAS thread limit
(threadpoolctl; the worker threads follow it), 1 or 2. Cases: B=1 H=4 L=--length d=64 causal in
blocks of --block-size; B=4 H=8 L=1024 d=64 causal with a key mask, in blocks of 128. float32.
Prints each median with its IQR and the median and IQR of the per-round ratios new / old, the
order of the two alternating round by round.
"""
import argparse
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import alternating, checkout, footer, header, report_ab  # noqa: E402



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--block-size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    old, new = checkout(args.old), checkout(args.new)
    rng = np.random.default_rng(0)
    n, b = args.length, args.block_size
    long_qkv = [rng.standard_normal((1, 4, n, 64), dtype=np.float32) for _ in range(3)]
    short_qkv = [rng.standard_normal((4, 8, 1024, 64), dtype=np.float32) for _ in range(3)]
    key_mask = rng.random((4, 1, 1024)) < 0.9

    def works(m):
        return {
            f"causal B=1 H=4 L={n} block {b}":
                lambda: m.blockwise_attention(*long_qkv, causal=True, block_size=b),
            "causal + key mask B=4 H=8 L=1024 block 128":
                lambda: m.blockwise_attention(*short_qkv, causal=True, key_mask=key_mask,
                                              block_size=128),
        }

    header(0)
    with threadpool_limits(args.threads, user_api="blas"):
        for label, f in works(new).items():  # the same output
            np.testing.assert_allclose(f(), works(old)[label](), rtol=1e-5, atol=1e-6)
        times = alternating(works(old), works(new), args.rounds)
    print(f"BLAS threads {args.threads}, {args.rounds} rounds, float32; old {args.old}, "
          f"new {args.new}")
    report_ab(times)
    footer()


if __name__ == "__main__":
    main()
