"""The baby GPT's two-piece training step with its second piece on a worker process
(engine/processes.py) against the same step on two worker threads and torch's two-thread step,
interleaved in one process (issue 61, item 5).

    python benchmarks/ab_process_split.py [--rounds 20] [--threads 2] [--busy 0]

Three arms, each its own model from the same weights and the same batches k = 0, 1, ...:
- "process": one loop.train run of rounds + 1 steps (the process policy needs a run: its worker
  is forked at the first step, the warm-up, and kept), timed from the end of one step's
  callback to the start of the next (the batch, the step, clipping, AdamW);
- "threads": loop.train one step at a time (a run of one step keeps its worker threads: the
  step as bench_char_gpt.py timed it before the process policy);
- "torch": tests/test_char_gpt.py's reference, as bench_char_gpt.py's.
The other two run inside the process arm's callback, their order alternating round by round.
CPU time: the process's own (time.process_time: all its threads), plus, for the process arm,
its worker's (bench_char_gpt.worker_cpu: /proc/PID/task/*/schedstat, read before and after
each step). The two minattn arms' losses are compared bit for bit. MINATTN_TIMED_THREADS=0
unless set (the process arm then never times itself against the threads).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")

import numpy as np  # noqa: E402

from _harness import busy, describe, footer, header, ratio  # noqa: E402
from bench_char_gpt import build, worker_cpu  # noqa: E402
from bench_finetune import threads  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    header(args.busy)
    with threads(args.threads):
        thread_step, torch_step, _, _ = build()
        process_run = build()[0].run
        others = {"threads": thread_step, "torch": torch_step}
        times = {"process": [], "threads": [], "torch": []}
        cpu = {name: [] for name in times}
        losses = {"process": [], "threads": []}
        mark = {}

        def between(step, loss):
            # after process step `step`: its times; then the other arms, alternating
            now, now_cpu, now_worker = time.perf_counter(), time.process_time(), worker_cpu()
            losses["process"].append(loss)
            if step > 1:  # (step 1: the warm-up, with the fork)
                times["process"].append(now - mark["wall"])
                cpu["process"].append(now_cpu - mark["cpu"] + now_worker - mark["worker"])
            for name in (("threads", "torch") if step % 2 else ("torch", "threads")):
                start, start_cpu = time.perf_counter(), time.process_time()
                loss = others[name](step - 1)
                if step > 1:
                    times[name].append(time.perf_counter() - start)
                    cpu[name].append(time.process_time() - start_cpu)
                if name == "threads":
                    losses["threads"].append(loss)
            mark.update(wall=time.perf_counter(), cpu=time.process_time(), worker=worker_cpu())

        from minattn.engine import processes
        start_workers, forks = processes.WorkerProcesses._start, []

        def timed_start(*a):  # the fork's own time (the shared blocks, the worker started)
            t = time.perf_counter()
            start_workers(*a)
            forks.append(time.perf_counter() - t)

        processes.WorkerProcesses._start = timed_start
        with busy(args.busy):
            process_run(args.rounds + 1, between)
    print(f"baby GPT, float32, 12 x 64, {args.threads} threads, {args.rounds} rounds")
    print("| arm | wall | CPU (the process's threads; + the worker process's) |")
    print("|---|---|---|")
    for name in times:
        print(f"| {name} | {describe(times[name])} | {describe(cpu[name])} |")
    for a, b in (("process", "threads"), ("process", "torch"), ("threads", "torch")):
        print(f"{a} / {b}: wall {ratio(times[a], times[b])}, CPU {ratio(cpu[a], cpu[b])}")
    print(f"the workers' start (shared blocks, fork): "
          f"{', '.join(f'{1e3 * t:.1f} ms' for t in forks)}")
    same = [float(x) for x in losses["process"]] == [float(x) for x in losses["threads"]]
    print(f"the two minattn arms' losses equal to the last bit: {same} "
          f"({len(losses['process'])} steps)")
    footer()


if __name__ == "__main__":
    main()
