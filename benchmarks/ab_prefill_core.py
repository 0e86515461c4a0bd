"""Two checkouts of minattn in one process: a 512-token prompt's attention core and SwiGLU at
SmolLM2-135M's shapes, 30 layers' worth each, for a before/after comparison (issue 65).

    python benchmarks/ab_prefill_core.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS [LENGTH [THREADS]]]

- core: weights_unread(grouped_attention) over q [1, 9, L, 64], k, v [1, 3, L, 64] with a
  causal mask, as kv_cache.self_attention calls it in a prompt's block (its products on the
  threads in force, as under the block's timed thread count);
- swiglu: position_wise.swiglu(gate, up) over [1, L, 1536] float32, as gated_feed_forward calls it.
Random float32 inputs (the time depends on the shapes only); THREADS BLAS threads
(threadpoolctl; default 1), the core's as a prompt's timed block running on that count leaves
them (a checkout may split the core's query blocks over that many worker threads).
The two checkouts alternate which runs first, round by round; prints each one's median (IQR)
of the wall clock and of the process's CPU time, the per-round ratios new / old, and the largest
difference of the two results (the new core divides the output by the sums: within rounding).
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout, describe, ratio  # noqa: E402

LAYERS, HEADS, KV_HEADS, HEAD_DIM, FF = 30, 9, 3, 64, 1536


def work(m, length):
    from_blocks = m.engine.query_blocks
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, HEADS, length, HEAD_DIM)).astype(np.float32)
    k, v = (rng.standard_normal((1, KV_HEADS, length, HEAD_DIM)).astype(np.float32)
            for _ in range(2))
    gate, up = (rng.standard_normal((1, length, FF)).astype(np.float32) for _ in range(2))
    mask = m.masks.causal_mask(length)
    core = from_blocks.weights_unread(m.multi_head.grouped_attention)

    def attention():
        m.engine.threads._TUNING.running = True  # as inside a prompt's block
        try:
            return [core(q, k, v, mask)[0] for _ in range(LAYERS)][-1]
        finally:
            m.engine.threads._TUNING.running = False

    return {"core": attention,
            "swiglu": lambda: [m.position_wise.swiglu(gate, up) for _ in range(LAYERS)][-1]}


def main():
    old_path, new_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 11
    length = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    n_threads = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    modules = ("engine.query_blocks", "engine.threads", "multi_head", "masks", "position_wise")
    versions = {"old": work(checkout(old_path, *modules), length),
                "new": work(checkout(new_path, *modules), length)}
    print("load before", os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    print(f"{n_threads} BLAS thread(s), {rounds} rounds, {length} tokens")
    with threadpool_limits(n_threads, user_api="blas"):
        for label in ("core", "swiglu"):
            a, b = versions["old"][label](), versions["new"][label]()  # (a warm-up each)
            drift = np.abs(b.astype(np.float64) - a).max()
            times = {name: ([], []) for name in versions}  # name -> (wall, CPU)
            for rnd in range(rounds):
                for name in (("old", "new") if rnd % 2 else ("new", "old")):
                    start, cpu = time.perf_counter(), time.process_time()
                    versions[name][label]()
                    times[name][0].append(time.perf_counter() - start)
                    times[name][1].append(time.process_time() - cpu)
            for i, clock in enumerate(("wall clock", "CPU time")):
                o, n = times["old"][i], times["new"][i]
                print(f"{label} x {LAYERS} layers, {clock}: old {describe(o).strip()}, "
                      f"new {describe(n).strip()}, new/old {ratio(n, o)}")
            print(f"{label}: max |new - old| = {drift:.2e} (of {np.abs(a).max():.2f})")
    print("load after", os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))


if __name__ == "__main__":
    main()
