"""The baby GPT's training step at two threads (its rows split over two workers) with the split's
GIL policies of engine/threads.py on and off (its switch interval and its workers' passes), in
one process, the order alternating round by round, torch's step of the same model in the same
rounds (issue 61, item 5).

    python benchmarks/ab_split_policies.py [ROUNDS [THREADS]] [--each]

(with minattn and torch installed, Shakespeare's text cached: bench_char_gpt.py's build; from the
repository root with PYTHONPATH=.) Off: SPLIT_SWITCH_INTERVAL at Python's default 5 ms and
WORKER_PASS at position_wise's cache-sized chunk (2**15), which is what the code did before
them; on: the module's own. --each: also each policy alone. ROUNDS: 30; THREADS: 2 (at one
there is no split, and both arms run the same code). Prints each arm's median and IQR, the
median of its per-round ratios to "off" and to torch, and the load before and after.
"""
import os
import sys
import time

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")  # code against code, not thread policies
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from threadpoolctl import threadpool_limits  # noqa: E402

import bench_char_gpt  # noqa: E402
from _harness import describe, footer, header, ratio  # noqa: E402
from minattn import position_wise  # noqa: E402
from minattn.engine import threads  # noqa: E402

argv = [a for a in sys.argv[1:] if a != "--each"]
rounds = int(argv[0]) if argv else 30
n_threads = int(argv[1]) if len(argv) > 1 else 2
ON = (threads.SPLIT_SWITCH_INTERVAL, threads.WORKER_PASS)
OFF = (sys.getswitchinterval(), position_wise._CHUNK)
arms = {"off": OFF, "on": ON}
if "--each" in sys.argv:
    arms.update({"switch interval only": (ON[0], OFF[1]), "worker passes only": (OFF[0], ON[1])})

import torch  # noqa: E402

torch.set_num_threads(n_threads)
minattn_step, torch_step = bench_char_gpt.build()[:2]
k = iter(range(10 ** 9))


def arm(interval, worker_pass):
    def step():
        threads.SPLIT_SWITCH_INTERVAL, threads.WORKER_PASS = interval, worker_pass
        minattn_step(next(k))
    return step


fs = {name: arm(*values) for name, values in arms.items()}
fs["torch"] = lambda: torch_step(next(k))
header(0)
times = {name: [] for name in fs}
with threadpool_limits(n_threads):
    for f in fs.values():
        f()  # warm-up
    names = list(fs)
    for r in range(rounds):
        for name in (names if r % 2 else names[::-1]):
            start = time.perf_counter()
            fs[name]()
            times[name].append(time.perf_counter() - start)
threads.SPLIT_SWITCH_INTERVAL, threads.WORKER_PASS = ON
print(f"baby GPT's training step, {n_threads} threads, {rounds} rounds; per-round ratios")
for name in names:
    print(f"| {name} | {describe(times[name])} | / off {ratio(times[name], times['off'])} | "
          f"/ torch {ratio(times[name], times['torch'])} |")
footer()
