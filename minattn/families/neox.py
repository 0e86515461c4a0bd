"""GPT-NeoX (Black et al. 2022, "GPT-NeoX-20B"; Pythia, Biderman et al. 2023). Tested against
transformers' models/gpt_neox/modeling_gpt_neox.py (tests/test_hf_families.py).

What the family changes in GPT-2's block: RoPE on the first int(d_k * partial_rotary_factor)
features of each head only (minattn.rope.apply_partial_rope), and the parallel residual,
both sublayers reading the block's input:
    x = x + self_attention(layer_norm_1(x)) + feed_forward(layer_norm_2(x))
(use_parallel_residual=False gives GPT-2's sequential block). Its q, k, v are fused head by
head in query_key_value, split here.
"""
import functools

import autograd.numpy as np

from ..engine.decoder_checks import _check_decoder_block, check_partial_rope_attention
from ..engine.variants import implements, show
from ..kv_cache import self_attention
from ..language_model import causal_lm
from ..rope import apply_partial_rope
from ..transformer_decoder import decoder_block, eps_given, normalize, position_wise
from . import hf


def from_hf(model):
    # GPT-NeoX (Pythia): LayerNorm, partial RoPE, a GELU feed-forward with biases, q, k, v fused
    # head by head, and the parallel residual x + attention(ln_1(x)) + mlp(ln_2(x)) (or GPT-2's
    # sequential one: use_parallel_residual=False).
    config, inner = model.config, model.gpt_neox
    activation = hf.activation(config)
    partial = hf.partial_rotary_factor(config)
    rope_base, rope_scaling = hf.rope_settings(config, partial_rotary_factor=partial)
    n_heads = config.num_attention_heads
    layers = [layer_from_hf(layer, n_heads) for layer in inner.layers]
    params = {"token_embedding": hf.array(inner.embed_in.weight), "layers": layers,
              "final_norm": hf.layer_norm(inner.final_layer_norm)[0],
              **hf.unembedding(model, inner.embed_in.weight)}
    kwargs = {"n_heads": n_heads, "norm": "layer_norm",
              "activation": activation, "eps": config.layer_norm_eps,
              "position": "rope", "rope_base": rope_base, "rope_scaling": rope_scaling,
              "partial_rotary_factor": partial, "parallel": bool(config.use_parallel_residual)}
    return params, kwargs


@implements(decoder_block, "parallel", priority=30)
def parallel_block(params, x, mask=None, *, parallel, n_heads, norm="layer_norm",
                   activation="relu", eps=None, cache=None, attention=None, feed_forward=None,
                   memory=None, memory_mask=None, norm_first=False, **attention_config):
    """GPT-NeoX's parallel residual (parallel=True; pre-norm, no cross-attention): both
    sublayers read the block's input, x + attention(norm_1(x)) + feed_forward(norm_2(x)).
    Keywords as minattn.decoder_block's."""
    # [..., L, D] -> [..., L, D] (with a cache: and the new cache)
    params, x, _ = _check_decoder_block(params, x, memory, memory_mask, n_heads,
                                        attention_config.get("n_kv_heads"), norm, activation, eps,
                                        parallel, norm_first)
    h = normalize(x, params["self_attention_norm"], norm, eps)
    out, new_cache = (attention or self_attention)(params["self_attention"], h, mask,
                                                   n_heads=n_heads, cache=cache, **eps_given(eps),
                                                   **attention_config)
    h = normalize(x, params["feed_forward_norm"], norm, eps)
    x = x + out + (feed_forward or position_wise)(params["feed_forward"], h, activation)
    return x if cache is None else (x, new_cache)


@implements(self_attention, "partial_rotary_factor", priority=60)
def partial_rope_attention(params, x, mask=None, *, partial_rotary_factor, **config):
    """self_attention with RoPE on the first int(d_k * partial_rotary_factor) features of each
    head of q and k only (minattn.rope.apply_partial_rope; GPT-NeoX, Phi, StableLM)."""
    check_partial_rope_attention(params, x, mask, partial_rotary_factor, config)
    scaling = getattr(config.pop("rope", None), "keywords", {})  # a schedule's, if one came first
    rope = functools.partial(apply_partial_rope, partial_rotary_factor=partial_rotary_factor,
                             **scaling)
    return self_attention(params, x, mask, rope=rope, **config)


def layer_from_hf(layer, n_heads):
    a, m = layer.attention, layer.mlp
    # query_key_value's output is [H, 3, d_k] (view(..., H, 3 d_k), then chunk(3)): head h's
    # q, k and v are its three consecutive d_k-wide slices.
    w = hf.weight(a.query_key_value.weight)  # [D, 3 D]
    d_k = w.shape[1] // (3 * n_heads)
    heads = np.reshape(w, (w.shape[0], n_heads, 3, d_k))
    attention = {f"w_{p}": np.reshape(heads[:, :, i], (w.shape[0], n_heads * d_k))
                 for i, p in enumerate("qkv")}
    if a.query_key_value.bias is not None:  # attention_bias=True (the default)
        biases = np.reshape(hf.array(a.query_key_value.bias), (n_heads, 3, d_k))
        attention.update({f"b_{p}": np.reshape(biases[:, i], (n_heads * d_k,))
                          for i, p in enumerate("qkv")})
    attention["w_o"] = hf.weight(a.dense.weight)
    if a.dense.bias is not None:
        attention["b_o"] = hf.array(a.dense.bias)
    return {"self_attention": attention,
            "self_attention_norm": hf.layer_norm(layer.input_layernorm)[0],
            "feed_forward": {"w_1": hf.weight(m.dense_h_to_4h.weight),
                             "b_1": hf.array(m.dense_h_to_4h.bias),
                             "w_2": hf.weight(m.dense_4h_to_h.weight),
                             "b_2": hf.array(m.dense_4h_to_h.bias)},
            "feed_forward_norm": hf.layer_norm(layer.post_attention_layernorm)[0]}


# causal_lm passes these on to its blocks and their self-attention (**block_config)
show(causal_lm, partial_rotary_factor=None, parallel=False)

# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"gpt_neox": from_hf}
