"""DiffLlama: Llama with differential attention (Ye et al. 2024, "Differential Transformer").
Tested against transformers' models/diffllama/modeling_diffllama.py (tests/test_variants_hf.py,
tests/test_differential.py).

What the family changes in Llama's model: its attention, minattn.differential's
differential_attention, the difference of two softmax maps (softmax(q1 k1ᵀ) - λ softmax(q2 k2ᵀ)),
each head normalised and scaled by (1 - λ_init). It plugs in as causal_lm(attention=...), the
config's "attention"; each layer's λ_init travels in its params.
"""
import autograd.numpy as np

from ..differential import differential_attention
from . import hf, llama


def from_hf(model):
    """DiffLlamaForCausalLM -> (params, kwargs); each layer's λ_init (transformers' lambda_init_fn
    of its layer_idx) travels in its params as "lambda_init"."""
    config = model.config
    d = config.hidden_size // config.num_attention_heads
    if getattr(config, "head_dim", d) != d:
        raise ValueError(f"head_dim={config.head_dim} != hidden_size / num_attention_heads = {d} "
                         "is not supported")

    def attention(a):
        params = {}
        for p, proj in zip("qkvo", (a.q_proj, a.k_proj, a.v_proj, a.o_proj)):
            params[f"w_{p}"] = hf.weight(proj.weight)
            if proj.bias is not None:  # attention_bias=True
                params[f"b_{p}"] = hf.array(proj.bias)
        params.update({name: hf.array(getattr(a, name))
                       for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")})
        params["lambda_init"] = np.array(a.lambda_init, dtype=params["w_q"].dtype)
        if a.groupnorm.eps != config.rms_norm_eps:
            raise ValueError(f"the per-head norm's eps={a.groupnorm.eps} differs from "
                             f"rms_norm_eps={config.rms_norm_eps}: minattn's block takes one eps")
        return params

    params, kwargs = llama.with_attention(model, config, model.model.layers, attention, hf.default_rope_base(config))
    kwargs.update({"n_kv_heads": config.num_key_value_heads, "attention": differential_attention})
    return params, kwargs


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"diffllama": from_hf}
