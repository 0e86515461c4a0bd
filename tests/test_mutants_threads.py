"""engine/threads.py, the cases its mutants showed untested (tests/MUTANTS.md): a timed call's
keywords reach `when`, `alike` and the function; a call's time is recorded per unit of size;
the step rule's boundaries (a step exactly twice as slow, a try exactly as fast as the mean); what
`decoding` and `decode_step` take; the affinity's fallbacks."""
import os

import numpy as np
import pytest

from minattn.engine import threads

from .test_decode_threads import _blas_threads, _Clock

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture
def clock(monkeypatch):
    fake = _Clock()
    monkeypatch.setattr(threads, "time", fake)
    monkeypatch.setattr(threads, "_TUNING", threads._Tuning())
    monkeypatch.setattr(threads, "TIMED_THREADS", True)
    return fake


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_timed_call_passes_its_arguments_and_keywords_on(clock, n_threads):
    seen = []

    def when(a, *, k):
        seen.append(("when", a, k))
        return True

    def alike(a, *, k):
        seen.append(("alike", a, k))
        return "kw", 4

    @threads.threads_chosen_by_timing(when, alike)
    def f(a, *, k):
        seen.append(("f", a, k))
        clock.now += 8.0
        return a + k

    recorded = []
    record = threads._Choice.record
    with threadpoolctl.threadpool_limits(n_threads, user_api="blas"):
        if _blas_threads() != n_threads:
            pytest.skip("this BLAS does not take two threads")
        try:
            threads._Choice.record = lambda self, n, s: recorded.append(s) or record(self, n, s)
            assert f(1, k=2) == 3
        finally:
            threads._Choice.record = record
    names = [name for name, *_ in seen]
    assert seen[-1] == ("f", 1, 2) and all(args == [1, 2] for _, *args in seen)
    if n_threads == 2:  # timed: when, alike, then the call, recorded per unit of size (8 / 4)
        assert names == ["when", "alike", "f"] and recorded == [2.0]
    else:  # one thread in force: nothing to choose, the call as it is
        assert names[-1] == "f" and recorded == []


def _choice_with(times):
    # a _Choice on 2 threads fed `times` (threads, seconds) pairs through next/record
    choice = threads._Choice(2, 2)
    for n, seconds in times:
        assert choice.next() == n
        choice.record(n, seconds)
    return choice


def test_a_step_exactly_twice_the_median_brings_no_try_forward_and_the_median_is_the_rule():
    # warm-up, two steps of 10 (the third step is the first try: one thread, lost at 30)
    base = [(2, 10.0), (2, 10.0), (1, 30.0), (2, 10.0), (2, 10.0)]
    choice = _choice_with(base + [(2, 20.0)])  # exactly 2 x the median: not "twice as slow"
    assert choice.steps > 1
    choice = _choice_with(base + [(2, 20.5)])  # more than twice: the other count next
    assert choice.next() == 1


def test_a_count_found_r_times_slower_waits_its_calls_times_r_minus_1_over_try_cost():
    # lost by 3x after the first try (one call: more than twice): 40 calls (not 8); won by
    # exactly 2x: the loser's try will be two calls, so it waits 2 x 1 / 0.05 = 40 (not 20, not
    # 8); 20x: LONGEST, 256
    assert _choice_with([(2, 10.0), (2, 10.0), (1, 30.0)]).interval == 40
    assert _choice_with([(2, 10.0), (2, 10.0), (1, 5.0), (1, 5.0)]).interval == 40
    assert _choice_with([(2, 10.0), (2, 10.0), (1, 4.9), (1, 4.9)]).interval == 21  # > 2x
    assert _choice_with([(2, 20.0), (2, 20.0), (1, 1.0), (1, 1.0)]).interval == 256
    assert round((3.0 - 1) / threads._Choice.TRY_COST) == 40


def test_a_try_exactly_as_fast_as_the_mean_does_not_win():
    choice = _choice_with([(2, 10.0), (2, 10.0), (1, 10.0), (1, 10.0)])
    assert choice.current == 2 and choice.tried == [] and choice.next() == 2  # lost, backed off


def test_after_a_switch_the_tries_times_are_the_new_mean_and_the_next_try_waits_8():
    choice = _choice_with([(2, 10.0), (2, 10.0), (1, 9.6), (1, 9.5)])  # won: one thread
    assert choice.current == 1 and list(choice.recent) == [9.6, 9.5]
    assert choice.interval == threads._Choice.FIRST and choice.tried == []
    for _ in range(threads._Choice.FIRST - 1):
        assert choice.next() == 1
        choice.record(1, 8.0)
    assert choice.next() == 2  # the other count tried after 8 calls
    assert choice.recent.maxlen == 8  # the current count's last eight times


def test_one_blas_thread_with_unless_refuses_the_with_statement_by_name():
    with pytest.raises(TypeError, match=r"^one_blas_thread\(unless=\.\.\.\) decides per call"):
        with threads.one_blas_thread(unless=threads.decoding):
            pass


def test_decoding_is_a_few_queries_of_any_q_of_two_or_more_dims():
    assert threads.decoding(np.zeros((1, 8))) and threads.decoding(np.zeros((2, 3, 4, 8)))
    assert not threads.decoding(np.zeros((5, 8))) and not threads.decoding(np.zeros(8))


def test_decode_step_takes_one_dimensional_tokens_and_leaves_lists_out():
    params = {"token_embedding": np.zeros((5, 2))}
    assert threads.decode_step(params, np.array([1, 2]), cache=[])  # [L]: one sequence
    assert not threads.decode_step(params, np.array([1, 2, 3, 4, 0]), cache=[])
    assert not threads.decode_step(params, [1, 2], cache=[])  # no shape: not a NumPy step


def test_without_sched_getaffinity_the_cores_are_cpu_count_or_one(monkeypatch):
    monkeypatch.setattr(threads, "_get_controller", lambda: False)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert threads._blas_threads() == 3
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert threads._blas_threads() == 1


def test_a_try_that_wins_after_backing_off_resets_the_interval_not_doubles_it():
    # The documented schedule, traced by hand: the first try at calls 3 and 4; a try of a count
    # 1.2 times slower waits 2 x 0.2 / 0.05 = 8 calls, doubled each time it loses (16, 32); a
    # win switches; then the other count (1.25 times slower) tried after
    # max(FIRST, 2 x 0.25 / 0.05) = 10 calls, whatever the interval had grown to, and, lost,
    # after max(2 x 10, 10) = 20.
    def seconds(call, n):  # two threads 10 s; one thread 12 s (loses), from call 40 on 8 s (wins)
        return 10.0 if n == 2 else (12.0 if call < 40 else 8.0)

    choice, tries = threads._Choice(2, 2), []
    for call in range(1, 80):
        n = choice.next()
        if n != choice.current:
            tries.append(call)
        choice.record(n, seconds(call, n))
    assert tries == [3, 4, 12, 13, 29, 30, 62, 63, 73, 74]
    assert choice.current == 1 and choice.interval == 20
