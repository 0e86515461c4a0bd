"""Exact GELU in float32: minattn's (Abramowitz & Stegun's fit of erfc, in cache-sized chunks)
against scipy.special.erf and torch's GELU, in the same process, interleaved; and each one's
largest error against the float64 GELU of the same float32 inputs.

    python benchmarks/bench_gelu.py [--shape 1920 1536] [--rounds 15] [--busy N]

The default shape is one hidden layer of the sentence encoder (a batch of 32 sentences of 60
word pieces, F = 1536).
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import busy, describe, footer, header, interleaved, ratio  # noqa: E402

from minattn.position_wise import gelu  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs="+", default=[1920, 1536])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    import torch
    from scipy.special import erf

    x = np.random.default_rng(0).normal(scale=3.0, size=args.shape).astype(np.float32)
    xt = torch.from_numpy(x)
    scipy_gelu = lambda: 0.5 * x * (1 + erf(x / np.float32(math.sqrt(2.0))))
    functions = {"minattn gelu": lambda: gelu(x), "scipy erf": scipy_gelu,
                 "torch gelu": lambda: torch.nn.functional.gelu(xt)}
    x64 = x.astype(np.float64)
    exact = 0.5 * x64 * (1 + erf(x64 / math.sqrt(2.0)))
    header(args.busy)
    print(f"float32 GELU of {x.size} elements (shape {tuple(x.shape)}), N(0, 3²) inputs; torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads)")
    with busy(args.busy):
        times = interleaved(functions, args.rounds)
    for name, f in functions.items():
        error = np.abs(np.asarray(f(), dtype=np.float64) - exact).max()
        per = np.median(times[name]) / x.size * 1e9
        print(f"  {name:<14}{describe(times[name])}  {per:5.1f} ns/element  "
              f"max |error| {error:.1e}")
    print(f"  minattn / scipy: {ratio(times['minattn gelu'], times['scipy erf'])}; "
          f"minattn / torch: {ratio(times['minattn gelu'], times['torch gelu'])}")
    footer()


if __name__ == "__main__":
    main()
