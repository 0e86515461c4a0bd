"""How much of a 512-token prefill of SmolLM2-135M is position-wise (elementwise) work on one
core, and what splitting it over two worker threads, each with its own rows, saves: issue 65's
floor for the passes that torch runs on both cores and minattn on one.

    python benchmarks/bench_position_wise_split.py [--rounds 21] [--length 512] [--busy N]

(from the repository root or with PYTHONPATH=.)

Per layer, at SmolLM2's shapes in float32 (D = 576, F = 1536, 9 heads, 3 kv heads of 64):
- swiglu: position_wise.swiglu(gate, up), gate and up the two halves of one [L, 2F] product
  (as a loaded model's fused gate-up product gives them), in one piece (n_workers 1) and in two
  pieces of rows on two worker threads (n_workers 2: what _in_chunks does where BLAS has two
  threads in force and the array is at least 2 * _PER_THREAD elements);
- rms_norm: normalization.rms_norm(x [L, D]), whole and as two halves of rows on two workers,
  each written into its rows of one output;
- residual: x + y [L, D], whole and in two halves alike;
- rope: rope.apply_rope on q [1, 9, L, 64] and k [1, 3, L, 64] (one core; for the total).
Each line: the median over the rounds (and IQR) of one call, times the calls of 30 layers (2
norms, 2 residual adds, 1 swiglu, 2 ropes), one core against two workers, and the sum: what two
cores could take off a prefill's wall time at best for these passes. The same values either way
(checked bit for bit before timing: each row's passes are the same).
"""
import argparse
import os
import sys
import time
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import busy, footer, header  # noqa: E402

D, F, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 576, 1536, 9, 3, 64, 30


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    from minattn import position_wise
    from minattn.engine import threads
    from minattn.normalization import rms_norm
    from minattn.rope import apply_rope

    L = args.length
    rng = np.random.default_rng(0)
    both = rng.standard_normal((L, 2 * F)).astype(np.float32)
    gate, up = both[:, :F], both[:, F:]
    x, y = (rng.standard_normal((L, D)).astype(np.float32) for _ in range(2))
    gamma = rng.standard_normal(D).astype(np.float32)
    q = rng.standard_normal((1, HEADS, L, HEAD_DIM)).astype(np.float32)
    k = rng.standard_normal((1, KV_HEADS, L, HEAD_DIM)).astype(np.float32)
    positions = np.arange(L)
    halves = [slice(0, L // 2), slice(L // 2, L)]

    def swiglu_on(n):
        def call():
            with mock.patch.object(threads, "n_workers", lambda x, work, per_thread: n):
                return position_wise.swiglu(gate, up)
        return call

    def rows_on_two(f, *arrays):
        def call():
            out = np.empty_like(arrays[0])

            def half(rows):
                out[rows] = f(*(a[rows] for a in arrays))
            threads.in_threads(half, halves, 2)
            return out
        return call

    norm = lambda a: rms_norm(a, gamma, eps=1e-5)  # noqa: E731
    add = lambda a, b: a + b  # noqa: E731
    passes = {  # name: (calls per layer, one core, two workers)
        "swiglu": (1, swiglu_on(1), swiglu_on(2)),
        "rms_norm": (2, lambda: norm(x), rows_on_two(norm, x)),
        "residual": (2, lambda: add(x, y), rows_on_two(add, x, y)),
        "rope q,k": (1, lambda: (apply_rope(q, positions, base=1e5),
                                 apply_rope(k, positions, base=1e5)), None),
    }
    for name, (_, one, two) in passes.items():
        if two is not None:
            np.testing.assert_array_equal(one(), two())  # the same bits
    header(args.busy)
    print(f"{L} tokens, float32, {args.rounds} rounds; per layer x {LAYERS} layers")
    with busy(args.busy):
        times = {(name, way): [] for name in passes for way in ("one", "two")}
        for _ in range(args.rounds + 1):  # the first round: warm-up
            for name, (_, one, two) in passes.items():
                for way, f in (("one", one), ("two", two)):
                    if f is None:
                        continue
                    start = time.perf_counter()
                    f()
                    times[name, way].append(time.perf_counter() - start)
    footer()
    total = {"one": 0.0, "two": 0.0}
    print(f"{'pass':10} {'one core, ms/call (IQR)':>26} {'two workers':>24} "
          f"{'x30 layers: one':>16} {'two':>7}")
    for name, (calls, _, two) in passes.items():
        row, per_prefill = [name.ljust(10)], []
        for way in ("one", "two"):
            t = np.asarray(times[name, way][1:] or times[name, "one"][1:]) * 1e3
            q1, m, q3 = np.percentile(t, [25, 50, 75])
            row.append(f"{m:8.3f} ({q1:.3f}-{q3:.3f})".rjust(25))
            per_prefill.append(m * calls * LAYERS)
            total[way] += m * calls * LAYERS
        print(" ".join(row), f"{per_prefill[0]:16.1f} {per_prefill[1]:7.1f}")
    print(f"sum over 30 layers: one core {total['one']:.1f} ms, two workers {total['two']:.1f} ms, "
          f"at best {total['one'] - total['two']:.1f} ms off the prefill")


if __name__ == "__main__":
    main()
