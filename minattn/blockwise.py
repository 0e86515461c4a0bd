"""Blockwise attention: the online softmax of FlashAttention, one tile of scores at a time.

The result equals scaled_dot_product_attention's output (up to rounding), but the [L_q, L_k]
matrix is never held: queries and keys are walked in blocks, and each query block keeps a running
max m, a running denominator l and an un-normalized output acc, rescaled whenever m grows
(Milakov & Gimelshein 2018; Dao et al. 2022, FlashAttention, algorithm 1). Memory is
O(block_size^2) per head for the scores (on each worker thread: query blocks run side by side
on the CPU's cores, minattn/engine/threads.py) instead of O(L_q L_k), plus O(L·d) for a copy of
v with a column of ones where the tiles are not on NumPy itself (one product per tile then gives
the weighted values and the denominator) and of k or v where they broadcast over q's batch; the
weights are not returned.

Gradients: FlashAttention-2's backward (Dao 2023, algorithm 2). The forward pass keeps only the
output and each query's log-sum-exp; the backward pass recomputes every tile's weights from
them, so the gradient needs O(L·d) memory for q, k, v, the output and their gradients, plus
O(H·block_size²) for the tile at hand, not O(L²). This hand-written VJP is first-order only (it
accumulates into arrays in place): autograd cannot differentiate it again. Like the rest of the
core it runs on CuPy arrays: nothing is created on the host.
"""
import math
import numbers

import autograd.numpy as np
import numpy
from autograd.extend import defvjp_argnums, primitive
from autograd.numpy.numpy_vjps import unbroadcast_f

from .engine import checks, plain_core
from .engine.threads import n_workers, one_blas_thread, spread, tile_entries


def blockwise_attention(q, k, v, *, causal=False, key_mask=None, scale=None, block_size=128):
    """Attention output computed tile by tile, never holding the (L_q, L_k) scores.

    causal: query i sees keys j <= i (top-left aligned, as causal_mask); key blocks wholly above
    the diagonal are skipped, not masked. key_mask: bool [..., L_k], True = a key that may be
    attended. A query with no key left gets a zero output. scale as in
    scaled_dot_product_attention (1/sqrt(d_k) by default; 0 gives uniform weights).
    Differentiable with autograd, to first order only (grad of grad raises NotImplementedError).
    """
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v] -> [..., L_q, d_v]
    q, k, v, key_mask, scale = _check_inputs(q, k, v, key_mask, scale, causal, block_size)
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        return q[..., :0] @ v[..., :0, :]  # [..., L_q, d_v] zeros: no query, or no key to see
    output, _ = _flash(q, k, v, key_mask, scale, causal, block_size)
    return output  # [..., L_q, d_v]


PLAIN_TILES = True  # False: every tile through _query_block (the tests compare the two)


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
    # run on worker threads (threads.spread), the costliest first (a causal block's work grows
    # with its start). Their outputs and log-sum-exps are then joined.
    batch, n_queries = q.shape[:-2], q.shape[-2]
    # NumPy arrays of one dtype, float32 or float64: the tiles on NumPy itself, in fewer passes
    # (engine/plain_core.flash_query_block); else v with a column of ones [..., L_k, d_v + 1]:
    # one product per tile gives its weighted values and its weights' sum (_query_block)
    plain = PLAIN_TILES and plain_core.plain(q, k, v, None, None)
    if plain:
        window = plain_core.exp_window(v, block_size)  # (of v's entries: once a call)
    else:
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
    pieces = [(g, s) for s in range(0, n_queries, block_size) for g in range(len(groups))]

    def cost(g, q_start):  # a piece's scores (a causal block's keys: up to its last query)
        rows = min(block_size, n_queries - q_start)
        keys = min(k.shape[-2], q_start + rows) if causal else k.shape[-2]
        return len(range(n_entries)[groups[g]]) * rows * keys

    def block(piece):
        g, q_start = piece
        e = groups[g]
        q_block = q[e, q_start:q_start + block_size, :]  # [entries, b_q, d_k]
        if plain:
            return plain_core.flash_query_block(
                q_block, k[e], v[e], None if key_mask is None else key_mask[e], q_start,
                causal, scale, block_size, _tile_mask, window)
        return _query_block(q_block, k[e], v[e], None if key_mask is None else key_mask[e],
                            q_start, causal, scale, block_size)

    done = spread(block, pieces, [cost(*piece) for piece in pieces], n_threads)
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
    # [..., b_q, d_k], [..., L_k, d_k], [..., L_k, d_v + 1] -> [..., b_q, d_v] and the
    # log-sum-exp [..., b_q, 1], for the queries q_start .. q_start + b_q - 1. v ends in a column
    # of ones, the denominator's (_flash_forward).
    n_keys = k.shape[-2]
    if causal:
        # Query i sees keys j <= i: key blocks starting at or after this block's last query + 1
        # are never computed at all (FlashAttention's saving: about half the tiles).
        n_keys = min(n_keys, q_start + q.shape[-2])
    # Running max, and output with the denominator in its last column (the ones' column of v);
    # Python scalars that broadcast on the first tile.
    m, acc = -np.inf, 0.0
    q = q * scale  # once for the block's queries, rather than on every tile of scores
    for k_start in range(0, n_keys, block_size):
        k_stop = min(k_start + block_size, k.shape[-2])
        scores = q @ np.swapaxes(k[..., k_start:k_stop, :], -1, -2)  # [..., b_q, b_k]
        keep = _tile_mask(scores, key_mask, q_start, k_start, k_stop, causal)
        m, acc = _online_softmax_step(m, acc, scores, keep, v[..., k_start:k_stop, :])
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


def _online_softmax_step(m, acc, scores, keep, v):
    # Fold one tile of scores [..., b_q, b_k] and its values [..., b_k, d_v + 1], the last column
    # ones, into the running max m [..., b_q, 1] and acc [..., b_q, d_v + 1]: the un-normalized
    # output and, in the ones' column, the denominator l. The scores are overwritten.
    if keep is not None:
        # -inf, as in softmax: exp(-inf) is exactly 0 in every dtype.
        numpy.copyto(scores, -numpy.inf, where=~keep)
    m_new = np.maximum(m, np.max(scores, axis=-1, keepdims=True))
    # A query with nothing visible so far has m_new = -inf; shift by 0 so no inf - inf = NaN.
    shift = np.where(np.isfinite(m_new), m_new, 0.0)
    # The old acc was a sum of exp(score - m) times the values (and ones); rescale it to
    # exp(score - m_new), and add the tile's: its weighted values and, against the ones, the sum
    # of its weights. (score - max and m - max are <= 0: at most -inf, past the dtype's range,
    # whose exp is 0.)
    with numpy.errstate(over="ignore"):
        p = np.exp(np.subtract(scores, shift, out=scores), out=scores)
        rescale = np.exp(m - shift)
    return m_new, acc * rescale + p @ v


def _check_inputs(q, k, v, key_mask, scale, causal, block_size):
    # The checks of scaled_dot_product_attention, with key_mask, causal and block_size in place
    # of mask.
    q, k, v, _, _, scale, _ = checks.check_attention(q, k, v, None, scale, 0.0, None)
    batch = tuple(q.shape[:-2])  # check_attention gave q every batch dim of q, k and v
    if not isinstance(causal, (bool, numpy.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if isinstance(block_size, (bool, numpy.bool_)) or \
            not isinstance(block_size, numbers.Integral):
        raise TypeError(f"block_size must be a positive int, got {block_size!r}")
    if block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
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
