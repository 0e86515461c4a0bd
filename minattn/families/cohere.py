"""Cohere (Command R, Cohere 2024). Tested against transformers' models/cohere/modeling_cohere.py
(tests/test_hf_families.py).

What the family changes in Llama's block: a parallel block under one LayerNorm without bias,
    h = layer_norm(x);  x = x + self_attention(h) + gated_feed_forward(h)
the logits times logit_scale (folded into the unembedding here), and interleaved RoPE, which
pairs features (2i, 2i + 1): each head's q and k columns are reordered here to
(even..., odd...), where minattn's rotate-half pairs i with i + d/2 (the same rotation).
"""
import autograd.numpy as np

from . import hf, llama

def from_hf(model):
    # Cohere (Command R): a parallel block under one LayerNorm without bias, SwiGLU, logits times
    # logit_scale (folded into the unembedding, untied), and interleaved RoPE, which pairs
    # features (2i, 2i + 1): each head's q and k columns are reordered to (even..., odd...) here,
    # where minattn's rotate-half pairs i with i + d/2 (the same rotation; section 20 of the
    # walkthrough, DeepSeek's interleaved RoPE).
    config, inner = model.config, model.model
    if config.use_qk_norm:
        hf.refuse_per_head_layer_norm("use_qk_norm", "Cohere")
    hf.check_silu(config)
    rope_base, rope_scaling = hf.rope_settings(config)
    n_heads, n_kv_heads = config.num_attention_heads, config.num_key_value_heads
    d_k = config.hidden_size // n_heads
    layers = []
    for layer in inner.layers:
        block = llama.sublayers_from_hf(layer)
        attention = block["self_attention"]
        for p, heads in (("q", n_heads), ("k", n_kv_heads)):
            for key in (f"w_{p}", f"b_{p}"):
                if key in attention:
                    attention[key] = _halves_from_interleaved(attention[key], heads, d_k)
        norm = {"gamma": hf.array(layer.input_layernorm.weight)}
        norm["beta"] = np.zeros_like(norm["gamma"])  # CohereLayerNorm has no bias
        block.update(self_attention_norm=norm, feed_forward_norm=norm)
        layers.append(block)
    final = {"gamma": hf.array(inner.norm.weight)}
    unembedding = hf.unembedding(model, inner.embed_tokens.weight).get(
        "lm_head", hf.array(inner.embed_tokens.weight).T)
    params = {"token_embedding": hf.array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": {**final, "beta": np.zeros_like(final["gamma"])},
              "lm_head": unembedding * config.logit_scale}
    kwargs = {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "norm": "layer_norm",
              "activation": "swiglu", "eps": config.layer_norm_eps, "position": "rope",
              "rope_base": rope_base, "rope_scaling": rope_scaling, "parallel": True}
    return params, kwargs


def _halves_from_interleaved(w, n_heads, d_k):
    # [..., H d_k] with each head's features in RoPE pairs (x0, x1), (x2, x3), ... ->
    # (x0, x2, ..., x1, x3, ...): the pairs (i, i + d_k/2) of rotate-half.
    heads = np.reshape(w, w.shape[:-1] + (n_heads, d_k))
    return np.reshape(np.concatenate([heads[..., 0::2], heads[..., 1::2]], axis=-1), w.shape)


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"cohere": from_hf}
