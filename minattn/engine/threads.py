"""The one place where minattn controls threads: BLAS threads, and worker threads.

What the policy does:

- `@one_blas_thread(unless=decoding_or_timed)` on the attention core: its many small
  [L_q, d_k] x [d_k, L_k] products (one per batch and head) run on one BLAS thread, because
  beside another busy process each of them waits for its second thread; the large projections
  keep every thread. A decode step's few queries (at most FEW_QUERIES) keep the threads in
  force, since switching twice per layer cost more than it saved, and so does a call inside a
  timed one (below), whose count was measured for the whole call.
- `@threads_chosen_by_timing(when, alike)` on causal_lm's decode steps, on each block of a
  prompt (decoder_block, more than FEW_QUERIES tokens) and on each training step
  (`training_step`): the call runs on the threads in force or on one, whichever recent alike
  calls found faster. Which is faster depends on what else the machine runs at that moment (the
  system's count of busy processes lags by a minute and counts minattn's own threads), so it
  measures: now and then two calls run on the other count (a try), first at the third call,
  then after an interval that doubles each time a try loses (8 to 256 calls, and long enough
  that a losing try costs about 5 % of the calls); a try wins if its faster call beats the mean
  of the last eight on the count in force, and its count is kept. On every thread, a call
  twice as slow as the last three brings the next try forward. A key timed for the first time
  starts where the key most recently used that has made a try stands (a reply's steps where its
  prompt's blocks stand). `_Choice` holds the rule; one `_Tuning` the whole state (the 32
  most recently used keys).
- `spread` and `n_workers`: independent items of known cost on worker threads, each with one
  BLAS thread, handed out the costliest first to the next worker free: blockwise attention's
  query blocks (`tile_entries`: how many heads a block's tile holds); `in_threads` under it,
  and the float32 GELU's chunks of a large array
  (position_wise._in_chunks) alike (NumPy releases the GIL inside its products and its passes
  over large arrays); `row_pieces` and `on_workers`: a fine-tuning step's batch split by rows
  over the cores (a training run's pieces after the first go to a worker process instead
  where processes.py's policy applies: no GIL shared); `rows_on_workers`: a batched forward's (the sentence encoder's) alike, in
  pieces of a given number of rows where asked (rows_per_piece: the sentence encoder's pieces
  of about 512 tokens, whose arrays stay in the CPU's cache). Only NumPy arrays are split: a
  GPU runs each piece in parallel already. While a split's workers run, Python's switch
  interval is at most SPLIT_SWITCH_INTERVAL (`short_switches`: a worker back from NumPy waits
  less for the other's Python), restored after it; and on a worker of on_workers or
  rows_on_workers (`beside_other_workers`), an elementwise primitive's array of at most
  WORKER_PASS elements goes in one pass per operation, not in cache-sized chunks
  (`elements_per_pass`: each NumPy call hands the GIL to the other worker and waits to take
  it back).

Turning it off: MINATTN_TIMED_THREADS=0 in the environment (or `TIMED_THREADS = False`) runs
every call on the threads in force. The thread count can change the last bits of a product
(BLAS may group a sum differently), so a run that must repeat bit for bit turns the timing off,
as the test suite does. With one BLAS thread in force (OPENBLAS_NUM_THREADS=1, threadpoolctl's
`threadpool_limits(1)`) there is nothing to choose, and `n_workers` gives one worker too.
Without threadpoolctl `one_blas_thread` is a no-op.

The BLAS thread count is the whole process's: only the main thread's calls are timed and switch
it, and while one runs on one thread, so do other threads' products. A threaded call sets the
limit once, around the whole call, after reading the number of workers.

Measured in docs/benchmarks.md: "Threads beside other work", "The prefill's core", "Training
and chat beside other work", "A step's rows split over the cores" (under "Fine-tuning with
LoRA"), and the runs once quoted here, under "Measurements moved from the docstrings".
"""
import collections
import functools
import numbers
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy

_controller = None


def _get_controller():
    # threadpoolctl's view of the loaded BLAS libraries, made once; False without threadpoolctl.
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            _controller = ThreadpoolController()
    return _controller


_libraries = None


def _blas_libraries():
    # The BLAS libraries threadpoolctl found, listed once per view (none without threadpoolctl).
    global _libraries
    controller = _get_controller()
    if _libraries is None or _libraries[0] is not controller:
        _libraries = (controller,
                      controller.select(user_api="blas").lib_controllers if controller else [])
    return _libraries[1]


def one_blas_thread(unless=None):
    """Context manager (or decorator): BLAS (OpenBLAS, MKL, ...) on one thread inside the
    block, the previous limits restored after it. As a decorator, unless(*args, **kwargs) ->
    True runs that call with the threads as they are (decoding, below)."""
    return _OneBlasThread(unless)


FEW_QUERIES = 4  # decoding: a token, or a few, per sequence


def decoding(q, *args, **kwargs):
    """True for attention's q [..., L_q, d_k] of at most FEW_QUERIES queries (an `unless` of
    one_blas_thread: see the module docstring)."""
    shape = getattr(q, "shape", ())
    return len(shape) >= 2 and shape[-2] <= FEW_QUERIES


def decoding_or_timed(q, *args, **kwargs):
    """True for a decode step's attention (`decoding`) or one inside a call whose BLAS thread count
    was chosen by timing (threads_chosen_by_timing): an `unless` of one_blas_thread, so that
    the count measured for the whole call holds for its products too."""
    return decoding(q) or _TUNING.running


def decode_step(params=None, tokens=None, *args, cache=None, **kwargs):
    """True for a model's call on at most FEW_QUERIES new tokens per sequence with a cache,
    NumPy weights (a `when` of threads_chosen_by_timing; a call missing its arguments is left
    to the function's own errors)."""
    shape = getattr(tokens, "shape", ())
    return cache is not None and len(shape) >= 1 and shape[-1] <= FEW_QUERIES and \
        isinstance(params, dict) and isinstance(params.get("token_embedding"), numpy.ndarray)


def block_of_a_prompt(params=None, x=None, *args, **kwargs):
    """True for a block's x [..., L, D] of more than FEW_QUERIES tokens, a NumPy array (a `when`
    of threads_chosen_by_timing: a prompt's layers, timed against each other)."""
    return isinstance(x, numpy.ndarray) and x.ndim >= 2 and x.shape[-2] > FEW_QUERIES


def same_model(params, tokens, *args, **kwargs):
    """A model's decode steps are timed against each other (an `alike` of
    threads_chosen_by_timing): (its token embedding, per step)."""
    return ("decode", id(params["token_embedding"])), 1


def blocks_of_a_width(params, x, *args, **kwargs):
    """Blocks of one width and dtype, of about as many tokens (within a factor of two), are timed
    against each other per token (an `alike` of threads_chosen_by_timing)."""
    tokens = x.size // x.shape[-1]
    return ("block", x.shape[-1], x.dtype.str, tokens.bit_length()), tokens


def numpy_params(params=None, *args, **kwargs):
    """True for a call whose params (nested dicts and lists) hold NumPy arrays (a `when` of
    threads_chosen_by_timing: a training step on the CPU, not one on CuPy)."""
    leaf = params
    while isinstance(leaf, (dict, list, tuple)) and leaf:
        leaf = next(iter(leaf.values())) if isinstance(leaf, dict) else leaf[0]
    return isinstance(leaf, numpy.ndarray)


def training_step(f):
    """f(params, ...), a training run's step (the value_and_grad of its loss, called once per
    step), with each call on the BLAS thread count that the run's recent steps found faster
    (threads_chosen_by_timing): a tiny model's step is many small products, which beside another
    busy process wait for their second thread (the module docstring)."""
    run = object()  # one run's steps are timed against each other, per step
    return threads_chosen_by_timing(numpy_params, lambda *args, **kwargs: (run, 1))(f)


class _OneBlasThread:
    # threadpoolctl's limit(), without its bookkeeping: it runs around every attention core (30
    # times a token in a 30-layer model; its cost: docs/benchmarks.md, "one_blas_thread's cost").
    def __init__(self, unless=None):
        self.unless = unless

    def __call__(self, f):
        @functools.wraps(f)
        def switched(*args, **kwargs):
            with _OneBlasThread():  # a fresh one per call (threads, recursion)
                return f(*args, **kwargs)

        if self.unless is None:
            return switched
        unless = self.unless

        @functools.wraps(f)
        def one_blas_thread_unless(*args, **kwargs):
            return f(*args, **kwargs) if unless(*args, **kwargs) else switched(*args, **kwargs)

        return one_blas_thread_unless

    def __enter__(self):
        if self.unless is not None:
            raise TypeError("one_blas_thread(unless=...) decides per call: use it as a decorator")
        self.switched = _BlasThreads(_blas_libraries(), 1)
        self.switched.__enter__()
        return self

    def __exit__(self, *exc):
        return self.switched.__exit__(*exc)


def n_workers(x, work, per_thread=2 ** 16):
    """How many worker threads to split a NumPy array x's `work` (elements to compute) over: as
    many as BLAS may use at this moment (the cores, unless OPENBLAS_NUM_THREADS, threadpoolctl's
    threadpool_limits or the like allow fewer: one thread there means one here), but 1 for a
    GPU array or for work under `per_thread` elements per thread."""
    if not isinstance(x, numpy.ndarray) or work < 2 * per_thread:
        return 1  # (work for one thread: BLAS's limits not asked, which costs a decode step)
    return max(1, min(_blas_threads(), work // per_thread))


def _blas_threads():
    controller = _get_controller()
    threads = [lib.num_threads for lib in controller.select(user_api="blas").lib_controllers] \
        if controller else []
    if threads:
        return min(threads)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


TILE_BYTES = 2 ** 20  # a tile of temporaries that stays in a core's L2 cache (1-2 MiB on x86)


def tile_entries(x, entry_bytes):
    """How many entries of a batch (x [n_entries, ...]: the heads of sequences) one tile of work
    should hold, each taking entry_bytes of temporaries: as many as fit in TILE_BYTES, at least
    one, for a NumPy array (a tile that spills out of the cache makes every pass over it slower:
    blockwise attention's tiles of scores, docs/benchmarks.md "Blockwise attention in cache-sized
    tiles"); all of them for a GPU array, which runs a batch in parallel already."""
    if not isinstance(x, numpy.ndarray):
        return max(1, x.shape[0])
    return max(1, TILE_BYTES // max(1, entry_bytes))


def in_threads(f, items, n_threads):
    """[f(item) for item in items], computed on up to n_threads worker threads (one thread or
    one item: here, in order). The workers are kept from call to call, one pool per count of
    threads (fresh threads each call cost a small GPT's training step on two workers about a
    tenth more CPU time: benchmarks/bench_char_gpt.py); a worker's own split runs on threads
    of its own, so that it never waits for a pool whose threads wait for it. Python's switch
    interval is at most SPLIT_SWITCH_INTERVAL while the workers run (short_switches)."""
    items = list(items)
    if n_threads <= 1 or len(items) <= 1:
        return [f(item) for item in items]
    n = min(n_threads, len(items))
    with short_switches():
        if threading.current_thread().name.startswith(_WORKER):  # (its threads are workers too)
            with ThreadPoolExecutor(n, thread_name_prefix=f"{_WORKER}-nested") as pool:
                return _all_done(pool, f, items)
        return _all_done(_pool(n), f, items)


def _all_done(pool, f, items):
    # [f(item) for item in items] on the pool, every item finished before this returns or
    # raises (the first failing item's error, in the items' order): nothing of a split runs on
    # after it, its switch interval included
    futures = [pool.submit(f, item) for item in items]
    wait(futures)
    return [future.result() for future in futures]


SPLIT_SWITCH_INTERVAL = 2e-4  # seconds: Python's switch interval while workers run (below)


class _ShortSwitches:
    # The switch interval (sys.setswitchinterval: how long a thread that wants the GIL waits
    # before asking its holder to drop it; 5 ms by default) at most SPLIT_SWITCH_INTERVAL while
    # any split runs: a worker back from a NumPy call waits for the other worker's Python to
    # reach its next NumPy call, which a stretch of autograd's bookkeeping can make last up to
    # the whole interval (a small GPT's step on two workers took 0.93-0.94 of its time at 0.2 ms
    # against 5 ms; 0.1-1 ms alike: docs/benchmarks.md, "The baby GPT's two workers and the
    # GIL"). Process-wide, as the interval is: splits that overlap (nested ones, or other
    # threads' own) share one lowering, counted; the last to end restores the interval found
    # by the first, unless someone set another in between (theirs is kept). An interval
    # already shorter is left as it is.
    def __init__(self):
        self.lock = threading.Lock()
        self.running = 0  # splits under way
        self.saved = self.lowered = None  # the interval found, and the one set (or None)

    def __enter__(self):
        with self.lock:
            if self.running == 0:
                self.saved = sys.getswitchinterval()
                self.lowered = None
                if self.saved > SPLIT_SWITCH_INTERVAL:
                    sys.setswitchinterval(SPLIT_SWITCH_INTERVAL)
                    self.lowered = sys.getswitchinterval()  # (as Python stores it)
            self.running += 1
        return self

    def __exit__(self, *exc):
        with self.lock:
            self.running -= 1
            if self.running == 0 and self.lowered is not None and \
                    sys.getswitchinterval() == self.lowered:
                sys.setswitchinterval(self.saved)
        return False


_SHORT_SWITCHES = _ShortSwitches()


def short_switches():
    """Context manager: Python's switch interval at most SPLIT_SWITCH_INTERVAL inside the block
    (in_threads' splits: see _ShortSwitches), restored after the last block that overlaps it,
    also when one raises."""
    return _SHORT_SWITCHES


_WORKER = "minattn-worker"
_POOLS = {}  # (process id, threads) -> a ThreadPoolExecutor of that many (a fork starts anew)


def _pool(n):
    key = (os.getpid(), n)
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(n, thread_name_prefix=f"{_WORKER}-{n}")
    return _POOLS[key]


def spread(f, items, costs, n_threads):
    """[f(item) for item in items] (independent items: blockwise attention's query blocks), on
    up to n_threads worker threads with one BLAS thread for the whole call (n_threads:
    n_workers of the work, read by the caller before any BLAS limit of its own: the count in
    force, or the one a timed block chose, threads_chosen_by_timing): the items handed out the
    costliest first (costs: each item's work), each to the next worker free (in_threads: a
    worker slowed by the machine's other work takes fewer), the results in the items' order
    (an error: the first failing item's in the order handed out, every item finished first).
    One thread, one item, or a caller on a worker thread already or beside other workers: in
    order, here, on the threads in force. The items' results are the same either way where
    each runs on one BLAS thread (the same calls on the same numbers: tests/test_threads.py)."""
    items, costs = list(items), list(costs)
    n = 1 if len(items) < 2 or beside_other_workers() or \
        threading.current_thread().name.startswith(_WORKER) else min(n_threads, len(items))
    if n <= 1:
        return [f(item) for item in items]
    order = sorted(range(len(items)), key=lambda i: -costs[i])  # (ties in the items' order)
    with one_blas_thread():
        done = in_threads(lambda i: f(items[i]), order, n)
    results = [None] * len(items)
    for i, result in zip(order, done):
        results[i] = result
    return results


def row_pieces(x, n_rows):
    """range(n_rows) as contiguous slices, one per worker thread that BLAS may use now
    (n_workers of the NumPy array x; at most n_rows): a training step's rows split over the
    cores (module docstring). Read before on_workers sets its BLAS limit."""
    n = max(1, min(n_workers(x, numpy.inf), n_rows))
    bounds = [n_rows * i // n for i in range(n + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def rows_on_workers(f, rows, x, rows_per_piece=None):
    """f(rows), the rows of a batch (a list, an array: anything a slice takes rows of) ->
    an array [n_rows, ...], computed as f(rows[piece]) for each of row_pieces(x, n_rows) on a
    worker thread of its own with one BLAS thread, the outputs joined along the first axis (a
    batched forward's rows are independent of one another: a sentence encoder's sentences).
    x: a NumPy array standing for the batch (a GPU array: one piece). rows_per_piece: pieces of
    at most that many rows instead, in order, so that each piece's arrays stay in the CPU's
    cache: as even as can be, and as many as a multiple of the workers (none left waiting for
    the last), dealt to them (one: one after the other on the threads in force)."""
    workers = row_pieces(x, len(rows))  # one for a GPU array
    pieces = workers if rows_per_piece is None or not isinstance(x, numpy.ndarray) else \
        _pieces_of(len(rows), rows_per_piece, len(workers))
    if len(pieces) <= 1:
        return f(rows)
    if len(workers) == 1:
        return numpy.concatenate([f(rows[piece]) for piece in pieces])
    with one_blas_thread():
        return numpy.concatenate(in_threads(_beside_others(lambda piece: f(rows[piece])),
                                            pieces, len(workers)))


def _pieces_of(n_rows, rows_per_piece, n_workers):
    # range(n_rows) as contiguous slices of at most rows_per_piece rows (a positive int), of
    # sizes differing by one at most, as many as a multiple of n_workers (or n_rows, if fewer)
    if isinstance(rows_per_piece, (bool, numpy.bool_)) or \
            not isinstance(rows_per_piece, numbers.Integral):
        raise TypeError(f"rows_per_piece must be a positive int, got {rows_per_piece!r}")
    if rows_per_piece < 1:
        raise ValueError(f"rows_per_piece must be a positive int, got {rows_per_piece!r}")
    n = -(-n_rows // rows_per_piece)  # the fewest pieces
    n = min(-(-n // n_workers) * n_workers, n_rows)
    bounds = [n_rows * i // n for i in range(n + 1)] if n else [0]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def on_workers(f, items):
    """[f(item) for item in items], each item on a worker thread of its own, with one BLAS
    thread for the whole call (one item: here, on the threads in force). Each worker runs
    beside_other_workers()."""
    items = list(items)
    if len(items) <= 1:
        return [f(item) for item in items]
    with one_blas_thread():
        return in_threads(_beside_others(f), items, len(items))


WORKER_PASS = 2 ** 18  # elements: an array a worker beside others passes over in one call


def elements_per_pass(in_cache, size):
    """How many elements one NumPy call of an elementwise primitive made of many passes (the
    float32 GELU's and SwiGLU's chunks) over `size` elements should cover: `in_cache`, the
    primitive's chunk whose scratch arrays stay in the CPU's cache, except on a worker that
    runs a model's step beside other workers (beside_other_workers), where an array of at most
    WORKER_PASS elements goes in one pass. Each NumPy call hands the GIL to the other worker
    (whose Python then runs until its own next call) and waits to take it back, so fewer,
    longer passes leave less waiting than cache-sized ones: a small GPT's step on two workers
    released the GIL ~950 times a worker, ~550 of them in the GELU's passes, and took 0.92-0.95
    of its time with each worker's GELU (196,608 elements) in one pass against chunks of 2**15
    (docs/benchmarks.md, "The baby GPT's two workers and the GIL"). A larger array keeps the
    cache-sized chunks: the sentence encoder's pieces (786,432 elements a GELU) took 1.03 of
    their time in passes of 2**18."""
    return max(size, in_cache) if beside_other_workers() and size <= WORKER_PASS else in_cache


_BESIDE = threading.local()  # .others: this thread runs a split's item beside other workers


def beside_other_workers():
    """True on a worker thread while it runs one item of on_workers or rows_on_workers: a
    model's step, or a forward pass, whose Python runs beside the other workers' own."""
    return getattr(_BESIDE, "others", False)


def _beside_others(f):
    def item_beside_others(item):
        before, _BESIDE.others = beside_other_workers(), True
        try:
            return f(item)
        finally:
            _BESIDE.others = before

    return item_beside_others


TIMED_THREADS = os.environ.get("MINATTN_TIMED_THREADS", "1") != "0"  # False: threads in force


def threads_chosen_by_timing(when, alike):
    """Decorator: a call for which when(*args, **kwargs) is true runs on the BLAS thread count
    that recent alike calls found faster: the count in force or one (see the module docstring).
    Other calls run as they are. alike(*args, **kwargs) -> (key, size): calls with the same key
    are timed against each other, per unit of size."""
    def decorator(f):
        @functools.wraps(f)
        def timed(*args, **kwargs):
            libraries = _blas_libraries() if TIMED_THREADS and not _TUNING.running and \
                threading.current_thread() is threading.main_thread() and \
                when(*args, **kwargs) else ()
            if not libraries:  # (the common case: a decode step's blocks, a timed call's inner
                return f(*args, **kwargs)  # ones, the timing off): as it is, nothing counted
            n_all = min(library.num_threads for library in libraries)
            if n_all == 1:
                return f(*args, **kwargs)
            key, size = alike(*args, **kwargs)
            choice = _TUNING.choice(key, n_all)
            n = choice.next()
            start, _TUNING.running = time.perf_counter(), True
            try:
                with _BlasThreads(libraries, n):
                    out = f(*args, **kwargs)
            finally:
                _TUNING.running = False
            choice.record(n, (time.perf_counter() - start) / size)
            return out

        return timed

    return decorator


class _Tuning:
    # The timing's whole state, in one object: each key's _Choice (the KEYS most recently used,
    # the most recent last) and whether a timed call is running (one inside it runs as it is,
    # and so does the attention core inside it: decoding_or_timed).
    KEYS = 32

    def __init__(self):
        self.choices = {}  # (key, threads in force) -> _Choice
        self.running = False

    def choice(self, key, n_all):
        # A key seen for the first time starts where the most recently used choice that has
        # tried both counts stands: its count, and its wait before the next try (a reply's
        # decode steps from its prompt's blocks: the load they met is the one it meets).
        choice = self.choices.pop((key, n_all), None)
        if choice is None:
            latest = next((c for (_, n), c in reversed(self.choices.items())
                           if n == n_all and c.decided), None)
            choice = _Choice(n_all) if latest is None else \
                _Choice(n_all, latest.current, latest.interval)
        self.choices[key, n_all] = choice
        if len(self.choices) > self.KEYS:
            del self.choices[next(iter(self.choices))]  # the least recently used
        return choice


_TUNING = _Tuning()  # the process's: the BLAS thread count it switches is the whole process's


class _Choice:
    # The thread count of the calls, and when to try the other: at the third call (the first,
    # which fills caches and tables, is not compared), then after `interval` calls, doubled (up
    # to LONGEST) each time the other loses, FIRST when it wins. A try is TRIED calls on the
    # other count, or one if that one took more than twice as long (clearly lost); it wins if
    # its faster call beats the mean of the current count's last KEPT calls (the mean, not the
    # median: the occasional long wait for a second thread is what two threads cost beside a
    # busy process; its faster call: the first after a switch pays for the switch). The
    # interval is at least what keeps a losing try's extra time under TRY_COST of the calls
    # between tries: a try of a count r times slower (the means) costs its calls times (r - 1),
    # so it waits that over TRY_COST calls.
    FIRST, LONGEST, TRY_COST, TRIED, KEPT = 8, 256, 0.05, 2, 8

    def __init__(self, n_all, current=None, interval=None):
        # a new choice: the threads in force, the first try at the third call; one that starts
        # where another stands (current, interval): as if it had just tried
        self.current = n_all if current is None else current
        self.other = 1 if self.current != 1 else n_all
        self.recent = collections.deque(maxlen=self.KEPT)  # the current count's last times
        self.tried = []  # the times of the try under way
        self.steps, self.interval = (3, self.FIRST // 2) if interval is None else (interval,) * 2
        self.decided = interval is not None  # a try made (or taken over)
        self.warm = False  # the first call seen

    def next(self):
        if self.tried:  # a try under way runs on
            return self.other
        self.steps -= 1
        return self.other if self.steps <= 0 and self.recent else self.current

    def record(self, n, seconds):
        if not self.warm:
            self.warm = True
            return
        if n == self.current:
            last = list(self.recent)[-3:]
            if self.current > 1 and len(last) == 3 and seconds > 2 * statistics.median(last):
                self.steps, self.interval = 1, self.FIRST // 2  # try the other now, then 8, ...
            self.recent.append(seconds)
            return
        mean = statistics.fmean(self.recent)
        self.tried.append(seconds)
        if len(self.tried) < self.TRIED and seconds <= 2 * mean:
            return  # the try runs on
        tried, self.tried, self.decided = self.tried, [], True
        won = min(tried) < mean
        if won:
            self.current, self.other = self.other, self.current
            self.recent = collections.deque(tried, maxlen=self.KEPT)
        slower = max(statistics.fmean(tried), mean) / min(statistics.fmean(tried), mean)  # r
        calls = 1 if slower > 2 else self.TRIED  # what a try of the slower count will cost
        self.interval = min(max(self.FIRST if won else 2 * self.interval,
                                round(calls * (slower - 1) / self.TRY_COST)), self.LONGEST)
        self.steps = self.interval


class _BlasThreads:
    # BLAS on n threads inside the block (nothing switched when it is the count in force).
    def __init__(self, libraries, n):
        self.libraries, self.n = libraries, n

    def __enter__(self):
        self.before = [library.num_threads for library in self.libraries]
        for library, n in zip(self.libraries, self.before):
            if n != self.n:
                library.set_num_threads(self.n)

    def __exit__(self, *exc):
        for library, n in zip(self.libraries, self.before):
            if n != self.n:
                library.set_num_threads(n)
        return False
