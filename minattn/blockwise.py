"""Blockwise attention: the online softmax of FlashAttention, one tile of scores at a time.

The result equals scaled_dot_product_attention's output (up to rounding), but the [L_q, L_k]
matrix is never held: queries and keys are walked in blocks, and each query block keeps a running
max m, a running denominator l and an un-normalized output acc, rescaled whenever m grows
(Milakov & Gimelshein 2018; Dao et al. 2022, FlashAttention, algorithm 1). Here m is a running
shift: the max, until every query of the block has seen a key; from then on, any finite shift
giving the same softmax, the tiles keep it (their weights may exceed 1) unless a weight would
overflow (the tile is then folded in by its max) or a denominator passes the square root of the
dtype's largest float (its row is divided by it, m raised by its log): those tiles take no pass
over their scores for a max. Memory is
O(block_size^2) per head for the scores (on each worker thread: query blocks run side by side
on the CPU's cores, minattn/engine/threads.py) instead of O(L_q L_k), plus O(L·d) for a copy of
v with a column of ones (one product per tile then gives the weighted values and the
denominator) and of k or v where they broadcast over q's batch; the weights are not returned.

Gradients: FlashAttention-2's backward (Dao 2023, algorithm 2). The forward pass keeps only the
output and each query's log-sum-exp; the backward pass recomputes every tile's weights from
them, so the gradient needs O(L·d) memory for q, k, v, the output and their gradients, plus
O(H·block_size²) for the tile at hand, not O(L²). This hand-written VJP is first-order only (it
accumulates into arrays in place): autograd cannot differentiate it again. Like the rest of the
core it runs on CuPy arrays: nothing is created on the host.
"""
import functools
import math
import numbers

import autograd.numpy as np
import numpy
from autograd.extend import defvjp_argnums, primitive
from autograd.numpy.numpy_vjps import unbroadcast_f

from .engine import checks
from .engine.threads import in_threads, n_workers, one_blas_thread, tile_entries


def blockwise_attention(q, k, v, *, causal=False, key_mask=None, scale=None, block_size=128):
    """Attention output computed tile by tile, never holding the (L_q, L_k) scores.

    causal: query i sees keys j <= i (top-left aligned, as causal_mask); key blocks wholly above
    the diagonal are skipped, not masked. key_mask: bool [..., L_k], True = a key that may be
    attended. A query with no key left gets a zero output. scale as in
    scaled_dot_product_attention (1/sqrt(d_k) by default; 0 gives uniform weights).
    Differentiable with autograd, to first order only (grad of grad raises NotImplementedError).
    """
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v] -> [..., L_q, d_v]
    q, k, v, key_mask, scale = _check_inputs(q, k, v, key_mask, scale, block_size)
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        return q[..., :0] @ v[..., :0, :]  # [..., L_q, d_v] zeros: no query, or no key to see
    output, _ = _flash(q, k, v, key_mask, scale, causal, block_size)
    return output  # [..., L_q, d_v]


@primitive
def _flash(q, k, v, key_mask, scale, causal, block_size):
    # -> the output [..., L_q, d_v] and each query's log-sum-exp of its scores [..., L_q, 1],
    # all the backward pass needs to recompute any tile of weights: P = exp(S - lse).
    n_scores = math.prod(q.shape[:-1]) * k.shape[-2]  # (about) how many scores to compute
    n_threads = n_workers(q, n_scores)  # read before the BLAS limit below, which it follows
    with one_blas_thread():  # tiles: one BLAS thread, set once for all workers
        return _flash_forward(q, k, v, key_mask, scale, causal, block_size, n_threads)


def _flash_forward(q, k, v, key_mask, scale, causal, block_size, n_threads):
    # Query blocks are independent of one another, and so are the entries of the batch (each
    # head of each sequence). Both are split: a piece is one query block of a group of entries,
    # as many as keep its tile of scores within a core's cache (tile_entries), and the pieces
    # run on worker threads (minattn/engine/threads.py), the longest first (a causal block's
    # work grows with its start). Their outputs and log-sum-exps are then joined.
    batch, n_queries = q.shape[:-2], q.shape[-2]
    # k transposed with a row of ones [..., d_k + 1, L_k], v with a column of ones
    # [..., L_k, d_v + 1]: each product of a tile does one sum more (_query_block)
    k = numpy.concatenate([numpy.swapaxes(k, -1, -2),
                           numpy.ones_like(numpy.swapaxes(k[..., :1], -1, -2))], axis=-2)
    v = numpy.concatenate([v, numpy.ones_like(v[..., :1])], axis=-1)
    # q, k, v and key_mask with one batch axis, of entries (a broadcast input is copied)
    n_entries = math.prod(batch)
    q, k, v = (numpy.reshape(numpy.broadcast_to(x, batch + x.shape[-2:]),
                             (n_entries,) + x.shape[-2:]) for x in (q, k, v))
    if key_mask is not None:
        key_mask = numpy.reshape(numpy.broadcast_to(key_mask, batch + key_mask.shape[-1:]),
                                 (n_entries, key_mask.shape[-1]))
    per_group = tile_entries(q, block_size ** 2 * numpy.result_type(q.dtype, k.dtype).itemsize)
    groups = [slice(i, i + per_group) for i in range(0, max(n_entries, 1), per_group)]
    starts = range(0, n_queries, block_size)
    pieces = [(g, s) for s in (reversed(starts) if causal else starts) for g in range(len(groups))]

    def block(piece):
        g, q_start = piece
        e = groups[g]
        q_block = q[e, q_start:q_start + block_size, :]  # [entries, b_q, d_k]
        return _query_block(q_block, k[e], v[e], None if key_mask is None else key_mask[e],
                            q_start, causal, scale, block_size)

    done = in_threads(block, pieces, n_threads)
    # numpy's empty, not autograd's, and like= the pieces': on their device
    joined = [numpy.empty((n_entries, n_queries) + x.shape[-1:], x.dtype, like=x)
              for x in done[0]]
    for (g, q_start), outputs in zip(pieces, done):
        for whole, x in zip(joined, outputs):
            whole[groups[g], q_start:q_start + block_size] = x
    return tuple(numpy.reshape(x, batch + x.shape[-2:]) for x in joined)


def _flash_vjp(argnums, outputs, args, kwargs):
    # FlashAttention-2's backward (Dao 2023, algorithm 2), tile by tile: with
    # P = exp(S - lse) recomputed, dV += Pᵀ dO, dP = dO Vᵀ, dS = P ⊙ (dP - δ) where
    # δ = rowsum(dO ⊙ O), dQ += scale · dS K, dK += scale · dSᵀ Q.
    (out, lse), (q, k, v, key_mask, scale, causal, block_size) = outputs, args

    @one_blas_thread()
    def vjp(g):
        d_out = g[0]
        # out was computed from q, k, v and scale: it arrives boxed whenever one of them does
        checks.check_first_order("blockwise_attention", d_out, out)
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        grads = {0: np.zeros_like(np.broadcast_to(q, batch + q.shape[-2:])),
                 1: np.zeros_like(np.broadcast_to(k, batch + k.shape[-2:])),
                 2: np.zeros_like(np.broadcast_to(v, batch + v.shape[-2:])), 4: 0.0}
        delta = np.sum(d_out * out, axis=-1, keepdims=True)  # δ [..., L_q, 1]
        for q_start in range(0, q.shape[-2], block_size):
            rows = slice(q_start, q_start + block_size)
            q_b, d_out_b, lse_b = q[..., rows, :], d_out[..., rows, :], lse[..., rows, :]
            n_keys = min(k.shape[-2], q_start + q_b.shape[-2]) if causal else k.shape[-2]
            for k_start in range(0, n_keys, block_size):
                cols = slice(k_start, min(k_start + block_size, k.shape[-2]))
                k_t, v_t = k[..., cols, :], v[..., cols, :]
                qk = q_b @ np.swapaxes(k_t, -1, -2)  # [..., b_q, b_k]
                z = qk * scale - np.where(np.isfinite(lse_b), lse_b, 0.0)
                keep = _tile_mask(qk, key_mask, q_start, cols.start, cols.stop, causal)
                z = np.where(np.isfinite(lse_b), z, -np.inf)  # a query with no key: P = 0
                p = np.exp(z if keep is None else np.where(keep, z, -np.inf))  # the tile's P
                d_s = p * (d_out_b @ np.swapaxes(v_t, -1, -2) - delta[..., rows, :])
                grads[0][..., rows, :] += (d_s @ k_t) * scale
                grads[1][..., cols, :] += (np.swapaxes(d_s, -1, -2) @ q_b) * scale
                grads[2][..., cols, :] += np.swapaxes(p, -1, -2) @ d_out_b
                grads[4] = grads[4] + np.sum(d_s * qk)
        return tuple(unbroadcast_f(args[i], lambda _, i=i: grads[i])(None) for i in argnums)

    return vjp


defvjp_argnums(_flash, _flash_vjp)


def _query_block(q, k, v, key_mask, q_start, causal, scale, block_size):
    # [..., b_q, d_k], [..., d_k + 1, L_k], [..., L_k, d_v + 1] -> [..., b_q, d_v] and the
    # log-sum-exp [..., b_q, 1], for the queries q_start .. q_start + b_q - 1. k (transposed)
    # ends in a row of ones, v in a column of ones (_flash_forward).
    n_keys = k.shape[-1]
    if causal:
        # Query i sees keys j <= i: key blocks starting at or after this block's last query + 1
        # are never computed at all (FlashAttention's saving: about half the tiles).
        n_keys = min(n_keys, q_start + q.shape[-2])
    # The queries scaled, once for all tiles, and a last column -shift (the shift: m below, or 0
    # where m is -inf): against k's ones, each tile's product gives its scores less the shift.
    # In the scores' dtype, so that the shift subtracted is m to its last bit.
    q = q * scale
    q = numpy.concatenate([q, numpy.zeros_like(q[..., :1])], axis=-1,
                          dtype=numpy.result_type(q.dtype, k.dtype))  # [..., b_q, d_k + 1]
    # The running shift m [..., b_q, 1] (a max of the scores so far) and acc = the sum of
    # exp(score - m) * [value, 1] over the keys so far: the un-normalized output and, last, the
    # denominator l (0.0: a Python scalar broadcasts on the first tile).
    m, acc = numpy.full_like(q[..., :1], -numpy.inf), 0.0
    for k_start in range(0, n_keys, block_size):
        k_stop = min(k_start + block_size, k.shape[-1])
        k_t, v_t = k[..., k_start:k_stop], v[..., k_start:k_stop, :]
        scores = q @ k_t  # the scores less the shift [..., b_q, b_k]
        keep = _tile_mask(scores, key_mask, q_start, k_start, k_stop, causal)
        # (None: a weight overflowed; the tile is folded in again by its max, from its scores)
        m_new, acc = _online_softmax_step(m, acc, scores, keep, v_t) or \
            _online_softmax_step(m, acc, q @ k_t, keep, v_t, by_max=True)
        if m_new is not m:  # (a step that keeps the shift returns m itself)
            q[..., -1:] = -_shift(m_new)
        m = m_new
    acc, l = acc[..., :-1], acc[..., -1:]  # [..., b_q, d_v], [..., b_q, 1]
    # A query that saw no key has l = 0 and acc = 0: divide by 1 instead, giving 0, not NaN; its
    # log-sum-exp, m + log(l), is -inf.
    lse = np.where(l > 0, m + np.log(np.where(l > 0, l, 1.0)), -np.inf)
    return acc / np.where(l > 0, l, 1.0), lse


def _tile_mask(scores, key_mask, q_start, k_start, k_stop, causal):
    # -> bool broadcastable to scores [..., b_q, b_k] (True = may attend), or None: keep all.
    keep = None
    if key_mask is not None:
        keep = key_mask[..., None, k_start:k_stop]  # [..., 1, b_k]
    if causal and k_stop - 1 > q_start:  # some key in the tile lies after some query
        # Key k_start + c is visible from query q_start + r when c <= r + (q_start - k_start):
        # a lower triangle shifted by the tile's offset. Built like scores, so on its device.
        below = numpy.tri(scores.shape[-2], k_stop - k_start, q_start - k_start, dtype=bool,
                          like=scores)  # [b_q, b_k]
        keep = below if keep is None else keep & below
    return keep


def _online_softmax_step(m, acc, scores, keep, v, by_max=False):
    # Fold one tile of scores less the shift (_shift(m)) [..., b_q, b_k] and its values
    # [..., b_k, d_v + 1], the last column ones, into the running shift m [..., b_q, 1] and acc
    # [..., b_q, d_v + 1] (_query_block). The scores are overwritten: a temporary.
    if keep is not None:
        # -inf, as in softmax: exp(-inf) is exactly 0 in every dtype.
        numpy.copyto(scores, -numpy.inf, where=~keep)
    if not by_max and isinstance(scores, numpy.ndarray) and np.all(np.isfinite(m)):
        # Every query has seen a key (not the first tile). Any finite shift gives the same
        # softmax: m is kept, and the tile's weights exp(score - m) may exceed 1 (no pass for the
        # tile's max, none to subtract it), unless one overflows: then None, and the tile is
        # folded in by its max. On the host only: on a GPU (CuPy) these tests would each copy a
        # flag to the host and wait for the device, so every tile goes by its max there.
        with numpy.errstate(over="ignore", invalid="ignore"):
            acc = acc + np.exp(scores, out=scores) @ v
        return _renormalized(m, acc) if np.all(np.isfinite(acc)) else None
    # By the max (FlashAttention's step): m becomes the running max of the scores.
    shift = _shift(m)
    m_new = np.maximum(m, shift + np.max(scores, axis=-1, keepdims=True))
    p = np.exp(np.subtract(scores, _shift(m_new) - shift, out=scores), out=scores)
    # The old acc was a sum of exp(score - m); rescale it to exp(score - m_new), and add the
    # tile's: its weighted values and, against the ones, the sum of its weights.
    rescale = np.exp(m - _shift(m_new))
    return m_new, acc * rescale + p @ v


def _shift(m):
    # What the scores have subtracted: m, but 0 where it is -inf (a query with nothing visible
    # so far), so that no inf - inf = NaN.
    return np.where(np.isfinite(m), m, 0.0)


def _renormalized(m, acc):
    # The rows whose denominator l (acc's last column) has passed the square root of the
    # dtype's largest float: divided by l, their shift raised by log(l), so that the next tiles'
    # weights have that much room before they overflow.
    l = acc[..., -1:]
    large = l > _room(acc.dtype)
    if not np.any(large):
        return m, acc
    by = np.where(large, l, 1.0)
    return m + np.log(by), acc / by


@functools.cache
def _room(dtype):
    return numpy.sqrt(numpy.finfo(dtype).max)


def _check_inputs(q, k, v, key_mask, scale, block_size):
    # The checks of scaled_dot_product_attention, with key_mask and block_size in place of mask.
    q, k, v, _, _, scale, _ = checks.check_attention(q, k, v, None, scale, 0.0, None)
    batch = tuple(q.shape[:-2])  # check_attention gave q every batch dim of q, k and v
    if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral) \
            or block_size < 1:
        raise TypeError(f"block_size must be a positive int, got {block_size!r}")
    return q, k, v, _check_key_mask(key_mask, batch + (k.shape[-2],)), scale


def _check_key_mask(key_mask, keys_shape):
    # bool [..., L_k] that broadcasts to the keys' shape (batch dims + (L_k,)), or None.
    if key_mask is None:
        return None
    if isinstance(key_mask, (list, tuple)) or hasattr(key_mask, "dtype"):
        key_mask = checks.as_array("key_mask", key_mask)
    if not hasattr(key_mask, "dtype") or numpy.dtype(key_mask.dtype).kind != "b":
        got = getattr(key_mask, "dtype", type(key_mask).__name__)
        raise TypeError(f"key_mask must be a boolean array (True = may be attended), got {got}")
    ok = checks.broadcasts_to(key_mask.shape, keys_shape)
    if not ok or key_mask.ndim < 1:
        raise ValueError(f"key_mask of shape {tuple(key_mask.shape)} does not broadcast to the "
                         f"keys' shape (..., L_k) = {keys_shape}")
    return key_mask
