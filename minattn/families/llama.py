"""Llama (Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models"; Llama 2
and 3), and the models built exactly like it: Mistral (Jiang et al. 2023; a sliding window on
every layer) and Qwen2 (Yang et al. 2024; biases on q, k and v, sliding windows by layer type).
Tested against transformers' models/llama/modeling_llama.py, mistral/modeling_mistral.py and
qwen2/modeling_qwen2.py (tests/test_hf_parity.py, tests/test_hf_families.py).

What the family is: the canonical Llama block, nothing changed.
    x = x + self_attention(rms_norm(x))      RoPE (rotate-half), grouped-query attention
    x = x + gated_feed_forward(rms_norm(x))  SwiGLU
so its model is minattn.causal_lm with norm="rms_norm", activation="swiglu", position="rope".
This file holds its converter: the tensors through models/llama_layout.py (the name map the
GGUF and safetensors loaders share), the config through config_from_hf. The other families
that keep Llama's layer layout (Qwen3, Phi-3, Gemma, OLMo, SmolLM3, Granite) read through it.
"""
from ..models import llama_layout
from . import hf


def from_hf(model, read_layer=None, activation_key="hidden_act", rope=None):
    # Llama and the models built like it (Mistral, Qwen2, Qwen3, Phi-3): RMSNorm, RoPE, SwiGLU,
    # GQA. Llama's own layers are read through llama_layout, the name map the GGUF and
    # safetensors loaders share (models/chat_model.py); a family with other tensor names passes
    # its own read_layer.
    config = model.config
    if read_layer is None:
        tensors = dict(model.named_parameters())  # a tied lm_head is embed_tokens': listed once
        unknown = sorted(set(tensors) - set(llama_layout.names(len(model.model.layers))))
        if unknown:  # mlp_bias=True, or a part of another architecture: refused, never dropped
            raise ValueError(f"{type(model).__name__} has tensors outside the Llama layout: "
                             f"{', '.join(unknown[:4])}{' ...' if len(unknown) > 4 else ''} "
                             "(mlp_bias=True is not supported: minattn's SwiGLU has no biases)")
    kwargs = config_from_hf(config, len(model.model.layers), activation_key=activation_key,
                            rope=rope)
    inner = model.model
    layers = [(read_layer or layer_from_hf)(layer) for layer in inner.layers]
    params = {"token_embedding": hf.array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": {"gamma": hf.array(inner.norm.weight)},
              **hf.unembedding(model, inner.embed_tokens.weight)}
    return params, kwargs


def config_from_hf(config, n_layers, *, activation_key="hidden_act", rope=None):
    """A transformers Llama-style config (or any object with its attributes, e.g. config.json
    read into a SimpleNamespace) -> the keyword arguments of causal_lm. rope(config, n_layers)
    -> (rope_base, rope_scaling) for families whose layer types have their own RoPE."""
    partial = hf.partial_rotary_factor(config) if config.model_type in _PARTIAL_ROPE else 1.0
    rope_base, rope_scaling = rope(config, n_layers) if rope else \
        hf.rope_settings(config, partial_rotary_factor=partial)
    n_heads = config.num_attention_heads
    d_k = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    if activation_key:
        hf.check_silu(config)
    kwargs = {"n_heads": n_heads, "n_kv_heads": config.num_key_value_heads, "d_k": d_k,
              "norm": "rms_norm", "activation": "swiglu", "eps": config.rms_norm_eps,
              "position": "rope", "rope_base": rope_base, "rope_scaling": rope_scaling,
              "window": hf.windows(config, n_layers)}
    if partial != 1.0:
        kwargs["partial_rotary_factor"] = partial
    return kwargs


# The families whose transformers forward rotates part of each head (apply_rotary_pos_emb
# splitting off cos.shape[-1] features); Llama's, Mistral's and Qwen's rotate the whole head
# (a partial_rotary_factor there fails in transformers, and is refused here).
_PARTIAL_ROPE = ("phi3",)


def layer_from_hf(layer):
    # One decoder layer's modules -> its params, through llama_layout (Gemma's converter adds its
    # own norms on top).
    if getattr(layer.mlp.gate_proj, "bias", None) is not None:
        raise ValueError("mlp_bias=True is not supported: minattn's SwiGLU has no biases")
    tensors = dict(layer.named_parameters())
    return llama_layout.layer_params(
        lambda name: hf.array(tensors[name]) if name in tensors else None)


def sublayers_from_hf(layer):
    a, m = layer.self_attn, layer.mlp
    attention = {}
    for p, proj in zip("qkvo", (a.q_proj, a.k_proj, a.v_proj, a.o_proj)):
        attention[f"w_{p}"] = hf.weight(proj.weight)
        if proj.bias is not None:  # attention_bias=True; Qwen2: q, k, v only
            attention[f"b_{p}"] = hf.array(proj.bias)
    for key in ("q_norm", "k_norm"):  # QK-norm (Qwen3)
        if getattr(a, key, None) is not None:
            attention[key] = {"gamma": hf.array(getattr(a, key).weight)}
    if getattr(m.gate_proj, "bias", None) is not None:
        raise ValueError("mlp_bias=True is not supported: minattn's SwiGLU has no biases")
    return {"self_attention": attention,
            "feed_forward": {"w_gate": hf.weight(m.gate_proj.weight),
                             "w_up": hf.weight(m.up_proj.weight),
                             "w_down": hf.weight(m.down_proj.weight)}}


def with_attention(model, config, layers, attention, rope_base):
    # Llama's model with another attention: embeddings, pre-norm RMSNorm blocks with SwiGLU,
    # the head; attention(layer.self_attn) reads each layer's attention params (DeepSeek-V3,
    # DiffLlama).
    hf.check_silu(config)
    inner = model.model
    params = {"token_embedding": hf.array(inner.embed_tokens.weight),
              "layers": [{"self_attention": attention(layer.self_attn),
                          "self_attention_norm": {"gamma": hf.array(layer.input_layernorm.weight)},
                          "feed_forward": _swiglu(layer.mlp),
                          "feed_forward_norm":
                              {"gamma": hf.array(layer.post_attention_layernorm.weight)}}
                         for layer in layers],
              "final_norm": {"gamma": hf.array(inner.norm.weight)},
              **hf.unembedding(model, inner.embed_tokens.weight)}
    kwargs = {"n_heads": config.num_attention_heads, "norm": "rms_norm", "activation": "swiglu",
              "eps": config.rms_norm_eps, "position": "rope", "rope_base": rope_base}
    return params, kwargs


def _swiglu(mlp):
    return {"w_gate": hf.weight(mlp.gate_proj.weight), "w_up": hf.weight(mlp.up_proj.weight),
            "w_down": hf.weight(mlp.down_proj.weight)}


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"llama": from_hf, "mistral": from_hf, "qwen2": from_hf}
