"""Time and peak extra memory of full vs blockwise attention as the sequence grows.

    python benchmarks/bench_memory.py [--block-size 128] [--lengths 512 1024 2048 4096]
                                      [--long 16384]
    python benchmarks/bench_memory.py --grad [--lengths 1024 2048 4096 8192]

(with minattn installed, `pip install -e .`, or from the repository root with PYTHONPATH=.)

B = 1, H = 4 heads, d_k = 64, float32. "Peak extra" is the most memory tracemalloc saw allocated
during the call above what was allocated before it (NumPy reports its array buffers to
tracemalloc); it includes the returned arrays. Each function is timed in a separate run with
tracing off, since tracing slows Python down. The full version is not run at --long: its
weights alone would be H * L^2 * 4 bytes (4 GiB at L = 16384).

BLAS runs on one thread unless OPENBLAS_NUM_THREADS / OMP_NUM_THREADS say otherwise: the tiles
are small matrices, and a threaded BLAS spends its time waking threads for them (on a busy
2-core machine, blockwise with block_size 128 ran 25x slower with 2 BLAS threads than with 1).
"""
import argparse
import os
import time
import tracemalloc

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy loads its BLAS

import numpy as np  # noqa: E402

import minattn as ma  # noqa: E402

N_HEADS, D_K = 4, 64
MiB = 2**20


def attention_inputs(length, rng):
    # -> q, k, v, each [B=1, H, L, d_k] float32
    return tuple(rng.standard_normal((1, N_HEADS, length, D_K), dtype=np.float32)
                 for _ in range(3))


def seconds_and_peak(fn):
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return seconds, peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--long", type=int, default=16384, help="blockwise only; 0 to skip")
    parser.add_argument("--grad", action="store_true",
                        help="measure autograd.grad of a scalar loss w.r.t. q, k and v instead")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    try:
        if args.grad:
            return gradient_table(args.lengths, args.block_size, rng)
        return forward_table(args, rng)
    finally:
        print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def forward_table(args, rng):
    b = args.block_size
    print(f"B=1, H={N_HEADS}, d_k={D_K}, float32, block_size={b}, "
          f"BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}; peak extra memory in MiB")
    print(f"{'L':>6} | {'full s':>8} {'full MiB':>9} | {'block s':>8} {'block MiB':>9} | "
          f"{'causal s':>8} {'causal MiB':>10} | {'H*L^2*4 MiB':>11}")
    for length in args.lengths + ([args.long] if args.long else []):
        q, k, v = attention_inputs(length, rng)
        if length in args.lengths:
            full = seconds_and_peak(lambda: ma.scaled_dot_product_attention(q, k, v))
            full_cells = f"{full[0]:8.2f} {full[1] / MiB:9.1f}"
        else:
            full_cells = f"{'-':>8} {'-':>9}"
        block = seconds_and_peak(lambda: ma.blockwise_attention(q, k, v, block_size=b))
        causal = seconds_and_peak(
            lambda: ma.blockwise_attention(q, k, v, causal=True, block_size=b))
        weights = N_HEADS * length**2 * 4
        print(f"{length:>6} | {full_cells} | {block[0]:8.2f} {block[1] / MiB:9.1f} | "
              f"{causal[0]:8.2f} {causal[1] / MiB:10.1f} | {weights / MiB:11.0f}", flush=True)
    if args.long:
        weights = N_HEADS * args.long**2 * 4
        print(f"\nAt L={args.long}: blockwise peak extra {block[1] / MiB:.1f} MiB "
              f"(output alone {N_HEADS * args.long * D_K * 4 / MiB:.0f} MiB) vs "
              f"{weights / 2**30:.0f} GiB for the full attention weights alone "
              f"({weights / block[1]:.0f}x less).")


def gradient_table(lengths, block, rng):
    # The gradient of sum(output * R) with respect to q, k and v together.
    from autograd import grad

    print(f"gradient w.r.t. q, k, v; B=1, H={N_HEADS}, d_k={D_K}, float32, causal, block_size={block}")
    print(f"{'L':>6} | {'blockwise s':>11} {'peak MiB':>9} | {'q,k,v,R MiB':>11} | {'H*L^2*4 MiB':>11}")
    for length in lengths:
        q, k, v = attention_inputs(length, rng)
        r = rng.standard_normal(q.shape, dtype=np.float32)
        loss = lambda qkv: np.sum(ma.blockwise_attention(*qkv, causal=True, block_size=block) * r)
        seconds, peak = seconds_and_peak(lambda: grad(loss)((q, k, v)))
        print(f"{length:>6} | {seconds:11.2f} {peak / MiB:9.1f} | {4 * q.nbytes / MiB:11.0f} | "
              f"{N_HEADS * length**2 * 4 / MiB:11.0f}", flush=True)


if __name__ == "__main__":
    main()
