"""Gated attention (Qwen3-Next's `full_attention` layers; Qiu et al. 2025, "Gated Attention for
Large Language Models"): self-attention whose output is multiplied, feature by feature, by a
sigmoid gate computed from the token itself, before the output projection,

    out = (attention(q, k, v) ⊙ sigmoid(x W_gate)) W_o

with QK-norm (each head of q and k RMS-normalised) and RoPE on the first features of each head
only (partial_rotary_factor: rope.apply_partial_rope). The gate lets a head output nothing for a
token without parking its weight on a sink (compare walkthrough.md, "Attention sinks").
"""
import functools

from .engine.hybrid_checks import _check_gated_attention
from .engine.param_checks import ROPE_BASE
from .gated_deltanet import sigmoid
from .heads import split_heads
from .kv_cache import self_attention
from .multi_head import _project, grouped_attention
from .rope import apply_partial_rope


def gated_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, d_k=None, positions=None,
                    rope_base=ROPE_BASE, rope_scaling=None, partial_rotary_factor=None, eps=1e-6,
                    cache=None, **others):
    """Gated self-attention of x [..., L, D] over its cached keys and values -> (output [..., L,
    D], new cache {"k", "v": [..., H_kv, L_past + L, d_k]}). params: "w_q", "w_gate" [D, H d_k],
    "w_k", "w_v" [D, H_kv d_k], "w_o" [H d_k, D], "q_norm", "k_norm" {"gamma": [d_k]}. RoPE
    (positions given) on the first int(d_k * partial_rotary_factor) features of each head of q
    and k (None: all of them). Other keywords a decoder block passes (query_pre_attn_scalar,
    attn_logit_softcapping) must be None."""
    # [..., L, D] -> [..., L, D]: self_attention (with QK-norm) whose heads are gated
    params, x, mask, positions, d_k, cache = _check_gated_attention(
        params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base, rope_scaling,
        partial_rotary_factor, eps, cache, others)
    gate = split_heads(sigmoid(_project(params, x, "gate")), n_heads)  # [..., H, L, d_k]
    rope = None if partial_rotary_factor is None else functools.partial(
        apply_partial_rope, partial_rotary_factor=partial_rotary_factor)  # (None: every feature)
    attention = {key: params[key] for key in params if key != "w_gate"}
    return self_attention(attention, x, mask, n_heads=n_heads, n_kv_heads=n_kv_heads, d_k=d_k,
                          positions=positions, rope_base=rope_base, rope_scaling=rope_scaling,
                          eps=eps, cache=cache, core=functools.partial(_gated, gate=gate),
                          rope=rope)


def _gated(q, k, v, mask=None, *, gate):
    # grouped attention, each head's output times its gate [..., H, L, d_k]
    heads, weights = grouped_attention(q, k, v, mask)  # [..., H, L, d_k]
    return heads * gate, weights
