"""Soft-capping (Gemma 2): squash logits smoothly into (-cap, cap) with cap · tanh(s / cap).

Near 0 it is the identity (tanh(u) ≈ u), so ordinary scores pass unchanged; a score far beyond
the cap saturates at ±cap instead of growing, so no single key (or next token) can take all the
softmax's weight however large the logits get. Gemma 2 caps the attention scores (before the
mask) and the final logits.

scaled_self_attention is self-attention with this core (and Gemma's query scale): the variant of
minattn.kv_cache.self_attention that its keywords query_pre_attn_scalar and
attn_logit_softcapping select (engine/variants.py).
"""
import functools

import autograd.numpy as np

from .attention import softmax
from .engine.decoder_checks import check_scaled_self_attention
from .engine.variants import implements, show
from .kv_cache import self_attention
from .language_model import causal_lm
from .multi_head import _group_heads, _group_mask, _ungroup_heads


def soft_cap(x, cap):
    """cap · tanh(x / cap), elementwise: x's shape and dtype, values in (-cap, cap)."""
    return cap * np.tanh(x / cap)


def capped_attention(q, k, v, mask=None, *, scale=None, cap=None):
    """Grouped attention (query head h reads kv head h // (H / H_kv)) with the scores scaled by
    `scale` (None: d^-1/2) and soft-capped at `cap` (None: not capped): softmax(soft_cap(q kᵀ · scale)) v.
    q [..., H, L_q, d], k, v [..., H_kv, L_k, d] -> ([..., H, L_q, d], weights)."""
    # [..., H, L_q, d], [..., H_kv, L_k, d] x 2 -> [..., H, L_q, d], [..., H, L_q, L_k]
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    q = _group_heads(q, n_kv_heads)  # [..., H_kv, G, L_q, d]
    k, v = np.expand_dims(k, -3), np.expand_dims(v, -3)  # [..., H_kv, 1, L_k, d]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q @ np.swapaxes(k, -1, -2)) * scale  # [..., H_kv, G, L_q, L_k]
    if cap is not None:
        scores = soft_cap(scores, cap)
    weights = softmax(scores, mask=_group_mask(mask, n_heads, n_kv_heads))
    return _ungroup_heads(weights @ v), _ungroup_heads(weights)


@implements(self_attention, "query_pre_attn_scalar", "attn_logit_softcapping", priority=50)
def scaled_self_attention(params, x, mask=None, *, query_pre_attn_scalar=None,
                          attn_logit_softcapping=None, **config):
    """self_attention with the scores scaled by query_pre_attn_scalar^-1/2 (default d_k^-1/2)
    and soft-capped at attn_logit_softcapping (None: not capped): Gemma 2 and 3's attention
    (query_pre_attn_scalar, attn_logit_softcapping as in their configs). config: as
    self_attention's."""
    # [..., L, D] -> [..., L, D], the new cache
    scalar, cap = check_scaled_self_attention(params, x, query_pre_attn_scalar,
                                              attn_logit_softcapping)
    core = functools.partial(capped_attention, scale=None if scalar is None else scalar ** -0.5,
                             cap=cap)  # scale None: d_k^-1/2
    return self_attention(params, x, mask, core=core, **config)


# causal_lm passes these on to its blocks' self-attention (**block_config)
show(causal_lm, query_pre_attn_scalar=None, attn_logit_softcapping=None)
