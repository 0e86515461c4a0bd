"""Phi-3 (Abdin et al. 2024, "Phi-3 Technical Report"). Tested against transformers'
models/phi3/modeling_phi3.py (tests/test_hf_families.py).

What the family changes: nothing in the computation; Llama's block (with a sliding window on
every layer where the config sets one, and RoPE on part of each head where
partial_rotary_factor < 1). Its tensors differ: q, k, v fused in one projection (qkv_proj) and
the gate and up projections in another (gate_up_proj), split here into Llama's params.
"""
from . import hf, llama

def from_hf(model):
    # Phi-3: Llama's block with q, k, v fused in one projection and gate, up in another.
    return llama.from_hf(model, _phi3_layer_from_hf)


def _phi3_layer_from_hf(layer):
    a, m = layer.self_attn, layer.mlp
    w_qkv, w_gate_up = hf.weight(a.qkv_proj.weight), hf.weight(m.gate_up_proj.weight)  # [D, ...]
    q_width = a.config.num_attention_heads * a.head_dim
    kv_width = a.num_key_value_heads * a.head_dim
    d_ff = w_gate_up.shape[1] // 2  # gate_up_proj's output: gate, then up (its .chunk(2))
    return {"self_attention": {"w_q": w_qkv[:, :q_width],
                               "w_k": w_qkv[:, q_width:q_width + kv_width],
                               "w_v": w_qkv[:, q_width + kv_width:],
                               "w_o": hf.weight(a.o_proj.weight)},
            "self_attention_norm": {"gamma": hf.array(layer.input_layernorm.weight)},
            "feed_forward": {"w_gate": w_gate_up[:, :d_ff], "w_up": w_gate_up[:, d_ff:],
                             "w_down": hf.weight(m.down_proj.weight)},
            "feed_forward_norm": {"gamma": hf.array(layer.post_attention_layernorm.weight)}}


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"phi3": from_hf}
