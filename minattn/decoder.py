"""The Transformer decoder: a causal self-attention block (with a KV cache, RoPE and GQA, and
optionally cross-attention to an encoder's memory), the stack, and a causal language model.

One block covers three families through keyword arguments:
    torch.nn.TransformerDecoderLayer  post- or pre-norm, LayerNorm, relu/gelu, cross-attention
    GPT-2   pre-norm, LayerNorm, learned positions, gelu_tanh, biases, tied embeddings
    Llama   pre-norm, rms_norm, RoPE, SwiGLU (activation="swiglu"), GQA, no biases
The KV cache is plain arrays, passed in and returned, never changed in place:
    one layer's cache  {"k": [B, H_kv, L_past, d_k], "v": [B, H_kv, L_past, d_k]}
    a model's cache    a tuple of one such dict per layer
"""
import numbers

import autograd.numpy as np
import numpy
from autograd.tracer import isbox

from .engine import checks
from .heads import merge_heads, split_heads
from .masks import causal_mask
from .multi_head import (PROJECTIONS, _project, check_multi_head_params, grouped_attention,
                         init_multi_head_attention, multi_head_attention)
from .normalization import init_layer_norm, layer_norm, rms_norm
from .position_wise import (ACTIVATIONS, check_feed_forward_params,
                            check_gated_feed_forward_params, feed_forward, gated_feed_forward,
                            gelu_tanh,
                            init_feed_forward, init_gated_feed_forward)
from .rope import apply_rope, as_int_array, check_positions
from .rope_scaling import check_rope_scaling
from .softcap import capped_attention, soft_cap

NORMS = ("layer_norm", "rms_norm")


def geglu_tanh(params, x):
    """GEGLU with the tanh GELU (Gemma's MLP): down(gelu_tanh(gate(x)) * up(x)), [..., D] ->
    [..., D]; params as gated_feed_forward's."""
    # [..., D] -> [..., F] -> [..., D]
    hidden = gelu_tanh(x @ params["w_gate"]) * (x @ params["w_up"])  # [..., F]
    return hidden @ params["w_down"]


# The gated feed-forwards; their params: w_gate, w_up, w_down.
GATED = {"swiglu": gated_feed_forward, "geglu_tanh": geglu_tanh}
DECODER_ACTIVATIONS = ACTIVATIONS + tuple(GATED)
POSITIONS = ("learned", "rope")


def self_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, d_k=None, positions=None,
                   rope_base=10000.0, rope_scaling=None, eps=1e-6, query_pre_attn_scalar=None,
                   attn_logit_softcapping=None, cache=None):
    """Self-attention of x [..., L, D] over the cached keys and values and its own: returns
    (output [..., L, D], new cache {"k", "v": [..., H_kv, L_past + L, d_k]}). d_k: the head
    width (default D / H; Qwen3 and Gemma set their own). positions (int, broadcasting to
    [..., L]): apply RoPE (rope_base, rope_scaling: minattn.rope_scaling) to q and k, never v.
    QK-norm where params has "q_norm" and "k_norm" ({"gamma": [d_k]}): each head of q and k
    RMS-normalised (with eps) before RoPE. Gemma: scores scaled by query_pre_attn_scalar^-1/2
    (not d_k^-1/2) and soft-capped at attn_logit_softcapping (minattn.softcap). mask covers all
    L_past + L keys (for a causal model, causal_mask(L, L_past + L, align="bottom_right")).
    params["sinks"] [H] (optional): one attention-sink logit per head (gpt-oss)."""
    # [..., L, D] -> [..., L, D]; the cache grows by L along its key axis.
    params, x, mask, positions, d_k, cache, query_pre_attn_scalar, attn_logit_softcapping = \
        _check_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base,
                              rope_scaling, cache, query_pre_attn_scalar, attn_logit_softcapping)
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    q = split_heads(_project(params, x, "q"), n_heads)  # [..., H, L, d_k]
    k = split_heads(_project(params, x, "k"), n_kv_heads)  # [..., H_kv, L, d_k]
    v = split_heads(_project(params, x, "v"), n_kv_heads)  # [..., H_kv, L, d_k]
    if "q_norm" in params:  # QK-norm: bounded q and k, so the scores cannot blow up
        q = rms_norm(q, params["q_norm"]["gamma"], eps)  # [..., H, L, d_k], per head
        k = rms_norm(k, params["k_norm"]["gamma"], eps)
    if positions is not None:  # RoPE: q and k rotate by their absolute positions
        positions = positions[..., None, :] if positions.ndim > 1 else positions  # [..., 1, L]
        rotate = lambda t: apply_rope(t, positions, base=rope_base, scaling=rope_scaling)
        q, k = rotate(q), rotate(k)
    if cache is not None:  # the past's keys and values, computed once, reused every step
        k = _append(cache.get("k"), k)  # [..., H_kv, L_past + L, d_k]
        v = _append(cache.get("v"), v)
    heads, _ = _attend(q, k, v, mask, query_pre_attn_scalar, attn_logit_softcapping,
                       params.get("sinks"))
    return _project(params, merge_heads(heads), "o"), {"k": k, "v": v}  # heads: [..., H, L, d_k]


def _attend(q, k, v, mask, query_pre_attn_scalar, softcap, sinks=None):
    # Gemma's scale and cap need their own core; every other model, the shared one.
    if query_pre_attn_scalar is None and softcap is None:
        return grouped_attention(q, k, v, mask, sinks=sinks)
    scalar = q.shape[-1] if query_pre_attn_scalar is None else query_pre_attn_scalar
    return capped_attention(q, k, v, mask, scale=scalar ** -0.5, cap=softcap)


def _check_self_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base,
                          rope_scaling, cache, query_pre_attn_scalar=None, softcap=None):
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    d_model = x.shape[-1]
    d_k = check_head_width(d_k, n_heads, d_model)
    checks.check_n_kv_heads(n_kv_heads, n_heads)
    n_kv = n_kv_heads or n_heads
    params = check_attention_params(params, d_model, n_heads, n_kv, d_k, dtype=x.dtype)
    past = 0
    if cache is not None:  # {}: an empty cache, to be filled
        cache = _check_layer_cache(cache, x.shape[:-2] + (n_kv, d_k), "cache")
        past = cache["k"].shape[-2] if cache else 0
    if positions is not None:  # RoPE
        positions = check_positions(positions, x)
        checks.check_positive_real("rope_base", rope_base, allow_inf=True)  # as apply_rope's base
        check_rope_scaling(rope_scaling)
        if d_k % 2:
            raise ValueError(f"RoPE (positions given) needs an even head width d_k, got "
                             f"d_k={d_k} (d_model={d_model}, n_heads={n_heads})")
    scores = x.shape[:-2] + (n_heads, x.shape[-2], past + x.shape[-2])
    mask = checks.check_mask(mask, scores, "the per-head scores (..., H, L, L_past + L)")
    checks.check_mask_has_head_axis(mask, scores)
    # Gemma's scalars: the scores are scaled by query_pre_attn_scalar^-1/2 (inf: by 0, uniform
    # weights, as transformers) and capped at cap * tanh(s / cap), undefined at cap = 0.
    if query_pre_attn_scalar is not None:
        query_pre_attn_scalar = checks.check_positive_real(
            "query_pre_attn_scalar", query_pre_attn_scalar, dtype=x.dtype, allow_inf=True)
    if softcap is not None:
        softcap = checks.check_positive_real("attn_logit_softcapping", softcap, dtype=x.dtype)
    if "sinks" in params and (query_pre_attn_scalar is not None or softcap is not None):
        raise ValueError("attention sinks (params['sinks']) with query_pre_attn_scalar or "
                         "attn_logit_softcapping are not supported")
    return params, x, mask, positions, d_k, cache, query_pre_attn_scalar, softcap


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
    "k_norm": {"gamma": [d_k]}}."""
    d_out = {"q": n_heads * d_k, "k": n_kv_heads * d_k, "v": n_kv_heads * d_k, "o": d_model}
    d_in = {"q": d_model, "k": d_model, "v": d_model, "o": n_heads * d_k}
    checks.check_params(params, {}, where)
    params = checks.check_params(params, {
        **{f"w_{p}": (d_in[p], d_out[p]) for p in PROJECTIONS},
        **{f"b_{p}": (d_out[p],) for p in PROJECTIONS if f"b_{p}" in params},
        **({"sinks": (n_heads,)} if "sinks" in params else {})}, where, dtype)
    if ("q_norm" in params) != ("k_norm" in params):
        raise ValueError(f"{where} has only one of 'q_norm' and 'k_norm' (QK-norm needs both)")
    for key in ("q_norm", "k_norm"):
        if key in params:
            params[key] = checks.check_params(params[key], {"gamma": (d_k,)}, f"{where}[{key!r}]",
                                              dtype)
    return params


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


def init_decoder_block(rng, d_model, n_heads, d_ff, *, n_kv_heads=None, d_k=None,
                       cross_attention=False, norm="layer_norm", activation="relu", bias=True,
                       qk_norm=False, dtype=np.float64):
    """-> {"self_attention", "self_attention_norm", ["cross_attention", "cross_attention_norm",]
    "feed_forward", "feed_forward_norm"} (each norm named for its sublayer; torch's norm1, norm2,
    norm3). norm="rms_norm" gives {"gamma"} only; activation="swiglu" a gated
    feed-forward without biases; bias=False drops the attention biases (Llama); d_k a head width
    other than d_model / n_heads; qk_norm=True adds {"q_norm", "k_norm"} (Qwen3)."""
    _check_config(n_heads, n_kv_heads, norm, activation)
    d_k = check_head_width(d_k, n_heads, checks.check_size("d_model", d_model))
    attention = (init_multi_head_attention(rng, d_model, n_heads, n_kv_heads=n_kv_heads,
                                           bias=bias, dtype=dtype)
                 if d_k * n_heads == d_model else
                 _init_self_attention(rng, d_model, n_heads, n_kv_heads, d_k, bias, dtype))
    if qk_norm:
        attention.update({key: {"gamma": np.ones(d_k, dtype=dtype)}
                          for key in ("q_norm", "k_norm")})
    params = {"self_attention": attention,
              "self_attention_norm": _init_norm(d_model, norm, dtype)}
    if cross_attention:
        params["cross_attention"] = init_multi_head_attention(rng, d_model, n_heads, bias=bias,
                                                              dtype=dtype)
        params["cross_attention_norm"] = _init_norm(d_model, norm, dtype)
    params["feed_forward"] = (init_gated_feed_forward(rng, d_model, d_ff, dtype=dtype)
                              if activation in GATED else
                              init_feed_forward(rng, d_model, d_ff, dtype=dtype))
    params["feed_forward_norm"] = _init_norm(d_model, norm, dtype)
    return params


def _init_self_attention(rng, d_model, n_heads, n_kv_heads, d_k, bias, dtype):
    # With a head width d_k != d_model / n_heads: U(+-1/sqrt(d_in)) weights, zero biases.
    n_kv = n_kv_heads or n_heads
    shapes = {"q": (d_model, n_heads * d_k), "k": (d_model, n_kv * d_k),
              "v": (d_model, n_kv * d_k), "o": (n_heads * d_k, d_model)}
    params = {f"w_{p}": (rng.uniform(-1, 1, size=shape) / np.sqrt(shape[0])).astype(dtype)
              for p, shape in shapes.items()}
    if bias:
        params.update({f"b_{p}": np.zeros(shape[1], dtype=dtype) for p, shape in shapes.items()})
    return params


def _init_norm(d_model, norm, dtype):
    params = init_layer_norm(d_model, dtype=dtype)
    return {"gamma": params["gamma"]} if norm == "rms_norm" else params


def decoder_block(params, x, mask=None, *, memory=None, memory_mask=None, n_heads,
                  n_kv_heads=None, d_k=None, norm_first=False, norm="layer_norm",
                  activation="relu", eps=1e-5, positions=None, rope_base=10000.0,
                  rope_scaling=None, cache=None, attention=self_attention, **attention_config):
    """One decoder block, x [..., L, D] -> [..., L, D]; with a cache -> (x, new cache).
    Post-norm (torch's default): x = norm(x + sublayer(x)); pre-norm (norm_first=True):
    x = x + sublayer(norm(x)). Sublayers: masked self-attention (mask over L_past + L keys),
    cross-attention to memory [..., L_m, D] (with memory_mask [L, L_m]) when params has it, the
    feed-forward. positions: RoPE positions (None: no RoPE), rope_scaling its frequency
    schedule. Sandwich norms (Gemma 2, 3) where params has "post_self_attention_norm" /
    "post_feed_forward_norm": the sublayer's output normalised too,
    x = x + post_norm(sublayer(norm(x))). activation
    "geglu_tanh": a gated feed-forward with the tanh GELU (Gemma). attention: the self-attention
    sublayer, a function with self_attention's signature (an attention variant plugs in here);
    attention_config: its further keywords (query_pre_attn_scalar, attn_logit_softcapping)."""
    # [..., L, D] (+ memory [..., L_m, D]) -> [..., L, D]
    params, x, memory = _check_decoder_block(params, x, memory, memory_mask, n_heads, n_kv_heads,
                                             norm, activation, eps)
    normalize = {"layer_norm": lambda h, p: layer_norm(h, p["gamma"], p["beta"], eps),
                 "rms_norm": lambda h, p: rms_norm(h, p["gamma"], eps)}[norm]

    def sublayer(x, name, f):  # one residual sublayer, its norm before (pre) or after (post)
        if norm_first:
            return x + sandwich(f(normalize(x, params[name])), f"post_{name}")
        return normalize(x + f(x), params[name])

    def sandwich(h, name):  # Gemma's second norm, on the sublayer's output
        return normalize(h, params[name]) if name in params else h

    new_cache = []  # filled by the self-attention sublayer

    def attend_self(h):
        out, layer_cache = attention(params["self_attention"], h, mask, n_heads=n_heads,
                                     n_kv_heads=n_kv_heads, d_k=d_k, positions=positions,
                                     rope_base=rope_base, rope_scaling=rope_scaling, eps=eps,
                                     cache=cache, **attention_config)
        new_cache.append(layer_cache)
        return out

    def attend_memory(h):
        return multi_head_attention(params["cross_attention"], h, memory, memory, memory_mask,
                                    n_heads=n_heads)[0]

    def feed(h):
        if activation in GATED:
            return GATED[activation](params["feed_forward"], h)
        return feed_forward(params["feed_forward"], h, activation=activation)

    x = sublayer(x, "self_attention_norm", attend_self)
    if memory is not None:
        x = sublayer(x, "cross_attention_norm", attend_memory)
    x = sublayer(x, "feed_forward_norm", feed)
    return x if cache is None else (x, new_cache[0])


def _check_config(n_heads, n_kv_heads, norm, activation):
    checks.check_choice("norm", norm, NORMS)
    checks.check_choice("activation", activation, DECODER_ACTIVATIONS)
    checks.check_n_kv_heads(n_kv_heads, n_heads)


def _check_decoder_block(params, x, memory, memory_mask, n_heads, n_kv_heads, norm, activation,
                         eps):
    # The self-attention sublayer checks its own params, cache and head width.
    where = "params"  # a decoder's layers are each a decoder_block's params
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    d_model = x.shape[-1]
    checks.check_size("n_heads", n_heads)
    _check_config(n_heads, n_kv_heads, norm, activation)
    checks.check_positive_real("eps", eps, allow_zero=True)
    params = checks.check_params(params, {}, where)
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
    checks.check_no_renamed_block_keys(params, where)
    needed = ["self_attention", "self_attention_norm", "feed_forward", "feed_forward_norm"]
    needed += ["cross_attention", "cross_attention_norm"] if memory is not None else []
    for key in needed:
        if key not in params:
            raise ValueError(f"{where} is missing key {key!r} (expected keys: "
                             f"{', '.join(map(repr, needed))})")
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


def _check_layer_cache(cache, expected, where):
    # expected: (..., H_kv, d_k); a cache from another model (other batch, heads or width) fails.
    if isinstance(cache, checks.DICT_TYPES) and not cache:
        return cache  # {}: empty, to be filled
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


def init_decoder(rng, n_layers, d_model, n_heads, d_ff, *, final_norm=False, **block_config):
    """-> {"layers": [block params] * n_layers} (+ "final_norm"); block_config as
    init_decoder_block (n_kv_heads, cross_attention, norm, activation, bias, dtype)."""
    n_layers = checks.check_size("n_layers", n_layers)
    params = {"layers": [init_decoder_block(rng, d_model, n_heads, d_ff, **block_config)
                         for _ in range(n_layers)]}
    if final_norm:
        params["final_norm"] = _init_norm(d_model, block_config.get("norm", "layer_norm"),
                                          block_config.get("dtype", np.float64))
    return params


def decoder(params, x, mask=None, *, memory=None, memory_mask=None, cache=None, **config):
    """A stack of decoder blocks, x [..., L, D] -> [..., L, D] (+ the final norm if params has
    one); with a cache (a tuple with one {"k", "v"} per layer) -> (x, new cache). config as
    decoder_block (n_heads, n_kv_heads, d_k, norm_first, norm, activation, eps, positions,
    rope_base, rope_scaling, attention). A list (for mask, or a config value) holds one entry
    per layer: local and global layers with their own windows (masks) or RoPE bases."""
    # [..., L, D] -> [..., L, D]
    layers = _check_decoder(params, cache, mask, config)
    per_layer = lambda value, i: value[i] if isinstance(value, list) else value
    new_cache = []
    for i, layer in enumerate(layers):
        out = decoder_block(layer, x, per_layer(mask, i), memory=memory, memory_mask=memory_mask,
                            cache=None if cache is None else cache[i],
                            **{key: per_layer(value, i) for key, value in config.items()})
        x, layer_cache = out if cache is not None else (out, None)
        new_cache.append(layer_cache)
    if "final_norm" in params:
        x = _final_norm(params["final_norm"], x, config)
    return x if cache is None else (x, tuple(new_cache))


def _final_norm(p, x, config):
    eps = config.get("eps", 1e-5)
    if config.get("norm", "layer_norm") == "rms_norm":
        return rms_norm(x, p["gamma"], eps)
    return layer_norm(x, p["gamma"], p["beta"], eps)


def _check_decoder(params, cache, mask=None, config=()):
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


def init_causal_lm(rng, vocab_size, n_layers, d_model, n_heads, d_ff, *, position="learned",
                   n_positions=1024, tied=True, activation="gelu_tanh", dtype=np.float64,
                   **block_config):
    """-> (params, config), the model as from_hf returns it: params {"token_embedding": [V, D],
    ("position_embedding": [n_positions, D],) "layers", "final_norm", ("lm_head": [D, V] unless
    tied)}, and config {"n_heads", "n_kv_heads", "d_k", "norm", "activation", "position"}, the
    keywords of causal_lm(params, tokens, **config) and generate. GPT-2 (position="learned",
    tied) or Llama (position="rope", norm="rms_norm", activation="swiglu", bias=False,
    tied=False) style; block_config as init_decoder_block (n_kv_heads, d_k, norm, bias,
    qk_norm)."""
    vocab_size = checks.check_size("vocab_size", vocab_size)
    dtype = checks.check_init(rng, dtype)
    checks.check_choice("position", position, POSITIONS)
    params = {"token_embedding": (0.02 * rng.normal(size=(vocab_size, d_model))).astype(dtype)}
    if position == "learned":
        n_positions = checks.check_size("n_positions", n_positions)
        params["position_embedding"] = (0.01 * rng.normal(size=(n_positions, d_model))).astype(dtype)
    params.update(init_decoder(rng, n_layers, d_model, n_heads, d_ff, final_norm=True,
                               activation=activation, dtype=dtype, **block_config))
    if not tied:
        params["lm_head"] = (0.02 * rng.normal(size=(d_model, vocab_size))).astype(dtype)
    config = {"n_heads": n_heads, "n_kv_heads": block_config.get("n_kv_heads"),
              "d_k": block_config.get("d_k"), "norm": block_config.get("norm", "layer_norm"),
              "activation": activation, "position": position}
    return params, config


def causal_lm(params, tokens, attention_mask=None, *, n_heads, n_kv_heads=None, d_k=None,
              norm="layer_norm", activation="gelu_tanh", eps=1e-5, position="learned",
              rope_base=10000.0, rope_scaling=None, window=None, embedding_scale=None,
              query_pre_attn_scalar=None, attn_logit_softcapping=None,
              final_logit_softcapping=None, attention=self_attention, cache=None,
              return_cache=False):
    """A decoder-only language model: int tokens [B, L] -> logits [B, L, V] for the NEXT token
    at every position (pre-norm blocks, a causal mask, the final norm, then the unembedding:
    params["lm_head"], or the token embedding transposed when tied). With a cache (or
    return_cache=True, starting empty) -> (logits, new cache): the tokens continue the cached
    sequence at positions L_past .. L_past + L - 1.
    attention_mask (int or bool [B, L_past + L], Hugging Face's convention: 1 = real token,
    0 = padding, padding on the left): no query attends to padding, and each row's positions
    count its real tokens from 0. Config: n_heads, n_kv_heads (grouped-query), d_k (head
    width), norm ("layer_norm", "rms_norm"), activation ("relu", "gelu", "gelu_tanh",
    "swiglu"), eps, position ("learned", "rope"), rope_base, rope_scaling (a schedule of
    minattn.rope_scaling), window (a sliding window of that many keys; a list: one per layer,
    None for a global layer); rope_base and rope_scaling may be lists too. Gemma:
    embedding_scale (the embeddings times sqrt(D)), query_pre_attn_scalar,
    attn_logit_softcapping, final_logit_softcapping (minattn.softcap on the logits).
    attention: the self-attention sublayer (minattn.mla's latent_attention, minattn.differential's
    differential_attention, as from_hf sets it); each layer's cache is what it returns, starting
    from {} (empty)."""
    # int [B, L] -> [B, L, V]
    params, tokens, attention_mask, past, embedding_scale, final_logit_softcapping = \
        _check_causal_lm(params, tokens, attention_mask, n_heads, n_kv_heads, d_k, norm,
                         activation, position, cache, embedding_scale, final_logit_softcapping)
    length = tokens.shape[-1]
    x = params["token_embedding"][tokens]  # [B, L, D]
    if embedding_scale is not None:
        x = x * embedding_scale
    positions = _positions(attention_mask, past, length, tokens)  # [L], or [B, L] with padding
    if position == "learned":
        x = x + params["position_embedding"][positions]

    def mask(window):  # [L, L_past + L], and not to padding: [B, 1, L, L_past + L]
        # The new tokens are the LAST L of L_past + L positions: bottom-right alignment.
        causal = causal_mask(length, past + length, align="bottom_right", window=window,
                             like=tokens)
        return causal if attention_mask is None else causal & attention_mask[:, None, None, :]

    masks = [mask(w) for w in window] if isinstance(window, list) else mask(window)
    if cache is None and return_cache:
        cache = tuple({} for _ in params["layers"])  # empty: each layer fills its own
    out = decoder({"layers": params["layers"], "final_norm": params["final_norm"]}, x, masks,
                  cache=cache, n_heads=n_heads, n_kv_heads=n_kv_heads, d_k=d_k, norm_first=True,
                  norm=norm, activation=activation, eps=eps,
                  positions=positions if position == "rope" else None, rope_base=rope_base,
                  rope_scaling=rope_scaling, query_pre_attn_scalar=query_pre_attn_scalar,
                  attn_logit_softcapping=attn_logit_softcapping, attention=attention)
    h, new_cache = out if cache is not None else (out, None)
    unembedding = params["lm_head"] if "lm_head" in params else params["token_embedding"].T
    logits = h @ unembedding  # [B, L, V]
    if final_logit_softcapping is not None:
        logits = soft_cap(logits, final_logit_softcapping)
    return logits if cache is None else (logits, new_cache)


def _positions(attention_mask, past, length, like):
    # -> int [L], or [B, L] with an attention_mask [B, L_past + L]: as transformers' generate,
    # a row's positions count its real tokens (cumsum - 1), padding at position 0.
    if attention_mask is None:
        return np.arange(past, past + length, like=like)
    counted = np.cumsum(attention_mask, axis=-1) - 1  # [B, L_past + L]
    return np.where(attention_mask, counted, 0)[:, past:]


def _check_causal_lm(params, tokens, attention_mask, n_heads, n_kv_heads, d_k, norm, activation,
                     position, cache, embedding_scale=None, final_logit_softcapping=None):
    checks.check_choice("position", position, POSITIONS)
    _check_config(checks.check_size("n_heads", n_heads), n_kv_heads, norm, activation)
    needed = ["token_embedding", "layers", "final_norm"] + (
        ["position_embedding"] if position == "learned" else [])
    if not isinstance(params, checks.DICT_TYPES) or any(k not in params for k in needed):
        learned = position == "learned" and isinstance(params, checks.DICT_TYPES)
        raise ValueError(f"params must be a dict with keys {', '.join(map(repr, needed))} "
                         "(and 'lm_head' unless the embeddings are tied)" + (
                             "; position='learned' (the default) needs 'position_embedding', a "
                             "model with RoPE passes position='rope'" if learned else ""))
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
        past = next(iter(first.values())).shape[-2] if first else 0  # [..., L_past, d]
    if attention_mask is not None:
        attention_mask = check_attention_mask(attention_mask,
                                              (tokens.shape[0], past + tokens.shape[1]))
    # The model's dtype is its embedding's: the other tables are taken in it (checks.in_dtype).
    tables = {"token_embedding": embedding.shape, "lm_head": (embedding.shape[1], vocab_size),
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
    if embedding_scale is not None:
        embedding_scale = checks.check_positive_real("embedding_scale", embedding_scale,
                                                     allow_zero=True, dtype=embedding.dtype)
    if final_logit_softcapping is not None:
        final_logit_softcapping = checks.check_positive_real(
            "final_logit_softcapping", final_logit_softcapping, dtype=embedding.dtype)
    return params, tokens, attention_mask, past, embedding_scale, final_logit_softcapping


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
    if np.dtype(attention_mask.dtype).kind not in "biu":
        raise TypeError(f"attention_mask must be int or bool (1 = real token, 0 = padding), "
                        f"got dtype {attention_mask.dtype}")
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected "
                         f"(B, L_past + L) = {tuple(shape)}")
    return attention_mask != 0


def generate(params, tokens, n_new, attention_mask=None, *, temperature=0.0, top_k=None,
             top_p=None, rng=None, eos_token_id=None, pad_token_id=None, use_cache=True,
             progress=None, **config):
    """Extend int tokens [B, L] by n_new tokens -> [B, L + n_new], or fewer when every row has
    ended (model.generate's semantics). Greedy (the argmax, temperature=0) by default;
    temperature > 0 samples from softmax(logits / temperature), restricted to the top_k most
    likely tokens and then to the nucleus (the most likely tokens whose probabilities add up to
    top_p) if given, with the np.random.Generator rng. attention_mask: as causal_lm (left
    padding). eos_token_id (an int or a list): a row that produced one has ended, and continues
    with pad_token_id. use_cache=True feeds one token per step through the KV cache;
    use_cache=False reruns the whole sequence every step (same tokens, quadratic cost).
    progress: an optional callable wrapping the step range (e.g. tqdm.trange's iterator).
    config as causal_lm."""
    # int [B, L] -> int [B, L + n_new]
    n_new, tokens, attention_mask, eos = _check_generate(
        params, tokens, n_new, attention_mask, temperature, top_k, top_p, rng, eos_token_id,
        pad_token_id, config)
    steps = range(n_new) if progress is None else progress(range(n_new))
    cache, new = None, tokens
    ended = np.zeros_like(tokens[:, 0], dtype=bool)  # [B]
    for _ in steps:
        if use_cache:
            logits, cache = causal_lm(params, new, attention_mask, cache=cache,
                                      return_cache=True, **config)
        else:
            logits = causal_lm(params, tokens, attention_mask, **config)
        new = _next_token(logits[:, -1], temperature, top_k, top_p, rng)  # [B]
        if eos is not None:  # an ended row continues with padding
            new = np.where(ended, pad_token_id, new)
            ended = ended | np.isin(new, eos)
        new = new[:, None]  # [B, 1]
        tokens = numpy.concatenate([tokens, new], axis=1)  # numpy's own: the arrays' library
        if attention_mask is not None:
            attention_mask = numpy.concatenate([attention_mask, np.ones_like(new, dtype=bool)], 1)
        if eos is not None and bool(np.all(ended)):
            break
    return tokens


def _next_token(logits, temperature, top_k, top_p, rng):
    # [B, V] -> int [B]
    if temperature == 0:
        return np.argmax(logits, axis=-1)  # the first maximum on ties, as torch.argmax
    # Shifted by the row max and divided in float64: a temperature too small for float32 (1e-300
    # is 0 there) still gives its limit, -inf (weight 0) to every token but the most likely.
    shifted = (logits - np.max(logits, axis=-1, keepdims=True)).astype(numpy.float64)
    with numpy.errstate(over="ignore"):
        logits = shifted / temperature
    if top_k is not None:  # keep the top_k largest logits of each row
        kth = np.sort(logits, axis=-1)[:, -min(top_k, logits.shape[-1])][:, None]  # as HF
        logits = np.where(logits >= kth, logits, -np.inf)
    if top_p is not None:
        logits = np.where(_nucleus(logits, top_p), logits, -np.inf)
    p = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    cdf = np.cumsum(p, axis=-1)  # [B, V]
    cdf = cdf / cdf[:, -1:]  # ends at exactly 1: every u in [0, 1) falls on a token
    u = rng.random((logits.shape[0], 1))  # inverse-CDF sampling, one uniform per row
    return np.sum(cdf <= u, axis=-1)  # the first token whose cdf exceeds u, never one of weight 0


def _nucleus(logits, top_p):
    # [B, V] -> bool [B, V]: the most likely tokens whose probabilities reach top_p (Holtzman et
    # al. 2019), as transformers' TopPLogitsWarper: drop, from the least likely up, the tokens
    # whose cumulative probability stays <= 1 - top_p; the most likely token always stays.
    p = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    p = p / np.sum(p, axis=-1, keepdims=True)
    order = np.argsort(logits, axis=-1, kind="stable")  # least likely first
    cumulative = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
    keep = (cumulative > 1 - top_p) | (np.arange(p.shape[-1], like=p) == p.shape[-1] - 1)
    return np.take_along_axis(keep, np.argsort(order, axis=-1), axis=-1)


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
    if eos_token_id is not None:
        eos = numpy.atleast_1d(as_int_array("eos_token_id", numpy.asarray(eos_token_id)))
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, numbers.Integral):
            raise ValueError(f"eos_token_id={eos_token_id!r} needs pad_token_id, the int that "
                             f"fills a row after its end, got {pad_token_id!r} (model.generate "
                             "uses the eos token when the model has no pad token)")
    if config.get("position", "learned") == "learned" and isinstance(
            params, checks.DICT_TYPES) and "position_embedding" in params:
        table = checks.as_array("params['position_embedding']", params["position_embedding"])
        n_positions = table.shape[0] if table.ndim else 0
        if tokens.shape[1] + n_new - 1 > n_positions:
            raise ValueError(f"n_new={n_new} after {tokens.shape[1]} tokens needs "
                             f"{tokens.shape[1] + n_new - 1} positions, but "
                             f"params['position_embedding'] has {n_positions}")
    return int(n_new), tokens, attention_mask, eos
