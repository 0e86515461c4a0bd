"""Qwen3-Next (Qwen Team 2025, "Qwen3-Next"; Gated DeltaNet from Yang et al. 2024, "Gated Delta
Networks"; gated attention from Qiu et al. 2025, "Gated Attention for Large Language Models"),
dense layers only. Tested against transformers' models/qwen3_next/modeling_qwen3_next.py
(tests/test_qwen3_next.py).

What the family changes in Llama's model: its token mixers. A hybrid of Gated DeltaNet layers
(minattn.gated_deltanet, a recurrent state of fixed size in place of the KV cache) and gated
attention layers (minattn.gated_attention), in the pattern config.layer_types gives (every
full_attention_interval-th layer attention, 3 of 4 recurrent in the released models), each
plugged in as one entry of the config's "attention" list; RMSNorm with (1 + w)
(zero-centred weights); SwiGLU feed-forwards.

The cache is one dict per layer: {"k", "v"} for an attention layer, {"conv", "state"} (fixed
size) for a recurrent one.
"""
import functools

import numpy

from ..gated_attention import gated_attention
from ..gated_deltanet import gated_deltanet
from . import hf


def zero_centered(norm):
    """Qwen3-Next's RMSNorm scales by (1 + w), its weight w initialised at 0 (a "zero-centred"
    weight, decayed towards the identity by weight decay): minattn's rms_norm with gamma = 1 + w."""
    return {"gamma": 1.0 + hf.array(norm.weight)}


def from_hf(model):
    """Qwen3NextForCausalLM whose layers are all dense (num_experts=0, or every layer in
    mlp_only_layers or off the decoder_sparse_step) -> (params, kwargs); a model with an
    experts layer is refused naming its layers."""
    config, inner = model.config, model.model
    _check_supported(config)
    layers, sublayers = [], []
    for i, layer in enumerate(inner.layers):
        if config.layer_types[i] == "linear_attention":
            mixer = _gated_deltanet(layer.linear_attn)
            sublayers.append(functools.partial(
                gated_deltanet, n_key_heads=config.linear_num_key_heads,
                n_value_heads=config.linear_num_value_heads))
        else:
            mixer = _gated_attention(layer.self_attn, config)
            sublayers.append(gated_attention)
        m = layer.mlp
        layers.append({"self_attention": mixer,
                       "self_attention_norm": zero_centered(layer.input_layernorm),
                       "feed_forward": {"w_gate": hf.weight(m.gate_proj.weight),
                                        "w_up": hf.weight(m.up_proj.weight),
                                        "w_down": hf.weight(m.down_proj.weight)},
                       "feed_forward_norm": zero_centered(layer.post_attention_layernorm)})
    params = {"token_embedding": hf.array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": zero_centered(inner.norm),
              **hf.unembedding(model, inner.embed_tokens.weight)}
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "d_k": config.head_dim, "norm": "rms_norm", "activation": "swiglu",
              "eps": config.rms_norm_eps, "position": "rope",
              "rope_base": float(config.rope_parameters["rope_theta"]),
              "partial_rotary_factor": config.rope_parameters.get("partial_rotary_factor", 1.0),
              "attention": sublayers}
    return params, kwargs


def _gated_attention(attention, config):
    # q_proj's rows hold, head by head, the query's d_k rows then the gate's: [H, 2, d_k, D].
    n_heads, d_k = config.num_attention_heads, config.head_dim
    both = hf.array(attention.q_proj.weight).reshape(n_heads, 2, d_k, -1)
    return {"w_q": both[:, 0].reshape(n_heads * d_k, -1).T,
            "w_gate": both[:, 1].reshape(n_heads * d_k, -1).T,
            "w_k": hf.weight(attention.k_proj.weight), "w_v": hf.weight(attention.v_proj.weight),
            "w_o": hf.weight(attention.o_proj.weight),
            "q_norm": zero_centered(attention.q_norm), "k_norm": zero_centered(attention.k_norm)}


def _gated_deltanet(layer):
    # in_proj_qkvz's rows hold, key head by key head, its q, k, then the v and z of the value
    # heads it serves ([H_k, 2 d_k + 2 r d_v, D], r = H_v / H_k); in_proj_ba's, b then a
    # ([H_k, 2 r, D]). minattn keeps q, k, v side by side in the convolution's channel order.
    h_k, h_v, d_k, d_v = layer.num_k_heads, layer.num_v_heads, layer.head_k_dim, layer.head_v_dim
    r = h_v // h_k
    qkvz = hf.array(layer.in_proj_qkvz.weight).reshape(h_k, 2 * d_k + 2 * r * d_v, -1)
    q, k = qkvz[:, :d_k].reshape(h_k * d_k, -1), qkvz[:, d_k:2 * d_k].reshape(h_k * d_k, -1)
    v = qkvz[:, 2 * d_k:2 * d_k + r * d_v].reshape(h_v * d_v, -1)
    z = qkvz[:, 2 * d_k + r * d_v:].reshape(h_v * d_v, -1)
    ba = hf.array(layer.in_proj_ba.weight).reshape(h_k, 2 * r, -1)
    return {"w_qkv": numpy.concatenate([q, k, v]).T, "w_z": z.T,
            "w_b": ba[:, :r].reshape(h_v, -1).T, "w_a": ba[:, r:].reshape(h_v, -1).T,
            "conv": hf.array(layer.conv1d.weight)[:, 0, :].T,  # [C, 1, K] -> [K, C]
            "dt_bias": hf.array(layer.dt_bias), "A_log": hf.array(layer.A_log),
            "gamma": hf.array(layer.norm.weight), "w_out": hf.weight(layer.out_proj.weight)}


def _check_supported(config):
    n_layers = config.num_hidden_layers
    experts = [i for i in range(n_layers) if i not in config.mlp_only_layers
               and config.num_experts > 0 and (i + 1) % config.decoder_sparse_step == 0]
    if experts:
        raise ValueError(f"Qwen3-Next with mixture of experts layers ({experts} of {n_layers}; "
                         f"num_experts={config.num_experts}, decoder_sparse_step="
                         f"{config.decoder_sparse_step}, mlp_only_layers="
                         f"{config.mlp_only_layers}) is not supported: minattn has no experts "
                         "layer (num_experts=0 or every layer in mlp_only_layers is)")
    if config.hidden_act != "silu":
        raise ValueError(f"hidden_act={config.hidden_act!r} is not supported (SwiGLU and the "
                         "convolution's activation use 'silu')")
    if getattr(config, "attention_bias", False):
        raise ValueError("attention_bias=True is not supported for Qwen3-Next")
    rope = dict(config.rope_parameters)
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"rope_parameters with rope_type {rope['rope_type']!r} are not "
                         "supported for Qwen3-Next (default RoPE only, partial or not)")
    unknown = set(config.layer_types[:n_layers]) - {"linear_attention", "full_attention"}
    if unknown:
        raise ValueError(f"layer_types {sorted(unknown)} are not supported (Qwen3-Next has "
                         "'linear_attention' and 'full_attention')")


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"qwen3_next": from_hf}
