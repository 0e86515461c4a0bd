"""What minattn/engine/threads.py's docstring promises about BLAS threads, checked in this
process through threadpoolctl (what a user would read back): inside `one_blas_thread()` (a
context manager or a decorator) every BLAS library runs one thread, and the limits in force
before come back after it, nested or not; it limits BLAS only (an OpenMP pool, as torch loads,
keeps its threads); without threadpoolctl it is a no-op, and n_workers is then the cores this
process may run on (its affinity), as it is when threadpoolctl finds no BLAS library.

Each test makes threads.py look at the libraries afresh (its threadpoolctl view is made once and
kept: here it is reset, so that a test sees the libraries loaded now, e.g. an OpenMP runtime)."""
import ctypes
import ctypes.util
import os
import sys

import numpy as np
import pytest

from minattn.engine import threads

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(threads, "_controller", None)


def blas_threads():
    return sorted({i["num_threads"] for i in threadpoolctl.threadpool_info()
                   if i["user_api"] == "blas"})


def test_inside_one_blas_thread_blas_runs_one_thread_and_the_limit_before_comes_back(fresh):
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if blas_threads() != [2]:
            pytest.skip("this BLAS cannot be set to 2 threads")
        with threads.one_blas_thread():
            assert blas_threads() == [1]
            with threads.one_blas_thread():  # nested: still one, and the outer block's after
                assert blas_threads() == [1]
            assert blas_threads() == [1]
        assert blas_threads() == [2]

        @threads.one_blas_thread()
        def body():
            return blas_threads()

        assert body() == [1] and blas_threads() == [2]
        with pytest.raises(KeyError):  # restored when the block raises, too
            with threads.one_blas_thread():
                raise KeyError
        assert blas_threads() == [2]


@pytest.mark.parametrize("n_queries", [1, 4, 5, 64])
def test_decoding_keeps_the_threads_and_longer_calls_get_one(fresh, monkeypatch, n_queries):
    # @one_blas_thread(unless=decoding): a call of at most FEW_QUERIES queries leaves the BLAS
    # threads as they are; the attention core (scaled_dot_product_attention) is decorated so.
    # (seen through the softmax the core calls, or the row max of its plain form on NumPy,
    # engine/plain_core.py)
    import minattn.attention as attention
    from minattn.engine import plain_core
    seen = []
    monkeypatch.setattr(attention, "softmax",
                        lambda *a, _f=attention.softmax, **k: seen.append(blas_threads()) or
                        _f(*a, **k))
    monkeypatch.setattr(plain_core, "row_max",
                        lambda *a, _f=plain_core.row_max, **k: seen.append(blas_threads()) or
                        _f(*a, **k))
    q = np.ones((2, n_queries, 8))
    k = v = np.ones((2, 70, 8))
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if blas_threads() != [2]:
            pytest.skip("this BLAS cannot be set to 2 threads")

        @threads.one_blas_thread(unless=threads.decoding)
        def body(q):
            return blas_threads()

        decoding = n_queries <= threads.FEW_QUERIES
        assert body(q) == ([2] if decoding else [1]) and blas_threads() == [2]
        assert body([[1.0]]) == [1]  # not an array: switched (its own checks come after)
        attention.scaled_dot_product_attention(q, k, v)
        assert seen == [[2] if decoding else [1]] and blas_threads() == [2]
        with pytest.raises(TypeError, match="decorator"):  # unless= decides per call
            with threads.one_blas_thread(unless=threads.decoding):
                pass
        assert blas_threads() == [2]


@pytest.mark.parametrize("n_queries", [1, 4, 5, 64])
def test_the_plain_cores_short_calls_keep_the_threads_only_when_decoding(fresh, monkeypatch,
                                                                          n_queries):
    # The core on NumPy itself (engine/plain_core.py), a call of fewer than two blocks of
    # queries: a decode step's (at most FEW_QUERIES queries) on the threads in force, a longer
    # one on one BLAS thread, as the core's own policy runs them (seen through the plain form's
    # row max: softmax left as it is, so that the plain form runs); the as-written core's bits
    import minattn.attention as attention
    from minattn.engine import plain_core, query_blocks
    seen = []
    monkeypatch.setattr(plain_core, "row_max",
                        lambda *a, _f=plain_core.row_max, **k: seen.append(blas_threads()) or
                        _f(*a, **k))
    rng = np.random.default_rng(n_queries)
    q = rng.normal(size=(2, 3, n_queries, 8)).astype(np.float32)
    k, v = rng.normal(size=(2, 2, 3, 70, 8)).astype(np.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if blas_threads() != [2]:
            pytest.skip("this BLAS cannot be set to 2 threads")
        out, weights = attention.scaled_dot_product_attention(q, k, v)
        assert seen == [[2] if n_queries <= threads.FEW_QUERIES else [1]]
        assert blas_threads() == [2]
    token = query_blocks._PLAIN.set(False)  # the core as written, for its bits
    try:
        want_out, want_weights = attention.scaled_dot_product_attention(q, k, v)
    finally:
        query_blocks._PLAIN.reset(token)
    assert np.array_equal(out, want_out) and np.array_equal(weights, want_weights)


def test_one_blas_thread_limits_blas_only_not_openmp(fresh):
    # an OpenMP runtime in the process, as torch or scikit-learn load one: GCC's libgomp
    name = ctypes.util.find_library("gomp")
    if name is None:
        pytest.skip("no libgomp on this system")
    ctypes.CDLL(name)
    if not any(i["user_api"] == "openmp" for i in threadpoolctl.threadpool_info()):
        pytest.skip("no OpenMP runtime loaded")
    with threadpoolctl.threadpool_limits(2):  # BLAS and OpenMP
        before = {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()
                  if i["user_api"] == "openmp"}
        if set(before.values()) != {2}:
            pytest.skip("this OpenMP cannot be set to 2 threads")
        with threads.one_blas_thread():
            inside = {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info()
                      if i["user_api"] == "openmp"}
            assert blas_threads() == [1] and inside == before


@pytest.fixture
def one_core():
    # the process narrowed to one core (as `taskset -c 0` would), restored after the test
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs os.sched_setaffinity")
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        yield len(cores)
    finally:
        os.sched_setaffinity(0, cores)


def test_without_threadpoolctl_one_blas_thread_is_a_no_op_and_n_workers_the_affinity(
        fresh, monkeypatch, one_core):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # as if it were not installed
    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # the module, imported above
        limits = blas_threads()
        with threads.one_blas_thread():
            assert blas_threads() == limits  # nothing changed
            assert threads.n_workers(np.zeros(3), 2 ** 40) == 1  # the one core it may use

        @threads.one_blas_thread()
        def body():
            return threads.n_workers(np.zeros(3), 2 ** 40)

        assert body() == 1 and blas_threads() == limits


def test_with_no_blas_library_found_n_workers_is_the_affinity(monkeypatch, one_core):
    # threadpoolctl installed, but no BLAS among the libraries it found: a controller of none
    monkeypatch.setattr(threads, "_controller",
                        threadpoolctl.ThreadpoolController().select(user_api="no such api"))
    with threads.one_blas_thread():
        assert threads.n_workers(np.zeros(3), 2 ** 40) == 1
    monkeypatch.setattr(threads, "_controller", None)
    if one_core > 1:  # a fresh controller finds NumPy's BLAS: its limit, not the affinity
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            assert threads.n_workers(np.zeros(3), 2 ** 40) == min(blas_threads())
