"""The Transformer decoder: a block of causal self-attention (with its KV cache, kv_cache.py),
optionally cross-attention to an encoder's memory, and a feed-forward; and the stack of blocks.

The block is the standard one, in the forms the course teaches:
    torch.nn.TransformerDecoderLayer  post- or pre-norm, LayerNorm, relu/gelu, cross-attention
    GPT-2   pre-norm, LayerNorm, learned positions, gelu_tanh, biases, tied embeddings
    Llama   pre-norm, rms_norm, RoPE, SwiGLU (activation="swiglu"), GQA, no biases
A family whose block differs (its norms after the sublayers, a parallel residual) writes its
block in its own file, minattn/families/, registered for the calls that select it
(engine/variants.py).
"""
import autograd.numpy as np

from .engine import checks, variants
from .engine.param_checks import ROPE_BASE
from .engine.threads import block_of_a_prompt, blocks_of_a_width, threads_chosen_by_timing
from .engine.decoder_checks import _check_config, _check_decoder, _check_decoder_block, \
    check_head_width, check_keywords
from .kv_cache import self_attention
from .linear import project
from .multi_head import init_multi_head_attention, multi_head_attention
from .normalization import init_layer_norm, layer_norm, rms_norm
from .position_wise import (feed_forward, gated_feed_forward, geglu, init_feed_forward,
                            init_gated_feed_forward)


def geglu_tanh(params, x):
    """GEGLU with the tanh GELU (Gemma's MLP): down(gelu_tanh(gate(x)) * up(x)), [..., D] ->
    [..., D]; params as gated_feed_forward's."""
    # [..., D] -> [..., F] -> [..., D]
    gate, up = project(params, x, ("gate", "up"))  # [..., F] each
    hidden = geglu(gate, up)  # gelu_tanh(gate) * up, [..., F]
    return project(params, hidden, ("down",))[0]  # [..., D]


# The gated feed-forwards (their names are checked in engine/decoder_checks.py's GATED).
GATED = {"swiglu": gated_feed_forward, "geglu_tanh": geglu_tanh}


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
    params = {"self_attention": _init_attention(rng, d_model, n_heads, n_kv_heads, d_k, bias,
                                                qk_norm, dtype),
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


def _init_attention(rng, d_model, n_heads, n_kv_heads, d_k, bias, qk_norm, dtype):
    # torch's init where the heads fill d_model, else _init_self_attention's; QK-norm's gammas 1
    attention = (init_multi_head_attention(rng, d_model, n_heads, n_kv_heads=n_kv_heads,
                                           bias=bias, dtype=dtype)
                 if d_k * n_heads == d_model else
                 _init_self_attention(rng, d_model, n_heads, n_kv_heads, d_k, bias, dtype))
    if qk_norm:
        attention.update({key: {"gamma": np.ones(d_k, dtype=dtype)}
                          for key in ("q_norm", "k_norm")})
    return attention


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
                  norm_first=False, norm="layer_norm", activation="relu", eps=None, cache=None,
                  attention=None, feed_forward=None, **attention_config):
    """One decoder block, x [..., L, D] -> [..., L, D]; with a cache -> (x, new cache).
    Post-norm (torch's default): x = norm(x + sublayer(x)); pre-norm (norm_first=True):
    x = x + sublayer(norm(x)). Sublayers: masked self-attention (mask over L_past + L keys),
    cross-attention to memory [..., L_m, D] (with memory_mask [L, L_m]) when given, the
    feed-forward (activation: "relu", "gelu", "gelu_tanh", or gated: "swiglu", "geglu_tanh").
    attention: the self-attention sublayer (None: minattn.self_attention), a function with its
    signature, where an attention variant plugs in; feed_forward: the feed-forward sublayer
    (None: position_wise), a function (params, x, activation) -> [..., D], where a variant plugs
    in (hooks: minattn.hooks); attention_config: the attention's further keywords
    (n_kv_heads, d_k, positions, rope_base, rope_scaling, ...). The defaults are torch's
    TransformerDecoderLayer's: post-norm, LayerNorm, ReLU, and no RoPE (positions None; a
    rope_base given without them is refused); eps None: each norm its own default, layer_norm's
    1e-5 (torch's) or rms_norm's 1e-6, and QK-norm the attention's (eps given: every norm's). A
    Llama block gives norm_first=True, norm="rms_norm", activation="swiglu", its model's eps
    (rms_norm_eps) and positions (README, "Check your own kernel")."""
    # [..., L, D] (+ memory [..., L_m, D]) -> [..., L, D]
    params, x, memory = _check_decoder_block(params, x, memory, memory_mask, n_heads,
                                             attention_config.get("n_kv_heads"), norm, activation,
                                             eps, False, norm_first)
    h = _normalize(x, params["self_attention_norm"], norm, eps) if norm_first else x
    out, new_cache = _self_attention(attention, params["self_attention"], h, mask, eps,
                                     n_heads=n_heads, cache=cache, **attention_config)
    x = x + out if norm_first else _normalize(x + out, params["self_attention_norm"], norm, eps)
    if memory is not None:  # cross-attention: the queries are x, the keys and values the memory
        attend = lambda h: multi_head_attention(params["cross_attention"], h, memory, memory,  # noqa
                                                memory_mask, n_heads=n_heads)[0]
        x = _residual(x, attend, params["cross_attention_norm"], norm, eps, norm_first)
    mlp = lambda h: (feed_forward or position_wise)(params["feed_forward"], h, activation)  # noqa
    x = _residual(x, mlp, params["feed_forward_norm"], norm, eps, norm_first)
    return x if cache is None else (x, new_cache)


# Its variants, each in its own file, answer the calls that select them (engine/variants.py);
# a prompt's blocks, the variants' too, run on the BLAS threads timing found faster (threads.py).
decoder_block = variants.dispatch(decoder_block, shows={  # the attention's keywords it passes on
    "n_kv_heads": None, "d_k": None, "positions": None, "rope_base": ROPE_BASE,
    "rope_scaling": None})
decoder_block = threads_chosen_by_timing(block_of_a_prompt, blocks_of_a_width)(decoder_block)


def _self_attention(attention, params, h, mask, eps, **config):
    # The block's self-attention sublayer: attention= where given, else minattn's, given the
    # block's eps where one was given (eps_given); a keyword that neither takes is refused by
    # name at the block (not from inside the attention).
    check_keywords("decoder_block", config, (self_attention, attention) if attention else
                   (self_attention,))
    return (attention or self_attention)(params, h, mask, **eps_given(eps), **config)


def _residual(x, sublayer, norm_params, norm, eps, norm_first):
    # pre-norm: x + sublayer(norm(x)); post-norm (torch's default): norm(x + sublayer(x))
    if norm_first:
        return x + sublayer(_normalize(x, norm_params, norm, eps))
    return _normalize(x + sublayer(x), norm_params, norm, eps)


def position_wise(params, x, activation):
    """The block's feed-forward, [..., D] -> [..., D]: a gated one (activation "swiglu",
    "geglu_tanh": GATED) or feed_forward with that activation."""
    if activation in GATED:
        return GATED[activation](params, x)
    return feed_forward(params, x, activation=activation)


def init_decoder(rng, n_layers, d_model, n_heads, d_ff, *, final_norm=False, **block_config):
    """-> {"layers": [block params] * n_layers} (+ "final_norm"); block_config as
    init_decoder_block (n_kv_heads, cross_attention, norm, activation, bias, dtype)."""
    n_layers = checks.check_size("n_layers", n_layers)
    check_keywords("init_decoder", block_config, (init_decoder_block,))
    params = {"layers": [init_decoder_block(rng, d_model, n_heads, d_ff, **block_config)
                         for _ in range(n_layers)]}
    if final_norm:
        params["final_norm"] = _init_norm(d_model, block_config.get("norm", "layer_norm"),
                                          block_config.get("dtype", np.float64))
    return params


def decoder(params, x, mask=None, *, memory=None, memory_mask=None, cache=None, **config):
    """A stack of decoder blocks, x [..., L, D] -> [..., L, D] (+ the final norm if params has
    one); with a cache (a tuple with one {"k", "v"} per layer) -> (x, new cache). config as
    decoder_block (n_heads, norm_first, norm, activation, eps, attention, and the attention's:
    n_kv_heads, d_k, positions, rope_base, rope_scaling). A list (for mask, or a config value)
    holds one entry per layer: local and global layers with their own windows (masks) or RoPE
    bases."""
    # [..., L, D] -> [..., L, D]
    layers = _check_decoder(params, cache, mask, config, takers(config))
    new_cache = []
    for i, layer in enumerate(layers):
        out = decoder_block(layer, x, mask[i] if isinstance(mask, list) else mask, memory=memory,
                            memory_mask=memory_mask, cache=None if cache is None else cache[i],
                            **layer_config(config, i))
        x, layer_cache = out if cache is not None else (out, None)
        new_cache.append(layer_cache)
    if "final_norm" in params:
        x = _final_norm(params["final_norm"], x, config)
    return x if cache is None else (x, tuple(new_cache))


def takers(config):
    """The functions a decoder's config reaches (decoder_block, and its attention: minattn's, and
    config's attention= plug, one or a list, where given), whose keywords it may hold."""
    plugs = config.get("attention")
    plugs = plugs if isinstance(plugs, list) else [plugs]
    return (decoder_block, self_attention, *(plug for plug in plugs if plug is not None))


def layer_config(config, layers):
    """config with each per-layer value (a list, one entry a layer: decoder's rule) cut to
    layers: an int, that layer's value; a slice, the list of those layers' values."""
    return {key: value[layers] if isinstance(value, list) else value
            for key, value in config.items()}


def _final_norm(p, x, config):
    return _normalize(x, p, config.get("norm", "layer_norm"), config.get("eps"))


def normalize(x, p, norm, eps):
    """The block's norm, [..., D] -> [..., D]: rms_norm or layer_norm with its params p
    ({"gamma"} or {"gamma", "beta"}) and eps (None: the norm's own default)."""
    return _normalize(x, p, norm, eps)


def _normalize(x, p, norm, eps):
    # [..., D] -> [..., D]: the block's norm, its params p ({"gamma"} or {"gamma", "beta"}),
    # with eps, or (None) the norm's own default
    if norm == "rms_norm":
        return rms_norm(x, p["gamma"], **eps_given(eps))
    return layer_norm(x, p["gamma"], p["beta"], **eps_given(eps))


def eps_given(eps):
    """{"eps": eps}, or {} for eps None: a block's eps reaches each norm, and its attention (for
    QK-norm), only where given, so that one left alone takes that norm's own default."""
    return {} if eps is None else {"eps": eps}
