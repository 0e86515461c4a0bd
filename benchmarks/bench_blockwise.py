"""blockwise_attention against torch's scaled_dot_product_attention at long sequences, causal,
forward, in the same process, interleaved (benchmarks/_harness.py).

    python benchmarks/bench_blockwise.py [--length 16384] [--block-size 512] [--rounds 3] [--busy N]

B=1, H=4, d_k=64, float32. Also the floor: the same tiles' two matrix products alone (q kᵀ and
P v for every tile that causal attention computes), run as blockwise runs them: one head's
query block a piece (engine/threads.tile_entries: a 512 x 512 tile of float32 scores is 1 MiB),
the longest first, spread over worker threads, each product on one BLAS thread
(minattn/engine/threads.py); and blockwise on one thread (under threadpool_limits(1)), to show
what the workers bring.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minattn as ma  # noqa: E402
from _harness import busy, describe, footer, header, interleaved, ratio  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=16384)
    parser.add_argument("--block-size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    import torch

    n, b = args.length, args.block_size
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 4, n, 64), dtype=np.float32) for _ in range(3))
    qt, kt, vt = (torch.from_numpy(a) for a in (q, k, v))

    from minattn.engine.threads import in_threads, n_workers, one_blas_thread

    def query_block(piece):
        head, start = piece
        for k_start in range(0, min(n, start + b), b):
            s = q[0, head, start:start + b, :] @ k[0, head, k_start:k_start + b, :].T
            s @ v[0, head, k_start:k_start + b, :]

    workers = n_workers(q, 4 * n * n)  # read outside the one-thread limit, as blockwise does

    @one_blas_thread()  # as blockwise_attention runs its tiles
    def floor():
        pieces = [(head, start) for start in reversed(range(0, n, b)) for head in range(4)]
        in_threads(query_block, pieces, workers)

    def one_thread():  # the workers follow the BLAS limit: one BLAS thread, one worker
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, user_api="blas"):
            ma.blockwise_attention(q, k, v, causal=True, block_size=b)

    header(args.busy)
    print(f"causal attention forward, B=1 H=4 L={n} d_k=64 float32, block_size={b}; torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads); minattn "
          f"{workers} worker threads")
    with busy(args.busy):
        times = interleaved({
            "minattn blockwise": lambda: ma.blockwise_attention(q, k, v, causal=True, block_size=b),
            "minattn, one thread": one_thread,
            "torch sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True),
            "tile products alone": floor,
        }, args.rounds)
    for name, t in times.items():
        print(f"  {name:<22}{describe(t)}")
    print(f"  blockwise / torch: {ratio(times['minattn blockwise'], times['torch sdpa'])}")
    print(f"  blockwise / floor: {ratio(times['minattn blockwise'], times['tile products alone'])}")
    print(f"  blockwise / blockwise on one thread: "
          f"{ratio(times['minattn blockwise'], times['minattn, one thread'])}")
    footer()


if __name__ == "__main__":
    main()
