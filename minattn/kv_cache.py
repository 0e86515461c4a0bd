"""Self-attention with a KV cache: each new token's keys and values are computed once and
appended, so a decoder generating token by token attends to the whole past without recomputing
it (RoPE, grouped-query attention and QK-norm as the Llama block has them).

The KV cache is plain arrays, passed in and returned, never changed in place (a step's keys
and values are written into room after the arrays, which no one holding them sees:
engine/kv_room.py):
    one layer's cache  {"k": [B, H_kv, L_past, d_k], "v": [B, H_kv, L_past, d_k]}
    a model's cache    a tuple of one such dict per layer

Variants of self-attention live in their own files and register the keywords that select them
(engine/variants.py): softcap.py (a query scale and soft-capped scores), sinks.py
(params["sinks"]), head_mask.py (head_mask=), rope_scaling.py's long-context schedules
(rope_scaling=: long_context.py), families/neox.py (partial_rotary_factor=),
families/smollm3.py (a layer without RoPE).
"""
import autograd.numpy as np
import numpy
from autograd.tracer import isbox

from .engine import checks, variants
from .engine.decoder_checks import check_self_attention
from .engine.param_checks import ROPE_BASE
from .engine.kv_room import appended
from .engine.query_blocks import weights_unread
from .heads import merge_heads, split_heads
from .linear import project
from .multi_head import _project, grouped_attention
from .normalization import rms_norm
from .rope import apply_rope


def self_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, d_k=None, positions=None,
                   rope_base=ROPE_BASE, eps=1e-6, cache=None, core=None, rope=None):
    """Self-attention of x [..., L, D] over the cached keys and values and its own: returns
    (output [..., L, D], new cache {"k", "v": [..., H_kv, L_past + L, d_k]}). d_k: the head
    width (default D / H). positions (int, broadcasting to [..., L]): RoPE on q and k, never
    v, with rope_base (default 10000.0); None (the default): no RoPE, and a rope_base, a
    schedule or a partial width given without positions is refused by name (rope_base=None: a
    layer without RoPE). QK-norm where params has "q_norm" and "k_norm" ({"gamma": [d_k]}, or
    [H d_k] and [H_kv d_k] over all heads at once): q and k RMS-normalised (with eps, rms_norm's
    default) before RoPE. mask covers all L_past + L keys (for a causal model, causal_mask(L,
    L_past + L, align="bottom_right")). core(q, k, v, mask) -> (heads, weights), the attention
    of the heads, and rope(t, positions, base=), the rotation: where a variant plugs in its own
    (None: grouped_attention and apply_rope)."""
    # [..., L, D] -> [..., L, D]; the cache grows by L along its key axis.
    params, x, mask, positions, cache = check_self_attention(
        params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base, cache, rope is None, eps)
    q, k, v = project(params, x, "qkv")  # [..., L, H d_k], [..., L, H_kv d_k] (twice)
    q = split_heads(q, n_heads)  # [..., H, L, d_k]
    k, v = split_heads(k, n_kv_heads or n_heads), split_heads(v, n_kv_heads or n_heads)
    if "q_norm" in params:  # QK-norm: bounded q and k, so the scores cannot blow up
        q = _qk_norm(q, params["q_norm"]["gamma"], eps)  # [..., H, L, d_k]
        k = _qk_norm(k, params["k_norm"]["gamma"], eps)
    if positions is not None:  # RoPE: q and k rotate by their absolute positions [..., 1, L]
        q, k = ((rope or apply_rope)(t, positions, base=rope_base) for t in (q, k))
    if cache is not None:  # the past's keys and values, computed once, reused every step
        k, v = _append(cache.get("k"), k), _append(cache.get("v"), v)  # [..., L_past + L, d_k]
    heads, _ = (core or weights_unread(grouped_attention))(q, k, v, mask)  # [..., H, L, d_k]
    return _project(params, merge_heads(heads), "o"), {"k": k, "v": v}


# Its variants, each in its own file, answer the calls that select them (engine/variants.py).
self_attention = variants.dispatch(self_attention, hooks=("core", "rope"))


def _qk_norm(heads, gamma, eps):
    # [..., H, L, d_k] -> RMSNorm of each head (gamma [d_k]), or of all heads of a token at once
    # (gamma [H d_k]; the same where H = 1).
    if gamma.shape[-1] == heads.shape[-1]:
        return rms_norm(heads, gamma, eps)
    return split_heads(rms_norm(merge_heads(heads), gamma, eps), heads.shape[-3])


def _append(past, new):
    # [..., L_past, d], [..., L, d] -> [..., L_past + L, d]; past None: an empty cache ({}).
    # autograd's np.concatenate views its result as a host ndarray (no CuPy); NumPy's own
    # dispatches to the arrays' library. So autograd's only when differentiating through it;
    # else the same arrays as NumPy's concatenate, in a buffer's spare room (engine/kv_room.py).
    if type(past) is type(new) is numpy.ndarray and past.dtype == new.dtype:
        return appended(past, new)  # the common case first (a decode step's), as below
    if past is None:
        return new
    past = checks.in_dtype(past, new.dtype)  # the cache, an auxiliary argument: x's dtype
    if isbox(past) or isbox(new):
        return np.concatenate([past, new], axis=-2)
    return appended(past, new)
