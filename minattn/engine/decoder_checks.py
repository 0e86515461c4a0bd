"""The argument checks of the decoder side, beside checks.py: self_attention and its KV cache
(kv_cache.py), decoder_block and decoder (transformer_decoder.py), causal_lm
(language_model.py) and generate (generation.py). Each concept function's first line calls
its _check_<name> here; the keyword vocabularies (NORMS, GATED, POSITIONS) are defined here,
where they are checked.

A block's sublayers are checked with their own param and position checks (param_checks.py,
which the sublayers' modules import too), so that a block's params are checked exactly as each
sublayer checks its own.
"""
import difflib
import functools
import inspect
import math
import numbers
import types
import weakref

import autograd.numpy as np
import numpy

from . import checks
from .param_checks import (ACTIVATIONS, PROJECTIONS, as_int_array, check_feed_forward_params,
                           n_kv_heads_hint,
                           check_gated_feed_forward_params, check_multi_head_params,
                           check_partial_rotary_factor, check_positions, check_rope_scaling,
                           rope_base_given, ROPE_BASE)

NORMS = ("layer_norm", "rms_norm")
# The gated feed-forwards (transformer_decoder.GATED maps each to its function); their params:
# w_gate, w_up, w_down.
GATED = ("swiglu", "geglu_tanh")
DECODER_ACTIVATIONS = ACTIVATIONS + GATED
POSITIONS = ("learned", "rope")


def check_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base, cache,
                         whole_heads=True, eps=1e-6):
    # self_attention's: -> params, x, mask, positions ([..., 1, L] to broadcast over the heads),
    # cache. whole_heads=False: a variant rotates part of each head, and checks that part. eps
    # (QK-norm's) is checked whether or not params has a QK-norm.
    fast = _common_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions,
                                  rope_base, cache, whole_heads, eps)
    if fast is not None:
        return fast
    checks.check_positive_real("eps", eps, allow_zero=True)
    params, x, mask, positions, _, cache = _check_self_attention(
        params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base, None, cache,
        whole_heads=whole_heads)
    if positions is not None and positions.ndim > 1:
        positions = positions[..., None, :]  # [..., L] -> [..., 1, L]
    return params, x, mask, positions, cache


def _common_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base,
                           cache, whole_heads, eps):
    # The common case first (every layer of a decode step, or of a prompt, of a model with RoPE
    # and no mask given: a plain dict of the four NumPy weights in x's dtype, no bias, sinks or
    # QK-norm, ints for the heads, floats for eps and rope_base, int positions, a NumPy cache of
    # the expected shape or none): -> what check_self_attention returns for it, without its
    # sequence of calls; None for any other call, which the full checks take
    # (tests/test_check_fast_paths.py: the same answers).
    if not (mask is None and type(params) is dict and type(x) is numpy.ndarray and
            x.dtype.kind == "f" and x.ndim >= 2 and type(n_heads) is int and n_heads > 0 and
            type(eps) is float and 0 <= eps < math.inf and type(rope_base) is float and
            0 < rope_base < math.inf and type(positions) is numpy.ndarray and
            positions.dtype.kind in "iu" and whole_heads is True):
        return None
    d_model = x.shape[-1]
    if d_k is None:
        if d_model % n_heads:
            return None
        d_k = d_model // n_heads
    elif type(d_k) is not int or d_k < 1:
        return None
    n_kv = n_heads if n_kv_heads is None else n_kv_heads
    if type(n_kv) is not int or n_kv < 1 or n_heads % n_kv or d_k % 2 or \
            not (params.keys() == _ATTENTION_WEIGHTS or params.keys() == _WITH_ADAPTERS) or \
            not (positions.shape == x.shape[-2:-1] or  # [L] (a model's): no loop to broadcast
                 checks.broadcasts_to(positions.shape, x.shape[:-1])):
        return None  # (any other key, a bias, sinks or QK-norm among them: the full checks;
        # LoRA's adapters, params["lora"], are read by minattn.lora's variant of project)
    for key, shape in (("w_q", (d_model, n_heads * d_k)), ("w_k", (d_model, n_kv * d_k)),
                       ("w_v", (d_model, n_kv * d_k)), ("w_o", (n_heads * d_k, d_model))):
        w = params[key]
        if type(w) is not numpy.ndarray or w.dtype != x.dtype or w.shape != shape:
            return None
    if cache is not None and not (type(cache) is dict and not cache):
        k, v = (cache.get("k"), cache.get("v")) if type(cache) is dict else (None, None)
        if not (type(k) is numpy.ndarray and type(v) is numpy.ndarray and k.shape == v.shape and
                k.shape[:-2] == x.shape[:-2] + (n_kv,) and k.shape[-1] == d_k):
            return None
    if positions.ndim > 1:
        positions = positions[..., None, :]  # [..., L] -> [..., 1, L]
    return dict(params), x, None, positions, cache


_ATTENTION_WEIGHTS = frozenset(("w_q", "w_k", "w_v", "w_o"))
_WITH_ADAPTERS = _ATTENTION_WEIGHTS | {"lora"}


def _check_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base,
                          rope_scaling, cache, partial_rotary_factor=None, whole_heads=True):
    # (Gemma's query_pre_attn_scalar and soft-cap: check_scaled_self_attention; head_mask:
    # minattn/head_mask.py, each checked by the variant that reads it)
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    d_model = x.shape[-1]
    d_k = check_head_width(d_k, n_heads, d_model)
    checks.check_n_kv_heads(n_kv_heads, n_heads)
    n_kv = n_kv_heads or n_heads
    with n_kv_heads_hint(params, d_k, n_heads, n_kv_heads):
        params = check_attention_params(params, d_model, n_heads, n_kv, d_k, dtype=x.dtype)
    past = 0
    if cache is not None:  # {}: an empty cache, to be filled
        cache = _check_layer_cache(cache, x.shape[:-2] + (n_kv, d_k), "cache")
        past = cache["k"].shape[-2] if cache else 0
    _check_rope_keywords(positions, rope_base, rope_scaling, partial_rotary_factor, d_k)
    if positions is not None:  # RoPE
        positions = check_positions(positions, x)
        if d_k % 2 and partial_rotary_factor is None and whole_heads:
            raise ValueError(f"RoPE (positions given) needs an even head width d_k, got "
                             f"d_k={d_k} (d_model={d_model}, n_heads={n_heads})")
    scores = x.shape[:-2] + (n_heads, x.shape[-2], past + x.shape[-2])
    mask = checks.check_mask(mask, scores, "the per-head scores (..., H, L, L_past + L)")
    checks.check_mask_has_head_axis(mask, scores)
    return params, x, mask, positions, d_k, cache


def _check_rope_keywords(positions, rope_base, rope_scaling, partial_rotary_factor, d_k):
    # RoPE's keywords are checked whether or not positions are given (a wrong value is wrong on
    # every path); a schedule or a partial width without positions would rotate nothing, so it
    # is refused by name rather than left without effect, as is a rope_base given (not left at
    # its default, ROPE_BASE) without positions. rope_base None: a layer without RoPE
    # (families/smollm3.py's variant takes it).
    if rope_base is not None:
        checks.check_positive_real("rope_base", rope_base, allow_inf=True)  # as apply_rope's
    check_rope_scaling(rope_scaling)
    if partial_rotary_factor is not None:  # apply_partial_rope's check, on a head
        check_partial_rotary_factor(partial_rotary_factor, d_k)
    unused = [f"{name}={value!r}" for name, value in (("rope_scaling", rope_scaling),
              ("partial_rotary_factor", partial_rotary_factor)) if value is not None]
    if rope_base_given(rope_base):  # a base chosen (the default is ROPE_BASE): RoPE was meant
        unused.insert(0, f"rope_base={rope_base!r}")
    if positions is None and unused:
        raise ValueError(f"{' and '.join(unused)} set RoPE, which rotates q and k only where "
                         "positions are given: pass positions, or leave them None")


def check_scaled_causal_lm(params, embedding_scale, final_logit_softcapping, unembed=None):
    # -> (embedding_scale, final_logit_softcapping) in the embedding's dtype; causal_lm checks
    # the rest (a params without an embedding: refused there). The cap applies to the logits,
    # which an unembed= hook (a loss fused with the unembedding) replaces: refused together.
    if final_logit_softcapping is not None and unembed is not None:
        raise ValueError("final_logit_softcapping caps the logits, which unembed= replaces "
                         "(minattn.training.losses.fusable: such a model takes the unfused loss): "
                         "not both")
    embedding = params.get("token_embedding") if isinstance(params, checks.DICT_TYPES) else None
    dtype = checks.as_float_array("params['token_embedding']", embedding).dtype \
        if embedding is not None else None
    if embedding_scale is not None:
        embedding_scale = checks.check_positive_real("embedding_scale", embedding_scale,
                                                     allow_zero=True, dtype=dtype)
    if final_logit_softcapping is not None:
        final_logit_softcapping = checks.check_positive_real(
            "final_logit_softcapping", final_logit_softcapping, dtype=dtype)
    return embedding_scale, final_logit_softcapping


def check_scaled_rope_attention(params, x, mask, rope_scaling, whole_heads, config):
    # self_attention's checks, with its RoPE schedule (whole_heads: rotating every feature)
    _check_self_attention(params, x, mask, config.get("n_heads"), config.get("n_kv_heads"),
                          config.get("d_k"), config.get("positions"),
                          config.get("rope_base", ROPE_BASE), rope_scaling, config.get("cache"),
                          whole_heads=whole_heads)


def check_partial_rope_attention(params, x, mask, partial_rotary_factor, config):
    # self_attention's checks, with RoPE on int(d_k * partial_rotary_factor) features of a head
    _check_self_attention(params, x, mask, config.get("n_heads"), config.get("n_kv_heads"),
                          config.get("d_k"), config.get("positions"),
                          config.get("rope_base", ROPE_BASE), config.get("rope_scaling"),
                          config.get("cache"), partial_rotary_factor=partial_rotary_factor)


def check_sinks_alone(config):
    # Attention sinks and Gemma's scaled, soft-capped core are two cores: not both at once.
    if config.get("query_pre_attn_scalar") is not None or \
            config.get("attn_logit_softcapping") is not None:
        raise ValueError("attention sinks (params['sinks']) with query_pre_attn_scalar or "
                         "attn_logit_softcapping are not supported")


def check_scaled_self_attention(params, x, query_pre_attn_scalar, softcap):
    # -> (query_pre_attn_scalar, softcap) in x's dtype; self_attention checks the rest.
    # The scores are scaled by query_pre_attn_scalar^-1/2 (inf: by 0, uniform weights, as
    # transformers) and capped at cap * tanh(s / cap), undefined at cap = 0.
    dtype = checks.as_float_array("x", x).dtype
    if query_pre_attn_scalar is not None:
        query_pre_attn_scalar = checks.check_positive_real(
            "query_pre_attn_scalar", query_pre_attn_scalar, dtype=dtype, allow_inf=True)
    if softcap is not None:
        softcap = checks.check_positive_real("attn_logit_softcapping", softcap, dtype=dtype)
    if isinstance(params, checks.DICT_TYPES) and "sinks" in params:
        raise ValueError("attention sinks (params['sinks']) with query_pre_attn_scalar or "
                         "attn_logit_softcapping are not supported")
    return query_pre_attn_scalar, softcap


def check_head_mask(head_mask, shape, dtype, name="head_mask"):
    """None, or a finite float array of `shape` ((n_layers, n_heads) for a model, (n_heads,) for
    one attention sublayer), taken in dtype (the inputs')."""
    if head_mask is None:
        return None
    head_mask = checks.check_shape(name, head_mask, shape, dtype)
    if not bool(np.all(np.isfinite(checks.getval(head_mask)))):
        raise ValueError(f"{name} must be finite, got a NaN or an infinity")
    return head_mask


def check_head_width(d_k, n_heads, d_model):
    """-> d_k: d_model / n_heads when None (which must divide), else a positive int."""
    if d_k is None:
        checks.check_n_heads(n_heads, d_model)
        return d_model // n_heads
    checks.check_size("n_heads", n_heads)
    return checks.check_size("d_k", d_k)


def check_attention_params(params, d_model, n_heads, n_kv_heads, d_k, where="params",
                           dtype=None):
    """{"w_q": [D, H d_k], "w_k", "w_v": [D, H_kv d_k], "w_o": [H d_k, D]} with optional biases
    b_* (each on its own: Qwen2 has b_q, b_k, b_v but no b_o) and optional QK-norm {"q_norm",
    "k_norm": {"gamma": [d_k]}} (each head), or {"gamma": [H d_k]} and [H_kv d_k] (all heads
    at once)."""
    if type(params) is not dict:  # (a plain dict: nothing to refuse)
        checks.check_params(params, {}, where)
    optional = tuple(key for key in _OPTIONAL_ATTENTION_KEYS if key in params)
    params = checks.check_params(
        params, _attention_shapes(d_model, n_heads, n_kv_heads, d_k, optional), where, dtype)
    if ("q_norm" in params) != ("k_norm" in params):
        raise ValueError(f"{where} has only one of 'q_norm' and 'k_norm' (QK-norm needs both)")
    for key, n in (("q_norm", n_heads), ("k_norm", n_kv_heads)):
        if key in params:  # one gamma per head width, or one over all the heads (OLMo 2)
            gamma = params[key].get("gamma") if isinstance(params[key], checks.DICT_TYPES) else None
            width = n * d_k if numpy.shape(gamma) == (n * d_k,) else d_k
            params[key] = checks.check_params(params[key], {"gamma": (width,)},
                                              f"{where}[{key!r}]", dtype)
    return params


_OPTIONAL_ATTENTION_KEYS = tuple(f"b_{p}" for p in PROJECTIONS) + ("sinks",)


@functools.lru_cache(maxsize=64)  # the same few shapes, asked for by every layer at every step
def _attention_shapes(d_model, n_heads, n_kv_heads, d_k, optional):
    # -> {key: shape} of an attention sublayer's weights, and of the optional keys it has
    d_out = {"q": n_heads * d_k, "k": n_kv_heads * d_k, "v": n_kv_heads * d_k, "o": d_model}
    d_in = {"q": d_model, "k": d_model, "v": d_model, "o": n_heads * d_k}
    shapes = {f"w_{p}": (d_in[p], d_out[p]) for p in PROJECTIONS}
    shapes.update({f"b_{p}": (d_out[p],) for p in PROJECTIONS})
    shapes["sinks"] = (n_heads,)
    return {key: shape for key, shape in shapes.items() if key.startswith("w_") or key in optional}


def _check_layer_cache(cache, expected, where):
    # expected: (..., H_kv, d_k); a cache from another model (other batch, heads or width) fails.
    if isinstance(cache, checks.DICT_TYPES) and not cache:
        return cache  # {}: empty, to be filled
    k, v = (cache.get("k"), cache.get("v")) if type(cache) is dict else (None, None)
    if type(k) is numpy.ndarray and type(v) is numpy.ndarray and k.shape == v.shape and \
            k.shape[:-2] == expected[:-1] and k.shape[-1] == expected[-1]:
        return cache  # the common case first: two NumPy arrays of the expected shape
    if not isinstance(cache, checks.DICT_TYPES) or "k" not in cache or "v" not in cache:
        got = (f"a dict with keys {list(cache)}" if isinstance(cache, checks.DICT_TYPES)
               else type(cache).__name__)
        raise TypeError(f"{where} must be a dict {{'k': ..., 'v': ...}} of arrays "
                        f"[..., H_kv, L_past, d_k], got {got}")
    cache = {**cache, **{key: checks.as_array(f"{where}[{key!r}]", cache[key]) for key in "kv"}}
    for key in ("k", "v"):
        a = cache[key]
        if len(a.shape) != len(expected) + 1 or \
                tuple(a.shape[:-2]) + (a.shape[-1],) != tuple(expected[:-1]) + (expected[-1],) \
                or a.shape[-3] != expected[-2]:
            shape = tuple(a.shape)
            want = tuple(expected[:-1]) + ("L_past", expected[-1])
            raise ValueError(f"{where}[{key!r}] has shape {shape}, expected {want}: "
                             "a cache from another model or batch?")
    if cache["k"].shape != cache["v"].shape:
        raise ValueError(f"{where}['k'] and {where}['v'] differ in shape: "
                         f"{tuple(cache['k'].shape)} vs {tuple(cache['v'].shape)}")
    return cache


def _check_config(n_heads, n_kv_heads, norm, activation):
    checks.check_choice("norm", norm, NORMS)
    checks.check_choice("activation", activation, DECODER_ACTIVATIONS)
    checks.check_n_kv_heads(n_kv_heads, n_heads)


_COMMON_BLOCK_KEYS = frozenset(("self_attention", "self_attention_norm", "feed_forward",
                                "feed_forward_norm"))
_GATED_KEYS = frozenset(("w_gate", "w_up", "w_down"))


def _common_decoder_block(params, x, memory, memory_mask, n_heads, n_kv_heads, norm, activation,
                          eps, parallel):
    # The common case first (every layer of a Llama-style model: a plain dict of the four
    # sublayers, a gated feed-forward of three NumPy weights in x's dtype, norms of NumPy
    # gammas, no memory, ints for the heads, a float or None for eps, parallel=False): -> what
    # _check_decoder_block returns for it, without its sequence of calls; None for any other
    # call, which the full checks take (tests/test_check_fast_paths.py: the same answers).
    if not (memory is None and memory_mask is None and parallel is False and
            type(params) is dict and params.keys() == _COMMON_BLOCK_KEYS and
            type(x) is numpy.ndarray and x.dtype.kind == "f" and x.ndim >= 2 and
            type(n_heads) is int and n_heads > 0 and activation in GATED and
            norm in NORMS and type(norm) is str and
            (eps is None or type(eps) is float and 0 <= eps < math.inf) and
            (n_kv_heads is None or type(n_kv_heads) is int and n_kv_heads > 0 and
             not n_heads % n_kv_heads)):
        return None
    d_model, feed = x.shape[-1], params["feed_forward"]
    if type(feed) is not dict or feed.keys() != _GATED_KEYS:
        return None
    gate = feed["w_gate"]
    d_ff = gate.shape[1] if type(gate) is numpy.ndarray and gate.ndim == 2 else -1
    for key, shape in (("w_gate", (d_model, d_ff)), ("w_up", (d_model, d_ff)),
                       ("w_down", (d_ff, d_model))):
        w = feed[key]
        if type(w) is not numpy.ndarray or w.dtype != x.dtype or w.shape != shape:
            return None
    checked = {"feed_forward": dict(feed)}
    for key in ("self_attention_norm", "feed_forward_norm"):
        p = params[key]
        if type(p) is not dict or ("beta" in p) != (norm == "layer_norm"):
            return None
        for name in ("gamma", "beta") if norm == "layer_norm" else ("gamma",):
            value = p.get(name)
            if type(value) is not numpy.ndarray or value.dtype.kind != "f" or \
                    value.shape != (d_model,):
                return None
        checked[key] = dict(p)
    return {**params, **checked}, x, None


def _check_decoder_block(params, x, memory, memory_mask, n_heads, n_kv_heads, norm, activation,
                         eps, parallel=False, norm_first=True):
    # The self-attention sublayer checks its own params, cache and head width.
    fast = _common_decoder_block(params, x, memory, memory_mask, n_heads, n_kv_heads, norm,
                                 activation, eps, parallel)
    if fast is not None:
        return fast
    where = "params"  # a decoder's layers are each a decoder_block's params
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    d_model = x.shape[-1]
    checks.check_size("n_heads", n_heads)
    _check_config(n_heads, n_kv_heads, norm, activation)
    if eps is not None:  # None: each norm its own default
        checks.check_positive_real("eps", eps, allow_zero=True)
    params = dict(params) if type(params) is dict else checks.check_params(params, {}, where)
    if memory is not None:
        memory = checks.as_float_array("memory", memory)
        checks.check_min_ndim("memory", memory, 2, "(..., L_m, d_model)")
        batch = checks.broadcast_or_raise([("x", x.shape[:-2]), ("memory", memory.shape[:-2])],
                                          "the batch dims of x and memory")
        scores = batch + (n_heads, x.shape[-2], memory.shape[-2])
        memory_mask = checks.check_mask(memory_mask, scores, "the cross-attention scores "
                                        "(..., H, L, L_m)", "memory_mask")
        checks.check_mask_has_head_axis(memory_mask, scores, "memory_mask")
    elif memory_mask is not None:
        raise ValueError("memory_mask is given without memory (it masks the cross-attention to "
                         "the memory): pass memory, or leave memory_mask None")
    checks.check_no_renamed_block_keys(params, where, known=BLOCK_KEYS)
    _check_parallel(parallel, norm_first, memory, params)
    needed = ["self_attention", "self_attention_norm", "feed_forward", "feed_forward_norm"]
    needed += ["cross_attention", "cross_attention_norm"] if memory is not None else []
    # OLMo 2 normalises after its pre-norm sublayers only (x + post_norm(sublayer(x))): a norm
    # before may be left out where the one after is there.
    needed = [k for k in needed
              if not (norm_first and k.endswith("_norm") and f"post_{k}" in params)]
    for key in needed:
        if key not in params:
            hint = f"; {where} has {f'post_{key}'!r}, which only a pre-norm block reads: pass " \
                "norm_first=True" if not norm_first and f"post_{key}" in params else ""
            raise ValueError(f"{where} is missing key {key!r} (expected keys: "
                             f"{', '.join(map(repr, needed))}){hint}")
    _check_block_keys(params, norm_first, memory)
    checked = {}
    if memory is not None:  # checked before computing; multi_head_attention takes them in the
        check_multi_head_params(params["cross_attention"], d_model,  # dtype of x and memory
                                f"{where}['cross_attention']", n_heads=n_heads)
    check_ff = (check_gated_feed_forward_params if activation in GATED
                else check_feed_forward_params)
    checked["feed_forward"] = check_ff(params["feed_forward"], d_model,
                                       f"{where}['feed_forward']", x.dtype)
    norm_shapes = {"gamma": (d_model,), **({"beta": (d_model,)} if norm == "layer_norm" else {})}
    for key in ("self_attention_norm", "cross_attention_norm", "feed_forward_norm",
                "post_self_attention_norm", "post_feed_forward_norm"):
        if key in needed or key.startswith("post") and key in params:
            checked[key] = checks.check_params(params[key], norm_shapes, f"{where}[{key!r}]")
            if norm == "rms_norm" and "beta" in params[key]:  # a LayerNorm's: never ignored
                raise ValueError(f"norm='rms_norm' contradicts {where}[{key!r}], which has "
                                 "'beta' (a LayerNorm's shift): pass norm='layer_norm'")
    return {**params, **checked}, x, memory


# Every key a block's params may hold; each is read by the blocks that take it (the post_*
# norms by a pre-norm block: Gemma's sandwich, OLMo 2's norms after the sublayers only).
BLOCK_KEYS = tuple(f"{prefix}{sublayer}{suffix}" for sublayer in
                   ("self_attention", "cross_attention", "feed_forward")
                   for prefix, suffix in (("", ""), ("", "_norm"), ("post_", "_norm")))


def _check_block_keys(params, norm_first, memory):
    # A key this call's block would not read is refused by name, with the keyword that leaves it
    # unused: weights silently skipped compute another model. (A key no block reads: refused by
    # checks.check_no_renamed_block_keys.)
    after = [key for key in params if key.startswith("post_")]
    if after and not norm_first:
        raise ValueError(f"params has {after} (norms after the sublayers, x + norm(sublayer(x)): "
                         "Gemma 2 and 3's sandwich norms, OLMo 2's), which the post-norm block "
                         "(norm_first=False: x = norm(x + sublayer(x))) does not use: pass "
                         "norm_first=True")
    cross = [key for key in params if "cross_attention" in key]
    if cross and memory is None:
        raise ValueError(f"params has {cross} (the cross-attention sublayer), which runs only "
                         "with memory (the encoder's output): pass memory")


def _check_decoder(params, cache, mask=None, config=(), takers=()):
    # takers: the functions config's keywords go to (transformer_decoder.takers)
    check_keywords("decoder", config, takers)
    if not isinstance(params, checks.DICT_TYPES) or not isinstance(
            params.get("layers"), checks.LIST_TYPES):
        raise ValueError("params must be a dict with key 'layers' holding a list of block params")
    layers = [params["layers"][i] for i in range(len(params["layers"]))]
    for name, value in [("mask", mask), *dict(config).items()]:
        if isinstance(value, list) and len(value) != len(layers):
            raise ValueError(f"{name} is a list of {len(value)} (one per layer), but params has "
                             f"{len(layers)} layers")
    if cache is not None and (not isinstance(cache, checks.LIST_TYPES)
                              or len(cache) != len(layers)):
        raise ValueError(f"cache must be a tuple with one {{'k', 'v'}} dict per layer "
                         f"({len(layers)} layers), got "
                         f"{len(cache) if isinstance(cache, checks.LIST_TYPES) else type(cache).__name__}")
    return layers


def check_keywords(where, config, takers):
    """Refuse by name, at where's entry, each keyword of config that none of takers (the
    functions it passes them on to: the block, its attention) names: a TypeError as Python's for
    an unknown keyword, raised before anything is computed, where the call was made, not from a
    sublayer deep inside. A taker names the keywords of the signature it shows: a dispatched
    function's lists its variants' (engine/variants.py), so a variant's keyword is taken where
    its file is imported; its **keywords go on to the takers beside it. A plug (a function with
    no signature shown: attention=) that takes **keywords may take any, and config is not
    checked."""
    if len(takers) == 1:  # the common case first (a block's own attention): no list made,
        shown = getattr(takers[0], "__signature__", None)  # its keywords as _keywords keeps them
        kept = _SHOWN.get(id(shown))
        if kept is not None and kept[0] is shown and kept[1].issuperset(config):
            return
    names = [_keywords(taker) for taker in takers]
    if None in names:
        return
    taken = names[0] if len(names) == 1 else frozenset().union(*names)
    unknown = [key for key in config if key not in taken]
    if unknown:
        close = {k: difflib.get_close_matches(k, taken, n=1) for k in unknown}
        hints = "; ".join(f"{k!r}: did you mean {close[k][0]!r}?" for k in unknown if close[k])
        raise TypeError(f"{where}() got unknown keyword argument{'s' * (len(unknown) > 1)} "
                        f"{', '.join(map(repr, unknown))}, which no block or attention takes"
                        + (f" ({hints})" if hints else "") + f"; they take: "
                        f"{', '.join(sorted(taken))}")


# The keyword-only parameters of each signature a dispatched function has shown (id -> (the
# signature, its keywords): a new one is shown as a variant registers), and of each plain function
# (a plug); inspect.signature takes 30 us, and a decode step checks every block.
_SHOWN = {}
_PLUGS = weakref.WeakKeyDictionary()


def _keywords(function):
    # -> the names function takes by keyword only; None for a plug that takes **keywords (any)
    shown = getattr(function, "__signature__", None)
    if shown is not None:
        kept = _SHOWN.get(id(shown))
        if kept is None or kept[0] is not shown:
            kept = _SHOWN[id(shown)] = (shown, _keyword_only(shown))
        return kept[1]
    if not isinstance(function, types.FunctionType):  # a partial, a callable object: read anew
        return _keyword_only(inspect.signature(function), plug=True)
    if function not in _PLUGS:
        _PLUGS[function] = _keyword_only(inspect.signature(function), plug=True)
    return _PLUGS[function]


def _keyword_only(signature, plug=False):
    kinds = {p.kind for p in signature.parameters.values()}
    if plug and inspect.Parameter.VAR_KEYWORD in kinds:
        return None
    return frozenset(name for name, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY)


def _check_parallel(parallel, norm_first, memory, params):
    # A parallel block is pre-norm, self-attention and feed-forward only: a post-norm, a
    # cross-attention or a sandwich norm would be left out, so each is refused by name.
    if not isinstance(parallel, (bool, np.bool_)):
        raise TypeError(f"parallel must be a bool, got {parallel!r}")
    sandwich = [k for k in ("post_self_attention_norm", "post_feed_forward_norm") if k in params]
    if parallel and (not norm_first or memory is not None or sandwich):
        raise ValueError("parallel=True (both sublayers read the block's input) needs "
                         "norm_first=True and takes no memory and no sandwich norms, got "
                         f"norm_first={norm_first!r}, memory "
                         f"{'given' if memory is not None else 'None'}, params with {sandwich}")


def check_causal_lm(params, tokens, attention_mask, n_heads, activation, position, cache,
                    logits_to_keep, config, takers):
    # causal_lm's: -> params, tokens, attention_mask, past; config: the blocks' keywords, which
    # takers take (transformer_decoder.takers)
    check_keywords("causal_lm", config, takers)
    rope = [f"{key}={config[key]!r}" for key in ("rope_scaling", "partial_rotary_factor")
            if config.get(key) is not None]
    if rope_base_given(config.get("rope_base")):  # the blocks' default (ROPE_BASE) is not RoPE
        rope.insert(0, f"rope_base={config['rope_base']!r}")
    if position == "learned" and rope:  # learned positions: the blocks get no positions
        raise ValueError(f"{', '.join(rope)} set RoPE, which position='learned' (the default: "
                         "learned position embeddings) does not use: pass position='rope'")
    return _check_causal_lm(params, tokens, attention_mask, n_heads, config.get("n_kv_heads"),
                            config.get("d_k"), config.get("norm", "layer_norm"), activation,
                            position, cache, logits_to_keep=logits_to_keep)


def _check_causal_lm(params, tokens, attention_mask, n_heads, n_kv_heads, d_k, norm, activation,
                     position, cache, logits_to_keep=None):
    # (embedding_scale and final_logit_softcapping: check_scaled_causal_lm; head_mask:
    # minattn/head_mask.py, each checked by the variant that reads it)
    checks.check_choice("position", position, POSITIONS)
    if logits_to_keep is not None:
        checks.check_size("logits_to_keep", logits_to_keep)
    _check_config(checks.check_size("n_heads", n_heads), n_kv_heads, norm, activation)
    needed = ["token_embedding", "layers", "final_norm"] + (
        ["position_embedding"] if position == "learned" else [])
    if not isinstance(params, checks.DICT_TYPES) or any(k not in params for k in needed):
        learned = position == "learned" and isinstance(params, checks.DICT_TYPES)
        raise ValueError(f"params must be a dict with keys {', '.join(map(repr, needed))} "
                         "(and 'lm_head' unless the embeddings are tied)" + (
                             "; position='learned' (the default) needs 'position_embedding', a "
                             "model with RoPE passes position='rope'" if learned else ""))
    unknown = [key for key in params if key not in MODEL_KEYS]
    if unknown:  # a table no path reads (a misnamed lm_head would leave the model tied)
        raise ValueError(f"params has keys {unknown}, which causal_lm does not read (its keys: "
                         f"{', '.join(map(repr, MODEL_KEYS))})")
    embedding = checks.check_shape("params['token_embedding']", params["token_embedding"],
                                      ("V", "D"))
    vocab_size = embedding.shape[0]
    tokens = as_int_array("tokens", tokens)
    if tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must have shape (B, L) with L >= 1, got {tuple(tokens.shape)}")
    if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise ValueError(f"tokens must lie in [0, vocab_size={vocab_size}), got min "
                         f"{int(tokens.min())}, max {int(tokens.max())}")
    past = 0
    if cache is not None:
        layers = _check_decoder(params, cache)
        first = cache[0] if layers else {}
        if not isinstance(first, checks.DICT_TYPES):
            raise TypeError("cache must be a tuple of dicts ({'k', 'v'}, or an attention "
                            "variant's), one per layer")
        # A recurrent layer's cache ({"conv", "state"}: minattn.gated_deltanet) has no token
        # axis: the length is read from the first layer that keeps one per token.
        first = next((c for c in cache if not (isinstance(c, checks.DICT_TYPES) and "state" in c)),
                     {})
        past = next(iter(first.values())).shape[-2] if first else 0  # [..., L_past, d]
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask,
                                              (tokens.shape[0], past + tokens.shape[1]))
    # The model's dtype is its embedding's: the other tables are taken in it (checks.in_dtype).
    tables = {"token_embedding": embedding.shape, "lm_head": (embedding.shape[1], vocab_size),
              "lm_head_bias": (vocab_size,),
              "position_embedding": ("n_positions", embedding.shape[1])}
    params = checks.check_params(params, {key: shape for key, shape in tables.items()
                                          if key in params}, "params", embedding.dtype)
    if position == "learned":
        n_positions = params["position_embedding"].shape[0]
        if past + tokens.shape[1] > n_positions:
            raise ValueError(f"tokens reach position {past + tokens.shape[1] - 1} (cache "
                             f"{past} + tokens {tokens.shape[1]}), but params['position_embedding']"
                             f" has only {n_positions} positions")
    _check_config_fits_params(params, embedding.shape[1], n_heads, n_kv_heads, d_k, norm,
                              activation, position)
    return params, tokens, attention_mask, past


# Every key a causal language model's params may hold (lm_head: unless the embeddings are tied).
MODEL_KEYS = ("token_embedding", "position_embedding", "layers", "final_norm", "lm_head",
              "lm_head_bias")


def _check_config_fits_params(params, d_model, n_heads, n_kv_heads, d_k, norm, activation,
                              position):
    # A keyword that contradicts what params holds is refused by name: params alone cannot say
    # everything (n_heads splits w_q's width any way it divides), so the config travels with them.
    def refuse(keyword, value, fact):
        raise ValueError(f"{keyword}={value!r} contradicts params: {fact}")
    if position == "rope" and "position_embedding" in params:
        refuse("position", position, "params has 'position_embedding' (learned positions)")
    if ("beta" in params["final_norm"]) != (norm == "layer_norm"):
        refuse("norm", norm, f"params['final_norm'] has keys {sorted(params['final_norm'])}")
    layer = params["layers"][0] if len(params["layers"]) else {}
    if not isinstance(layer, checks.DICT_TYPES):
        return  # not a block's params: the block refuses them by name
    feed, attention = layer.get("feed_forward", {}), layer.get("self_attention", {})
    if ("w_gate" in feed) != (activation in GATED):
        refuse("activation", activation, f"the feed-forward has keys {sorted(feed)} (a gated "
               f"one, {', '.join(GATED)}, has w_gate, w_up, w_down)")
    if "w_q" not in attention or "w_k" not in attention:
        return  # an attention variant with other params checks its own
    where = "params['layers'][0]['self_attention']"  # read before the block checks them
    w_q, w_k = (checks.as_array(f"{where}['{key}']", attention[key]) for key in ("w_q", "w_k"))
    d_k = d_model // n_heads if d_k is None and d_model % n_heads == 0 else d_k
    if d_k is not None and w_q.shape[-1] != n_heads * d_k:
        refuse("d_k", d_k, f"w_q has shape {tuple(w_q.shape)}, not (D, n_heads * "
               f"d_k) with n_heads={n_heads} (d_k defaults to d_model / n_heads)")
    if d_k is not None and w_k.shape[-1] != (n_kv_heads or n_heads) * d_k:
        refuse("n_kv_heads", n_kv_heads, f"w_k has shape {tuple(w_k.shape)}, "
               f"not (D, n_kv_heads * d_k) with d_k={d_k} (n_kv_heads defaults to n_heads)")


def check_attention_mask(attention_mask, shape):
    """Hugging Face's attention_mask: int or bool [B, L_past + L], 1 = real token -> bool."""
    attention_mask = checks.as_array("attention_mask", attention_mask)
    if numpy.dtype(attention_mask.dtype).kind not in "biu":
        raise TypeError(f"attention_mask must be int or bool (1 = real token, 0 = padding), "
                        f"got dtype {attention_mask.dtype}")
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected "
                         f"(B, L_past + L) = {tuple(shape)}")
    return attention_mask != 0


def _check_generate(params, tokens, n_new, attention_mask, temperature, top_k, top_p, rng,
                    eos_token_id, pad_token_id, config):
    if isinstance(n_new, bool) or not isinstance(n_new, numbers.Integral) or n_new < 0:
        raise TypeError(f"n_new must be a non-negative int, got {n_new!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not temperature >= 0:
        raise ValueError(f"temperature must be a number >= 0 (0: greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, numbers.Integral)
                              or top_k < 1):
        raise TypeError(f"top_k must be None or a positive int, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, numbers.Real)
                              or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    if temperature == 0 and (top_k is not None or top_p is not None):
        raise ValueError(f"top_k={top_k!r} and top_p={top_p!r} restrict sampling, and "
                         "temperature=0 does not sample (greedy): pass temperature > 0 to use "
                         "them (transformers warns and ignores them)")
    if temperature > 0 and not callable(getattr(rng, "random", None)):
        raise ValueError(f"temperature={temperature} samples: it needs rng, a "
                         "np.random.Generator (nothing here seeds a global RNG)")
    tokens = as_int_array("tokens", tokens)
    if tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must have shape (B, L) with L >= 1, got {tuple(tokens.shape)}")
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask, tokens.shape)
        # Every row continues from its last position, so padding goes on the left (a 0 after a
        # 1 would predict the first new token from a pad; transformers warns there).
        right = np.any(attention_mask[:, :-1] & ~attention_mask[:, 1:], axis=-1)
        if bool(np.any(right)):
            raise ValueError(f"attention_mask has padding on the right (a 0 after a 1) in rows "
                             f"{[int(b) for b in np.flatnonzero(right)]}; generate continues "
                             "each row from its last position, so pad on the left")
    eos = None
    if eos_token_id is None and pad_token_id is not None:  # it fills only the ended rows
        raise ValueError(f"pad_token_id={pad_token_id!r} fills a row after its eos_token_id, and "
                         "eos_token_id is None (no row ends): pass eos_token_id, or leave "
                         "pad_token_id None")
    if eos_token_id is not None:
        eos = numpy.atleast_1d(as_int_array("eos_token_id", numpy.asarray(eos_token_id)))
        if pad_token_id is None:  # as model.generate: a model without a pad token pads with eos
            pad_token_id = int(eos[0])
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, numbers.Integral):
            raise ValueError(f"eos_token_id={eos_token_id!r} needs pad_token_id, the int that "
                             f"fills a row after its end (default: the first eos token), got "
                             f"{pad_token_id!r}")
    if config.get("position", "learned") == "learned" and isinstance(
            params, checks.DICT_TYPES) and "position_embedding" in params:
        table = checks.as_array("params['position_embedding']", params["position_embedding"])
        n_positions = table.shape[0] if table.ndim else 0
        if tokens.shape[1] + n_new - 1 > n_positions:
            raise ValueError(f"n_new={n_new} after {tokens.shape[1]} tokens needs "
                             f"{tokens.shape[1] + n_new - 1} positions, but "
                             f"params['position_embedding'] has {n_positions}")
    return int(n_new), tokens, attention_mask, eos, pad_token_id
