"""Two checkouts of minattn in one process: the baby GPT's training step (one step of
minattn/training/loop.py's train, as bench_char_gpt.py times it: the value and gradient with its
rows on the worker threads, clipping, AdamW) and its value and gradient alone, interleaved round
by round, for a before/after comparison of the step (issue 61).

    python benchmarks/ab_step_versions.py OLD_CHECKOUT NEW_CHECKOUT [THREADS [ROUNDS]] [--torch]
                                          [--step-only] [--run]

e.g. `git worktree add /tmp/old <commit>` for OLD. THREADS: the BLAS thread limit
(threadpoolctl), 1 or 2 (default 1; at 2 the step splits its rows over two workers). The same
weights and batches on both sides, float32, batch 12 x 64 random characters. Prints each
median with its IQR and the median and IQR of the per-round ratios new / old, wall time and the
process's CPU time (user + system, both threads: less moved by other processes than the wall
time on a shared machine), the order of the two alternating round by round; 15 rounds (or ROUNDS).
--torch: torch's step of the same model (bench_char_gpt.py's, eager, on its batches of the same
shape: Shakespeare's text cached) in the same rounds too, and each checkout's ratio to it: the
peer ratio of both in one process. --step-only: the training step alone (at two threads the value
and gradient runs the whole batch on two BLAS threads, whose OpenBLAS threads then spin for a
while on the cores the next round's row split wants).
--run: each checkout's steps as ONE loop.train run of ROUNDS + 1 steps instead of a run of one
step per call, as bench_char_gpt.py and `python -m minattn shakespeare` take them (at two
threads the second half of the rows on the run's worker process, engine/processes.py, where it
applies): each run on a thread of its own, paused in its callback until the next round asks for
its next step (the first step, with the fork, the warm-up); the CPU time then includes the worker
processes' (/proc/PID/task/*/schedstat), and the two runs' losses are compared bit for bit at the
end. Implies --step-only.
"""
import os
import sys
import threading
import time

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")  # code against code, not thread policies

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout  # noqa: E402


def settings(gpt):
    # loop.train's arguments for the baby GPT's steps on both sides (BABY's, batch 12 x 64)
    baby = gpt.BABY
    return dict(total=2000, batch_size=None, pad_id=None, lr=baby["lr"], min_lr=baby["min_lr"],
                warmup=baby["warmup"], weight_decay=baby["weight_decay"], betas=baby["betas"],
                decays=gpt.decays, max_grad_norm=baby["max_grad_norm"])


def batch(gpt, ids, k):
    return gpt.window_batch(ids, context=64, batch_size=12, seed=0, k=k)


def works(m, ids):
    gpt, loop = m.models.char_gpt, m.training.loop
    params, config = gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=np.float32)
    loss_sum = gpt.loss_sum(config)
    state = {"step": 0, "trainable": params, "adam": m.training.optimizer.adamw_init(params),
             "losses": [], "settings": None}
    value_and_grad = m.engine.autograd_rules.value_and_grad_by_leaf(loss_sum)

    def step():
        nonlocal state
        k = state["step"]
        state = loop.train(loss_sum, None, None, steps=k + 1, state=state,
                           batches=lambda _: batch(gpt, ids, k), **settings(gpt))

    return {"training step": step,
            "value and gradient": lambda: value_and_grad(params, batch(gpt, ids, 0), None)}


def in_one_run(m, ids, steps):
    # -> (step, losses, end): one loop.train run of `steps` steps on a thread of its own, each
    # call of step() letting it take one step (back at that step's callback); end() lets the
    # run finish (its worker processes closed) and returns its losses
    gpt, loop = m.models.char_gpt, m.training.loop
    params, config = gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=np.float32)
    go, done, out = threading.Semaphore(0), threading.Semaphore(0), {}

    def paused(step, loss, n):
        done.release()
        go.acquire()

    def run():
        go.acquire()
        try:
            out["state"] = loop.train(gpt.loss_sum(config), params, None, steps=steps,
                                      batches=lambda k: batch(gpt, ids, k), callback=paused,
                                      **settings(gpt))
        finally:
            done.release()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def step():
        go.release()
        done.acquire()

    def end():
        go.release()
        thread.join()
        return out["state"]["losses"]

    return step, end


def children_cpu():
    # seconds of CPU used by this process's children (the runs' worker processes), all threads
    total = 0
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids = f.read().split()
        for pid in pids:
            try:
                for t in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                        total += int(f.read().split()[0])
            except FileNotFoundError:
                pass
    return total / 1e9


def torch_step(ids):
    # bench_char_gpt.py's torch side (tests/test_char_gpt.py's reference from torch.nn, eager,
    # with its scheduler), on Shakespeare's batches of the same shape: the same work to time
    import bench_char_gpt

    step, k = bench_char_gpt.build()[1], iter(range(10 ** 9))
    return lambda: step(next(k))


def main():
    with_torch, run = "--torch" in sys.argv, "--run" in sys.argv
    step_only = run or "--step-only" in sys.argv
    argv = [a for a in sys.argv if a not in ("--torch", "--step-only", "--run")]
    old, new = (checkout(path, "engine.autograd_rules", "models.char_gpt", "training.loop",
                         "training.optimizer") for path in argv[1:3])
    threads = int(argv[3]) if len(argv) > 3 else 1
    rounds = int(argv[4]) if len(argv) > 4 else 15
    ids = np.random.default_rng(0).integers(65, size=100_000)
    fs = {"old": works(old, ids), "new": works(new, ids)}
    ends = {}
    if run:
        for v, m in (("old", old), ("new", new)):
            fs[v]["training step"], ends[v] = in_one_run(m, ids, rounds + 1)
    if step_only:
        for side in fs.values():
            del side["value and gradient"]
    if with_torch:
        import torch

        torch.set_num_threads(threads)
        fs["torch"] = {"training step": torch_step(ids), "value and gradient": lambda: None}
        if step_only:
            del fs["torch"]["value and gradient"]
    wall = {(v, k): [] for v in fs for k in fs["old"]}
    cpu = {(v, k): [] for v in fs for k in fs["old"]}

    print(f"BLAS threads {threads}, {rounds} rounds, load before", os.getloadavg())
    with threadpool_limits(threads):
        for v in fs:
            for f in fs[v].values():
                f()
        for rnd in range(rounds):  # old first in odd rounds, new first in even ones
            for k in fs["old"]:
                for v in (("old", "new") if rnd % 2 else ("new", "old")) + \
                        (("torch",) if with_torch else ()):
                    s, c = time.perf_counter(), time.process_time() + children_cpu()
                    fs[v][k]()
                    wall[v, k].append(time.perf_counter() - s)
                    cpu[v, k].append(time.process_time() + children_cpu() - c)
    print("load after", os.getloadavg())
    if run:
        losses = {v: end() for v, end in ends.items()}
        print("the two runs' losses equal to the last bit:", losses["old"] == losses["new"],
              f"({len(losses['old'])} steps)")
    for k in fs["old"]:
        for name, times in (("wall", wall), ("cpu", cpu)):
            o, n = np.array(times["old", k]), np.array(times["new", k])
            r = n / o
            print(f"{k}, {name}: old {np.median(o) * 1e3:.2f} ms (IQR "
                  f"{np.percentile(o, 25) * 1e3:.2f}-{np.percentile(o, 75) * 1e3:.2f}), new "
                  f"{np.median(n) * 1e3:.2f} ms (IQR {np.percentile(n, 25) * 1e3:.2f}-"
                  f"{np.percentile(n, 75) * 1e3:.2f}), new/old {np.median(r):.3f} (IQR "
                  f"{np.percentile(r, 25):.3f}-{np.percentile(r, 75):.3f})")
            if with_torch and k == "training step":
                t = np.array(times["torch", k])
                print(f"  torch {np.median(t) * 1e3:.2f} ms (IQR {np.percentile(t, 25) * 1e3:.2f}-"
                      f"{np.percentile(t, 75) * 1e3:.2f}); " + ", ".join(
                          f"{v}/torch {np.median(np.array(times[v, k]) / t):.3f} (IQR "
                          f"{np.percentile(np.array(times[v, k]) / t, 25):.3f}-"
                          f"{np.percentile(np.array(times[v, k]) / t, 75):.3f})"
                          for v in ("old", "new")))


if __name__ == "__main__":
    main()
