"""A training run's row pieces on worker PROCESSES: the process policy (training/loop.py).

A training step split by rows over the cores (threads.py: row_pieces) runs its pieces on
worker threads, one BLAS thread each. Each thread's NumPy calls hand the GIL to the other
and wait to take it back, ~500 times a worker per step of the baby GPT (docs/benchmarks.md,
"The baby GPT's two workers and the GIL"), and the two halves run in a convoy, well above what
two halves at once cost without it. A process of its own shares no GIL:

- `worker_processes(f, calls)`, a context manager around a training run (loop.train: f is its
  value_and_grad, calls how many it will make) -> a `WorkerProcesses`, whose
  `map(tree, items, otherwise=...)` is [f(tree, *item) for item in items]: item 0 here, on
  the calling thread, each other item on a worker process of its own, all on one BLAS thread
  each; or otherwise() (the caller's worker threads) where the processes may not run or the
  timed rule below prefers it.
- The workers are forked once, at the run's first map, so they inherit f (a closure: a model's
  config, a LoRA run's base weights, copy-on-write) and are kept for the run; closed at its
  end (also when it raises or on Ctrl-C, which the workers ignore: the parent decides).
- Each map: the tree's leaves (the weights: all of them change every step) copied into one
  block of anonymous shared memory (mmap, made before the fork: nothing to unlink, nothing
  left behind by a killed process), read by every worker as views; each item (the piece's
  rows, its generator) pickled through the worker's pipe; each worker writes its gradient
  into its own shared block and answers its value through the pipe. The caller adds the
  pieces' gradients in the pieces' order, as it does for the threads: the step's bits are
  those of the thread split and of the pieces computed one after the other
  (tests/test_processes.py). A worker's gradient comes back as copies of its block, the
  caller's to keep; or, with `map(..., borrow=True)`, as read-only views of the block, which
  the next map writes over: no copy of the whole model's gradient, for a caller that has read
  it before its next map (loop.accumulated, for a step's last micro-batch, whose pieces it adds
  before the step ends).

Which, when both may run: the timed rule of threads.py's BLAS thread counts (its _Choice,
one per run): the processes first (the fork in the first call, which is not compared), the
caller's threads tried at the third call and then after an interval that doubles while they
lose, a try kept where its faster call beats the mean of the last eight on the way in force.
With the timing off (MINATTN_TIMED_THREADS=0, as in the benchmarks), the processes whenever
they may run. Where the two halves seldom run at once (the cores busy with other work) the
processes gain nothing, and the rule keeps the threads where they are the faster. Either way
the same bits.

When the processes may run at all (`usable`; else the threads as before): Linux with fork
(elsewhere a fork's child may not run NumPy's threads safely; spawn would not inherit f), not
in a daemonic process (a multiprocessing Pool's worker may have no children), a fork that
worked (an OSError at the first map: threads for the rest of the run);
MINATTN_PROCESSES not "0" (or `PROCESSES = True`); a run of at least MIN_CALLS calls (one
step does not repay the fork); the call on the thread and process that made the workers, not
inside a worker (a nested split: threads); every leaf of the tree a C-contiguous NumPy array
of a numeric dtype (CuPy arrays and autograd's boxes: threads; a strided weight would change a
product's bits once copied), the same leaves' shapes and dtypes at every map (the shared block
is laid out at the fork); each item's arrays plain NumPy arrays; as many items as at the first
map.
A gradient leaf whose shape or dtype is not its weight's comes back through the pipe.

Failures: an exception in a worker comes back and is raised here, in the items' order after
the caller's own (every item answered first, as threads.in_threads does); a worker that dies
(killed, out of memory) raises WorkerDied naming its process id and exit code, never a hang
(the parent waits on the pipe and on the process's own sentinel together); a worker silent for
longer than PATIENCE seconds plus PATIENCE_FACTOR times the caller's own piece raises
WorkerDied too, the worker killed. After a failure the run's workers are closed: the error ends
the run.

Fork with threads alive: the caller's worker threads are idle between steps; OpenBLAS shuts
its threads down around a fork (its atfork handlers) and each worker sets one BLAS thread; the
worker runs only f. Python 3.12+ warns at every fork of a process with threads (a
DeprecationWarning): silenced around this one fork, for the reasons above.

A worker's memory: each worker keeps the memory its calls free for its next call (keep_heap:
glibc's heap not trimmed, arrays up to HEAP_MMAP_THRESHOLD taken from it), where glibc would
hand it back to the system after each call and fault every page in again at the next. So a
worker holds the largest heap a step needed until the run closes it, also while the caller
evaluates or writes a checkpoint. A user's own malloc settings (GLIBC_TUNABLES' glibc.malloc,
MALLOC_TRIM_THRESHOLD_ and the like) are left as they are, and so is the caller's process.

Measured: docs/benchmarks.md, "The baby GPT's step on a worker process" (the workers' start
is a few milliseconds to a third of a step: MIN_CALLS), and "A worker process that keeps its
heap" (the worker's half as fast as the caller's).
"""
import contextlib
import mmap
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import warnings

import numpy

from . import threads
from .trees import flatten

PROCESSES = os.environ.get("MINATTN_PROCESSES", "1") != "0"  # False: worker threads only
MIN_CALLS = 2  # a run of fewer calls keeps its threads (the fork is not repaid)
PATIENCE, PATIENCE_FACTOR = 60.0, 100.0  # seconds, and times the caller's own piece
_ALIGN = 64  # bytes: each leaf's start in a shared block

_IN_WORKER = False  # True in a worker process: a split inside it uses threads
_LIVE = set()  # the WorkerProcesses with workers running (live_worker_pids)


class WorkerDied(ChildProcessError):
    """A worker process of a training run died or stopped answering."""


def available():
    """True where the policy may run at all: Linux with fork, MINATTN_PROCESSES not 0, not
    inside a worker process, nor inside a daemonic process of multiprocessing's (a Pool's
    worker: it may have no children)."""
    return PROCESSES and not _IN_WORKER and sys.platform.startswith("linux") and \
        hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods() and \
        not multiprocessing.current_process().daemon


@contextlib.contextmanager
def worker_processes(f, calls):
    """Context manager around a training run that will call f `calls` times -> a
    WorkerProcesses (its map forks the workers at its first use), or None where the policy
    cannot apply to the whole run (fewer than MIN_CALLS calls, not available()). The workers
    are closed when the block ends, also when it raises."""
    if calls < MIN_CALLS or not available():
        yield None
        return
    workers = WorkerProcesses(f)
    try:
        yield workers
    finally:
        workers.close()


def live_worker_pids():
    """The process ids of the worker processes running now (none once every run has ended)."""
    return sorted(pid for workers in list(_LIVE) for pid in workers.pids())


class WorkerProcesses:
    """f's items on worker processes (the module docstring); made by worker_processes."""

    def __init__(self, f):
        self.f = f
        self.owner = (os.getpid(), threading.get_ident())
        self.layout = None  # [(offset, shape, dtype)] of the tree's leaves, fixed at the fork
        self.rebuild = None  # leaves -> a tree of the first map's structure
        self.workers = []  # [(process, connection, gradient block)]
        self.shared = None  # the weights' block
        self.pending = set()  # the workers asked and not yet answered
        self.closed = False
        self.choice = threads._Choice(2)  # the timed rule's state for this run: 2 processes

    def pids(self):
        return [] if self.closed else \
            [process.pid for process, _, _ in self.workers if process.is_alive()]

    # -- the policy --------------------------------------------------------------------------
    def usable(self, leaves, items):
        """True where map may run these (the module docstring's "When")."""
        if self.closed or not available() or len(items) < 2 or \
                (os.getpid(), threading.get_ident()) != self.owner:
            return False
        if not all(type(leaf) is numpy.ndarray and leaf.flags.c_contiguous and
                   leaf.dtype.kind in "biufc" for leaf in leaves):
            return False
        if not all(isinstance(a, numpy.ndarray) and type(a) is numpy.ndarray
                   for item in items for a in _arrays(item)):
            return False
        if self.layout is None:
            return True
        return len(items) == len(self.workers) + 1 and len(leaves) == len(self.layout) and \
            all(leaf.shape == shape and leaf.dtype == dtype
                for leaf, (_, shape, dtype) in zip(leaves, self.layout))

    # -- a call ------------------------------------------------------------------------------
    def map(self, tree, items, here=None, otherwise=None, borrow=False):
        """[f(tree, *item) for item in items]: item 0 on this thread (inside `here`, a context
        manager: one BLAS thread), the others on the workers. otherwise() -> the same list
        computed another way (the caller's worker threads): called where usable() is not, and
        where the timed rule (the module docstring) finds it faster; without it, None there
        (nothing run). borrow=True: a worker's gradient leaves, where they came back through its
        shared block, are read-only views of it, valid until the next map writes over them (still
        mapped after close); else copies."""
        leaves, rebuild = flatten(tree)
        items = [tuple(item) for item in items]
        if self.usable(leaves, items) and self.layout is None:
            try:  # the workers, forked at the first map that may use them
                self.rebuild = rebuild
                self._start(leaves, len(items) - 1)
            except OSError:  # (no fork: out of memory, out of processes) threads for the run
                self.close()
        if not self.usable(leaves, items):
            return None if otherwise is None else otherwise()
        if otherwise is None or not threads.TIMED_THREADS:
            return self._map(tree, leaves, rebuild, items, here, borrow)
        way = self.choice.next()  # 2: the processes, 1: otherwise
        start = time.perf_counter()
        out = self._map(tree, leaves, rebuild, items, here, borrow) if way == 2 else otherwise()
        self.choice.record(way, time.perf_counter() - start)
        return out

    def _map(self, tree, leaves, rebuild, items, here, borrow=False):
        for view, leaf in zip(self._views(self.shared), leaves):
            numpy.copyto(view, leaf, casting="no")
        for (process, connection, _), item in zip(self.workers, items[1:]):
            self._send(process, connection, item)
        start = time.perf_counter()
        try:
            with here if here is not None else contextlib.nullcontext():
                first = self.f(tree, *items[0])
        except KeyboardInterrupt:
            self.close()  # (the workers' halves are not waited for)
            raise
        except BaseException:
            own = time.perf_counter() - start  # every worker answers (or is found dead) first
            for worker in self.workers:
                self._answer(worker, own)
            raise
        own = time.perf_counter() - start
        answers = [self._answer(worker, own) for worker in self.workers]
        out = [first]
        for (process, _, block), (kind, value, grads) in zip(self.workers, answers):
            if kind == "error":
                try:
                    value.add_note(f"(raised in the training step's worker process, pid "
                                   f"{process.pid})")
                except AttributeError:
                    pass
                raise value
            if grads is None:
                views = self._views(block)
                if borrow:
                    for view in views:
                        view.flags.writeable = False
                grads = rebuild(views if borrow else [view.copy() for view in views])
            out.append((value, grads))
        return out

    def _send(self, process, connection, item):
        try:
            connection.send(item)
        except (BrokenPipeError, ConnectionError, OSError) as error:
            self._fail(process, "could not be sent its rows", error)
        self.pending.add(process.pid)

    def _answer(self, worker, own):
        # the worker's ("ok", value, gradient or None) or ("error", exception, None); its death
        # or silence: WorkerDied (the run's workers closed)
        process, connection, _ = worker
        limit = PATIENCE + PATIENCE_FACTOR * own
        ready = multiprocessing.connection.wait([connection, process.sentinel], limit)
        if connection in ready:
            try:
                answer = connection.recv()
            except (EOFError, ConnectionError, OSError) as error:
                self._fail(process, "died before it answered", error)
            self.pending.discard(process.pid)
            return answer
        if process.sentinel in ready:
            self._fail(process, "died before it answered")
        self._fail(process, f"gave no answer in {limit:.3g} s (killed)")

    def _fail(self, process, what, cause=None):
        if process.exitcode is None:
            process.kill()
        process.join()
        code = process.exitcode
        self.close()
        how = "" if code is None else f" (exit code {code}{_signal_name(code)})"
        raise WorkerDied(f"the training step's worker process (pid {process.pid}) {what}"
                         f"{how}; the run stops") from cause

    # -- the workers -------------------------------------------------------------------------
    def _start(self, leaves, n):
        self.layout, offset = [], 0
        for leaf in leaves:
            offset = -(-offset // _ALIGN) * _ALIGN
            self.layout.append((offset, leaf.shape, leaf.dtype))
            offset += leaf.nbytes
        size = max(offset, 1)
        self.shared = mmap.mmap(-1, size)  # anonymous, shared with the children forked below
        context = multiprocessing.get_context("fork")
        _LIVE.add(self)
        for _ in range(n):
            block = mmap.mmap(-1, size)
            here, there = context.Pipe()
            process = context.Process(target=self._serve, args=(there, block), daemon=True,
                                      name="minattn-worker-process")
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=DeprecationWarning,
                                        message=r".*fork\(\)")  # (3.12+: the docstring)
                try:
                    process.start()
                except BaseException:
                    here.close()
                    block.close()  # (no view of it made yet)
                    raise
                finally:
                    there.close()
            self.workers.append((process, here, block))

    def _views(self, block):
        return [numpy.ndarray(shape, dtype, buffer=block, offset=offset)
                for offset, shape, dtype in self.layout]

    def _serve(self, connection, block):
        # a worker's life: one BLAS thread; each item -> f(the shared weights, *item), its
        # gradient into `block`; ends at None or when the parent's end of the pipe closes
        global _IN_WORKER
        _IN_WORKER = True
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
        keep_heap()
        with threads._BlasThreads(threads._blas_libraries(), 1):
            while True:
                try:
                    item = connection.recv()
                except (EOFError, OSError):
                    return
                if item is None:
                    return
                connection.send(self._one(item, block))

    def _one(self, item, block):
        try:
            weights = self._views(self.shared)
            for view in weights:
                view.flags.writeable = False
            value, grads = self.f(self.rebuild(weights), *item)
            g_leaves = flatten(grads)[0]
            if len(g_leaves) == len(self.layout) and all(
                    type(g) is numpy.ndarray and g.shape == shape and g.dtype == dtype
                    for g, (_, shape, dtype) in zip(g_leaves, self.layout)):
                for view, g in zip(self._views(block), g_leaves):
                    numpy.copyto(view, g, casting="no")
                return ("ok", value, None)
            return ("ok", value, grads)  # (through the pipe)
        except BaseException as error:  # noqa: BLE001 (sent to the parent, raised there)
            try:
                pickle.dumps(error)
            except Exception:  # noqa: BLE001
                error = RuntimeError(f"{type(error).__name__}: {error}")
            return ("error", error, None)

    def close(self):
        """Stop the workers: asked to end (or killed where one is still computing, or does not
        end within a few seconds), reaped, their pipes closed; the shared blocks dropped, each
        unmapped with the last view of it (a borrowed gradient may outlive the run). Idempotent."""
        if self.closed:
            return
        self.closed = True
        for process, connection, _ in self.workers:
            if process.pid in self.pending or not process.is_alive():
                continue
            try:
                connection.send(None)
            except (BrokenPipeError, ConnectionError, OSError):
                pass
        for process, connection, block in self.workers:
            if process.pid in self.pending and process.exitcode is None:
                process.kill()
            process.join(5)
            if process.exitcode is None:
                process.kill()
                process.join()
            connection.close()
        # the shared blocks are dropped, never closed: NumPy's views of an mmap (a borrowed
        # gradient, a traceback's frame) hold no buffer export on it, so close() would unmap
        # the memory under them; each block is unmapped when its last view is gone
        self.workers = [(process, connection, None) for process, connection, _ in self.workers]
        self.shared = None
        _LIVE.discard(self)
        self.pending.clear()


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
HEAP_MMAP_THRESHOLD = 32 * 2 ** 20  # bytes: the ceiling of glibc's own moving threshold (64-bit)
TOP_PAD = 64 * 2 ** 20  # bytes kept at the top of a thread's arena (below: keep_heap)
_USERS_MALLOC = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_",
                 "MALLOC_MMAP_MAX_")


def keep_heap():
    """In a worker process: glibc's malloc keeps the memory a call frees for the next call. A
    worker's call frees all its temporaries at its end; glibc then trims the free top of its
    heap back to the system, and the next call faults every page in again. Here trimming is off
    (M_TRIM_THRESHOLD), arrays up to HEAP_MMAP_THRESHOLD come from the heap, not from a mapping
    of their own made and unmapped with each (M_MMAP_THRESHOLD; larger ones as ever), and
    TOP_PAD bytes stay at the heap's top (M_TOP_PAD: a worker forked from a thread other than
    the main one allocates in that thread's arena, which trims its top by its own rule). -> True
    where trimming was turned off; False, and nothing changed, where the C library is not glibc
    or the user has set glibc's malloc through the environment (GLIBC_TUNABLES' glibc.malloc,
    MALLOC_TRIM_THRESHOLD_ and the like). Never called in the caller's own process: its heap
    is its own."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (AttributeError, ValueError, OSError, TypeError):  # (not glibc; no confstr)
        return False
    if any(name in os.environ for name in _USERS_MALLOC) or \
            "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    import ctypes

    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not mallopt(_M_TRIM_THRESHOLD, -1):
        return False
    # (32-bit glibc refuses a threshold over 512 KiB: its own ceiling there, taken instead)
    mallopt(_M_MMAP_THRESHOLD, HEAP_MMAP_THRESHOLD if ctypes.sizeof(ctypes.c_void_p) == 8
            else 512 * 2 ** 10)
    mallopt(_M_TOP_PAD, TOP_PAD)
    return True


def _arrays(item):
    # the arrays of an item (a tuple of a piece's rows and its generator), None and
    # generators left out
    for a in item:
        if isinstance(a, (tuple, list)):
            yield from _arrays(a)
        elif a is not None and not isinstance(a, numpy.random.Generator):
            yield a


def _signal_name(code):
    # ", signal SIGKILL" for a process ended by a signal (exit code -9), else ""
    try:
        return f", signal {signal.Signals(-code).name}" if code < 0 else ""
    except ValueError:
        return f", signal {-code}"
