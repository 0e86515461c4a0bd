"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"). Tested
against transformers' models/gpt2/modeling_gpt2.py (tests/test_hf_parity.py).

What the family is: the canonical pre-norm block with LayerNorm, learned positions, biases, a
tanh-GELU feed-forward and tied embeddings, i.e. minattn.causal_lm's defaults
(norm="layer_norm", activation="gelu_tanh", position="learned"). Its tensors are Conv1D's,
stored [d_in, d_out] already (no transpose), q, k and v packed side by side in c_attn.
"""
from . import hf

def from_hf(model):
    config = model.config
    activation = hf.activation(config, "activation_function")
    if getattr(config, "scale_attn_by_inverse_layer_idx", False) or \
            getattr(config, "reorder_and_upcast_attn", False) or not config.scale_attn_weights:
        raise ValueError("GPT-2 attention variants (scale_attn_by_inverse_layer_idx, "
                         "reorder_and_upcast_attn, scale_attn_weights=False) are not supported")
    inner, d_model = model.transformer, config.n_embd
    layers = []
    for block in inner.h:
        # GPT-2's Conv1D stores its weight [d_in, d_out] already: no transpose. c_attn packs
        # q, k, v side by side along d_out.
        w_qkv, b_qkv = hf.array(block.attn.c_attn.weight), hf.array(block.attn.c_attn.bias)
        attention = {f"w_{p}": w_qkv[:, i * d_model:(i + 1) * d_model] for i, p in enumerate("qkv")}
        attention.update({f"b_{p}": b_qkv[i * d_model:(i + 1) * d_model]
                          for i, p in enumerate("qkv")})
        attention["w_o"], attention["b_o"] = (hf.array(block.attn.c_proj.weight),
                                              hf.array(block.attn.c_proj.bias))
        layers.append({
            "self_attention": attention,
            "self_attention_norm": hf.layer_norm(block.ln_1)[0],
            "feed_forward": {"w_1": hf.array(block.mlp.c_fc.weight), "b_1": hf.array(block.mlp.c_fc.bias),
                             "w_2": hf.array(block.mlp.c_proj.weight),
                             "b_2": hf.array(block.mlp.c_proj.bias)},
            "feed_forward_norm": hf.layer_norm(block.ln_2)[0]})
    params = {"token_embedding": hf.array(inner.wte.weight),
              "position_embedding": hf.array(inner.wpe.weight), "layers": layers,
              "final_norm": hf.layer_norm(inner.ln_f)[0],
              **hf.unembedding(model, inner.wte.weight)}
    kwargs = {"n_heads": config.n_head, "norm": "layer_norm",
              "activation": activation,
              "eps": config.layer_norm_epsilon, "position": "learned"}
    return params, kwargs


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"gpt2": from_hf}
