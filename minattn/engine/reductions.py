"""Reductions along short rows, in a faster order than NumPy's reduction along each row.

    row_max(x, axis=-1)    x.max(axis, keepdims=True), the shift of softmax and log-sum-exp
    row_dot(a, b)          (a * b).sum(-1, keepdims=True) without making a * b
    ones_column(d, dtype)  a read-only column of d ones [d, 1], made once per width and dtype:
                           sums as products with it (one BLAS call)

NumPy reduces along each contiguous row with one call of its inner loop, and its float32 max
does so several times slower per element than a sum, so that on rows of attention scores
(64 keys) finding the max costs as much as the exp. Down a column instead, the max is one
elementwise maximum of long rows after another. So for rows of at most SHORT_ROW elements along
the last axis, row_max takes the max of the transposed copy's columns: the same comparisons of
the same numbers, the same max (NaN where a row holds one), faster by more than the copy costs
(docs/benchmarks.md, "Fewer elementwise passes"). The copy is made of BLOCK_BYTES of rows at a
time, all the rows of the block as the columns' length: n - 1 maximums of a few hundred entries
each, where a transposed copy per matrix of scores had n - 1 of a matrix's rows each: a third
to three fifths less time on a sentence encoder's scores of 16 to 63 keys (docs/benchmarks.md,
"The bias in place, and the sentence encoder's pieces"). Rows of a multiple of 256 bytes (64
float32) keep the copy per matrix: the block's column reads, 256 bytes apart, fall into few of
the cache's sets, and were slower there. Only the sign of a zero max may differ, which
no shift by it can tell apart (x - 0 and x - (-0) are the same number for every x but -0, whose
exp is 1 either way). Wider rows, other axes, 1-d x and GPU arrays are reduced as NumPy (or
CuPy) does.

row_dot is each row's dot product (einsum): one read of a and b, no product made, and faster
than NumPy's sum along rows of a few hundred; the same sum in float32 up to its order (a few
ulps), differentiable by autograd (layer_norm's mean square, the attention VJP's Σ dP ⊙ P).
"""
import functools

import autograd.numpy as np
import numpy

try:  # what numpy.einsum calls without optimize= (the same sums), without its Python layers
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # pragma: no cover (another NumPy's layout)
    _einsum = numpy.einsum

SHORT_ROW = 64
BLOCK_BYTES = 2 ** 16  # of rows transposed at a time: a few L1 caches' worth


def row_max(x, axis=-1):
    """x [..., n] -> x.max(axis, keepdims=True): see the module docstring."""
    if type(x) is not numpy.ndarray:  # (a GPU array, a masked one: its own reduction)
        return x.max(axis=axis, keepdims=True)
    if x.ndim < 2 or axis not in (-1, x.ndim - 1) or not 1 < x.shape[-1] <= SHORT_ROW:
        # the ufunc's reduction that ndarray.max calls (its Python layer, numpy's _methods,
        # left out: a frame fewer in a decode step's scores of more than SHORT_ROW keys)
        return numpy.maximum.reduce(x, axis=axis, keepdims=True)
    n = x.shape[-1]
    if n * x.itemsize % 256 == 0:
        columns = x.swapaxes(-1, -2).copy()  # [..., n, L], C order: each row's entries a column
        return columns.max(axis=-2)[..., None]  # [..., L, 1]
    rows = numpy.reshape(x, (-1, n))  # [R, n]
    out = numpy.empty(rows.shape[0], x.dtype)
    step = max(1, BLOCK_BYTES // (n * x.itemsize))
    for start in range(0, rows.shape[0], step):  # [n, rows of the block], C order, then its max
        numpy.maximum.reduce(rows[start:start + step].T.copy(), axis=0,
                             out=out[start:start + step])
    return out.reshape(x.shape[:-1] + (1,))


def row_dot(a, b):
    """a, b [..., n] (broadcasting) -> Σ_i a_i b_i [..., 1]: see the module docstring."""
    if type(a) is numpy.ndarray and type(b) is numpy.ndarray:  # NumPy's own: the same einsum,
        return _einsum("...i,...i->...", a, b)[..., None]  # without autograd's wrapper
    return np.einsum("...i,...i->...", a, b)[..., None]


@functools.lru_cache(maxsize=64)
def ones_column(d, dtype):
    """A read-only column of d ones [d, 1] of that dtype: see the module docstring."""
    ones = numpy.ones((d, 1), dtype)
    ones.flags.writeable = False
    return ones
