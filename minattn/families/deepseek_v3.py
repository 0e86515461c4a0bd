"""DeepSeek-V3 (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report"; multi-head latent attention from
"DeepSeek-V2", 2024), dense layers only. Tested against transformers'
models/deepseek_v3/modeling_deepseek_v3.py (tests/test_variants_hf.py, tests/test_mla.py).

What the family changes in Llama's model: its attention, multi-head latent attention
(minattn.mla.latent_attention): keys and values are decompressed from a small latent
c_kv = rms_norm(x @ w_kv_a) of kv_lora_rank features, the one thing the KV cache must keep,
and each head's key is a part without RoPE (from the latent) joined to a RoPE part shared by
the heads. It plugs in as causal_lm(attention=...), the config's "attention". DeepSeek's
interleaved RoPE is permuted into rotate-half here; its YaRN softmax scale is folded into the
query weights.
"""
import functools
import math

import autograd.numpy as np

from ..mla import latent_attention
from . import hf, llama


def from_hf(model):
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
        params = {"w_kv_a": rope_columns(hf.weight(a.kv_a_proj_with_mqa.weight), r, r + d_rope),
                  "gamma_kv_a": hf.array(a.kv_a_layernorm.weight),
                  "w_kv_b": hf.weight(a.kv_b_proj.weight), "w_o": hf.weight(a.o_proj.weight)}
        if a.q_lora_rank is None:
            params["w_q"] = rope_columns(hf.weight(a.q_proj.weight), d_nope, d_nope + d_rope)
        else:
            params.update({"w_q_a": hf.weight(a.q_a_proj.weight),
                           "gamma_q_a": hf.array(a.q_a_layernorm.weight),
                           "w_q_b": rope_columns(hf.weight(a.q_b_proj.weight), d_nope,
                                                 d_nope + d_rope)})
        for name, proj in (("q_a", a.q_a_proj), ("kv_a", a.kv_a_proj_with_mqa), ("o", a.o_proj)):
            if proj is not None and proj.bias is not None:  # attention_bias=True
                bias = hf.array(proj.bias)
                params[f"b_{name}"] = rope_columns(bias, r, r + d_rope) if name == "kv_a" else bias
        return params

    # The latents' RMSNorms keep DeepseekV3RMSNorm's default eps (1e-6), not rms_norm_eps.
    eps = {layer.self_attn.kv_a_layernorm.variance_epsilon for layer in model.model.layers}
    rope_base, rope_scaling = hf.rope_settings(config)
    params, kwargs = llama.with_attention(model, config, model.model.layers, attention, rope_base)
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


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"deepseek_v3": from_hf}
