"""The attention core's forward on NumPy itself, in fewer passes over the scores
(docs/benchmarks.md, "The attention core's forward in fewer passes").

The concept (attention.scaled_dot_product_attention, with attention.softmax) computes, through
autograd.numpy's wrappers: the scores, a new array for the mask's `where` (or the scores plus a
bias, and the scores minus their max), each row's max and four fix-ups of it, the exp, the sum,
a fix-up of the sums, the division of the weights, then the weights times the values. Where the
arguments are plain NumPy arrays of one dtype, float32 or float64 (no autograd box, no GPU or
masked array, no subclass), the mask boolean or none (or a floating mask, added), and no dropout,
in_query_blocks (engine/query_blocks.py) computes the core here instead, as NumPy calls on the
one array of scores each block makes:

    weights(q, k, keep, bias, scale)   -> the weights (attention._weights' softmax of the
        scores) alone: the same operations on the same numbers in the same order, so the same
        bits as the concept (tests/test_plain_core.py); forward's, and the plain VJP's where the
        tape did not keep them (engine/plain_vjps.py). What it saves: the `where`'s (or the
        bias's) new [..., L_q, L_k] array (the mask written into the scores in place, on rows of
        more than 128 keys only over the keys where some query is masked: most of a causal
        block's keys are visible to all its queries), the shift's new array where there is no
        mask, and the max's fix-ups and the sums' fix-up where no row's max is infinite or NaN
        (one isfinite over [..., L_q, 1] then, not four comparisons and assignments).
    forward(q, k, v, keep, bias, scale)   -> (output, weights): the weights, then times the
        values: the concept's bits.
    output_into(out, q, k, v, keep, scale, scratch, window)   the output alone, written into
        `out`, for a caller that never reads the weights (weights_unread: a decoder's prompt,
        by blocks of queries): the scores' exps unshifted where the sums show every row's max
        within exp_window (no row max, no shift: two passes over the scores fewer), else as
        forward's; then (e @ v) / sums, the division moved from the [..., L_q, L_k] weights to
        the [..., L_q, d_v] output (a pass over the largest array fewer), the sums a product
        with a column of ones, the scores in tiles that fit the L2 cache in one scratch
        buffer. Not the concept's bits: within its dtype's rounding of the float64 formula
        (tested).

    flash_query_block(...)   blockwise attention's query block (blockwise._query_block) in
        fewer passes over each tile: see its comment, at the end of this file.

forward and output_into keep the core's meaning in every corner: masked entries weigh exactly 0;
a row with every key masked gives zero weights and a zero output (0 times the values: NaN where
a value is NaN or infinite, as the concept gives); a row whose scores hold a NaN or +inf gives
NaN weights and a NaN output, as softmax documents. The scale multiplies q first (the concept's
order: the scores are the concept's bits).
"""
import math

import numpy

from .reductions import SHORT_ROW, row_max
from .reductions import ones_column as _ones_column
from .threads import TILE_BYTES

FLOATS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))


def plain(q, k, v, keep, bias):
    """True where forward and output compute the core (the arguments as check_attention
    returns them): q, k, v NumPy arrays (type ndarray) of one dtype, float32 or float64; keep a
    boolean NumPy array or None; bias None or a NumPy array of that dtype."""
    return (type(q) is numpy.ndarray and type(k) is numpy.ndarray and type(v) is numpy.ndarray
            and q.dtype in FLOATS and q.dtype == k.dtype == v.dtype
            and (keep is None or type(keep) is numpy.ndarray and keep.dtype == bool)
            and (bias is None or type(bias) is numpy.ndarray and bias.dtype == q.dtype))


def forward(q, k, v, keep, bias, scale):
    """(output [..., L_q, d_v], weights [..., L_q, L_k]), the concept's bits: see the module
    docstring."""
    p = weights(q, k, keep, bias, scale)
    return p @ v, p


def output_into(out, q, k, v, keep, scale, scratch=None, window=None):
    """The core's output (keep a boolean mask [..., L_q, L_k], no bias) written into out
    [batch..., L_q, d_v] (batch: q's, k's, v's and keep's lead dims broadcast), in tiles of the
    lead dims whose scores fit in TILE_BYTES (a pass over a block's scores that spills out of
    the core's L2 cache is slower: SmolLM2's block of 128 queries over 512 keys is 2.4 MB for
    its 9 heads, 0.8 MB for the 3 of a kv head). Each tile's scores go into one scratch buffer,
    kept in `scratch` (a dict the caller passes from block to block); the mask is written only
    over the keys where it hides some entry (found once for all the tiles); the sums are a
    product with a column of ones (the same additions in BLAS's order: within rounding of the
    sum, not its bits).

    window: exp_window(v, L_k) (of a v whose entries include these: a caller's whole v, once a
    call), computed here where None. A tile's exps are taken unshifted, as flash_query_block's (the
    comment above EXP_WINDOW), with no row max at all: the sums bound each row's max afterwards (a
    row's sum lies between e^max and L_k e^max), and the exps stand where those bounds lie within
    the window (a sufficient test: a row whose max is within it but whose sum is past e^window, or
    below L_k e^-window, is shifted too). Elsewhere (scores past the window, NaN or infinite ones,
    or a sum near the window's edge), the tile's scores are made again and shifted by their row max,
    as are the rest of the call's tiles (a call, a block of queries, chooses alone: the same bits on
    whichever thread after whichever block); so is every tile of a call where some row has every key
    masked (its sum 0 says nothing of a max) or v leaves no window. The row max is NumPy's fmax on
    rows longer than row_max's short ones (faster than max, and a row holding a NaN comes out NaN
    all the same: its sum is NaN)."""
    batch, (n_q, n_k) = out.shape[:-2], (q.shape[-2], k.shape[-2])
    entry = n_q * n_k * out.dtype.itemsize  # bytes of one lead entry's scores
    split = 0  # tile over batch[:split], each tile batch[split:]: the fewest tiles that fit
    while split < len(batch) and math.prod(batch[split:]) * entry > TILE_BYTES:
        split += 1
    hidden = ~keep
    columns = hidden.any(axis=tuple(range(hidden.ndim - 1))) if hidden.ndim > 1 else hidden
    masked = columns.nonzero()[0]
    keys = slice(int(masked[0]), int(masked[-1]) + 1) if masked.size else None
    if window is None:
        window = exp_window(v, n_k)
    unshifted = window > 0.0 and n_k > 0 and not (  # (a row with every key masked: shifted)
        keys == slice(0, n_k) and hidden.all(axis=-1).any())
    views = [numpy.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v)]
    hidden = numpy.broadcast_to(hidden[..., keys], batch + (n_q, keys.stop - keys.start)) \
        if keys is not None else None
    ones = _ones_column(n_k, out.dtype)
    size = math.prod(batch[split:]) * n_q * n_k
    if scratch is None:
        scratch = {}
    if scratch.get("scores") is None or scratch["scores"].size < size:
        scratch["scores"] = numpy.empty(size, out.dtype)
    for index in numpy.ndindex(batch[:split]):
        qt, kt, vt = (a[index] for a in views)
        s = scratch["scores"][:size].reshape(qt.shape[:-1] + (n_k,))
        if not any(kt.strides[:-2]) and not any(vt.strides[:-2]):
            # one k and v for the whole tile (the query heads of one kv head): one product of
            # all its queries, not one per head (within rounding of the products per head)
            kt, vt = kt[(0,) * (kt.ndim - 2)], vt[(0,) * (vt.ndim - 2)]
        _scores_into(s, qt, kt, scale, keys, hidden[index] if keys is not None else None)
        if unshifted:
            with numpy.errstate(over="ignore", divide="ignore"):  # (an overflow: a max past
                numpy.exp(s, out=s)  # the window; a sum 0: every exp underflowed)
                total = s @ ones  # [..., L_q, 1]
                top = numpy.log(total)  # each row's max lies in [top - log L_k, top]
            unshifted = within_window(top - math.log(n_k), top, window)
            if not unshifted:  # the tile again, shifted (and the call's tiles after it)
                _scores_into(s, qt, kt, scale, keys, hidden[index] if keys is not None else None)
        if not unshifted:
            total = _shifted_exps(s, _row_max(s), lambda e: e @ ones)  # [..., L_q, 1]
        if vt.ndim == 2:
            numpy.divide((s.reshape(-1, n_k) @ vt).reshape(out[index].shape), total,
                         out=out[index])
        else:
            numpy.divide(s @ vt, total, out=out[index])
    return out


def _scores_into(s, q, k, scale, keys, hidden):
    # s = (q scale) kᵀ, -inf where hidden [..., L_q, keys] (the keys where the mask hides some
    # entry; None: none); a k of two dims: one product of all of q's rows
    if k.ndim == 2:
        numpy.matmul(numpy.multiply(q, scale).reshape(-1, q.shape[-1]), k.T,
                     out=s.reshape(-1, s.shape[-1]))
    else:
        numpy.matmul(numpy.multiply(q, scale), numpy.swapaxes(k, -1, -2), out=s)
    if keys is not None:
        numpy.copyto(s[..., keys], -numpy.inf, where=hidden)


def _row_max(s):
    # s.max(-1, keepdims=True) where a row holds no NaN; where it holds one, the max of the rest
    # (NumPy's fmax: faster on rows longer than row_max's short ones), whose row of exps then
    # sums to NaN all the same
    if s.shape[-1] <= SHORT_ROW:
        return row_max(s)
    return numpy.fmax.reduce(s, axis=-1, keepdims=True)


def weights(q, k, keep, bias, scale):
    """P = softmax(scale · Q Kᵀ + bias, mask=keep) [..., L_q, L_k], attention._weights' bits
    (attention.softmax's operations on the same numbers in the same order), for q and k NumPy
    arrays of one dtype, float32 or float64, keep a boolean NumPy array or None, bias a floating
    NumPy array or None: all in the one array of scores made here (the bias added and the mask's
    -inf written into it where they broadcast to it, the bias where its dtype is the scores':
    softmax's where makes a copy; the shift, the exp and the division in place), and softmax's
    fix-ups of the row max and the sums only where some row's max is infinite or NaN (one
    isfinite over [..., L_q, 1] tells). None where the scores come out in a dtype other than
    float32 and float64 (a bias's)."""
    # (the product's invalid flag ignored: OpenBLAS's kernel raised it once on finite float32
    # entries, a decoder's cross-attention to one key under the suite; a real inf * 0 is NaN in
    # s, and NaN in the weights, as the concept's)
    with numpy.errstate(invalid="ignore"):
        s = numpy.multiply(q, scale) @ k.swapaxes(-1, -2)  # [..., L_q, L_k]; the concept's
    if bias is not None:
        s = _add_in_place(s, bias)
    if s.dtype not in FLOATS:
        return None
    if keep is not None:
        s = _mask_in_place(s, keep)
    if s.shape[-1] == 0:  # no keys: softmax leaves the empty scores as they are
        return s
    total = _shifted_exps(s, row_max(s), _row_sums)  # [..., L_q, 1]
    numpy.divide(s, total, out=s)
    return s


def _shifted_exps(s, x_max, sums):
    # s = exp(s - x_max) in place, with softmax's fix-ups where some row's max is infinite or
    # NaN (a fully masked row shifted by 0, a +inf max made NaN) -> sums(s) [..., L_q, 1], 1
    # where every entry is masked (elsewhere the max's entry gives exp(0) = 1: no sum is 0)
    infinite = not numpy.logical_and.reduce(numpy.isfinite(x_max), axis=None)
    if infinite:
        x_max[x_max == -numpy.inf] = 0.0
        x_max[x_max == numpy.inf] = numpy.nan
    numpy.subtract(s, x_max, out=s)
    numpy.exp(s, out=s)
    total = sums(s)
    if infinite:
        total[total == 0] = 1.0
    return total


def _row_sums(s):
    return numpy.add.reduce(s, axis=-1, keepdims=True)


def _add_in_place(s, bias):
    # s + bias, into s where the sum has s's shape and dtype (s: the scores made here)
    if bias.dtype == s.dtype and bias.ndim <= s.ndim and \
            numpy.broadcast(s, bias).shape == s.shape:
        return numpy.add(s, bias, out=s)
    return s + bias


def _mask_in_place(s, keep):
    # -inf where keep is False (s: an array made here, keep broadcasting to it); on rows of more
    # than 128 keys written only into the keys from the first to the last that some entry masks
    # (a causal block's diagonal tile); shorter, in one call
    if keep.ndim > s.ndim or numpy.broadcast(s, keep).shape != s.shape:
        return numpy.where(keep, s, -numpy.inf)  # (keep wider than the scores: softmax's where)
    hidden = ~keep
    if s.shape[-1] <= 128 or keep.ndim == 0 or keep.shape[-1] != s.shape[-1]:  # (short rows,
        numpy.copyto(s, -numpy.inf, where=hidden)  # or one mask entry for every key of a row)
        return s
    columns = hidden.any(axis=tuple(range(hidden.ndim - 1))) if hidden.ndim > 1 else hidden
    masked = columns.nonzero()[0]
    if masked.size:
        keys = slice(int(masked[0]), int(masked[-1]) + 1)
        numpy.copyto(s[..., keys], -numpy.inf, where=hidden[..., keys])
    return s


# blockwise attention's tiles on NumPy itself (blockwise._flash_forward, where q, k, v are NumPy
# arrays of one dtype, float32 or float64): its _query_block and _online_softmax_step in fewer
# passes over each tile of scores. A tile's exps need no shift where every row's max in the tile
# lies within EXP_WINDOW of 0 (within_window; output_into's tiles too, the maxima bounded there by
# the sums, after the exps, not computed): no exp overflows (a float32 tile's exps are at most e^40,
# so its products overflow only for values past about 1e18), and a term that underflows is below
# e^-47 of its row's largest in float32 (e^-400 in float64), under the dtype's rounding. The running
# max then rescales the tile's [b_q, d_v] product, not its [b_q, b_k] scores (a pass fewer). That
# product is on the unshifted scale, up to e^window times v's entries: exp_window(v, block_size)
# narrows the window, once a call, so that no product can overflow (block_size e^window max|v| below
# the dtype's largest) and no term at its row's max leaves the normal floats (e^-window min|v| above
# tiny / eps, v's zeros aside); a v of NaN or infinite entries takes no window at all. Elsewhere (a
# row fully masked in the tile, infinite or NaN scores, a max past the window) the tile is shifted
# by the running max, as _online_softmax_step does. The row max is NumPy's fmax (faster; a row
# holding a NaN still comes out NaN: its exps sum to NaN), and the sums a product with a column of
# ones beside the values' product (v with a column of ones appended took more than the two:
# docs/benchmarks.md, "The prefill at two threads and blockwise attention's tiles"). Within the
# dtype's rounding of the formula, not the bits of _query_block (tests/test_blockwise.py).
EXP_WINDOW = {numpy.dtype(numpy.float32): 40.0, numpy.dtype(numpy.float64): 300.0}


def exp_window(v, block_size):
    """The window of flash_query_block's (and output_into's) unshifted tiles for these values
    v (see above): at most EXP_WINDOW, less where v's entries are very large or very small; -1
    (every tile shifted) where v holds NaN or infinities or leaves no window."""
    info, window = numpy.finfo(v.dtype), EXP_WINDOW[v.dtype]
    size = numpy.abs(v)
    largest = float(numpy.max(size, initial=0.0))
    if not math.isfinite(largest):  # (a NaN is NumPy's max; an infinity too)
        return -1.0
    if largest > 0.0:
        smallest = float(numpy.min(size))  # (the masked min only where v holds zeros: slower)
        if smallest == 0.0:
            smallest = float(numpy.min(size, where=size > 0, initial=numpy.inf))
        # (each log of its own factors: their products leave Python's floats for a float64 v
        # near the largest float or among the subnormals)
        window = min(window, math.log(float(info.max)) - math.log(block_size)
                     - math.log(largest) - 1.0,
                     math.log(smallest) + math.log(float(info.eps) / float(info.tiny)) - 1.0)
    return window if window > 0.0 else -1.0


def within_window(low, high, window):
    """True where every row's max, known to lie between low and high (arrays [..., 1]), lies
    within [-window, window]: its exps need no shift (see above); False where a bound is NaN
    or infinite (a row holding a NaN or +inf, or one whose every entry is masked)."""
    return bool(numpy.min(low, initial=numpy.inf) >= -window) and \
        bool(numpy.max(high, initial=-numpy.inf) <= window)  # (NaN: NumPy's min and max)


def flash_query_block(q, k, v, key_mask, q_start, causal, scale, block_size, tile_mask, window):
    """blockwise._query_block's (output [..., b_q, d_v], log-sum-exp [..., b_q, 1]) for the
    queries q_start .. q_start + b_q - 1, v without the ones' column; tile_mask: blockwise's
    _tile_mask; window: exp_window(v, block_size) of the whole v. See the comment above."""
    n_keys = k.shape[-2]
    if causal:
        n_keys = min(n_keys, q_start + q.shape[-2])
    dtype = q.dtype
    q = numpy.multiply(q, scale)
    lead = q.shape[:-1]
    m = numpy.full(lead + (1,), -numpy.inf, dtype)  # the running max
    acc = numpy.zeros(lead + (v.shape[-1],), dtype)  # the un-normalised output
    total = numpy.zeros(lead + (1,), dtype)  # its denominator
    ones = _ones_column(min(block_size, k.shape[-2]), dtype)
    scores = None
    with numpy.errstate(over="ignore", invalid="ignore"):
        for k_start in range(0, n_keys, block_size):
            k_stop = min(k_start + block_size, k.shape[-2])
            k_tile, v_tile = k[..., k_start:k_stop, :], v[..., k_start:k_stop, :]
            shape = numpy.broadcast_shapes(q.shape[:-2], k_tile.shape[:-2]) + \
                (q.shape[-2], k_stop - k_start)
            if scores is None or scores.shape != shape:
                scores = numpy.empty(shape, dtype)
            numpy.matmul(q, numpy.swapaxes(k_tile, -1, -2), out=scores)
            keep = tile_mask(scores, key_mask, q_start, k_start, k_stop, causal)
            if keep is not None:
                numpy.copyto(scores, -numpy.inf, where=~keep)
            tile_max = _row_max(scores)
            m_new = numpy.maximum(m, tile_max)
            if within_window(tile_max, tile_max, window):
                numpy.exp(scores, out=scores)  # no shift: the scores are within the window
                down = numpy.exp(numpy.negative(m_new))  # (finite, as the tile's maxima)
                rescale = numpy.exp(m - m_new)
                acc *= rescale
                acc += numpy.matmul(scores, v_tile) * down
                total *= rescale
                total += (scores @ ones[:k_stop - k_start]) * down
            else:  # _online_softmax_step's shift
                shift = numpy.where(numpy.isfinite(m_new), m_new, 0.0)
                numpy.exp(numpy.subtract(scores, shift, out=scores), out=scores)
                rescale = numpy.exp(m - shift)
                acc = acc * rescale + numpy.matmul(scores, v_tile)
                total = total * rescale + scores @ ones[:k_stop - k_start]
            m = m_new
    seen = total > 0  # a query that saw no key: output 0, log-sum-exp -inf
    lse = numpy.where(seen, m + numpy.log(numpy.where(seen, total, 1.0)), -numpy.inf)
    return acc / numpy.where(seen, total, 1.0), lse.astype(dtype, copy=False)
