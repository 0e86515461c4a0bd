"""A correct answer to exercise 13 (section 15): the online softmax over blocks of keys."""
import numpy as np


def blockwise_attention(q, k, v, *, causal=False, key_mask=None, scale=None, block_size=128):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    l_q, l_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = np.full(lead + (l_q, 1), -np.inf, dtype=q.dtype)
    total = np.zeros(lead + (l_q, 1), dtype=q.dtype)
    acc = np.zeros(lead + (l_q, v.shape[-1]), dtype=q.dtype)
    for start in range(0, l_k, block_size):
        stop = min(start + block_size, l_k)
        s = q @ np.swapaxes(k[..., start:stop, :], -1, -2) * scale  # [..., L_q, block]
        keep = np.ones(s.shape, bool)
        if causal:
            keep &= np.arange(l_q)[:, None] >= np.arange(start, stop)[None, :]
        if key_mask is not None:
            keep &= key_mask[..., None, start:stop]
        s = np.where(keep, s, -np.inf)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        shift = np.where(m_new == -np.inf, 0, m_new)
        c = np.exp(np.where(m == -np.inf, -np.inf, m - shift))
        e = np.exp(s - shift)
        total = c * total + e.sum(axis=-1, keepdims=True)
        acc = c * acc + e @ v[..., start:stop, :]
        m = m_new
    return acc / np.where(total == 0, 1, total)
