"""The baby GPT's training step with its rows split over the worker threads (one BLAS thread
each: minattn/training/loop.py's default) against the whole batch on the BLAS threads in force,
in one process, the order alternating round by round (issue 61: what the split brings at two
threads).

    python benchmarks/ab_row_split.py [THREADS [ROUNDS]]

(with minattn and torch installed, Shakespeare's text cached: bench_char_gpt.py's build; from the
repository root with PYTHONPATH=.) THREADS: the BLAS thread limit, default 2; 20 rounds (or ROUNDS).
"""
import os
import sys

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")  # code against code, not thread policies
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from threadpoolctl import threadpool_limits  # noqa: E402

import bench_char_gpt  # noqa: E402
from _harness import alternating, footer, header, report_ab  # noqa: E402
from minattn.training import loop  # noqa: E402

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
step = bench_char_gpt.build()[0]
split = loop.row_pieces
k = iter(range(10 ** 9))


def with_pieces(pieces):
    def run():
        loop.row_pieces = pieces
        try:
            step(next(k))
        finally:
            loop.row_pieces = split
    return {"training step": run}


header(0)
with threadpool_limits(threads):
    times = alternating(with_pieces(split), with_pieces(lambda x, n: [slice(0, n)]), rounds)
print(f"BLAS threads {threads}, {rounds} rounds; old: rows split over the workers, new: the "
      f"whole batch on the BLAS threads")
report_ab(times)
footer()
