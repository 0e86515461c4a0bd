"""Soft-capping (Gemma 2): squash logits smoothly into (-cap, cap) with cap · tanh(s / cap).

Near 0 it is the identity (tanh(u) ≈ u), so ordinary scores pass unchanged; a score far beyond
the cap saturates at ±cap instead of growing, so no single key (or next token) can take all the
softmax's weight however large the logits get. Gemma 2 caps the attention scores (before the
mask) and the final logits.
"""
import autograd.numpy as np

from .attention import softmax
from .multi_head import _group_heads, _group_mask, _ungroup_heads


def soft_cap(x, cap):
    """cap · tanh(x / cap), elementwise: x's shape and dtype, values in (-cap, cap)."""
    return cap * np.tanh(x / cap)


def capped_attention(q, k, v, mask=None, *, scale, cap=None):
    """Grouped attention (query head h reads kv head h // (H / H_kv)) with the scores scaled by
    `scale` and soft-capped at `cap` (None: not capped): softmax(soft_cap(q kᵀ · scale)) v.
    q [..., H, L_q, d], k, v [..., H_kv, L_k, d] -> ([..., H, L_q, d], weights)."""
    # [..., H, L_q, d], [..., H_kv, L_k, d] x 2 -> [..., H, L_q, d], [..., H, L_q, L_k]
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    q = _group_heads(q, n_kv_heads)  # [..., H_kv, G, L_q, d]
    k, v = np.expand_dims(k, -3), np.expand_dims(v, -3)  # [..., H_kv, 1, L_k, d]
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # [..., H_kv, G, L_q, L_k]
    if cap is not None:
        scores = soft_cap(scores, cap)
    weights = softmax(scores, mask=_group_mask(mask, n_heads, n_kv_heads))
    return _ungroup_heads(weights @ v), _ungroup_heads(weights)
