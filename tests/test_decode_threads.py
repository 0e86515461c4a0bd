"""A decode step's BLAS thread count, chosen by timing (engine/threads.py,
threads_chosen_by_timing on causal_lm). What it promises: a decode step runs with the threads in
force until a try of two steps on one thread has a step faster than the mean of the last eight
on the threads in force, then on one thread until the other count wins a try in turn; the first
try at the third step (the first is not compared); a try whose first step is more than twice as
slow ends there; a losing try waits twice as long before the next (8, 16, ... 256 steps), and a
try of a count r times slower at least its steps times (r - 1) / TRY_COST steps (tries cost
about 5 %); a new key starts where the most recently used one that has tried stands; the threads in
force are restored after each call; other calls (a prompt, no cache, CuPy weights) are not
touched; and the model's answers are those of the threads in force."""
import numpy as np
import pytest

from minattn.engine import threads

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads():
    return min(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")


def _choices(seconds_of, steps):
    # Drive a _Choice for `steps` steps, each step's time given by seconds_of(threads, step):
    # the thread count of every step.
    choice, used = threads._Choice(2, 2), []
    for step in range(steps):
        n = choice.next()
        used.append(n)
        choice.record(n, seconds_of(n, step))
    return used


def _tries(used, n):
    # the first step of each try of n threads: [start, ...]
    return [i for i, m in enumerate(used) if m == n and (i == 0 or used[i - 1] != n)]


def test_on_quiet_cores_the_tries_of_one_thread_back_off_up_to_256_steps():
    # One thread is always slower (by about a third, as on quiet cores): steps run on 2, with a
    # try of two steps on 1 at the third step. A try of a count 1.3 times slower costs
    # 2 x 0.3 steps, so it waits at least 2 x 0.3 / 0.05 = 12 steps: 12, then doubled each time
    # it loses (24, 48, ...), at most 256.
    used = _choices(lambda n, step: 1.0 if n == 2 else 1.3, 2000)
    starts = _tries(used, 1)
    assert all(used[i:i + 3] == [1, 1, 2] for i in starts)  # each try two steps
    gaps = np.diff(starts) - 1  # from a try's last step to the next try's first
    assert starts[0] == 2 and list(gaps[:6]) == [12, 24, 48, 96, 192, 256]
    assert set(gaps[6:]) == {256}
    time = sum(1.0 if n == 2 else 1.3 for n in used)
    assert time < 1.01 * 2000


def test_beside_a_busy_process_one_thread_wins_at_the_first_try_and_keeps_winning():
    # One thread is ten times faster: the first try (the third and fourth steps) wins, and the
    # steps run on one thread from then on. A try of two threads, ten times slower, ends at its
    # first step and costs nine steps more, so the next waits (10 - 1) / 0.05 = 180 steps, then
    # 256: the tries cost under 5 % of the steps, where 8, 16, 32 ... had cost a reply of 256
    # tokens a sixth of its time (issue 56).
    used = _choices(lambda n, step: 1.0 if n == 1 else 10.0, 1000)
    assert used[:6] == [2, 2, 1, 1, 1, 1]
    tries = [i for i, n in enumerate(used) if n == 2 and i > 3]
    assert list(np.diff([3] + tries)) == [180, 256, 256, 256]
    time = sum(1.0 if n == 1 else 10.0 for n in used[4:])
    assert time < 1.05 * len(used[4:])


def test_when_the_load_comes_and_goes_the_choice_follows_it():
    # Busy from step 300 to 900: one thread wins there; quiet again: two threads win back.
    # On one thread a slow step brings nothing forward (trying two threads under load costs
    # ten steps): the return of two threads waits for the next try.
    def seconds(n, step):
        busy = 300 <= step < 900
        return (1.0 if n == 1 else 10.0) if busy else (1.5 if n == 1 else 1.0)

    used = _choices(seconds, 1500)
    assert used[290:300] == [2] * 10
    assert used[301] == 1 and used[305:900].count(1) >= 585  # a step ten times slower: try now
    assert used[1400:1500].count(2) >= 95  # and back after it


def test_a_step_twice_as_slow_as_the_last_three_brings_the_try_forward():
    # Quiet, two threads winning, the tries backed off (the one due next at 636); then one slow
    # step at 600 (a hiccup): the next step tries one thread, loses, and the tries back off
    # from 8 again: 610, then 16 steps after that try, then 32 (the hiccup counted in the mean
    # makes one thread only 1.09 times slower, so 8 and 16 are the longer waits).
    used = _choices(lambda n, step: (2.5 if step == 600 else 1.0) if n == 2 else 1.3, 1000)
    assert [t for t in _tries(used, 1) if 520 < t < 700] == [601, 610, 627, 660]
    slower = _choices(lambda n, step: (1.9 if step == 600 else 1.0) if n == 2 else 1.3, 1000)
    assert [t for t in _tries(slower, 1) if 520 < t < 700] == [636]  # under 2x: as scheduled


def test_a_tries_faster_step_decides_so_the_first_step_after_a_switch_is_not_held_against_it():
    # One thread's first step of the try 1.6 (the switch), its second 0.8, two threads 1.0: won.
    used = _choices(lambda n, step: 1.0 if n == 2 else (1.6 if step == 2 else 0.8), 10)
    assert used == [2, 2] + [1] * 8


def test_a_try_whose_first_step_is_more_than_twice_as_slow_ends_there():
    # One thread 2.5 times slower: each try is one step, and the next waits 1.5 / 0.05 = 30.
    used = _choices(lambda n, step: 1.0 if n == 2 else 2.5, 100)
    assert _tries(used, 1) == [2, 32, 92] and used.count(1) == 3
    exactly = _choices(lambda n, step: 1.0 if n == 2 else 2.0, 5)  # exactly twice: runs on
    assert exactly == [2, 2, 1, 1, 2]


def test_the_mean_counts_the_long_waits_the_median_would_hide():
    # Two threads take 1.0, but every third step 1.9 (under twice: no try brought forward):
    # mean 1.225 over the last eight at the second try, median 1.0. One thread's 1.2 wins it.
    used = _choices(lambda n, step: (1.9 if step % 3 == 0 else 1.0) if n == 2 else 1.2, 14)
    assert used[:4] == [2, 2, 1, 1] and used[4:11] == [2] * 7  # lost to the one step of 1.0
    assert used[11:14] == [1, 1, 1]  # won against the mean: kept


def test_a_new_key_starts_where_the_most_recently_used_key_that_has_tried_stands():
    tuning = threads._Tuning()  # a state of its own: the process's is left as it is
    early = tuning.choice("early", 2)
    prompt = tuning.choice("prompt", 2)
    assert (prompt.current, prompt.steps) == (2, 3)  # nothing to start from: fresh
    for n, seconds in ((2, 9.0), (2, 10.0), (1, 1.0), (1, 1.0)):  # one thread 10x faster
        assert prompt.next() == n
        prompt.record(n, seconds)
    assert (prompt.current, prompt.interval) == (1, 180)
    assert tuning.choice("early", 2) is early  # used since, but has tried nothing: not
    assert (early.current, early.decided) == (2, False)  # the one started from
    decode = tuning.choice("decode", 2)
    assert (decode.current, decode.other, decode.steps, decode.interval) == (1, 2, 180, 180)
    used = []
    for _ in range(180):  # on one thread, the try of two threads at the 180th step, as if
        used.append(decode.next())
        decode.record(used[-1], 1.0 if used[-1] == 1 else 10.0)
    assert used == [1] * 179 + [2]  # the decode had itself just tried (tries 180 apart)
    assert tuning.choice("other width", 4).current == 4  # not from a count of 2
    assert tuning.choice("decode", 2) is decode  # a key seen before keeps its own


@pytest.fixture(autouse=True)
def _fresh_choices(monkeypatch):
    monkeypatch.setattr(threads, "_TUNING", threads._Tuning())
    monkeypatch.setattr(threads, "TIMED_THREADS", True)  # off for the rest of the suite (conftest)


class _Clock:
    # A stand-in for time.perf_counter: the steps below advance it, so no test hangs on how
    # busy the machine is.
    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = _Clock()
    monkeypatch.setattr(threads, "time", fake)
    return fake


def _in_force():
    return min(library.num_threads for library in threads._blas_libraries())


def _step(threads_seen, clock, fail=False):
    # A stand-in decode step: records the BLAS thread count it ran with; on two threads it
    # "takes" 20 time units, on one 1 (the clock above).
    @threads.threads_chosen_by_timing(lambda *a, **k: True, lambda *a, **k: ("toy", 1))
    def step(params):
        n = _in_force()
        threads_seen.append(n)
        clock.now += 20.0 if n > 1 else 1.0
        if fail:
            raise RuntimeError("a step that fails")
        return n

    return step


def _two_threads():  # a context manager: the limit is restored when it ends
    limits = threadpoolctl.threadpool_limits(2, user_api="blas")
    if _blas_threads() != 2:
        limits.restore_original_limits()
        pytest.skip("this BLAS does not take two threads")
    return limits


def test_the_decorator_runs_the_chosen_count_and_restores_the_threads_in_force(clock):
    seen = []
    step = _step(seen, clock)
    with _two_threads():
        for _ in range(30):
            step({})
            assert _in_force() == 2  # restored after each call
    assert seen[:4] == [2, 2, 1, 1]  # the first try, at the third and fourth steps, wins
    assert seen[4:] == [1] * 26  # one thread kept; two, 20 times slower, not tried for 256


def test_a_failing_call_restores_the_threads_and_times_the_next_call(clock):
    seen = []
    step = _step(seen, clock, fail=True)
    with _two_threads():
        for _ in range(3):
            with pytest.raises(RuntimeError, match="a step that fails"):
                step({})
            assert _in_force() == 2 and threads._TUNING.running is False
    assert seen == [2, 2, 2]  # nothing recorded, so nothing to try against


def test_a_timed_call_inside_another_runs_as_it_is(clock):
    seen, inner_seen = [], []
    inner = _step(inner_seen, clock)

    @threads.threads_chosen_by_timing(lambda *a, **k: True, lambda *a, **k: ("outer", 1))
    def outer(params):
        seen.append(_in_force())
        inner(params)

    with _two_threads():
        for _ in range(12):
            outer({})
    assert inner_seen == seen and 1 in seen  # the inner call ran on the outer's count
    assert [key for key, _ in threads._TUNING.choices] == ["outer"]


def test_with_one_thread_in_force_or_timing_off_nothing_is_switched(monkeypatch, clock):
    seen = []
    step = _step(seen, clock)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        for _ in range(20):
            step({})
    assert seen == [1] * 20
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    seen.clear()
    with _two_threads():
        for _ in range(20):
            step({})
    assert seen == [2] * 20


def test_the_environment_turns_the_timing_off():
    import os
    import subprocess
    import sys

    code = "from minattn.engine import threads; print(threads.TIMED_THREADS)"
    for value, expected in (("0", "False"), ("1", "True"), (None, "True")):
        env = {k: v for k, v in os.environ.items() if k != "MINATTN_TIMED_THREADS"}
        if value is not None:
            env["MINATTN_TIMED_THREADS"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip()
        assert out == expected, (value, out)


def test_the_32_most_recently_used_timings_are_kept():
    tuning = threads._Tuning()
    for key in range(40):
        tuning.choice(key, 2)
    tuning.choice(10, 2)  # used again: kept
    tuning.choice("new", 2)
    kept = [key for key, _ in tuning.choices]
    assert len(kept) == 32 and kept[-2:] == [10, "new"] and 8 not in kept and 11 in kept


def test_decode_step_is_a_few_new_tokens_with_a_cache_and_numpy_weights():
    params = {"token_embedding": np.zeros((5, 3))}
    one, prompt = np.zeros((1, 1), int), np.zeros((1, threads.FEW_QUERIES + 1), int)
    assert threads.decode_step(params, one, cache=({},))
    assert threads.decode_step(params, np.zeros((2, threads.FEW_QUERIES), int), cache=({},))
    assert not threads.decode_step(params, prompt, cache=({},))  # a prompt
    assert not threads.decode_step(params, one)  # no cache: the whole sequence each time
    assert not threads.decode_step(params, one, cache=None)
    assert not threads.decode_step({"token_embedding": [[0.0]]}, one, cache=({},))  # not NumPy


def _spy_counts(monkeypatch):
    # The thread counts the timed calls ran with (as each call's time is recorded).
    counts, record = [], threads._Choice.record

    def spy(self, n, seconds):
        counts.append(n)
        return record(self, n, seconds)

    monkeypatch.setattr(threads._Choice, "record", spy)
    return counts


def test_a_models_decode_steps_answer_as_with_the_threads_in_force(monkeypatch):
    # generate under the timed choice (forced to try the other count at every other step) gives
    # the tokens and logits of generate with timing off; its steps ran on both counts; a call
    # with params and tokens by keyword is timed alike.
    from minattn.generation import generate
    from minattn.language_model import causal_lm, init_causal_lm

    rng = np.random.default_rng(0)
    params, config = init_causal_lm(rng, 50, 2, 32, 4, 64, position="rope", norm="rms_norm",
                                    activation="swiglu", bias=False, tied=False, n_kv_heads=2)
    prompt = rng.integers(0, 50, size=(1, 5))
    monkeypatch.setattr(threads._Choice, "FIRST", 1)
    monkeypatch.setattr(threads._Choice, "LONGEST", 1)
    counts = _spy_counts(monkeypatch)
    with _two_threads():
        timed = generate(params, prompt, 12, **config)
        _, cache = causal_lm(params, prompt, return_cache=True, **config)
        steps = [causal_lm(params=params, tokens=timed[:, 5 + i:6 + i], cache=cache,
                           return_cache=True, **config)[0] for i in range(6)]
    assert {1, 2} <= set(counts)
    assert ("decode", id(params["token_embedding"])) in [key for key, _ in threads._TUNING.choices]
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    plain = generate(params, prompt, 12, **config)
    np.testing.assert_array_equal(timed, plain)
    _, cache = causal_lm(params, prompt, return_cache=True, **config)
    for i in range(6):
        want = causal_lm(params, timed[:, 5 + i:6 + i], cache=cache, return_cache=True,
                         **config)[0]
        np.testing.assert_allclose(steps[i], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["causal_lm", "decoder_block"])
def test_a_call_missing_its_arguments_gets_the_functions_own_error(name):
    # The timed functions' `when` and their variants' see the call first; a call missing an
    # argument must still get the function's own TypeError, naming it.
    import minattn

    with _two_threads():
        for call in ((), ({"token_embedding": np.zeros((3, 2))},)):
            with pytest.raises(TypeError, match=rf"^{name}\(\) missing"):
                getattr(minattn, name)(*call)


def test_on_one_thread_a_slow_step_brings_nothing_forward():
    # Busy: one thread kept, its tries of two threads backed off; a step of one thread 5x slower
    # at 600 does not bring a try of two threads (ten times slower there) forward.
    used = _choices(lambda n, step: (5.0 if step == 600 else 1.0) if n == 1 else 10.0, 1000)
    tries = [i for i, n in enumerate(used) if n == 2 and i > 3]
    assert [t for t in tries if 500 < t < 700] == [695]  # 183, 439, 695: none brought forward


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
    counts = _spy_counts(monkeypatch)
    with _two_threads():
        timed = causal_lm(params, prompt, **config)
    # 18 tokens: 2**4 to 2**5
    assert list(threads._TUNING.choices) == [(("block", 32, "<f8", 5), 2)]
    assert len(counts) == 6 and {1, 2} <= set(counts)
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    np.testing.assert_allclose(timed, causal_lm(params, prompt, **config), rtol=1e-12, atol=1e-12)


def test_block_of_a_prompt_is_more_than_a_few_tokens_of_numpy():
    few, many = threads.FEW_QUERIES, threads.FEW_QUERIES + 1
    assert threads.block_of_a_prompt({}, np.zeros((1, many, 8)))
    assert threads.block_of_a_prompt({}, np.zeros((many, 8)))
    assert not threads.block_of_a_prompt({}, np.zeros((1, few, 8)))  # a decode step's block
    assert not threads.block_of_a_prompt({}, np.zeros(8))
    assert not threads.block_of_a_prompt({}, [[0.0] * 8] * many)  # not NumPy: left alone
    assert threads.blocks_of_a_width({}, np.zeros((2, 3, 8), np.float32)) == \
        (("block", 8, "<f4", 3), 6)  # 6 tokens, 2**2 <= 6 < 2**3
    assert threads.blocks_of_a_width({}, np.zeros((7, 8)))[0] == ("block", 8, "<f8", 3)
    assert threads.blocks_of_a_width({}, np.zeros((8, 8)))[0] == ("block", 8, "<f8", 4)


def test_only_the_main_threads_calls_are_timed(clock):
    # The BLAS thread count is the process's: a call from another thread runs on the threads in
    # force, never switching them under the main thread's feet, and leaves no timing behind.
    import threading

    seen = []
    step = _step(seen, clock)
    with _two_threads():
        worker = threading.Thread(target=lambda: [step({}) for _ in range(10)])
        worker.start()
        worker.join()
    assert seen == [2] * 10 and threads._TUNING.choices == {}


def test_inside_a_timed_call_the_attention_core_runs_on_the_chosen_count(monkeypatch, clock):
    # The core's products run on one BLAS thread (one_blas_thread), but inside a call whose count
    # was chosen by timing they run on that count (unless=decoding_or_timed): seen through the
    # softmax the core calls (or the row max of its plain form on NumPy, engine/plain_core.py),
    # for a prompt of 300 queries.
    import minattn.attention as attention
    from minattn.engine import plain_core
    seen = []

    def spied(f):
        def spy(*args, **kwargs):
            seen.append(_in_force())
            return f(*args, **kwargs)
        return spy

    monkeypatch.setattr(attention, "softmax", spied(attention.softmax))
    monkeypatch.setattr(plain_core, "row_max", spied(plain_core.row_max))
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 300, 8)) for _ in range(3))
    mask = np.tril(np.ones((300, 300), bool))
    chosen = []

    @threads.threads_chosen_by_timing(lambda *a, **k: True, lambda *a, **k: ("prompt", 1))
    def block(q):
        chosen.append(_in_force())
        clock.now += 20.0 if chosen[-1] > 1 else 1.0  # one thread "faster": chosen at the 3rd
        return attention.scaled_dot_product_attention(q, k, v, mask)

    with _two_threads():
        attention.scaled_dot_product_attention(q, k, v, mask)
        assert set(seen) == {1}  # not timed: the core on one thread, block by block
        for _ in range(6):
            seen.clear()
            block(q)
            assert seen and set(seen) == {chosen[-1]}
    assert chosen == [2, 2, 1, 1, 1, 1]  # both counts seen inside the timed calls


@pytest.mark.parametrize("train", ["count_task.train_count_model", "sorting_lm.train_sort_model"])
def test_a_training_runs_steps_are_timed_and_train_as_with_the_threads_in_force(monkeypatch,
                                                                                train):
    # The tour's and generate's training (forced to try the other count at every other step),
    # made tiny: each step timed, on both counts, one run's steps against each other; the
    # trained params those of the run with timing off (float64: the count may move last bits).
    import functools
    import importlib

    module, name = train.split(".")
    train = functools.partial(getattr(importlib.import_module(f"minattn.models.{module}"), name),
                              batch_size=4, d_model=8, d_ff=8)
    monkeypatch.setattr(threads._Choice, "FIRST", 1)
    monkeypatch.setattr(threads._Choice, "LONGEST", 1)
    counts = _spy_counts(monkeypatch)
    with _two_threads():
        timed = train(steps=6)
        assert len(counts) == 6 and {1, 2} <= set(counts)
        assert len(threads._TUNING.choices) == 1
        train(steps=2)
        assert len(threads._TUNING.choices) == 2  # another run, timed on its own
        monkeypatch.setattr(threads, "TIMED_THREADS", False)
        plain = train(steps=6)
    for got, want in zip(_leaves(timed), _leaves(plain)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_numpy_params_looks_at_the_first_array_of_nested_params():
    assert threads.numpy_params({"a": [{"w": np.zeros(2)}], "b": 1})
    assert not threads.numpy_params({"a": [[0.0]]}) and not threads.numpy_params({})
    assert not threads.numpy_params(None)


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [tree]
