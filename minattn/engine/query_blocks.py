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

The blocks run one after the other, under the attention core's one BLAS thread. They are
independent, but worker threads over them did not pay: the large projections' OpenBLAS threads,
spinning after each product, hold the cores the workers would need (docs/benchmarks.md, "The
query blocks on worker threads").

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
"""
import contextvars
import functools

import numpy
from autograd.tracer import isbox

from . import checks
from .signatures import binder


def in_query_blocks(rows=128):
    """Decorator: see the module docstring. rows: the queries per block."""
    def decorate(f):
        names, bind = binder(f)

        @functools.wraps(f)
        def by_query_blocks(*args, **kwargs):
            q = args[0] if args else kwargs.get("q")
            if getattr(q, "ndim", 0) < 2 or q.shape[-2] < 2 * rows:  # decoding: one query
                return f(*args, **kwargs)
            values = dict(zip(names, bind(args, kwargs)))
            # the whole call's arguments checked first, so that an error names their shapes and
            # no block is cut from arguments the attention would refuse
            checks.check_attention(*(values[name] for name in
                                     ("q", "k", "v", "mask", "scale", "dropout", "rng")))
            if not _splittable(values):
                return f(*args, **kwargs)
            return _in_blocks(f, values, rows)

        return by_query_blocks

    return decorate


_UNREAD = contextvars.ContextVar("minattn_weights_unread", default=False)


def weights_unread(core):
    """core(q, k, v, mask, ...) -> (output, weights) as core(...) -> (output, None), the weights
    not assembled where the queries are split in blocks (see the module docstring)."""
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
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    seen = mask.any(axis=tuple(range(mask.ndim - 2))) if mask.ndim > 2 else mask  # [L_q, L_k]
    unread = _UNREAD.get()

    def block(start):
        # the block's queries start .. start + rows - 1, over the keys first .. last - 1: from the
        # first to the last that one of them may see (none: one key, masked, gives zeros)
        stop = min(start + rows, n_queries)
        visible = numpy.flatnonzero(seen[start:stop].any(axis=0))
        first, last = (int(visible[0]), int(visible[-1]) + 1) if visible.size else (0, 1)
        keys = slice(first, last)
        out, w = f(q[..., start:stop, :], k[..., keys, :], v[..., keys, :],
                   mask[..., start:stop, keys], **others)
        if unread:  # not kept: a NaN of their dtype, the placeholder's, and their lead dims
            w = numpy.asarray(numpy.nan, dtype=w.dtype, like=w), w.shape[:-2]
        return start, stop, keys, out, w

    blocks = [block(start) for start in range(0, n_queries, rows)]
    output = numpy.concatenate([out for _, _, _, out, _ in blocks], axis=-2)  # [..., L_q, d_v]
    if unread:  # no one reads them: a placeholder of their shape, no memory
        nan, lead = blocks[0][4]
        return output, numpy.broadcast_to(nan, lead + (n_queries, n_keys))
    first = blocks[0][4]
    # np.zeros, not zeros_like: NumPy's zeros come from calloc, untouched where no block writes
    weights = numpy.zeros(first.shape[:-2] + (n_queries, n_keys), first.dtype, like=first)
    for start, stop, keys, _, w in blocks:
        weights[..., start:stop, keys] = w  # the keys left out keep their weight, 0
    return output, weights
