"""Linear attention: attention without the softmax, and the recurrence it turns into.

Drop the softmax from causal attention and what is left is linear in the keys and values:

    out_t = Σ_{s≤t} (q_t · k_s) v_s = q_t S_t,   S_t = Σ_{s≤t} k_sᵀ v_s = S_{t-1} + k_tᵀ v_t

so the whole past is folded into one state S of shape [d_k, d_v] per head, whatever the length
(Katharopoulos et al. 2020, "Transformers are RNNs"; here without their feature map and
normalizer, as DeltaNet starts from). The same numbers come three ways: the quadratic form
(q kᵀ masked causally) v, the loop over time below, and the chunked form that real kernels run
(walkthrough.md, "Attention and recurrence").
"""
import autograd.numpy as np

from .engine.devices import concatenate
from .engine.dtypes import float16_in_float32
from .engine.recurrence_checks import _check_linear_attention
from .engine.threads import one_blas_thread


@float16_in_float32("q", "k", "v")
@one_blas_thread()
def linear_attention(q, k, v, *, chunk_size=None):
    """Causal linear attention, out_t = Σ_{s≤t} (q_t · k_s) v_s: q, k [..., L, d_k], v [..., L,
    d_v] -> [..., L, d_v]. chunk_size=None: the recurrent form (a state [..., d_k, d_v] updated
    token by token); an int: the chunked form (chunk_size tokens at a time). Both equal
    (q kᵀ masked causally) v."""
    # [..., L, d_k], [..., L, d_k], [..., L, d_v] -> [..., L, d_v]
    q, k, v, chunk_size = _check_linear_attention(q, k, v, chunk_size)
    if chunk_size is None:
        return _recurrent(q, k, v)
    return _chunked(q, k, v, chunk_size)


def _recurrent(q, k, v):
    state = np.swapaxes(k[..., :0, :], -1, -2) @ v[..., :0, :]  # zeros [..., d_k, d_v]
    out = []
    for t in range(q.shape[-2]):
        state = state + k[..., t, :, None] * v[..., t, None, :]  # S_t = S_{t-1} + k_tᵀ v_t
        out.append(q[..., t, None, :] @ state)  # q_t S_t [..., 1, d_v]
    return concatenate(out, axis=-2) if out else v  # [..., L, d_v] (v itself when L = 0)


def _chunked(q, k, v, chunk_size):
    state = np.swapaxes(k[..., :0, :], -1, -2) @ v[..., :0, :]  # zeros [..., d_k, d_v]
    out = []
    for start in range(0, q.shape[-2], chunk_size):
        span = slice(start, start + chunk_size)
        q_c, k_c, v_c = q[..., span, :], k[..., span, :], v[..., span, :]  # [..., C, d]
        scores = np.tril(q_c @ np.swapaxes(k_c, -1, -2))  # [..., C, C]: within the chunk
        out.append(q_c @ state + scores @ v_c)  # earlier chunks through the state, then this one
        state = state + np.swapaxes(k_c, -1, -2) @ v_c  # the whole chunk written at once
    return concatenate(out, axis=-2) if out else v  # [..., L, d_v]
