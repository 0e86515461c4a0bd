"""A 512-token prompt's attention core right after a large product on two BLAS threads, as a
prefill layer calls it (the q, k, v product, then the core), against the same core after a
pause: what OpenBLAS's idle thread, spinning after each product, costs the core's worker threads.

    python benchmarks/bench_core_after_product.py [ROUNDS [CALLS]]
    OPENBLAS_THREAD_TIMEOUT=4 python benchmarks/bench_core_after_product.py   (a short spin)

The core: weights_unread(grouped_attention) over q [1, 9, 512, 64], k, v [1, 3, 512, 64] with
a causal mask, as kv_cache.self_attention calls it inside a prompt's timed block
(threads._TUNING.running set: the core keeps the block's threads), NumPy's BLAS on two threads.
Before each core call: x [512, 576] @ W [576, 1536] (SmolLM2's gate and up product) on the two
threads, then either nothing ("after a product": OpenBLAS's worker thread still spins, for
2^OPENBLAS_THREAD_TIMEOUT cycles, by default 2^28, about 0.1 s) or a pause of 0.15 s ("after
a pause": it sleeps). Three ways of running the core's blocks of queries:
- spread: on two worker threads, each with one BLAS thread (threads.spread's workers:
  minattn's way);
- serial, 2 BLAS: one after the other on the threads in force (the spinning thread takes half
  of each product);
- serial, 1 BLAS: one after the other on one BLAS thread.
Each round runs every way and condition CALLS times (default 10), in a rotating order; prints
the median (IQR) over the rounds of each one's median call, wall clock and the process's CPU
time (which counts the spinning thread's), and the OpenBLAS thread timeout in force.
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import describe, footer, header  # noqa: E402


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    from minattn.engine import query_blocks, threads
    from minattn.masks import causal_mask
    from minattn.multi_head import grouped_attention

    header(0)
    print(f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT', '(default)')}")
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 9, 512, 64)).astype(np.float32)
    k, v = (rng.standard_normal((1, 3, 512, 64)).astype(np.float32) for _ in range(2))
    x = rng.standard_normal((512, 576)).astype(np.float32)
    w = rng.standard_normal((576, 1536)).astype(np.float32)
    mask = causal_mask(512)
    core = query_blocks.weights_unread(grouped_attention)
    n_workers = query_blocks.n_workers
    ways = {"spread": (n_workers, 2), "serial, 2 BLAS": (lambda *a: 1, 2),
            "serial, 1 BLAS": (lambda *a: 1, 1)}
    conditions = {"after a product": 0.0, "after a pause": 0.15}
    runs = [(way, condition) for way in ways for condition in conditions]
    wall = {run: [] for run in runs}
    cpu = {run: [] for run in runs}
    threads._TUNING.running = True  # as inside a prompt's block timed on two threads
    try:
        with threadpool_limits(2, user_api="blas"):
            for r in range(rounds + 1):  # (the first: a warm-up)
                for way, condition in runs[r % len(runs):] + runs[:r % len(runs)]:
                    query_blocks.n_workers, blas = ways[way]
                    times = []
                    for _ in range(calls):
                        x @ w
                        time.sleep(conditions[condition])
                        with threadpool_limits(blas, user_api="blas"):
                            start, start_cpu = time.perf_counter(), time.process_time()
                            core(q, k, v, mask)
                            times.append((time.perf_counter() - start,
                                          time.process_time() - start_cpu))
                    if r:
                        wall[way, condition].append(np.median([t[0] for t in times]))
                        cpu[way, condition].append(np.median([t[1] for t in times]))
    finally:
        query_blocks.n_workers = n_workers
        threads._TUNING.running = False
    for run in runs:
        print(f"{run[0]:15s} {run[1]:16s} wall {describe(wall[run])}   CPU {describe(cpu[run])}")
    footer()


if __name__ == "__main__":
    main()
