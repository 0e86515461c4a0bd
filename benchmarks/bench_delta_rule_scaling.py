"""The chunked gated delta rule alone, at growing L: does its time grow linearly?

    python benchmarks/bench_delta_rule_scaling.py [--lengths 4096,8192,16384,32768] [--rounds 7]

bench_delta_rule.py interleaves the chunked form with the loop, transformers' torch function and
blockwise softmax attention (seconds per call at 32k); on a 2-core VM those neighbours' large
allocations and cache traffic showed in the chunked form's time above 16k. Here it runs alone, in
one process, on one BLAS thread: B = 1, H = 2, d_k = d_v = 128, float32, chunk_size = 64, one
warm-up call per length, then --rounds timed calls; medians and IQR in ms, and each length's
median over the previous one's.
"""
import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import minattn
from minattn.gated_delta_rule import delta_rule


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="4096,8192,16384,32768")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    previous = None
    with threadpool_limits(1):
        for length in map(int, args.lengths.split(",")):
            shape = (1, 2, length, 128)
            q, k = (minattn.l2_normalize(rng.normal(size=shape).astype(np.float32))
                    for _ in range(2))
            v = rng.normal(size=shape).astype(np.float32)
            beta = rng.uniform(size=shape[:-1]).astype(np.float32)
            g = -0.1 * rng.uniform(size=shape[:-1]).astype(np.float32)
            delta_rule(q, k, v, beta, g, chunk_size=64)  # warm-up
            times = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                delta_rule(q, k, v, beta, g, chunk_size=64)
                times.append(1e3 * (time.perf_counter() - start))
            median = float(np.median(times))
            growth = "" if previous is None else f", {median / previous:.2f}x the previous length"
            print(f"L = {length:6d}: {median:8.1f} ms (IQR {np.percentile(times, 25):.1f}-"
                  f"{np.percentile(times, 75):.1f}){growth}")
            previous = median
    print("load average after:  %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
