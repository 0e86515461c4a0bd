"""The (gated) delta rule: a fixed-size state that learns, token by token, to map keys to values.

Linear attention (causal_linear_attention.py) only ever adds to its state: S_t = S_{t-1} + k_tᵀ v_t, so
after d_k tokens the keys overlap and old values blur into new ones. The delta rule (Schlag et
al. 2021; DeltaNet, Yang et al. 2024) writes only what the state failed to predict: one step of
online regression of v on k, with learning rate β_t,

    S_t = S_{t-1} + β_t k_tᵀ (v_t − k_t S_{t-1})          (the value minus its prediction)
        = (I − β_t k_tᵀ k_t) S_{t-1} + β_t k_tᵀ v_t,     o_t = (scale · q_t) S_t

and the gated delta rule (Gated DeltaNet, Yang et al. 2025; Qwen3-Next, Kimi Linear) first
forgets, multiplying the state by a decay e^{g_t} in (0, 1]: S_t = e^{g_t}(I − β_t k_tᵀ k_t)
S_{t-1} + β_t k_tᵀ v_t. Keys and queries are L2-normalized by the caller (l2_normalize), so
that β ∈ (0, 1] keeps the state bounded. Row vectors here, as in the code: k_t [1, d_k], the
state [d_k, d_v]; the papers write the transpose.

The loop over time is the definition; the chunked form computes the same numbers C tokens at a
time with matrix products (the WY / UT transform: one triangular solve per chunk, then the
state passed from chunk to chunk), as transformers' torch_chunk_gated_delta_rule and the
flash-linear-attention kernels do (walkthrough.md, "Attention and recurrence").
"""
import autograd.numpy as np

from .engine.devices import concatenate
from .engine.dtypes import float16_in_float32
from .engine.recurrence_checks import _check_delta_rule, _check_l2_normalize
from .engine.threads import one_blas_thread


@float16_in_float32("x")
def l2_normalize(x, eps=1e-6):
    """x / sqrt(Σ x² + eps) along the last axis: x [..., d] -> [..., d], unit rows (the l2norm
    of transformers' Qwen3-Next and of flash-linear-attention, eps inside the root)."""
    # [..., d] -> [..., d]
    x, eps = _check_l2_normalize(x, eps)
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


@float16_in_float32("q", "k", "v")
@one_blas_thread()
def delta_rule(q, k, v, beta, g=None, *, scale=None, initial_state=None, chunk_size=None,
               return_state=False):
    """The gated delta rule over one sequence: q, k [..., L, d_k], v [..., L, d_v], beta [..., L]
    (the write strength β_t), g [..., L] (the log decay, <= 0; None: no decay, DeltaNet) ->
    out [..., L, d_v], or (out, final state [..., d_k, d_v]) with return_state=True.
    S_t = e^{g_t}(I − β_t k_tᵀ k_t) S_{t−1} + β_t k_tᵀ v_t, o_t = (scale · q_t) S_t; scale
    defaults to 1/sqrt(d_k); initial_state [..., d_k, d_v] continues a sequence (zeros: a new
    one). chunk_size=None: the loop over time; an int: the chunked form (the same numbers)."""
    # [..., L, d_k] x 2, [..., L, d_v], [..., L] x 2 -> [..., L, d_v] (, [..., d_k, d_v])
    q, k, v, beta, g, scale, state, chunk_size = _check_delta_rule(
        q, k, v, beta, g, scale, initial_state, chunk_size, return_state)
    if chunk_size is None:
        out, state = _recurrent(q, k, v, beta, g, scale, state)
    else:
        out, state = _chunked(q, k, v, beta, g, scale, state, chunk_size)
    return (out, state) if return_state else out


def _recurrent(q, k, v, beta, g, scale, state):
    out = []
    for t in range(q.shape[-2]):
        k_t, v_t = k[..., t, None, :], v[..., t, None, :]  # [..., 1, d_k], [..., 1, d_v]
        state = np.exp(g[..., t, None, None]) * state  # forget: S ← e^{g_t} S
        error = v_t - k_t @ state  # what the state fails to predict for k_t [..., 1, d_v]
        state = state + np.swapaxes(k_t, -1, -2) @ (beta[..., t, None, None] * error)  # write it
        out.append((scale * q[..., t, None, :]) @ state)  # read: o_t = scale · q_t S_t
    return (concatenate(out, axis=-2) if out else v), state  # [..., L, d_v], [..., d_k, d_v]


def _chunked(q, k, v, beta, g, scale, state, chunk_size):
    # Within a chunk, unroll the recurrence from the state S it starts from (G: the cumulative
    # log decay from the chunk's start, Γ_ij = e^{G_i − G_j} for j <= i, else 0):
    #   (I + A) U = β v,  (I + A) W = β k e^G,  A = strictly-lower(β_i k_i·k_j Γ_ij)  [UT transform]
    #   out = scale (q e^G) S + scale (q kᵀ ⊙ Γ)(U − W S),   S ← e^{G_C} S + (k e^{G_C − G})ᵀ (U − W S)
    # U, W and the masked scores of every chunk are computed at once; only S is passed on.
    length, d_v = q.shape[-2], v.shape[-1]
    chunk_size = min(chunk_size, max(length, 1))  # a short sequence is one chunk, unpadded
    pad = -length % chunk_size  # zeros at the end: β = 0 writes nothing, g = 0 forgets nothing
    n = (length + pad) // chunk_size
    if n == 0:
        return v, state

    def chunks(x):  # [..., L, d] -> [..., n, C, d];  [..., L] -> [..., n, C]
        if x.ndim == q.ndim:
            x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, pad), (0, 0)], mode="constant")
            return np.reshape(x, x.shape[:-2] + (n, chunk_size, x.shape[-1]))
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)], mode="constant")
        return np.reshape(x, x.shape[:-1] + (n, chunk_size))

    q, k, v, beta, g = (chunks(x) for x in (q, k, v, beta, g))
    big_g = np.cumsum(g, axis=-1)  # [..., n, C]
    gamma = np.tril(np.exp(np.tril(big_g[..., :, None] - big_g[..., None, :])))  # [..., n, C, C]
    k_beta = k * beta[..., None]  # [..., n, C, d_k]
    a = np.tril((k_beta @ np.swapaxes(k, -1, -2)) * gamma, -1)  # [..., n, C, C]
    solved = _solve_unit_lower(a, concatenate(
        [v * beta[..., None], k_beta * np.exp(big_g)[..., None]], axis=-1))  # the triangular solve
    u, w = solved[..., :d_v], solved[..., d_v:]  # [..., n, C, d_v], [..., n, C, d_k]
    scores = (q @ np.swapaxes(k, -1, -2)) * gamma * scale  # [..., n, C, C], causal and decayed
    q_read = q * (np.exp(big_g)[..., None] * scale)  # [..., n, C, d_k]: reads the start state
    k_write = k * np.exp(big_g[..., -1:] - big_g)[..., None]  # decayed to the chunk's end
    chunk_decay = np.exp(big_g[..., -1])[..., None, None]  # [..., n, 1, 1]
    out = []
    for c in range(n):
        new = u[..., c, :, :] - w[..., c, :, :] @ state  # [..., C, d_v]: the corrected values
        out.append(q_read[..., c, :, :] @ state + scores[..., c, :, :] @ new)
        state = chunk_decay[..., c, :, :] * state + np.swapaxes(k_write[..., c, :, :], -1, -2) @ new
    return concatenate(out, axis=-2)[..., :length, :], state


def _solve_unit_lower(a, b):
    # (I + a) x = b for x, a strictly lower triangular [..., C, C], b [..., C, m]: forward
    # substitution, by halves (the top rows first, then the bottom rows given them), so that it
    # is matrix products and no assignment into an array (autograd differentiates it).
    size = b.shape[-2]
    if size == 1:
        return b
    h = size // 2
    top = _solve_unit_lower(a[..., :h, :h], b[..., :h, :])
    bottom = _solve_unit_lower(a[..., h:, h:], b[..., h:, :] - a[..., h:, :h] @ top)
    return concatenate([top, bottom], axis=-2)
