"""A decode step's BLAS thread count, chosen by timing (engine/threads.py,
threads_chosen_by_timing on causal_lm). What it promises: a decode step runs with the threads in
force until a step on one thread is timed faster, then on one thread until the other count is
timed faster again; the first try at the second step, then a losing try waits twice as long
before the next (8, 16, ... 256 steps); the
threads in force are restored after each call; other calls (a prompt, no cache, CuPy weights)
are not touched; and the model's answers are those of the threads in force."""
import numpy as np
import pytest

from minattn.engine import threads

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads():
    return min(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")


def _choices(seconds_of, steps):
    # Drive a _Choice for `steps` steps, each step's time given by seconds_of(threads, step):
    # the thread count of every step.
    choice, used = threads._Choice(2), []
    for step in range(steps):
        n = choice.next()
        used.append(n)
        choice.record(n, seconds_of(n, step))
    return used


def test_on_quiet_cores_the_tries_of_one_thread_back_off_8_16_32_up_to_256_steps():
    # One thread is always slower: steps run on 2, with a try of 1 at the second step, then
    # after 8 steps, 16, 32, ..., and at most every 256 steps.
    used = _choices(lambda n, step: 1.0 if n == 2 else 1.5, 2000)
    tries = [i for i, n in enumerate(used) if n == 1]
    gaps = np.diff([-1] + tries)
    assert list(gaps[:7]) == [2, 8, 16, 32, 64, 128, 256]
    assert set(gaps[7:]) == {256}
    assert used.count(2) > 0.99 * 2000 - 13


def test_beside_a_busy_process_one_thread_wins_at_the_first_try_and_keeps_winning():
    # One thread is ten times faster: the first try (the second step) switches to it; from then
    # on the steps run on one thread, with tries of two threads backing off as above.
    used = _choices(lambda n, step: 1.0 if n == 1 else 10.0, 600)
    assert used[:3] == [2, 1, 1]
    tries = [i for i, n in enumerate(used) if n == 2 and i > 1]
    assert list(np.diff([1] + tries)) == [8, 16, 32, 64, 128, 256][:len(tries)]
    assert len(tries) >= 5


def test_when_the_load_comes_and_goes_the_choice_follows_it():
    # Busy from step 300 to 900: one thread wins there; quiet again: two threads win back.
    # On one thread a slow step brings nothing forward (trying two threads under load costs
    # ten steps): the return of two threads waits for the next try.
    def seconds(n, step):
        busy = 300 <= step < 900
        return (1.0 if n == 1 else 10.0) if busy else (1.5 if n == 1 else 1.0)

    used = _choices(seconds, 1500)
    assert used[290:300] == [2] * 10
    assert used[301] == 1 and used[302:900].count(1) >= 590  # a step ten times slower: try now
    assert used[1400:1500].count(2) >= 95  # and back after it


def test_a_step_twice_as_slow_as_the_last_three_brings_the_try_forward():
    # Quiet, two threads winning, the tries backed off to 256 steps; then one slow step
    # (a hiccup): the next step tries one thread, loses, and the tries back off from 8 again.
    used = _choices(lambda n, step: (2.5 if step == 600 else 1.0) if n == 2 else 1.5, 1000)
    tries = [i for i, n in enumerate(used) if n == 1]
    assert [t for t in tries if 505 < t < 700] == [601, 609, 625, 657]
    slower = _choices(lambda n, step: (1.9 if step == 600 else 1.0) if n == 2 else 1.5, 1000)
    assert [i for i, n in enumerate(slower) if n == 1 and 505 < i < 700] == []  # under 2x: none


@pytest.fixture(autouse=True)
def _fresh_choices(monkeypatch):
    monkeypatch.setattr(threads, "_choices", {})
    monkeypatch.setattr(threads, "TIMED_THREADS", True)  # off for the rest of the suite (conftest)


def _step(threads_seen):
    # A stand-in decode step: records the BLAS thread count it ran with; two threads "slow".
    @threads.threads_chosen_by_timing(when=lambda *a, **k: True)
    def step(params):
        n = _blas_threads()
        threads_seen.append(n)
        np.dot(np.ones(4), np.ones(4))
        if n > 1:
            import time
            time.sleep(0.02)
        return n

    return step


def test_the_decorator_runs_the_chosen_count_and_restores_the_threads_in_force():
    seen = []
    step = _step(seen)
    params = {}
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if _blas_threads() != 2:
            pytest.skip("this BLAS does not take two threads")
        for _ in range(30):
            step(params)
            assert _blas_threads() == 2  # restored after each call
    first = seen.index(1)  # the second step
    assert seen[:first] == [2] * first and first == 1
    assert seen[first + 1:first + 8] == [1] * 7  # one thread was faster: kept


def test_with_one_thread_in_force_or_timing_off_nothing_is_switched(monkeypatch):
    seen = []
    step = _step(seen)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        for _ in range(20):
            step({})
    assert seen == [1] * 20
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    seen.clear()
    step = _step(seen)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if _blas_threads() != 2:
            pytest.skip("this BLAS does not take two threads")
        for _ in range(20):
            step({})
    assert seen == [2] * 20


def test_decode_step_is_a_few_new_tokens_with_a_cache_and_numpy_weights():
    params = {"token_embedding": np.zeros((5, 3))}
    one, prompt = np.zeros((1, 1), int), np.zeros((1, threads.FEW_QUERIES + 1), int)
    assert threads.decode_step(params, one, cache=({},))
    assert threads.decode_step(params, np.zeros((2, threads.FEW_QUERIES), int), cache=({},))
    assert not threads.decode_step(params, prompt, cache=({},))  # a prompt
    assert not threads.decode_step(params, one)  # no cache: the whole sequence each time
    assert not threads.decode_step(params, one, cache=None)
    assert not threads.decode_step({"token_embedding": [[0.0]]}, one, cache=({},))  # not NumPy


def test_a_models_decode_steps_answer_as_with_the_threads_in_force(monkeypatch):
    # generate under the timed choice (forced to try one thread often) gives the tokens and
    # logits of generate with timing off, the steps run on both counts.
    from minattn.generation import generate
    from minattn.language_model import causal_lm, init_causal_lm

    rng = np.random.default_rng(0)
    params, config = init_causal_lm(rng, 50, 2, 32, 4, 64, position="rope", norm="rms_norm",
                                    activation="swiglu", bias=False, tied=False, n_kv_heads=2)
    prompt = rng.integers(0, 50, size=(1, 5))
    monkeypatch.setattr(threads._Choice, "FIRST", 1)
    monkeypatch.setattr(threads._Choice, "LONGEST", 2)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        timed = generate(params, prompt, 12, **config)
        _, cache = causal_lm(params, prompt, return_cache=True, **config)
        steps = [causal_lm(params, timed[:, 5 + i:6 + i], cache=cache, return_cache=True,
                           **config)[0] for i in range(6)]
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    plain = generate(params, prompt, 12, **config)
    np.testing.assert_array_equal(timed, plain)
    _, cache = causal_lm(params, prompt, return_cache=True, **config)
    for i in range(6):
        want = causal_lm(params, timed[:, 5 + i:6 + i], cache=cache, return_cache=True,
                         **config)[0]
        np.testing.assert_allclose(steps[i], want, rtol=1e-12, atol=1e-12)


def test_on_one_thread_a_slow_step_brings_nothing_forward():
    # Busy: one thread kept, its tries of two threads backed off; a step of one thread 5x slower
    # at 600 does not bring a try of two threads (ten times slower there) forward.
    used = _choices(lambda n, step: (5.0 if step == 600 else 1.0) if n == 1 else 10.0, 1000)
    tries = [i for i, n in enumerate(used) if n == 2 and i > 1]
    assert [t for t in tries if 500 < t < 700] == [505]


def test_a_prompts_blocks_are_timed_against_each_other_and_answer_as_with_the_threads_in_force(
        monkeypatch):
    # A prompt (more than FEW_QUERIES tokens) is one call of causal_lm, not timed; its blocks
    # are, keyed by their input's shape, and a forced try of one thread at every other block
    # changes no logit beyond float64 rounding.
    from minattn.language_model import causal_lm, init_causal_lm

    rng = np.random.default_rng(1)
    params, config = init_causal_lm(rng, 50, 6, 32, 4, 64, position="rope", norm="rms_norm",
                                    activation="swiglu", bias=False, tied=False)
    prompt = rng.integers(0, 50, size=(2, 9))
    monkeypatch.setattr(threads._Choice, "FIRST", 1)
    monkeypatch.setattr(threads._Choice, "LONGEST", 1)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if _blas_threads() != 2:
            pytest.skip("this BLAS does not take two threads")
        timed = causal_lm(params, prompt, **config)
    assert list(threads._choices) == [(("block", (2, 9, 32), "<f8"), 2)]
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    np.testing.assert_allclose(timed, causal_lm(params, prompt, **config), rtol=1e-12, atol=1e-12)


def test_block_of_a_prompt_is_more_than_a_few_tokens_of_numpy():
    few, many = threads.FEW_QUERIES, threads.FEW_QUERIES + 1
    assert threads.block_of_a_prompt({}, np.zeros((1, many, 8)))
    assert threads.block_of_a_prompt({}, np.zeros((many, 8)))
    assert not threads.block_of_a_prompt({}, np.zeros((1, few, 8)))  # a decode step's block
    assert not threads.block_of_a_prompt({}, np.zeros(8))
    assert not threads.block_of_a_prompt({}, [[0.0] * 8] * many)  # not NumPy: left alone
    assert threads.same_input_shape({}, np.zeros((1, many, 8), np.float32)) == \
        ("block", (1, many, 8), "<f4")


def test_only_the_main_threads_calls_are_timed():
    # The BLAS thread count is the process's: a call from another thread runs on the threads in
    # force, never switching them under the main thread's feet, and leaves no timing behind.
    import threading

    seen = []
    step = _step(seen)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if _blas_threads() != 2:
            pytest.skip("this BLAS does not take two threads")
        worker = threading.Thread(target=lambda: [step({}) for _ in range(10)])
        worker.start()
        worker.join()
    assert seen == [2] * 10 and threads._choices == {}
