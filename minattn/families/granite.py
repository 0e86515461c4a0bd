"""Granite (IBM's Granite 3.0 language models, 2024). Tested against transformers'
models/granite/modeling_granite.py (tests/test_hf_families.py).

What the family changes: Llama's block with four scalar multipliers, each on a linear map's
input or output, so each is folded into a weight or an existing keyword here and the block is
Llama's, unchanged.
"""
from . import llama

def from_hf(model):
    # Granite: Llama's block with four multipliers, each a scalar on a linear map's input or
    # output, so each lands on a weight or on an existing keyword: the embeddings times
    # embedding_multiplier (embedding_scale), the scores times attention_multiplier (in place of
    # 1/sqrt(d_k): query_pre_attn_scalar = attention_multiplier^-2), each sublayer's output times
    # residual_multiplier (folded into w_o and w_down), the logits divided by logits_scaling
    # (folded into the unembedding, untied).
    config = model.config
    for key in ("embedding_multiplier", "attention_multiplier", "residual_multiplier",
                "logits_scaling"):
        if not getattr(config, key) > 0:
            raise ValueError(f"{key}={getattr(config, key)!r} is not supported (a positive "
                             "scale)")
    params, kwargs = llama.from_hf(model)
    residual = config.residual_multiplier
    for layer in params["layers"]:
        attention, feed = layer["self_attention"], layer["feed_forward"]
        attention.update({k: attention[k] * residual for k in ("w_o", "b_o") if k in attention})
        feed["w_down"] = feed["w_down"] * residual
    unembedding = params.get("lm_head", params["token_embedding"].T)
    params["lm_head"] = unembedding / config.logits_scaling
    kwargs.update(embedding_scale=config.embedding_multiplier,
                  query_pre_attn_scalar=config.attention_multiplier ** -2)
    return params, kwargs


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"granite": from_hf}
