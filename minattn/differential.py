"""Differential attention (Ye et al. 2024, "Differential Transformer", arXiv:2410.05258;
transformers' DiffLlama): the difference of two softmax maps cancels the attention both give to
irrelevant context, as a differential amplifier cancels common-mode noise.

    head_i = (softmax(Q1 K1ᵀ / √d) − λ softmax(Q2 K2ᵀ / √d)) V        V is 2d wide
    λ = exp(λ_q1 · λ_k1) − exp(λ_q2 · λ_k2) + λ_init,   λ_init = 0.8 − 0.6 exp(−0.3 (l − 1))
    output_i = (1 − λ_init) · RMSNorm(head_i)   (per head, no learned scale), then W_o

Heads as transformers pairs them (walkthrough.md, "Differential attention"): of H query heads
of width d, head j and head j + H/2 are one differential head's Q1 and Q2; its V is kv heads
g and g + H_kv/2 side by side (g = j // (H / H_kv)), and K1, K2 are kv heads g and g + H_kv/2.

params: {"w_q": [D, H d], "w_k", "w_v": [D, H_kv d], "w_o": [H d, D]} (optional biases b_*),
"lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2": [d], and "lambda_init": [] (a constant of
the layer, lambda_init(layer_index); stored with the params so each layer carries its own).
"""
import functools
import math

import autograd.numpy as np

from .engine import checks
from .engine.decoder_checks import _check_layer_cache
from .engine.param_checks import ROPE_BASE
from .kv_cache import self_attention
from .multi_head import check_multi_head_params, grouped_attention
from .normalization import rms_norm
from .rope import check_positions


def lambda_init(layer_index):
    """λ_init = 0.8 − 0.6 exp(−0.3 · layer_index), layer_index counted from 0 (the paper's
    l − 1 for layers l = 1..L; transformers' layer_idx)."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer_index)


def differential_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, positions=None,
                           rope_base=ROPE_BASE, eps=1e-6, cache=None, **others):
    """Differential self-attention of x [..., L, D] over its cached keys and values and its own
    -> (output [..., L, D], new cache {"k", "v": [..., H_kv, L_past + L, d]}), d = D / H.
    positions: RoPE on q and k; eps: the per-head RMSNorm's (rms_norm's default, 1e-6). n_heads
    and n_kv_heads even. Other keywords a decoder block passes (d_k, rope_scaling, ...) must be
    None."""
    # [..., L, D] -> [..., L, D]: self_attention with the differential core
    params, x, mask, n_kv_heads, positions, cache = _check_differential_attention(
        params, x, mask, n_heads, n_kv_heads, positions, rope_base, eps, cache, others)
    lam = (np.exp(np.sum(params["lambda_q1"] * params["lambda_k1"]))
           - np.exp(np.sum(params["lambda_q2"] * params["lambda_k2"])) + params["lambda_init"])
    core = functools.partial(differential_heads, lam=lam, lambda_init=params["lambda_init"],
                             eps=eps)
    return self_attention(params, x, mask, n_heads=n_heads, n_kv_heads=n_kv_heads,
                          positions=positions, rope_base=rope_base, cache=cache, core=core)


def differential_heads(q, k, v, mask=None, *, lam, lambda_init, eps):
    """The differential core: q [..., H, L, d], k, v [..., H_kv, L_k, d] -> (heads
    [..., H/2, L, 2d], the weights [..., H, L, L_k]): (1 - λ_init) RMSNorm(A1 V - λ A2 V) per
    differential head, A1, A2 the softmax maps of its two query heads."""
    # [..., H, L, d], [..., H_kv, L_k, d] x 2 -> [..., H/2, L, 2d], [..., H, L, L_k]
    n_heads, half = q.shape[-3], k.shape[-3] // 2
    v2 = np.concatenate([v[..., :half, :, :], v[..., half:, :, :]], axis=-1)  # [.., H_kv/2, L, 2d]
    # Every query head reads the 2d-wide values of its pair: both halves of the heads see the same.
    heads, weights = grouped_attention(q, k, np.concatenate([v2, v2], axis=-3), mask)
    first, second = heads[..., :n_heads // 2, :, :], heads[..., n_heads // 2:, :, :]
    diff = first - lam * second  # [..., H/2, L, 2d]
    diff = rms_norm(diff, np.ones_like(diff[(0,) * (diff.ndim - 1)]), eps)
    return (1 - lambda_init) * diff, weights


def init_differential_attention(rng, d_model, n_heads, *, layer_index, n_kv_heads=None,
                                lambda_std=0.1, dtype=np.float64):
    """-> differential_attention's params: weights U(±1/sqrt(D)), λ vectors N(0, lambda_std)
    (as DiffLlama's lambda_std_dev), lambda_init(layer_index); no biases."""
    dtype = checks.check_init(rng, dtype)
    d = d_model // n_heads
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    shapes = {"q": (d_model, n_heads * d), "k": (d_model, n_kv * d), "v": (d_model, n_kv * d),
              "o": (n_heads * d, d_model)}
    params = {f"w_{p}": rng.uniform(-1, 1, size=s) / math.sqrt(s[0]) for p, s in shapes.items()}
    params.update({name: rng.normal(0, lambda_std, size=d)
                   for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")})
    params["lambda_init"] = np.array(lambda_init(layer_index))
    return {name: a.astype(dtype) for name, a in params.items()}


def _check_differential_attention(params, x, mask, n_heads, n_kv_heads, positions, rope_base, eps,
                                  cache, others):
    checks.check_unused_keywords("differential_attention", others)
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    d_model = x.shape[-1]
    checks.check_n_heads(n_heads, d_model)
    checks.check_n_kv_heads(n_kv_heads, n_heads)
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    if n_heads % 2 or n_kv % 2:
        raise ValueError(f"differential attention pairs heads: n_heads={n_heads} and n_kv_heads="
                         f"{n_kv} must both be even")
    d = d_model // n_heads
    checks.check_positive_real("eps", eps, allow_zero=True)
    checks.check_positive_real("rope_base", rope_base, allow_inf=True)  # as apply_rope's base
    if "sinks" in params:  # gpt-oss's sinks join a softmax; never silently ignored here
        raise ValueError("differential_attention does not support attention sinks "
                         "(params['sinks'])")
    params = check_multi_head_params(params, d_model, d_kv=n_kv * d, n_heads=n_heads,
                                     dtype=x.dtype)
    params = checks.check_params(params, {
        **{name: (d,) for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")},
        "lambda_init": ()}, "params", x.dtype)
    past = 0
    if cache is not None:
        cache = _check_layer_cache(cache, x.shape[:-2] + (n_kv, d), "cache")
        past = cache["k"].shape[-2] if cache else 0
    if positions is not None:  # a list is taken as an array, as everywhere (checks.as_array)
        positions = check_positions(positions, x)
        if d % 2:
            raise ValueError(f"RoPE (positions given) needs an even head width d = d_model / "
                             f"n_heads, got d={d} (d_model={d_model}, n_heads={n_heads})")
    scores = x.shape[:-2] + (n_heads, x.shape[-2], past + x.shape[-2])
    mask = checks.check_mask(mask, scores, "the per-head scores (..., H, L, L_past + L)")
    checks.check_mask_has_head_axis(mask, scores)
    return params, x, mask, n_kv, positions, cache
