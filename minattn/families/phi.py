"""Phi (1, 1.5, 2: Gunasekar et al. 2023, "Textbooks Are All You Need"; Li et al. 2023). Tested
against transformers' models/phi/modeling_phi.py (tests/test_hf_families.py).

What the family changes: GPT-NeoX's parallel block (partial RoPE, parallel residual) under ONE
LayerNorm read by both sublayers,
    h = layer_norm(x);  x = x + self_attention(h) + feed_forward(h)
and an unembedding with a bias (params "lm_head_bias").
"""
from . import hf

def from_hf(model):
    # Phi (1, 1.5, 2): GPT-NeoX's parallel block under one LayerNorm, partial RoPE, q/k/v/o and
    # a GELU feed-forward with biases, and an unembedding with a bias.
    config, inner = model.config, model.model
    if config.qk_layernorm:
        raise ValueError("qk_layernorm=True is not supported: Phi's QK-norm is a LayerNorm; "
                         "minattn's QK-norm is an RMSNorm")
    activation = hf.activation(config)
    partial = hf.partial_rotary_factor(config)
    rope_base, rope_scaling = hf.rope_settings(config, partial_rotary_factor=partial)
    layers = []
    for layer in inner.layers:
        a, m = layer.self_attn, layer.mlp
        attention = {}
        for p, proj in zip("qkvo", (a.q_proj, a.k_proj, a.v_proj, a.dense)):
            attention[f"w_{p}"], attention[f"b_{p}"] = hf.weight(proj.weight), hf.array(proj.bias)
        norm = hf.layer_norm(layer.input_layernorm)[0]  # one norm, both sublayers
        layers.append({"self_attention": attention, "self_attention_norm": norm,
                       "feed_forward": {"w_1": hf.weight(m.fc1.weight), "b_1": hf.array(m.fc1.bias),
                                        "w_2": hf.weight(m.fc2.weight), "b_2": hf.array(m.fc2.bias)},
                       "feed_forward_norm": norm})
    params = {"token_embedding": hf.array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": hf.layer_norm(inner.final_layernorm)[0],
              **hf.unembedding(model, inner.embed_tokens.weight),
              "lm_head_bias": hf.array(model.lm_head.bias)}
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "norm": "layer_norm", "activation": activation,
              "eps": config.layer_norm_eps, "position": "rope", "rope_base": rope_base,
              "rope_scaling": rope_scaling, "partial_rotary_factor": partial, "parallel": True}
    return params, kwargs


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"phi": from_hf}
