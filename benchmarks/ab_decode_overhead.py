"""Two checkouts of minattn in one process, a decode step's Python: bench_smollm2.py --overhead's
step (SmolLM2's 30 layers, 9 query heads on 3 KV heads, RoPE, SwiGLU, RMSNorm, float32, with
tiny widths, so that the products cost next to nothing), old and new alternating round by round.

    python benchmarks/ab_decode_overhead.py OLD NEW [ROUNDS [STEPS]]

Each round: STEPS decode steps of each checkout, each step's token through the cache the step
before it returned (as generate runs them: the KV room's path), after a 64-token prompt; a
round's time is the median step. Before timing, the two checkouts' logits and caches are checked
equal bit for bit over STEPS steps. Prints the medians (IQR) and the per-round ratios new / old
of the wall clock and of the process's CPU time; beside them, in the same rounds, the floor of
that Python: the same step written out in bare NumPy (bench_smollm2.py's _bare_step, checked
against the logits of new; its four products a layer, where minattn's step makes seven of
these separate weights), the median of STEPS calls a round, and new / bare and old / bare.
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout, describe, footer, header, ratio  # noqa: E402


def tiny_model(m):
    # -> (params, config, a 64-token prompt): SmolLM2's layers with tiny widths
    rng = np.random.default_rng(0)
    params, config = m.language_model.init_causal_lm(
        rng, 100, 30, 72, 9, 32, position="rope", tied=True, activation="swiglu",
        norm="rms_norm", bias=False, n_kv_heads=3, dtype=np.float32)
    config.update(rope_base=100000.0, eps=1e-5)
    return params, config, rng.integers(0, 100, size=(1, 64))


def steps(m, n_steps):
    params, config, prompt = tiny_model(m)

    def run(record=None):  # -> the median (wall clock, CPU) seconds of a step
        _, cache = m.causal_lm(params, prompt, return_cache=True, **config)
        token, times = prompt[:, -1:], []
        for _ in range(n_steps):
            start, cpu = time.perf_counter(), time.process_time()
            logits, cache = m.causal_lm(params, token, cache=cache, return_cache=True, **config)
            token = np.argmax(logits[:, -1], axis=-1)[:, None]
            times.append((time.perf_counter() - start, time.process_time() - cpu))
            if record is not None:
                record.append((logits, cache))
        return tuple(np.median(times, axis=0))

    return run


def bare_step(m, n_steps):
    """The tiny model's first decode step after its prompt, in bare NumPy (bench_smollm2.py's
    _bare_step: batch 1, float32, no mask, no checks or policies; q, k, v and gate, up each
    copied side by side once, a product each, as a loaded model's), checked there against
    m.causal_lm's logits: -> run() as steps' (the median (wall clock, CPU) seconds of n_steps
    calls)."""
    import types

    import bench_smollm2

    params, config, prompt = tiny_model(m)
    model = types.SimpleNamespace(params=params, config={**config, "d_k": 72 // 9})
    step = bench_smollm2._bare_step(model, np.concatenate([prompt, prompt[:, -1:]], axis=1))

    def run():
        times = []
        for _ in range(n_steps):
            start, cpu = time.perf_counter(), time.process_time()
            step()
            times.append((time.perf_counter() - start, time.process_time() - cpu))
        return tuple(np.median(times, axis=0))

    return run


def main():
    old_path, new_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    n_steps = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    threadpool_limits(1, user_api="blas")
    versions = {"old": checkout(old_path, "language_model", "engine.threads"),
                "new": checkout(new_path, "language_model", "engine.threads")}
    for m in versions.values():
        m.engine.threads.TIMED_THREADS = False
    runs = {name: steps(m, n_steps) for name, m in versions.items()}
    records = {name: [] for name in runs}
    for name, run in runs.items():
        run(records[name])
    for (lo, co), (ln, cn) in zip(records["old"], records["new"]):
        assert np.array_equal(lo, ln) and all(
            np.array_equal(a[key], b[key]) for a, b in zip(co, cn) for key in ("k", "v")), \
            "the logits or the caches differ"
    header(0)
    print(f"a decode step's Python (tiny weights), 1 thread, {rounds} rounds of {n_steps} steps; "
          f"old {old_path}, new {new_path}")
    runs["bare"] = bare_step(versions["new"], n_steps)
    runs["bare"]()
    times = {name: [] for name in runs}
    for r in range(rounds):
        for name in (("old", "new") if r % 2 else ("new", "old")) + ("bare",):
            times[name].append(runs[name]())
    for i, clock in enumerate(("wall clock", "CPU time")):
        t = {name: [r[i] for r in rounds_] for name, rounds_ in times.items()}
        print(f"{clock}: old {describe(t['old']).strip()}, new {describe(t['new']).strip()}, "
              f"new / old {ratio(t['new'], t['old'])}")
        print(f"{clock}: the bare NumPy step {describe(t['bare']).strip()}, new / bare "
              f"{ratio(t['new'], t['bare'])}, old / bare {ratio(t['old'], t['bare'])}")
    footer()


if __name__ == "__main__":
    main()
