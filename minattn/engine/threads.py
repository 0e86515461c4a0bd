"""The one place where minattn controls threads: BLAS threads, and the worker threads that run
blockwise attention's independent query blocks side by side.

The attention core multiplies many small matrices (one [L_q, d_k] x [d_k, L_k] product per batch
and head). With two BLAS threads each of those products wakes and joins a second thread; when
other processes compete for the cores, every one of them waits for its thread, and the core
slows down about eight-fold (735 ms against 88 ms with one thread, IQR 144-3275 ms; a run of
benchmarks/bench_encoder.py --busy 2 on 2026-11-22). So the small products
run under `one_blas_thread()`; the large projections keep every thread.

Decoding is the exception: `@one_blas_thread(unless=decoding)` leaves the threads as they are
for a call of at most FEW_QUERIES queries, whose products are tiny. Switching the count there,
twice per layer, made SmolLM2's decode step slower: 17.67 ms against 17.04 ms without the
switch (30 layers, 2 threads, medians of 7 interleaved rounds of 12 steps, 2026-11-25), where
the two calls that switch cost about 1 us (timeit): the rest is lost in the products that
follow, presumably while OpenBLAS's second thread, sent idle, is brought back (not verified).
That was measured with a cache of 64 tokens; the rule does not look at the keys, and a decode
step over a long cache (larger products) was not measured. Inside a call whose thread count
was chosen by timing (below: a prompt's decoder blocks) the core's products run on that count
too (`@one_blas_thread(unless=decoding_or_timed)`): the count measured for the whole block
holds for all of it, and under load the timing has already chosen one thread. SmolLM2's
512-token prefill: 849 against 878 ms with the core on one thread (medians of 9 interleaved
rounds, 2 threads, quiet, 2026-11-27; benchmarks in docs/benchmarks.md, "The prefill's core").

`in_threads` uses the other cores instead, for work made of large independent pieces: the query
blocks of blockwise_attention run on worker threads, each with its one BLAS thread. NumPy
releases Python's lock (the GIL) inside its matrix products and its passes over large arrays, so
the threads run at the same time, and a thread that another process holds up delays only its
own pieces (benchmarks/bench_blockwise.py on 2026-11-23: 0.54x the time of one thread on two
quiet cores, 0.80x beside two competing processes). Worker threads did not pay inside the
encoder block (tried on 2026-11-22: the attention core split by query rows, the GELU by chunks;
256 sentences took 4.3 s with them, 3.9 s without). There each large projection has just
run on every BLAS thread, and OpenBLAS's idle threads spin for a while waiting for more work,
holding the cores the workers need: with OPENBLAS_THREAD_TIMEOUT=4, which sends them to sleep at
once, the threaded version was the faster (3.9 s against 4.2 s). Only NumPy arrays are split: a
GPU runs each piece in parallel already.

A decode step's thread count is chosen by timing (`threads_chosen_by_timing`, on causal_lm).
A step of generation reads every weight once in many small products; on quiet cores two BLAS
threads read them fastest, but beside one other busy process each product waits for its second
thread, and SmolLM2's step took 1,136 ms with two threads against 105 ms with one (a 2-core AVX2
VM, issue 43). Which is faster depends on what else the machine runs at that moment, which
minattn cannot know in advance (the load average lags by a minute and counts minattn's own
threads). So it measures: decode steps run with the threads in force, and now and then two run
on the other count (a try): first at the third and fourth steps, against the second (the first
fills caches and tables), then against the mean of the last eight steps of the count in force.
The mean, not the median: beside a busy process most steps on two threads are only a quarter
slower than on one, but now and then one waits for its second thread and takes three to six
times as long, and those are what two threads cost (a traced SmolLM2 reply beside one busy
process, 2026-11-28: 64 ms a typical step on two threads, 176 to 326 ms the long ones, 51 ms
on one; docs/benchmarks.md, issue 56). A try wins if the faster of its two steps beats that mean (the first step after a
switch pays for it: one thread's first step after two took 66 to 96 ms where the next took
51), and then its count is kept and the other tried in turn; a try whose first step takes more
than twice the mean has lost and ends there. A try that loses waits twice as long before the
next (8 steps, then 16, ... up to 256), so on quiet cores almost every step runs with every
thread; and since a try of a count r times slower costs its steps times r - 1, it waits at
least that over TRY_COST (5 %) steps, so that tries cost about 5 % of the steps between them
(beside one busy process a try of two threads, ten times slower in issue 43, waits 180 steps
and then 256). On every thread, a step twice as slow as the last three brings the next try
forward to the next step: load that arrives costs those threads ten times the step, while load
that leaves costs one thread about a third more, until its next try. A model's decode steps
(its token embedding) are timed against each other. A key timed for the first time starts where
the most recently used key that has made a try stands, its count and its wait before the next
try: a reply's steps where its prompt's blocks stand, which have just met the same load
(taking over the count without the wait, a reply that started on one thread still tried two at
its third step: 721 ms, where a step on one thread took 58, beside other work).

A training step is timed the same way (`training_step`, around the value_and_grad of each
training loop in minattn/models): the tour's, `generate`'s and `attention --model`'s tiny
models make only small products, and beside one busy process two BLAS threads made the tour
two and a half times slower than one (issue 56; measured in docs/benchmarks.md).

A prompt is one call, too few to learn from, so there the blocks are timed the same way
(decoder_block, its variants included, for more than FEW_QUERIES tokens), per token: a
prompt's layers against each other and against those of earlier prompts of the same width and
dtype and of about its length (within a factor of two). Layers of unlike cost (a model's local
and global ones) are timed together; a try on a costlier one can lose where one thread would
have won. A timed call inside another runs as it is. The 32 most recent such timings are kept.

A fine-tuning step splits its batch by rows over the cores instead (`row_pieces` and `on_workers`,
in minattn/training/loop.py's `accumulated`): each worker thread runs the forward and backward pass
of its rows with one BLAS thread, and their sums and gradients are added in order. NumPy's
elementwise passes (the norms, SwiGLU, the softmaxes and their gradients) run on one core, and
the attention core's small products gain nothing from a second BLAS thread, so two BLAS threads
made a LoRA step of SmolLM2 at 8 x 128 only about 1.45 times faster than one, where torch's gets
1.8 times; the same step as two halves of 4 rows on two worker threads took 3.2 s against 4.3 s
for the whole batch on two BLAS threads (benchmarks/bench_finetune.py's model, quiet, 2026-11-28:
docs/benchmarks.md, issue 52). The gradients are those of the whole batch up to float rounding;
dropout draws from each piece's own generator (`Generator.spawn`), so a run is the same for a
seed and a thread count.

`TIMED_THREADS = False` (or MINATTN_TIMED_THREADS=0 in the environment) runs every call on the
threads in force; with one BLAS thread in force there is nothing to choose. The thread count can
change the last bits of a product (BLAS may group a sum differently), so a run that must repeat
bit for bit turns the timing off, as the test suite does. The BLAS thread count is the whole
process's: only the main thread's calls are timed and switch it, and while one runs on one
thread, so do other threads' products. Measured in docs/benchmarks.md ("Threads beside other
work").

Uses threadpoolctl for the BLAS limit; `one_blas_thread` is a no-op if it is not installed.
The BLAS limit is global to the process, so it is set once, around the whole threaded call, and
the number of workers is read before it (`n_workers` follows the BLAS limit in force: with
OPENBLAS_NUM_THREADS=1 or inside threadpoolctl's `threadpool_limits(1)`, minattn runs on one
thread too).
"""
import collections
import contextlib
import functools
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

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
    return decoding(q) or _timing


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


class _OneBlasThread(contextlib.ContextDecorator):
    # threadpoolctl's limit(), without its bookkeeping: it runs around every attention core (30
    # times a token in a 30-layer model), where limit() cost 4.8 us and this 2.2 us (timeit,
    # 2026-11-25).
    def __init__(self, unless=None):
        self.unless = unless

    def __call__(self, f):
        switched = super().__call__(f)
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

    def _recreate_cm(self):  # as a decorator: a fresh one per call (threads, recursion)
        return _OneBlasThread()


def n_workers(x, work):
    """How many worker threads to split a NumPy array x's `work` (elements to compute) over: as
    many as BLAS may use at this moment (the cores, unless OPENBLAS_NUM_THREADS, threadpoolctl's
    threadpool_limits or the like allow fewer: one thread there means one here), but 1 for a
    GPU array or for work under 2**16 elements per thread."""
    if not isinstance(x, numpy.ndarray):
        return 1
    return max(1, min(_blas_threads(), work // 2 ** 16))


def _blas_threads():
    controller = _get_controller()
    threads = [lib.num_threads for lib in controller.select(user_api="blas").lib_controllers] \
        if controller else []
    if threads:
        return min(threads)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def in_threads(f, items, n_threads):
    """[f(item) for item in items], computed on up to n_threads worker threads (one thread or
    one item: here, in order)."""
    items = list(items)
    if n_threads <= 1 or len(items) <= 1:
        return [f(item) for item in items]
    with ThreadPoolExecutor(min(n_threads, len(items))) as pool:
        return list(pool.map(f, items))


def row_pieces(x, n_rows):
    """range(n_rows) as contiguous slices, one per worker thread that BLAS may use now
    (n_workers of the NumPy array x; at most n_rows): a training step's rows split over the
    cores (module docstring). Read before on_workers sets its BLAS limit."""
    n = max(1, min(n_workers(x, numpy.inf), n_rows))
    bounds = [n_rows * i // n for i in range(n + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


def on_workers(f, items):
    """[f(item) for item in items], each item on a worker thread of its own, with one BLAS
    thread for the whole call (one item: here, on the threads in force)."""
    items = list(items)
    if len(items) <= 1:
        return [f(item) for item in items]
    with one_blas_thread():
        return in_threads(f, items, len(items))


TIMED_THREADS = os.environ.get("MINATTN_TIMED_THREADS", "1") != "0"  # False: threads in force
_timing = False  # a timed call is running (one inside it runs as it is)


def threads_chosen_by_timing(when, alike):
    """Decorator: a call for which when(*args, **kwargs) is true runs on the BLAS thread count
    that recent alike calls found faster: the count in force or one (see the module docstring).
    Other calls run as they are. alike(*args, **kwargs) -> (key, size): calls with the same key
    are timed against each other, per unit of size."""
    def decorator(f):
        @functools.wraps(f)
        def timed(*args, **kwargs):
            global _timing
            libraries = _blas_libraries() if TIMED_THREADS and not _timing and \
                threading.current_thread() is threading.main_thread() and \
                when(*args, **kwargs) else ()
            n_all = min((library.num_threads for library in libraries), default=1)
            if n_all == 1:
                return f(*args, **kwargs)
            key, size = alike(*args, **kwargs)
            choice = _choice(key, n_all)
            n = choice.next()
            start, _timing = time.perf_counter(), True
            try:
                with _BlasThreads(libraries, n):
                    out = f(*args, **kwargs)
            finally:
                _timing = False
            choice.record(n, (time.perf_counter() - start) / size)
            return out

        return timed

    return decorator


_choices = {}  # (key, threads in force) -> _Choice, the most recently used last


def _choice(key, n_all):
    # A key seen for the first time starts where the most recently used choice that has tried
    # both counts stands: its count, and its wait before the next try (a reply's decode steps
    # from its prompt's blocks: the load they met is the one it meets).
    choice = _choices.pop((key, n_all), None)
    if choice is None:
        latest = next((c for (_, n), c in reversed(_choices.items())
                       if n == n_all and c.decided), None)
        choice = _Choice(n_all) if latest is None else \
            _Choice(n_all, latest.current, latest.interval)
    _choices[key, n_all] = choice
    if len(_choices) > 32:
        del _choices[next(iter(_choices))]  # the least recently used
    return choice


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
