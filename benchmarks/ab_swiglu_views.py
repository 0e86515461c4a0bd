"""Two checkouts of minattn in one process: the float32 SwiGLU of a fused gate-up product's two
halves (gate, up: [L, F] slices of one [L, 2F] array, as a loaded model's one product gives
them), its value (a prompt's) and its value with both derivatives (a fine-tuning step's), at
SmolLM2-135M's shape, old and new alternating round by round (benchmarks/_harness.py).

    python benchmarks/ab_swiglu_views.py OLD NEW [--rounds 41] [--length 512] [--threads 1]

Prints medians (IQR) of one call, the per-round ratios new / old, the load average before and
after; first checks old and new give the same bits.
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
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    threadpool_limits(args.threads, user_api="blas")
    versions = [checkout(path, "position_wise") for path in (args.old, args.new)]
    F = 1536
    both = np.random.default_rng(0).standard_normal((args.length, 2 * F)).astype(np.float32)
    gate, up = both[:, :F], both[:, F:]
    ways = [{"value": (lambda pw=m.position_wise: pw.swiglu(gate, up)),
             "value and derivatives": (lambda pw=m.position_wise:
                                       pw._swiglu_float32_and_derivatives(("gate", "up"), gate,
                                                                          up))}
            for m in versions]
    for label in ways[0]:
        a, b = ways[0][label](), ways[1][label]()
        for x, y in zip(*((r[0], *r[1].values()) if isinstance(r, tuple) else (r,)
                          for r in (a, b))):
            np.testing.assert_array_equal(x, y)
    header(0)
    print(f"{args.length} x {F} float32 views, {args.threads} BLAS thread(s), {args.rounds} rounds")
    report_ab(alternating(*ways, args.rounds))
    footer()


if __name__ == "__main__":
    main()
