"""Self-attention with a KV cache: each new token's keys and values are computed once and
appended, so a decoder generating token by token attends to the whole past without recomputing
it (RoPE, GQA, QK-norm and Gemma's scalars by keyword).

The KV cache is plain arrays, passed in and returned, never changed in place:
    one layer's cache  {"k": [B, H_kv, L_past, d_k], "v": [B, H_kv, L_past, d_k]}
    a model's cache    a tuple of one such dict per layer
"""
import autograd.numpy as np
import numpy
from autograd.tracer import isbox

from .engine import checks
from .engine.decoder_checks import _check_self_attention
from .heads import merge_heads, split_heads
from .multi_head import _project, _projections, grouped_attention
from .normalization import rms_norm
from .rope import apply_partial_rope, apply_rope
from .softcap import capped_attention


def self_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, d_k=None, positions=None,
                   rope_base=10000.0, rope_scaling=None, partial_rotary_factor=None, eps=1e-6,
                   query_pre_attn_scalar=None, attn_logit_softcapping=None, cache=None,
                   head_mask=None):
    """Self-attention of x [..., L, D] over the cached keys and values and its own: returns
    (output [..., L, D], new cache {"k", "v": [..., H_kv, L_past + L, d_k]}). d_k: the head
    width (default D / H; Qwen3 and Gemma set their own). positions (int, broadcasting to
    [..., L]): apply RoPE (rope_base, rope_scaling: minattn.rope_scaling) to q and k, never v;
    partial_rotary_factor: to the first int(d_k * factor) features of each head only
    (minattn.rope.apply_partial_rope: GPT-NeoX, Phi).
    QK-norm where params has "q_norm" and "k_norm" ({"gamma": [d_k]}): each head of q and k
    RMS-normalised (with eps) before RoPE ({"gamma": [H d_k]}, [H_kv d_k]: all heads at once,
    OLMo 2). Gemma: scores scaled by query_pre_attn_scalar^-1/2
    (not d_k^-1/2) and soft-capped at attn_logit_softcapping (minattn.softcap). mask covers all
    L_past + L keys (for a causal model, causal_mask(L, L_past + L, align="bottom_right")).
    params["sinks"] [H] (optional): one attention-sink logit per head (gpt-oss). head_mask [H]:
    each head's output times its entry before the output projection (0 ablates the head)."""
    # [..., L, D] -> [..., L, D]; the cache grows by L along its key axis.
    params, x, mask, positions, d_k, cache, query_pre_attn_scalar, attn_logit_softcapping, \
        head_mask = _check_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions,
                                          rope_base, rope_scaling, cache, query_pre_attn_scalar,
                                          attn_logit_softcapping, partial_rotary_factor,
                                          head_mask)
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    q, k, v = _projections(params, x, "qkv")  # [..., L, H d_k], [..., L, H_kv d_k] (twice)
    q = split_heads(q, n_heads)  # [..., H, L, d_k]
    k, v = split_heads(k, n_kv_heads), split_heads(v, n_kv_heads)  # [..., H_kv, L, d_k]
    if "q_norm" in params:  # QK-norm: bounded q and k, so the scores cannot blow up
        q = _qk_norm(q, params["q_norm"]["gamma"], eps)  # [..., H, L, d_k]
        k = _qk_norm(k, params["k_norm"]["gamma"], eps)
    if positions is not None:  # RoPE: q and k rotate by their absolute positions
        positions = positions[..., None, :] if positions.ndim > 1 else positions  # [..., 1, L]
        rotate = lambda t: apply_rope(t, positions, base=rope_base, scaling=rope_scaling)
        if partial_rotary_factor is not None:  # only the first int(d_k * factor) features
            rotate = lambda t: apply_partial_rope(t, positions, partial_rotary_factor,
                                                  base=rope_base, scaling=rope_scaling)
        q, k = rotate(q), rotate(k)
    if cache is not None:  # the past's keys and values, computed once, reused every step
        k = _append(cache.get("k"), k)  # [..., H_kv, L_past + L, d_k]
        v = _append(cache.get("v"), v)
    heads, _ = _attend(q, k, v, mask, query_pre_attn_scalar, attn_logit_softcapping,
                       params.get("sinks"))  # heads: [..., H, L, d_k]
    return _project(params, _merge(heads, head_mask), "o"), {"k": k, "v": v}


def _merge(heads, head_mask=None):
    # [..., H, L, d_v] -> [..., L, H d_v]; with a head_mask [H], each head's output times its
    # entry first (transformers' head_mask; 0 removes the head: an ablation). None: untouched.
    return merge_heads(heads if head_mask is None else heads * head_mask[:, None, None])


def _qk_norm(heads, gamma, eps):
    # [..., H, L, d_k] -> RMSNorm of each head (gamma [d_k]: Qwen3, Gemma 3), or of all heads of a
    # token at once (gamma [H d_k]: OLMo 2; the same where H = 1).
    if gamma.shape[-1] == heads.shape[-1]:
        return rms_norm(heads, gamma, eps)
    return split_heads(rms_norm(merge_heads(heads), gamma, eps), heads.shape[-3])


def _attend(q, k, v, mask, query_pre_attn_scalar, softcap, sinks=None):
    # Gemma's scale and cap need their own core; every other model, the shared one.
    if query_pre_attn_scalar is None and softcap is None:
        return grouped_attention(q, k, v, mask, sinks=sinks)
    scalar = q.shape[-1] if query_pre_attn_scalar is None else query_pre_attn_scalar
    return capped_attention(q, k, v, mask, scale=scalar ** -0.5, cap=softcap)


def _append(past, new):
    # [..., L_past, d], [..., L, d] -> [..., L_past + L, d]; past None: an empty cache ({}).
    # autograd's np.concatenate views its result as a host ndarray (no CuPy); NumPy's own
    # dispatches to the arrays' library. So autograd's only when differentiating through it.
    if past is None:
        return new
    past = checks.in_dtype(past, new.dtype)  # the cache, an auxiliary argument: x's dtype
    if isbox(past) or isbox(new):
        return np.concatenate([past, new], axis=-2)
    return numpy.concatenate([past, new], axis=-2)
