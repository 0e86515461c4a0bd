"""Several weights of one input in one matrix product: the fused-products policy.

Attention projects one input three times (q, k and v) and SwiGLU twice (gate and up). Where
those weights lie side by side in memory, each [d_in, d_out_i] in Fortran order (the transpose
of torch's row-major [d_out, d_in]) and each starting where the one before it ends, together
they *are* one [d_in, sum of d_out_i] matrix: one product reads them all and its output splits
into the separate results, views of one array. It is what GPT-2's packed c_attn and the fused
QKV of inference engines do, without changing the params: `models/llama_layout.packed` lays each
layer's weights out this way, in the order the model's loader lists them (q, k, v; gate, up).

    @in_one_product()
    def linears(x, ws, bs=None): ...     # -> (x @ ws[0] + bs[0], x @ ws[1] + bs[1], ...)

Decoding one token is a matrix-vector product per weight, so the time is reading the weights,
plus the cost of each call: SmolLM2's decode step makes 121 products instead of 211, and takes
less time. With many tokens the products are limited by arithmetic, not by reading, and the
split results are strided views that the next steps read more slowly: so one product only for
at most FEW_TOKENS tokens (docs/benchmarks.md, "One product for several weights, at one token").

The function runs as written (one product per weight) where x holds more tokens, where the
weights are not side by side in one NumPy buffer (separate arrays, row-major ones, CuPy
arrays), and where x, a weight or a bias is an autograd box (a gradient being recorded: each
product then has its own VJP). Either way each result holds the same sums; the one product
may only group them differently inside BLAS (last bits of float32).

    linear = bias_in_place(linear)       # linear.py: x @ w + b, the bias added into x @ w

`bias_in_place` is the other policy of the products: where nothing is recorded, `linear`'s bias
is added into the product's own array (out=) instead of into a fresh one: the same additions of
the same numbers (equal to the last bit), one array of the output's size fewer to write and to
fault in. A sentence encoder's bias adds took 5 % of encode() (docs/benchmarks.md, "The bias
in place, and the sentence encoder's pieces").
"""
import functools
import weakref

import numpy
from autograd.tracer import box_types  # isbox(x): type(x) in box_types

from . import autograd_rules


def side_by_side(ws):
    """ws: 2-D arrays [d_in, d_out_i] -> one read-only [d_in, sum of d_out_i] view of them all,
    where they are Fortran-ordered NumPy arrays of one dtype and d_in, each a view of the same
    buffer starting where the one before it ends; else None. Found once per tuple of arrays
    (a model's weights, asked for at every step) and remembered while they live."""
    for w in ws:
        if type(w) is not numpy.ndarray or w.base is None:
            return None  # (the common refusal first: arrays that own their memory)
    if len(ws) < 2:
        return None
    key = tuple(map(id, ws))
    found = _found.get(key)
    if found is not None:  # the same arrays, of the same shapes and strides as then
        for ref, (shape, strides), w in zip(found[0], found[1], ws):  # (a loop: no frame
            if ref() is not w or w.shape != shape or w.strides != strides:  # of a generator)
                break
        else:
            return found[2]
    whole = _one_view(ws)
    if whole is not None:  # remembered until one of the weights is freed
        forget = lambda _: _found.pop(key, None)  # noqa: E731
        _found[key] = (tuple(weakref.ref(w, forget) for w in ws), _layouts(ws), whole)
    return whole


# id()s of a tuple of weights -> (weak references to them, their shapes and strides, their one
# view). The view is made from the buffer that owns the memory, not from the weights, so it
# keeps none of them alive; a weight whose shape or strides were set in place is looked at anew.
_found = {}


def _layouts(ws):
    return tuple((w.shape, w.strides) for w in ws)


def _one_view(ws):
    first = ws[0]
    if first.ndim != 2 or first.shape[0] == 0:
        return None
    d_in, itemsize = first.shape[0], first.itemsize
    strides = (itemsize, d_in * itemsize)  # each column (one output's weights) contiguous
    root = _root(first)
    if root.ndim != 1 or not root.flags.c_contiguous or root.dtype != first.dtype:
        return None
    begin = address = _address(first)
    for w in ws:
        if w.ndim != 2 or w.shape[0] != d_in or w.dtype != first.dtype or \
                w.strides != strides or _address(w) != address or _root(w) is not root:
            return None
        address += w.size * itemsize
    offset, misaligned = divmod(begin - _address(root), itemsize)
    if misaligned:  # a view that starts between two of root's items: no slice of root is it
        return None
    n = (address - begin) // itemsize  # every weight lies inside root, one after another
    whole = root[offset:offset + n].reshape(n // d_in, d_in).T  # [d_in, sum of d_out_i]
    whole.flags.writeable = False
    return whole


def _address(a):
    return a.__array_interface__["data"][0]


def _root(a):
    # The array that owns a view's memory.
    while isinstance(a.base, numpy.ndarray):
        a = a.base
    return a


FEW_TOKENS = 4  # one product for x of at most this many tokens (rows of [..., d_in])


def in_one_product():
    """Decorator for f(x, ws, bs=None) -> tuple of x @ ws[i] (+ bs[i]): see the module
    docstring."""
    def decorate(f):
        @functools.wraps(f)
        def in_one_product(x, ws, bs=None):
            bs = (None,) * len(ws) if bs is None else bs
            if type(x) in box_types or getattr(x, "ndim", 0) < 1 or \
                    x.size > FEW_TOKENS * x.shape[-1] or not box_types.isdisjoint(map(type, bs)):
                return f(x, ws, bs)
            whole = side_by_side(ws)
            if whole is None:
                return f(x, ws, bs)
            (y,) = f(x, (whole,))  # [..., sum of d_out_i]
            out, start = [], 0
            for w, b in zip(ws, bs):  # each result a view of y, then its bias
                part = y[..., start:start + w.shape[1]]
                out.append(part if b is None else (part + b).reshape(part.shape))  # as linear
                start += w.shape[1]
            return tuple(out)

        return in_one_product

    return decorate


def bias_in_place(f):
    """Decorator for linear, f(x, w, b=None) -> x @ w (+ b): see the module docstring. Where x,
    w and b are plain NumPy arrays (no autograd box: nothing is recorded; no GPU array), b has
    one entry per output and the sum keeps the product's dtype, it computes f(x, w) and adds b
    into it; elsewhere it calls f(x, w, b) as written."""
    # f's own function where f is gradient_by_hand's wrapper (linear's): called here on NumPy
    # arrays, where that wrapper would call it (nothing to record: a frame fewer a product)
    plain = autograd_rules.unrecorded(f) or f

    @functools.wraps(f)
    def with_bias_in_place(x, w, b=None):
        if b is None and type(x) is type(w) is numpy.ndarray:
            return plain(x, w, b)  # the common case first (a model's projections have no bias)
        if b is None or type(x) is not numpy.ndarray or type(w) is not numpy.ndarray or \
                type(b) is not numpy.ndarray or w.ndim != 2 or b.shape != w.shape[1:] or \
                x.ndim < 1 or numpy.result_type(x, w, b) != numpy.result_type(x, w):
            return f(x, w, b)
        y = plain(x, w)  # a fresh array (linear's product, reshaped), never a view of x or w
        return numpy.add(y, b, out=y)

    return with_bias_in_place
