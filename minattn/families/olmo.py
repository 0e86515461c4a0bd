"""OLMo 2 and 3 (OLMo et al. 2024, "2 OLMo 2 Furious"; OLMo 3, 2025). Tested against transformers'
models/olmo2/modeling_olmo2.py and olmo3/modeling_olmo3.py (tests/test_model_families.py,
tests/test_hf_families.py).

What the family changes in Llama's block: the norms come after the sublayers only,
    x = x + rms_norm(self_attention(x))
    x = x + rms_norm(gated_feed_forward(x))
(params "post_self_attention_norm" and "post_feed_forward_norm", no norm before), and QK-norm
over all the heads of a token at once (gammas [H d_k] and [H_kv d_k]). OLMo 3 adds local
(sliding window) and global layers with their own RoPE.
"""
from . import hf, llama

def from_hf(model):
    # OLMo 2 and 3: Llama's block with its norms after the sublayers only,
    # x + post_norm(sublayer(x)), and QK-norm over all heads at once (gammas [H d_k] and
    # [H_kv d_k]); OLMo 3 adds local (sliding) and global layers with their own RoPE.
    rope = None if model.config.model_type == "olmo2" else hf.per_layer_rope
    return llama.from_hf(model, layer_from_hf, rope=rope)


def layer_from_hf(layer):
    return {**llama.sublayers_from_hf(layer),
            "post_self_attention_norm": {"gamma": hf.array(layer.post_attention_layernorm.weight)},
            "post_feed_forward_norm": {"gamma": hf.array(layer.post_feedforward_layernorm.weight)}}


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"olmo2": from_hf, "olmo3": from_hf}
