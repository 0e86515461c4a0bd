"""StableLM (Stability AI's StableLM 2, Bellagente et al. 2024, "Stable LM 2 1.6B Technical
Report"). Tested against transformers' models/stablelm/modeling_stablelm.py
(tests/test_hf_families.py).

What the family changes in Llama's block: LayerNorm for RMSNorm, partial RoPE, biases on q, k, v
(use_qkv_bias), and GPT-NeoX's parallel residual where use_parallel_residual (both sublayers
then reading the same input_layernorm).
"""
from . import hf, llama

def from_hf(model):
    # StableLM: Llama's attention and SwiGLU with LayerNorm, partial RoPE, q/k/v biases
    # (use_qkv_bias), and GPT-NeoX's parallel residual where use_parallel_residual, its two
    # sublayers then reading the same input_layernorm.
    config, inner = model.config, model.model
    if config.qk_layernorm:
        hf.refuse_per_head_layer_norm("qk_layernorm", "StableLM")
    hf.check_silu(config)
    partial = hf.partial_rotary_factor(config)
    rope_base, rope_scaling = hf.rope_settings(config, partial_rotary_factor=partial)
    parallel = bool(config.use_parallel_residual)
    layers = []
    for layer in inner.layers:
        block = llama.sublayers_from_hf(layer)
        block["self_attention_norm"] = hf.layer_norm(layer.input_layernorm)[0]
        block["feed_forward_norm"] = block["self_attention_norm"] if parallel else \
            hf.layer_norm(layer.post_attention_layernorm)[0]
        layers.append(block)
    params = {"token_embedding": hf.array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": hf.layer_norm(inner.norm)[0],
              **hf.unembedding(model, inner.embed_tokens.weight)}
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "norm": "layer_norm", "activation": "swiglu", "eps": config.layer_norm_eps,
              "position": "rope", "rope_base": rope_base, "rope_scaling": rope_scaling,
              "partial_rotary_factor": partial, "parallel": parallel}
    return params, kwargs


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"stablelm": from_hf}
