"""Attention by query blocks, each over the keys its mask lets it see: the causal saving.

A causal mask lets query i see keys 0 .. i only, so in a 512-token prompt about half of the
[L, L] scores are computed, masked, exponentiated to exactly 0 and multiplied by the values for
nothing. `@in_query_blocks()` on the attention core splits the queries into blocks of `rows`
queries and gives each block only the keys from the first to the last that one of its queries
may see (the causal diagonal; a sliding window's start too). A key left out of a block is one
whose weight in that block is exactly 0, so each weight and each output is the same sum of the
same nonzero terms (up to the order of the additions), and the weights come back whole, zeros
where they were left out. For a 512-token causal prompt in blocks of 128, 10 of 16 tiles are
computed. The one difference: a NaN or an infinity among the values of keys that no query of
a block may see stays out of that block's outputs, where the whole computation multiplies it
by its weight 0 and gets NaN (as a value no query may see should).

The blocks run one after the other, on the attention core's threads (one BLAS thread, or the
threads in force inside a prompt's timed block). A prompt's blocks whose weights are unread
were once dealt to worker threads (threads.spread, one BLAS thread each); but inside a prompt,
right after the q, k, v product on two threads, OpenBLAS's idle thread still spins on the core
a worker needs, and the prefill was slower than with the blocks here on the block's BLAS
threads (docs/benchmarks.md, "A prompt's blocks back on the threads in force").

The decorated function takes (q, k, v, mask, scale, dropout, rng) and returns (output
[..., L_q, d_v], weights [..., L_q, L_k]) as scaled_dot_product_attention, whose checks
(checks.check_attention) run on the whole call before it is split. It runs as it is (one block) when there is
nothing to save or no way to split: fewer than two blocks of queries, a mask that is not boolean
or has no query axis, dropout (its random draws are the whole matrix's), or a value being
differentiated (an autograd box: the gradient is recorded on the whole).

`weights_unread(core)` is the attention core for a caller that reads only its output, as a
decoder's self-attention does: the weights are still computed block by block (each block's
output is its weights times its values), but not assembled into the [..., L_q, L_k] array,
which for a long prompt is most of the memory (SmolLM2's 4,096-token prompt: 600 MB a layer in
float32) and, for a 512-token one, time: 2.4 of 9.5 ms in the core's steps written out by hand,
and SmolLM2's prefill 878 against 910 ms (docs/benchmarks.md, "The prefill's core"). The core
returns None as its weights. Inside the call the blocks give a placeholder (NaN, read-only, no
memory) where the weights were, which the core may reshape but not read: only the canonical cores, whose output does not come from the
assembled weights, are wrapped (kv_cache.self_attention's `grouped_attention`). A call that is
not split (decoding, a box, dropout) builds its weights as ever, and drops them.

The plain forms. The decorated function is the canonical core, so where its
arguments, once checked, are NumPy arrays of one dtype, float32 or float64, with a boolean mask,
a floating one or none, and no dropout, the decorator computes the core on NumPy itself
(engine/plain_core.py) rather than through the concept's autograd.numpy calls and softmax, once
under the core's own thread policy (one BLAS thread, unless decoding or inside a prompt's timed
block): a call not split returns the canonical core's output and weights to the last bit, in
fewer calls and passes (the weights returned even where unread: a gradient's tape keeps them);
split blocks whose weights are read, likewise each block; and split blocks whose weights are
unread (a prompt's self-attention) write each block's output into the output's rows as
(e @ v) / row sums, the division moved from the [.., L_q, L_k] weights to the [.., L_q, d_v]
output, the scores of tiles that fit the L2 cache in one scratch buffer: within float32 (or
float64) rounding of the formula, not the canonical bits (docs/benchmarks.md, "The attention
core's forward in fewer passes"). The mask's zeros and NaN rows are the canonical core's in
every form. Where a function the core's body calls has been swapped for another (minattn.swap:
the course's grader runs a student's softmax inside minattn's attention), f itself runs.
`plain=False` keeps f itself for every call (a function that is not the canonical core: the
tests' spies).
"""
import contextvars
import functools
import inspect

import numpy
from autograd.tracer import isbox

from . import checks, plain_core, variants
from .signatures import binder
from .threads import decoding, decoding_or_timed, one_blas_thread


def in_query_blocks(rows=128, plain=True):
    """Decorator: see the module docstring. rows: the queries per block; plain: f is the
    canonical core, computed on NumPy itself where plain_core can (False: by f, always)."""
    def decorate(f):
        bound = _binder(f)
        as_written = calls_as_written(f)

        @functools.wraps(f)
        def by_query_blocks(*args, **kwargs):
            q = args[0] if args else kwargs.get("q")
            short = getattr(q, "ndim", 0) < 2 or q.shape[-2] < 2 * rows  # decoding: one query
            in_plain = plain and _PLAIN.get() and as_written()
            if short and not in_plain:
                return f(*args, **kwargs)
            values = bound(args, kwargs)
            # the whole call's arguments checked first, so that an error names their shapes and
            # no block is cut from arguments the attention would refuse
            checked = checks.check_attention(values["q"], values["k"], values["v"],
                                             values["mask"], values["scale"], values["dropout"],
                                             values["rng"])
            if in_plain and not values.get("dropout") and plain_core.plain(*checked[:5]):
                if short and decoding(checked[0]):  # a decode step's call: on the threads in
                    return plain_core.forward(*checked[:6])  # force, as the core's policy runs it
                return _plain_core_on_its_threads(*checked[:6], rows=rows, whole=short)
            if short or not _splittable(values):
                return f(*args, **kwargs)
            return _in_blocks(f, values, rows)

        return by_query_blocks

    return decorate


def calls_as_written(f):
    """-> a check that every function f's body calls by a global name, and every function of
    f's module that those call in turn, is still the one it was when the check was made: False
    where one has been swapped (minattn.swap, the course's grader: a student's softmax must run
    inside the attention, and inside its gradient), so that f itself runs, not a form on NumPy
    that computes the original."""
    namespace = getattr(inspect.unwrap(f), "__globals__", {})
    called, seen, bodies = [], set(), [f]
    while bodies:
        body = inspect.unwrap(bodies.pop())
        code = getattr(body, "__code__", None)
        for name in (code.co_names if code else ()):
            function = namespace.get(name)
            if name in seen or not callable(function) or inspect.ismodule(function):
                continue
            seen.add(name)
            called.append((name, function))
            if getattr(inspect.unwrap(function), "__globals__", None) is namespace:
                bodies.append(function)  # (a function of f's module: what it calls too)
    called = tuple(called)

    def as_written():
        for name, function in called:
            if namespace.get(name) is not function:
                return False
        return True

    return as_written


def _binder(f):
    # -> bound(args, kwargs) -> {name: value}: the common call of the core, q, k, v (and mask)
    # by position and the rest by name, directly, its defaults read once (binder's checks cost
    # a decode step's or a small model's core more calls than its own arithmetic); any other
    # call, or another signature, through binder (its TypeErrors Python's)
    names, bind = binder(f)
    if names != ("q", "k", "v", "mask", "scale", "dropout", "rng"):
        return lambda args, kwargs: dict(zip(names, bind(args, kwargs)))
    defaults = dict(zip(names, bind((None,) * 3, {})))
    every, required = frozenset(names), [frozenset(names[n:3]) for n in range(4)]

    def bound(args, kwargs):
        n = len(args)  # (gradient_by_hand's forward passes every argument by name)
        if n <= 7 and kwargs.keys() <= every and not kwargs.keys() & names[:n] and \
                required[min(n, 3)] <= kwargs.keys():
            values = {**defaults, **kwargs}
            values.update(zip(names, args))
            return values
        return dict(zip(names, bind(args, kwargs)))

    return bound


# whether in_query_blocks(plain=True) computes on NumPy itself (a test turns it off, to compare)
_PLAIN = contextvars.ContextVar("minattn_plain_core", default=True)


@one_blas_thread(unless=decoding_or_timed)  # the core's own policy (attention.py), once a call
def _plain_core_on_its_threads(q, k, v, keep, bias, scale, *, rows, whole):
    # the core on NumPy itself (engine/plain_core.py; q, k, v, keep, bias and scale as
    # check_attention returns them): in one piece where the call is short or its mask has no
    # query axis (forward: the concept's bits); else by blocks of queries, each over the keys
    # it may see, the weights assembled (forward), or never made whole where they are unread
    # (output_into: the output divided by the sums, not the weights)
    if whole or bias is not None or keep is None or keep.ndim < 2 or \
            keep.shape[-2] != q.shape[-2] or keep.shape[-1] != k.shape[-2]:
        # (the weights made and returned even where unread: a gradient's tape keeps them, and
        # its VJP reads them rather than compute them again)
        return plain_core.forward(q, k, v, keep, bias, scale)
    if _UNREAD.get():
        return _unread_blocks(q, k, v, keep, scale, rows)
    return _blocks(lambda *qkvm: plain_core.forward(*qkvm, None, scale), q, k, v, keep, rows)


def _unread_blocks(q, k, v, keep, scale, rows):
    # weights_unread's blocks on NumPy itself: each block's output written into the output's
    # rows (plain_core.output_into: the sums divide the output, not the weights), the weights
    # a placeholder of their shape
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    batch = numpy.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], keep.shape[:-2])
    output = numpy.empty(batch + (n_queries, v.shape[-1]), q.dtype)
    seen = keep.any(axis=tuple(range(keep.ndim - 2))) if keep.ndim > 2 else keep  # [L_q, L_k]
    scratch = {}  # the scores' buffer, from block to block
    window = plain_core.exp_window(v, n_keys)  # (of the whole v: once a call)
    for start in range(0, n_queries, rows):
        stop = min(start + rows, n_queries)
        keys = _keys_seen(seen[start:stop])
        plain_core.output_into(output[..., start:stop, :], q[..., start:stop, :],
                               k[..., keys, :], v[..., keys, :], keep[..., start:stop, keys],
                               scale, scratch, window)
    scores = numpy.broadcast_shapes(q.shape[:-2], k.shape[:-2], keep.shape[:-2])
    return output, numpy.broadcast_to(numpy.asarray(numpy.nan, q.dtype),
                                      scores + (n_queries, n_keys))


def _keys_seen(seen):
    # the keys from the first to the last that one of a block's queries may see (seen
    # [rows, L_k]); none: the first key alone, masked (zero weights)
    visible = numpy.flatnonzero(seen.any(axis=0))
    return slice(int(visible[0]), int(visible[-1]) + 1) if visible.size else slice(0, 1)


_UNREAD = contextvars.ContextVar("minattn_weights_unread", default=False)


def weights_unread(core):
    """core(q, k, v, mask, ...) -> (output, weights) as core(...) -> (output, None), the weights
    not assembled where the queries are split in blocks (see the module docstring)."""
    # A dispatched function (engine/variants.py: a module's canonical core, made once, such as
    # kv_cache.self_attention's grouped_attention, asked for at every layer of every step)
    # keeps its wrapper as an attribute of its own: made once, not at every call. The wrapper
    # and the function hold each other, a cycle the collector frees with them; any other core
    # (a per-call one) gets a fresh wrapper, which nothing else holds.
    cached = getattr(core, "_minattn_output_only", None)
    if cached is not None and cached.__wrapped__ is core:  # (functools.wraps copies the
        return cached  # attribute into a wrapper of core: that wrapper gets its own)
    wrapper = _output_only(core)
    if core in variants._DISPATCHED:
        core._minattn_output_only = wrapper
    return wrapper


def _output_only(core):
    @functools.wraps(core)
    def output_only(*args, **kwargs):
        unread = _UNREAD.set(True)
        try:
            output, _ = core(*args, **kwargs)
        finally:
            _UNREAD.reset(unread)
        return output, None

    return output_only


def _splittable(values):
    # (after check_attention: q, k, v and mask fit one another; lists are left whole)
    q, k, mask = values["q"], values["k"], values["mask"]
    return (all(hasattr(a, "shape") and not isbox(a) for a in (q, k, values["v"], mask))
            and mask.dtype == bool and mask.ndim >= 2 and mask.shape[-2] == q.shape[-2]
            and mask.shape[-1] == k.shape[-2]
            and not values.get("dropout"))


def _in_blocks(f, values, rows):
    q, k, v, mask = values["q"], values["k"], values["v"], values["mask"]
    others = {name: value for name, value in values.items() if name not in ("q", "k", "v", "mask")}
    unread = None
    if _UNREAD.get():  # the weights' dtype and lead dims, from the first block's
        unread = lambda w: (w.dtype, w.shape[:-2])  # noqa: E731
    return _blocks(lambda *qkvm: f(*qkvm, **others), q, k, v, mask, rows, unread)


def _blocks(core, q, k, v, mask, rows, unread=None):
    # core(q, k, v, mask) -> (output, weights) of each block of queries over its keys, the
    # outputs concatenated and the weights assembled, zeros where keys were left out; unread:
    # None, or the weights' (dtype, lead dims) (or a function of the first block's weights to
    # them), for a placeholder of their shape instead
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    seen = mask.any(axis=tuple(range(mask.ndim - 2))) if mask.ndim > 2 else mask  # [L_q, L_k]

    def block(start):
        # the block's queries start .. start + rows - 1, over the keys first .. last - 1: from the
        # first to the last that one of them may see (none: one key, masked, gives zeros)
        stop = min(start + rows, n_queries)
        keys = _keys_seen(seen[start:stop])
        out, w = core(q[..., start:stop, :], k[..., keys, :], v[..., keys, :],
                      mask[..., start:stop, keys])
        return start, stop, keys, out, None if unread is not None else w, \
            unread(w) if callable(unread) and start == 0 else None

    blocks = [block(start) for start in range(0, n_queries, rows)]
    output = numpy.concatenate([out for _, _, _, out, _, _ in blocks], axis=-2)  # [..., L_q, d_v]
    if unread is not None:  # no one reads them: a placeholder of their shape, no memory
        dtype, lead = blocks[0][5] if callable(unread) else unread
        nan = numpy.asarray(numpy.nan, dtype=dtype, like=output)
        return output, numpy.broadcast_to(nan, lead + (n_queries, n_keys))
    first = blocks[0][4]
    # np.zeros, not zeros_like: NumPy's zeros come from calloc, untouched where no block writes
    weights = numpy.zeros(first.shape[:-2] + (n_queries, n_keys), first.dtype, like=first)
    for start, stop, keys, _, w, _ in blocks:
        weights[..., start:stop, keys] = w  # the keys left out keep their weight, 0
    return output, weights
