"""What minattn/engine/threads.py promises. n_workers: as many workers as BLAS may use at this
moment, read back from threadpoolctl under the limits it sets; one per 2**16 elements of work at
most; without threadpoolctl, the cores this process may run on (its affinity). in_threads: never
more worker threads than asked, and every one of them used when there are items for them."""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from minattn.engine import threads as _threads


def test_n_workers_is_the_blas_limit_in_force_and_one_worker_per_2_16_elements():
    # The promise of n_workers, under a limit threadpoolctl sets and then reports back: as many
    # workers as BLAS threads, an int, never more than work // 2**16.
    threadpoolctl = pytest.importorskip("threadpoolctl")
    x = np.zeros(3)
    for limit in (1, 2, 4):
        with threadpoolctl.threadpool_limits(limit, user_api="blas"):
            blas = min(i["num_threads"] for i in threadpoolctl.threadpool_info()
                       if i["user_api"] == "blas")
            for work, expected in [(2 ** 40, blas), (3 * 2 ** 16 - 1, min(blas, 2)),
                                   (2 ** 16 - 1, 1), (0, 1)]:
                workers = _threads.n_workers(x, work)
                assert type(workers) is int and workers == expected, (limit, work, workers)


_WITHOUT_THREADPOOLCTL = """
import os, sys
sys.modules["threadpoolctl"] = None  # as if it were not installed
import numpy
from minattn.engine import threads
cores = sorted(os.sched_getaffinity(0))
print(threads.n_workers(numpy.zeros(3), 2 ** 40))
os.sched_setaffinity(0, cores[:1])  # the process may now run on one core
print(threads.n_workers(numpy.zeros(3), 2 ** 40))
with threads.one_blas_thread():  # a no-op
    print(threads.n_workers(numpy.zeros(3), 2 ** 40))
print(len(cores))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs os.sched_setaffinity")
def test_without_threadpoolctl_n_workers_is_the_cores_this_process_may_use():
    # Without threadpoolctl there is no BLAS limit to read: the cores this process may run on
    # (its affinity, which taskset or a container narrows), not every core of the machine.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", _WITHOUT_THREADPOOLCTL], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    cores = int(out[3])
    assert out[:3] == [str(cores), "1", "1"]


def _run(n_threads, n_items):
    # in_threads over items that each hold their thread a while: which threads ran them, and
    # how many ran at once at most.
    lock, running, most = threading.Lock(), [0], [0]

    def f(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return i, threading.get_ident()

    results = _threads.in_threads(f, range(n_items), n_threads)
    assert [i for i, _ in results] == list(range(n_items))  # in order
    return {ident for _, ident in results}, most[0]


@pytest.mark.parametrize("n_threads, n_items", [(2, 2), (2, 6), (3, 2), (3, 7), (8, 3)])
def test_in_threads_runs_on_up_to_n_threads_worker_threads(n_threads, n_items):
    idents, most = _run(n_threads, n_items)
    assert threading.get_ident() not in idents  # worker threads, not this one
    assert len(idents) <= min(n_threads, n_items) and most <= min(n_threads, n_items)


@pytest.mark.parametrize("n_threads, n_items", [(1, 5), (0, 3), (4, 1), (4, 0)])
def test_in_threads_with_one_thread_or_one_item_runs_here(n_threads, n_items):
    idents, _ = _run(n_threads, n_items)
    assert idents <= {threading.get_ident()}
