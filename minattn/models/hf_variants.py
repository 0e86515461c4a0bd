"""Hugging Face converters for the attention variants: DeepSeek-V3 (multi-head latent attention,
minattn.mla; default RoPE or YaRN) and DiffLlama (differential attention, minattn.differential). Registered in
from_hf's table (minattn.models.interop); nothing is downloaded, torch is imported by the caller.

Each returns (params, kwargs): params in the decoder's layout ({"token_embedding", "layers":
[{"self_attention", "self_attention_norm", "feed_forward", "feed_forward_norm"}],
"final_norm", "lm_head"}), kwargs with "attention" (the self-attention sublayer, its config
bound) and the block's config.
"""
import functools
import math

import autograd.numpy as np

from ..differential import differential_attention
from ..mla import latent_attention
from .interop import _array, _unembedding, _weight, check_silu, rope_settings


def _default_rope(config):
    rope = getattr(config, "rope_parameters", None) or {"rope_type": "default",
                                                         "rope_theta": config.rope_theta}
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE scaling {rope['rope_type']!r} is not supported (default RoPE "
                         "only)")
    return float(rope["rope_theta"])


def _swiglu(mlp):
    return {"w_gate": _weight(mlp.gate_proj.weight), "w_up": _weight(mlp.up_proj.weight),
            "w_down": _weight(mlp.down_proj.weight)}


def _model(model, config, layers, attention, rope_base):
    # The parts every variant shares: embeddings, pre-norm RMSNorm blocks with SwiGLU, the head.
    check_silu(config)
    inner = model.model
    params = {"token_embedding": _array(inner.embed_tokens.weight),
              "layers": [{"self_attention": attention(layer.self_attn),
                          "self_attention_norm": {"gamma": _array(layer.input_layernorm.weight)},
                          "feed_forward": _swiglu(layer.mlp),
                          "feed_forward_norm":
                              {"gamma": _array(layer.post_attention_layernorm.weight)}}
                         for layer in layers],
              "final_norm": {"gamma": _array(inner.norm.weight)},
              **_unembedding(model, inner.embed_tokens.weight)}
    kwargs = {"n_heads": config.num_attention_heads, "norm": "rms_norm", "activation": "swiglu",
              "eps": config.rms_norm_eps, "position": "rope", "rope_base": rope_base}
    return params, kwargs


def deepseek_v3_from_hf(model):
    """DeepseekV3ForCausalLM whose layers are all dense (first_k_dense_replace >= the number of
    layers) -> (params, kwargs). DeepSeek's interleaved RoPE (rope_interleave=True) rotates the
    neighbours (2i, 2i + 1); its RoPE weight columns are permuted here to (even..., odd...), where
    rotate-half pairs i with i + d/2: the same rotation, so minattn's apply_rope serves both."""
    config = model.config
    n_layers = config.num_hidden_layers
    if config.first_k_dense_replace is None or config.first_k_dense_replace < n_layers:
        raise ValueError(f"mixture of experts layers (first_k_dense_replace="
                         f"{config.first_k_dense_replace} < num_hidden_layers={n_layers}) are not "
                         "supported: minattn converts DeepSeek-V3 models whose layers are all "
                         "dense")
    d_nope, d_rope = config.qk_nope_head_dim, config.qk_rope_head_dim
    n_heads, r = config.num_attention_heads, config.kv_lora_rank
    if config.num_key_value_heads != n_heads:
        raise ValueError(f"num_key_value_heads={config.num_key_value_heads} != "
                         f"num_attention_heads={n_heads} is not supported: transformers' "
                         "DeepSeek-V3 then repeats the latent's per-head keys (and fails); "
                         "minattn's latent attention has one key per head")
    order = np.arange(d_rope)
    if config.rope_interleave:  # (x0, x1, x2, x3, ...) -> (x0, x2, ..., x1, x3, ...)
        order = np.concatenate([order[0::2], order[1::2]])

    def rope_columns(w, start, width):  # permute each head's RoPE columns [start, start + d_rope)
        heads = np.reshape(w, w.shape[:-1] + (-1, width))
        heads = np.concatenate([heads[..., :start], heads[..., start:][..., order]], axis=-1)
        return np.reshape(heads, w.shape)

    def attention(a):
        params = {"w_kv_a": rope_columns(_weight(a.kv_a_proj_with_mqa.weight), r, r + d_rope),
                  "gamma_kv_a": _array(a.kv_a_layernorm.weight),
                  "w_kv_b": _weight(a.kv_b_proj.weight), "w_o": _weight(a.o_proj.weight)}
        if a.q_lora_rank is None:
            params["w_q"] = rope_columns(_weight(a.q_proj.weight), d_nope, d_nope + d_rope)
        else:
            params.update({"w_q_a": _weight(a.q_a_proj.weight),
                           "gamma_q_a": _array(a.q_a_layernorm.weight),
                           "w_q_b": rope_columns(_weight(a.q_b_proj.weight), d_nope,
                                                 d_nope + d_rope)})
        for name, proj in (("q_a", a.q_a_proj), ("kv_a", a.kv_a_proj_with_mqa), ("o", a.o_proj)):
            if proj is not None and proj.bias is not None:  # attention_bias=True
                bias = _array(proj.bias)
                params[f"b_{name}"] = rope_columns(bias, r, r + d_rope) if name == "kv_a" else bias
        return params

    # The latents' RMSNorms keep DeepseekV3RMSNorm's default eps (1e-6), not rms_norm_eps.
    eps = {layer.self_attn.kv_a_layernorm.variance_epsilon for layer in model.model.layers}
    rope_base, rope_scaling = rope_settings(config)
    params, kwargs = _model(model, config, model.model.layers, attention, rope_base)
    # DeepSeek's YaRN also multiplies the softmax scale by m(factor, mscale_all_dim)^2
    # (transformers' yarn_apply_mscale): folded into the query weights, which scale q (its
    # no-RoPE and RoPE parts alike, RoPE being linear) and so every score.
    query_scale = _yarn_softmax_mscale(config.rope_parameters) if rope_scaling else 1.0
    if query_scale != 1.0:
        w = "w_q" if config.q_lora_rank is None else "w_q_b"
        for layer in params["layers"]:
            layer["self_attention"][w] = layer["self_attention"][w] * query_scale
    kwargs.update(rope_scaling=rope_scaling, attention=functools.partial(
        latent_attention, qk_nope_head_dim=d_nope, qk_rope_head_dim=d_rope,
        v_head_dim=config.v_head_dim, latent_eps=eps.pop()))
    return params, kwargs


def _yarn_softmax_mscale(rope):
    # transformers' DeepSeek-V3: scaling * m^2 with m = 0.1 mscale_all_dim ln(factor) + 1 (1
    # where factor <= 1), when rope_parameters has a truthy mscale_all_dim.
    m = rope.get("mscale_all_dim") or 0
    if not m or rope["factor"] <= 1:
        return 1.0
    return (0.1 * m * math.log(rope["factor"]) + 1.0) ** 2


def diffllama_from_hf(model):
    """DiffLlamaForCausalLM -> (params, kwargs); each layer's λ_init (transformers' lambda_init_fn
    of its layer_idx) travels in its params as "lambda_init"."""
    config = model.config
    d = config.hidden_size // config.num_attention_heads
    if getattr(config, "head_dim", d) != d:
        raise ValueError(f"head_dim={config.head_dim} != hidden_size / num_attention_heads = {d} "
                         "is not supported")

    def attention(a):
        params = {}
        for p, proj in zip("qkvo", (a.q_proj, a.k_proj, a.v_proj, a.o_proj)):
            params[f"w_{p}"] = _weight(proj.weight)
            if proj.bias is not None:  # attention_bias=True
                params[f"b_{p}"] = _array(proj.bias)
        params.update({name: _array(getattr(a, name))
                       for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")})
        params["lambda_init"] = np.array(a.lambda_init, dtype=params["w_q"].dtype)
        if a.groupnorm.eps != config.rms_norm_eps:
            raise ValueError(f"the per-head norm's eps={a.groupnorm.eps} differs from "
                             f"rms_norm_eps={config.rms_norm_eps}: minattn's block takes one eps")
        return params

    params, kwargs = _model(model, config, model.model.layers, attention, _default_rope(config))
    kwargs.update({"n_kv_heads": config.num_key_value_heads, "attention": differential_attention})
    return params, kwargs


# By config.model_type, as from_hf's table.
CONVERTERS = {"deepseek_v3": deepseek_v3_from_hf, "diffllama": diffllama_from_hf}
