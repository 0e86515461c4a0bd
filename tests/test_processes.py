"""The process policy (engine/processes.py): a training run's row pieces after the first on a
forked worker process. Its steps are those of the worker threads and of the pieces computed
one after the other, to the last bit; the policy steps aside where it cannot apply (one step,
one piece, boxes, strided or non-NumPy weights, another thread, MINATTN_PROCESSES=0); a
worker's exception, death or silence is raised here naming it, never a hang; no worker is
left running after a run, whatever ended it."""
import multiprocessing
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest
from autograd import grad

from minattn.engine import processes, threads
from minattn.engine.autograd_rules import value_and_grad_by_leaf
from minattn.engine.trees import leaves
from minattn.models import char_gpt
from minattn.training import loop

threadpoolctl = pytest.importorskip("threadpoolctl")
pytestmark = pytest.mark.skipif(not processes.available(),
                                reason="the process policy needs Linux's fork")
from .test_training_workers import two_threads  # noqa: E402,F401 (a fixture)


@pytest.fixture(autouse=True)
def no_worker_left():
    yield
    assert processes.live_worker_pids() == []
    assert [p for p in multiprocessing.active_children()
            if p.name == "minattn-worker-process"] == []


def _gpt(dtype=np.float32):
    params, config = char_gpt.init_char_gpt(np.random.default_rng(0), 11, n_layers=1,
                                            n_heads=2, d_model=16, context=8, dtype=dtype)
    ids = np.random.default_rng(1).integers(11, size=300)
    return params, config, ids


def _run(params, config, ids, steps, *, on=True, accumulation=1, loss_sum=None, **kwargs):
    # loop.train of a small GPT, the process policy on or off; -> (state, the worker process
    # ids live at each step's callback)
    seen = []
    callback = kwargs.pop("callback", None)

    def record(step, loss, n):
        seen.append(processes.live_worker_pids())
        if callback is not None:
            callback(step, loss, n)

    before = processes.PROCESSES
    processes.PROCESSES = on
    try:
        state = loop.train(loss_sum or char_gpt.loss_sum(config), params, None, steps=steps,
                           batch_size=None, pad_id=None, lr=1e-2, warmup=1,
                           weight_decay=0.1, accumulation=accumulation, callback=record,
                           batches=lambda k: char_gpt.window_batch(ids, context=8, batch_size=5,
                                                                   seed=0, k=k), **kwargs)
    finally:
        processes.PROCESSES = before
    return state, seen


@pytest.mark.parametrize("dtype, accumulation", [(np.float32, 1), (np.float64, 2)])
def test_a_run_on_a_worker_process_has_the_bits_of_the_worker_threads(two_threads, dtype,
                                                                       accumulation):
    params, config, ids = _gpt(dtype)
    on, seen = _run(params, config, ids, 3, accumulation=accumulation)
    assert len({tuple(pids) for pids in seen}) == 1 and len(seen[0]) == 1  # one worker, kept
    assert seen[0][0] != os.getpid()
    off, seen_off = _run(params, config, ids, 3, on=False, accumulation=accumulation)
    assert seen_off == [[], [], []]
    assert on["losses"] == off["losses"]
    for a, b in zip(leaves([on["trainable"], on["adam"]]), leaves([off["trainable"],
                                                                   off["adam"]])):
        np.testing.assert_array_equal(a, b)


def test_the_pieces_are_those_computed_one_after_the_other(two_threads):
    # accumulated with a run's WorkerProcesses: the loss and every gradient, to the last bit,
    # those of the two pieces computed here in turn, added in their order (and of 5 rows:
    # 2 here and 3 on the worker)
    params, config, ids = _gpt()
    part = char_gpt.window_batch(ids, context=8, batch_size=5, seed=0, k=0)
    loss_and_grad = value_and_grad_by_leaf(char_gpt.loss_sum(config))
    rng = np.random.default_rng(3)
    with processes.worker_processes(loss_and_grad, 2) as workers:
        loss, grads = loop.accumulated(loss_and_grad, params, [part], [rng], workers)
        assert len(workers.pids()) == 1
    children = np.random.default_rng(3).spawn(2)
    by_piece = [loss_and_grad(params, tuple(a[s] for a in part), child)
                for s, child in zip((slice(0, 2), slice(2, 5)), children)]
    count = int(part[2].sum())
    assert loss == (float(by_piece[0][0]) + float(by_piece[1][0])) / count
    for g, g0, g1 in zip(leaves(grads), leaves(by_piece[0][1]), leaves(by_piece[1][1])):
        np.testing.assert_array_equal(g, (g0 + g1) / count)


def _twice(tree, x, rng):
    # a stand-in for a value_and_grad: (sum of w * x, {"w": x summed to w's shape, ...})
    value = float((tree["w"] * x.sum()).sum())
    return value, {"w": np.full_like(tree["w"], x.sum()), "b": [tree["b"][0] * 2]}


def test_map_gives_each_items_value_and_gradient_in_order():
    tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.ones(4)]}
    items = [(np.array([1.0, 2.0]), None), (np.array([3.0]), None), (np.array([5.0]), None)]
    with processes.worker_processes(_twice, 2) as workers:
        out = workers.map(tree, items)
        assert len(workers.pids()) == 2
        tree["w"] = tree["w"] + 1  # new weights: the workers read them at the next map
        again = workers.map(tree, items)
    for got, item in zip(out, items):
        want = _twice({"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                       "b": [np.ones(4)]}, *item)
        assert got[0] == want[0]
        np.testing.assert_array_equal(got[1]["w"], want[1]["w"])
        assert got[1]["w"].dtype == np.float32 and isinstance(got[1]["b"], list)
    assert [v for v, _ in again] == [_twice(tree, *item)[0] for item in items]


def _memory_given_back(tree, n_mib, rng):
    # a stand-in for a step's value_and_grad that allocates n_mib arrays of 1 MiB, touches them
    # and frees them all: -> (the MiB of anonymous memory this process gave back to the system
    # as they were freed (Linux's RssAnon; in bytes, whatever the page size), a zero gradient)
    def resident_mib():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("RssAnon:")) / 1024

    temporaries = [np.ones(2 ** 18, dtype=np.float32) for _ in range(int(n_mib))]
    alive = resident_mib()
    del temporaries
    return alive - resident_mib(), {"w": np.zeros_like(tree["w"])}


@pytest.mark.parametrize("where", ["the main thread", "a thread of its own"])
def test_a_worker_keeps_the_memory_its_calls_free_for_the_next(where, monkeypatch):
    # 80 MiB of temporaries a call, more than glibc's largest trim threshold (64 MiB): unless
    # the worker keeps its heap (processes.keep_heap), each call gives them back to the system
    # as they are freed (and faults them in again at the next); kept, it gives back none. A run
    # started on another thread forks its worker in that thread's malloc arena.
    for name in processes._USERS_MALLOC + ("GLIBC_TUNABLES",):
        monkeypatch.delenv(name, raising=False)
    tree = {"w": np.zeros(4, dtype=np.float32)}
    items = [(np.array(80.0), None), (np.array(80.0), None)]
    given_back = []

    def run():
        with processes.worker_processes(_memory_given_back, 3) as workers:
            given_back.extend(workers.map(tree, items)[1][0] for _ in range(3))

    if where == "the main thread":
        run()
    else:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
    assert len(given_back) == 3 and max(given_back) < 8, given_back


def test_keep_heap_sets_glibcs_malloc_and_leaves_a_users_own_settings(monkeypatch):
    # keep_heap calls mallopt in the process it runs in: here, in child interpreters of their
    # own; True on glibc (as os.confstr names the C library), where no environment variable of
    # the user's sets glibc's malloc; else False
    import subprocess

    code = "from minattn.engine import processes; print(processes.keep_heap())"
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        glibc = False
    env = {k: v for k, v in os.environ.items()
           if k not in processes._USERS_MALLOC + ("GLIBC_TUNABLES",)}
    for users, want in [({}, glibc), ({"MALLOC_TRIM_THRESHOLD_": "0"}, False),
                        ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, False),
                        ({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}, glibc)]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={**env, **users}).stdout.strip()
        assert out == str(want), users


def test_borrowed_gradients_are_read_only_views_until_the_next_map():
    # map(borrow=True): a worker's gradient as read-only views of its shared block, which the
    # next map writes over; without borrow, copies that are the caller's to keep
    tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": [np.ones(4)]}
    items = [(np.array([1.0]), None), (np.array([3.0]), None)]
    with processes.worker_processes(_twice, 3) as workers:
        borrowed = workers.map(tree, items, borrow=True)[1][1]
        want = _twice(tree, *items[1])[1]
        np.testing.assert_array_equal(borrowed["w"], want["w"])
        np.testing.assert_array_equal(borrowed["b"][0], want["b"][0])
        for g in (borrowed["w"], borrowed["b"][0]):
            assert not g.flags.owndata and not g.flags.writeable  # a view, not a copy
            with pytest.raises(ValueError):
                g[...] = 0
        kept = workers.map(tree, [items[0], (np.array([9.0]), None)])[1][1]  # no borrow
        np.testing.assert_array_equal(borrowed["w"], np.full((2, 3), 9.0))  # written over
        assert kept["w"].flags.writeable and kept["w"].flags.owndata
        workers.map(tree, [items[0], (np.array([7.0]), None)], borrow=True)
        np.testing.assert_array_equal(kept["w"], np.full((2, 3), 9.0))  # the caller's


def test_a_step_borrows_only_its_last_micro_batchs_worker_gradients(two_threads, monkeypatch):
    # accumulated reads a worker's gradient in place only where summed adds it before the
    # next map: the step's last micro-batch (accumulation 3: copies, copies, views)
    params, config, ids = _gpt()
    asked = []
    borrowing = processes.WorkerProcesses.map

    def recorded(self, *args, borrow=False, **kwargs):
        asked.append(borrow)
        return borrowing(self, *args, borrow=borrow, **kwargs)

    monkeypatch.setattr(processes.WorkerProcesses, "map", recorded)
    _run(params, config, ids, 2, accumulation=3)
    assert asked == [False, False, True] * 2


def test_a_gradient_not_shaped_as_its_weight_comes_back_through_the_pipe():
    def f(tree, x, rng):
        return 1.0, {"w": np.float64(x.sum())}  # a number, not w's float32 [2]

    with processes.worker_processes(f, 2) as workers:
        out = workers.map({"w": np.zeros(2, np.float32)}, [(np.ones(2), None)] * 2)
    assert out[1] == (1.0, {"w": 2.0}) and type(out[1][1]["w"]) is np.float64


def test_the_policy_steps_aside_where_it_cannot_apply(two_threads, monkeypatch):
    params, config, ids = _gpt()
    # a run of one step, or the policy off: no worker process
    assert _run(params, config, ids, 1)[1] == [[]]
    assert _run(params, config, ids, 2, on=False)[1] == [[], []]
    with processes.worker_processes(_twice, 1) as workers:
        assert workers is None
    monkeypatch.setattr(processes, "PROCESSES", False)
    with processes.worker_processes(_twice, 5) as workers:
        assert workers is None
    monkeypatch.setattr(processes, "PROCESSES", True)
    tree = {"w": np.ones((2, 3)), "b": [np.ones(4)]}
    items = [(np.ones(2), None)] * 2
    with processes.worker_processes(_twice, 5) as workers:
        assert workers.map(tree, items[:1]) is None  # one piece
        assert workers.map({"w": np.ones((3, 2)).T, "b": [np.ones(4)]}, items) is None
        assert workers.map({"w": np.ones((2, 3), object), "b": [np.ones(4)]}, items) is None
        assert workers.map(tree, [(np.ones(2).view(np.ma.MaskedArray), None)] * 2) is None

        class Device(np.ndarray):  # not a plain NumPy array (a GPU array's stand-in)
            pass

        assert workers.map({"w": np.ones((2, 3)).view(Device), "b": [np.ones(4)]},
                           items) is None
        out = []  # another thread (a nested split on a worker thread)
        thread = threading.Thread(target=lambda: out.append(workers.map(tree, items)))
        thread.start()
        thread.join()
        assert out == [None] and workers.pids() == []  # nothing forked yet
        assert workers.map(tree, items) is not None
        # after the fork: leaves of other shapes or more pieces than workers
        assert workers.map({"w": np.ones((2, 4)), "b": [np.ones(4)]}, items) is None
        assert workers.map(tree, items * 2) is None


def test_autograd_boxes_keep_the_threads():
    # a gradient through the step (its weights boxes): map steps aside, and the value is the
    # plain one
    tree = {"w": np.ones((2, 3)), "b": [np.ones(4)]}
    seen = []

    def outer(scale):
        with processes.worker_processes(_twice, 5) as workers:
            seen.append(workers.map({"w": tree["w"] * scale, "b": tree["b"]},
                                    [(np.ones(2), None)] * 2))
        return (tree["w"] * scale).sum()

    assert grad(outer)(2.0) == 6.0 and seen == [None]


def test_a_worker_error_is_raised_here_naming_the_worker(two_threads):
    params, config, ids = _gpt()
    plain = char_gpt.loss_sum(config)

    def loss_sum(params, batch, rng):  # fails on the worker's rows only (its pid not ours)
        if os.getpid() != parent:
            raise ValueError("bad rows")
        return plain(params, batch, rng)

    parent = os.getpid()
    with pytest.raises(ValueError, match="bad rows") as caught:
        _run(params, config, ids, 3, loss_sum=loss_sum)
    assert any("worker process, pid" in note for note in caught.value.__notes__)


def test_the_parents_error_comes_first_after_the_worker_answered(two_threads):
    params, config, ids = _gpt()
    plain = char_gpt.loss_sum(config)
    parent = os.getpid()

    def loss_sum(params, batch, rng):
        if os.getpid() == parent:
            raise KeyError("ours")
        time.sleep(0.2)
        return plain(params, batch, rng)

    with pytest.raises(KeyError, match="ours"):
        _run(params, config, ids, 3, loss_sum=loss_sum)


def test_a_worker_that_dies_raises_worker_died_not_a_hang(two_threads):
    params, config, ids = _gpt()
    plain = char_gpt.loss_sum(config)
    parent = os.getpid()

    def loss_sum(params, batch, rng):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return plain(params, batch, rng)

    with pytest.raises(processes.WorkerDied, match=r"pid \d+\) died .*SIGKILL"):
        _run(params, config, ids, 3, loss_sum=loss_sum)


def test_a_silent_worker_is_killed_after_its_patience(two_threads, monkeypatch):
    params, config, ids = _gpt()
    plain = char_gpt.loss_sum(config)
    parent = os.getpid()
    monkeypatch.setattr(processes, "PATIENCE", 0.5)
    monkeypatch.setattr(processes, "PATIENCE_FACTOR", 0.0)

    def loss_sum(params, batch, rng):
        if os.getpid() != parent:
            time.sleep(60)
        return plain(params, batch, rng)

    start = time.perf_counter()
    with pytest.raises(processes.WorkerDied, match="gave no answer in 0.5 s"):
        _run(params, config, ids, 3, loss_sum=loss_sum)
    assert time.perf_counter() - start < 30


def test_ctrl_c_and_a_non_finite_step_leave_no_worker(two_threads, tmp_path):
    params, config, ids = _gpt()

    def interrupt(step, loss, n):
        if step == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(params, config, ids, 5, callback=interrupt, out=tmp_path)
    plain = char_gpt.loss_sum(config)

    def poisoned(params, batch, rng):
        return plain(params, batch, rng) * np.nan

    with pytest.raises(loop.NonFinite):
        _run(params, config, ids, 3, loss_sum=poisoned)


def test_the_workers_ignore_ctrl_c_and_a_split_inside_one_uses_threads():
    def f(tree, x, rng):
        os.kill(os.getpid(), signal.SIGINT)  # ignored in a worker; here, ignored by _no_sigint
        return (processes.available(), threading.current_thread().name), tree

    with processes.worker_processes(f, 2) as workers:
        out = workers.map({"w": np.ones(1)}, [(np.ones(1), None)] * 2, here=_no_sigint())
    assert out[0][0] == (True, "MainThread") and out[1][0] == (False, "MainThread")


class _no_sigint:
    def __enter__(self):
        self.before = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.before)


def test_dropout_draws_from_each_pieces_child_generator_as_on_the_threads(two_threads):
    from tests.test_training_workers import _setup

    loss_and_grad, lora, parts, _ = _setup(lora_dropout=0.5)
    rngs = lambda: [np.random.default_rng(7), np.random.default_rng(8)]  # noqa: E731
    on_threads = loop.accumulated(loss_and_grad, lora, parts, rngs())
    with processes.worker_processes(loss_and_grad, 2) as workers:
        on_processes = loop.accumulated(loss_and_grad, lora, parts, rngs(), workers)
        assert len(workers.pids()) == 1
    assert on_processes[0] == on_threads[0]
    for a, b in zip(leaves(on_processes[1]), leaves(on_threads[1])):
        np.testing.assert_array_equal(a, b)
    no_dropout = loop.accumulated(_setup()[0], lora, parts, rngs())
    assert on_threads[0] != no_dropout[0]  # (the generators were read)


def test_close_reaps_the_workers_and_is_idempotent():
    with processes.worker_processes(_twice, 3) as workers:
        workers.map({"w": np.ones((2, 3)), "b": [np.ones(4)]}, [(np.ones(2), None)] * 2)
        pids = workers.pids()
        assert len(pids) == 1
    workers.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pids[0], os.WNOHANG)  # reaped: no zombie
    assert workers.map({"w": np.ones((2, 3)), "b": [np.ones(4)]},
                       [(np.ones(2), None)] * 2) is None  # closed: threads


def test_elsewhere_than_linux_the_policy_is_off(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not processes.available()
    with processes.worker_processes(_twice, 5) as workers:
        assert workers is None


def test_ctrl_c_in_our_own_piece_kills_the_busy_worker_and_saves(two_threads, tmp_path):
    # KeyboardInterrupt while the worker computes its piece: the worker is not waited for, the
    # run saves its last finished step, and nothing is left running
    params, config, ids = _gpt()
    plain = char_gpt.loss_sum(config)
    parent, calls = os.getpid(), []

    def loss_sum(params, batch, rng):
        if os.getpid() != parent:
            time.sleep(0.3)
        else:
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
        return plain(params, batch, rng)

    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        _run(params, config, ids, 5, loss_sum=loss_sum, out=tmp_path, every=100)
    assert time.perf_counter() - start < 30
    from minattn.training.checkpoints import load_checkpoint
    assert load_checkpoint(tmp_path)["step"] == 1


def test_the_timed_rule_keeps_the_threads_where_they_are_faster(monkeypatch):
    # threads.py's rule, per run: the processes first (the fork untimed), the other way tried
    # at the third call and kept where faster; with the timing off, the processes always
    parent = os.getpid()

    def f(tree, x, rng):
        if os.getpid() != parent:
            time.sleep(0.05)  # a slow worker
        return float(x.sum()), tree

    def otherwise():
        used.append("threads")
        return [f(tree, *item) for item in items]

    tree, items = {"w": np.ones(3)}, [(np.ones(2), None), (np.ones(3), None)]
    monkeypatch.setattr(threads, "TIMED_THREADS", True)
    used = []
    with processes.worker_processes(f, 10) as workers:
        outs = [workers.map(tree, items, otherwise=otherwise) for _ in range(8)]
    assert used == ["threads"] * 6  # calls 3 and 4 tried them, and they were kept
    assert all([v for v, _ in out] == [2.0, 3.0] for out in outs)
    monkeypatch.setattr(threads, "TIMED_THREADS", False)
    used = []
    with processes.worker_processes(f, 10) as workers:
        outs = [workers.map(tree, items, otherwise=otherwise) for _ in range(4)]
    assert used == [] and all([v for v, _ in out] == [2.0, 3.0] for out in outs)
    # where the processes cannot run: otherwise, untimed
    with processes.worker_processes(f, 10) as workers:
        assert workers.map(tree, items[:1], otherwise=otherwise) is not None
    assert used == ["threads"]


def test_no_fork_or_a_daemonic_process_keeps_the_threads(monkeypatch):
    # a fork that fails (no memory, no processes left): the run's calls go to otherwise, and
    # nothing is left; inside a Pool's worker (daemonic: it may have no children): not at all
    tree, items = {"w": np.ones(3)}, [(np.ones(2), None), (np.ones(3), None)]
    used = []

    def otherwise():
        used.append(1)
        return "threads"

    def no_fork(self):
        raise OSError(11, "Resource temporarily unavailable")

    with monkeypatch.context() as patched:
        patched.setattr(multiprocessing.get_context("fork").Process, "start", no_fork)
        with processes.worker_processes(_twice, 5) as workers:
            assert workers.map(tree, items, otherwise=otherwise) == "threads"
            assert workers.map(tree, items, otherwise=otherwise) == "threads"
    assert used == [1, 1]

    class Daemonic:
        daemon = True

    monkeypatch.setattr(multiprocessing, "current_process", lambda: Daemonic())
    assert not processes.available()


_HELD_PAST_THE_RUN = """
import numpy as np
from minattn.engine import processes
def f(tree, x, rng):
    return float(x.sum()), {"w": tree["w"] * float(x.sum())}
tree = {"w": np.arange(6, dtype=np.float32)}
with processes.worker_processes(f, 3) as workers:
    held = workers.map(tree, [(np.ones(1), None), (np.full(1, 3.0), None)],
                       borrow=True)[1][1]["w"]
assert held.base is not None  # a view of the worker's block, not a copy
print(held.tolist())
"""


def test_a_borrowed_gradient_held_past_the_runs_end_stays_readable():
    # NumPy's views of an mmap hold no buffer export on it: closing the blocks at the run's end
    # unmapped the memory under a borrowed gradient (or a traceback frame's view of a block),
    # and reading it crashed the interpreter; a child interpreter, so that a crash fails the test
    import subprocess

    run = subprocess.run([sys.executable, "-c", _HELD_PAST_THE_RUN], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.split() == ["[0.0,", "3.0,", "6.0,", "9.0,", "12.0,", "15.0]"]
