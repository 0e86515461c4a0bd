"""Gated attention (Qwen3-Next's `full_attention` layers; Qiu et al. 2025, "Gated Attention for
Large Language Models"): self-attention whose output is multiplied, feature by feature, by a
sigmoid gate computed from the token itself, before the output projection,

    out = (attention(q, k, v) ⊙ sigmoid(x W_gate)) W_o

with QK-norm (each head of q and k RMS-normalised) and RoPE on the first features of each head
only (partial_rotary_factor: rope.apply_partial_rope). The gate lets a head output nothing for a
token without parking its weight on a sink (compare walkthrough.md, "Attention sinks").
"""
import autograd.numpy as np

from .engine.hybrid_checks import _check_gated_attention
from .gated_deltanet import sigmoid
from .heads import merge_heads, split_heads
from .kv_cache import _append
from .multi_head import _project, grouped_attention
from .normalization import rms_norm
from .rope import apply_partial_rope


def gated_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, d_k=None, positions=None,
                    rope_base=10000.0, rope_scaling=None, partial_rotary_factor=None, eps=1e-6,
                    cache=None, **others):
    """Gated self-attention of x [..., L, D] over its cached keys and values -> (output [..., L,
    D], new cache {"k", "v": [..., H_kv, L_past + L, d_k]}). params: "w_q", "w_gate" [D, H d_k],
    "w_k", "w_v" [D, H_kv d_k], "w_o" [H d_k, D], "q_norm", "k_norm" {"gamma": [d_k]}. RoPE
    (positions given) on the first int(d_k * partial_rotary_factor) features of each head of q
    and k (None: all of them). Other keywords a decoder block passes (query_pre_attn_scalar,
    attn_logit_softcapping) must be None."""
    # [..., L, D] -> [..., L, D]
    params, x, mask, positions, d_k, cache = _check_gated_attention(
        params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base, rope_scaling,
        partial_rotary_factor, eps, cache, others)
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    q = rms_norm(split_heads(_project(params, x, "q"), n_heads), params["q_norm"]["gamma"], eps)
    k = rms_norm(split_heads(_project(params, x, "k"), n_kv_heads), params["k_norm"]["gamma"], eps)
    v = split_heads(_project(params, x, "v"), n_kv_heads)  # [..., H_kv, L, d_k]
    if positions is not None:
        positions = positions[..., None, :] if positions.ndim > 1 else positions  # [..., 1, L]
        factor = 1.0 if partial_rotary_factor is None else partial_rotary_factor
        rotate = lambda t: apply_partial_rope(t, positions, factor, base=rope_base,  # noqa: E731
                                              scaling=rope_scaling)
        q, k = rotate(q), rotate(k)  # [..., H, L, d_k], [..., H_kv, L, d_k]
    if cache is not None:
        k, v = _append(cache.get("k"), k), _append(cache.get("v"), v)  # [..., H_kv, L_past + L, d_k]
    heads, _ = grouped_attention(q, k, v, mask)  # [..., H, L, d_k]
    gate = sigmoid(_project(params, x, "gate"))  # [..., L, H d_k]
    return _project(params, merge_heads(heads) * gate, "o"), {"k": k, "v": v}
