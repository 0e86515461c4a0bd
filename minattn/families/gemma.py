"""Gemma 1, 2 and 3 (Gemma Team 2024, "Gemma: Open Models Based on Gemini Research and
Technology"; "Gemma 2: Improving Open Language Models at a Practical Size"; 2025, "Gemma 3
Technical Report"). Tested against transformers' models/gemma/modeling_gemma.py,
gemma2/modeling_gemma2.py and gemma3/modeling_gemma3.py (tests/test_hf_families.py,
tests/test_model_families.py).

What the family changes in Llama's block:
- RMSNorm scales by (1 + w): stored here as gamma = 1 + w, so the norm is minattn's rms_norm;
- the embeddings times sqrt(D) (embedding_scale);
- GEGLU with the tanh GELU for SwiGLU (activation="geglu_tanh");
- Gemma 2, 3: sandwich norms, each sublayer's output normalised too,
      x = x + rms_norm(self_attention(rms_norm(x)))
  (params "post_self_attention_norm", "post_feed_forward_norm");
- Gemma 2, 3: scores scaled by query_pre_attn_scalar^-1/2 (not d_k^-1/2); Gemma 2 soft-caps
  them, cap * tanh(s / cap) (minattn.softcap), and the final logits too;
- Gemma 2, 3: local (sliding window) and global layers with their own RoPE bases; Gemma 3
  QK-norm.
"""
from ..engine import checks
from ..engine.decoder_checks import _check_decoder_block, check_scaled_causal_lm
from ..engine.variants import implements
from ..kv_cache import self_attention
from ..language_model import causal_lm, final_logits
from ..multi_head import multi_head_attention
from ..softcap import soft_cap
from ..transformer_decoder import decoder_block, eps_given, normalize, position_wise
from . import hf, llama, olmo

# The family's computation: its block (sandwich norms) and its model (scaled embeddings, capped
# logits). Its attention (a query scale, soft-capped scores) is minattn.softcap's
# scaled_self_attention; its norm, rms_norm with gamma = 1 + w; its feed-forward, GEGLU
# (minattn.transformer_decoder.geglu_tanh). Then its converter from transformers.


def _sandwich(params, x, mask=None, *, norm_first=False, **config):
    return norm_first and isinstance(params, checks.DICT_TYPES) and \
        ("post_self_attention_norm" in params or "post_feed_forward_norm" in params) and \
        not olmo.norms_after_only(params, norm_first=True)


@implements(decoder_block, when=_sandwich, priority=10)
def sandwich_block(params, x, mask=None, *, n_heads, norm_first, norm="layer_norm",
                   activation="relu", eps=None, cache=None, attention=None, feed_forward=None,
                   memory=None, memory_mask=None, **attention_config):
    """Gemma 2 and 3's block, sandwich norms: each sublayer's output normalised too,
    x = x + post_norm(sublayer(norm(x))) (params "post_self_attention_norm",
    "post_feed_forward_norm"; a norm params lacks is left out). Keywords as
    minattn.decoder_block's."""
    # [..., L, D] -> [..., L, D] (with a cache: and the new cache)
    params, x, memory = _check_decoder_block(params, x, memory, memory_mask, n_heads,
                                             attention_config.get("n_kv_heads"), norm,
                                             activation, eps, False, norm_first)
    pre = lambda h, name: normalize(h, params[name], norm, eps) if name in params else h  # noqa
    post = lambda h, name: pre(h, f"post_{name}")  # noqa: E731
    out, new_cache = (attention or self_attention)(
        params["self_attention"], pre(x, "self_attention_norm"), mask, n_heads=n_heads,
        cache=cache, **eps_given(eps), **attention_config)
    x = x + post(out, "self_attention_norm")
    if memory is not None:
        out = multi_head_attention(params["cross_attention"], pre(x, "cross_attention_norm"),
                                   memory, memory, memory_mask, n_heads=n_heads)[0]
        x = x + post(out, "cross_attention_norm")
    out = (feed_forward or position_wise)(params["feed_forward"], pre(x, "feed_forward_norm"),
                                          activation)
    x = x + post(out, "feed_forward_norm")
    return x if cache is None else (x, new_cache)


@implements(causal_lm, "embedding_scale", "final_logit_softcapping", priority=30)
def scaled_causal_lm(params, tokens, attention_mask=None, *, embedding_scale=None,
                     final_logit_softcapping=None, **config):
    """Gemma's model: causal_lm with the token embeddings times embedding_scale (sqrt(D); 0
    zeroes them) and the logits soft-capped at final_logit_softcapping (minattn.softcap; None:
    not capped; it caps the logits, which an unembed= hook replaces: not both). config: as
    causal_lm's."""
    # int [B, L] -> [B, L, V] (with a cache: and the new cache)
    scale, cap = check_scaled_causal_lm(params, embedding_scale, final_logit_softcapping,
                                        config.get("unembed"))
    embed = None if scale is None else lambda p, t: p["token_embedding"][t] * scale  # [B, L, D]
    out = causal_lm(params, tokens, attention_mask, embed=embed, **config)
    logits, new_cache = out if isinstance(out, tuple) else (out, None)
    logits = logits if cap is None else soft_cap(logits, cap)
    return logits if not isinstance(out, tuple) else (logits, new_cache)


@implements(final_logits, "final_logit_softcapping", priority=0)
def capped_final_logits(params, h, *, final_logit_softcapping, **config):
    """final_logits soft-capped at final_logit_softcapping, as Gemma's model caps its logits."""
    # [B, L, D] -> [B, L, V]
    _, cap = check_scaled_causal_lm(params, None, final_logit_softcapping, None)
    return soft_cap(final_logits(params, h, **config), cap)


def gemma1_from_hf(model):
    # Gemma (1): Llama's block with Gemma's RMSNorm (1 + w), embeddings times sqrt(D) and the
    # tanh-GELU gated feed-forward (its hidden_act; Gemma 2 and 3 read hidden_activation).
    config, inner = model.config, model.model
    _check_tanh_gelu("hidden_act", config.hidden_act)
    params, kwargs = llama.from_hf(model, _gemma1_layer_from_hf, activation_key=None)
    params["final_norm"] = _one_plus(inner.norm)
    scale = inner.embed_tokens.embed_scale  # the model's own value (a float32 buffer)
    kwargs.update(activation="geglu_tanh", embedding_scale=float(scale))
    return params, kwargs


def _gemma1_layer_from_hf(layer):
    block = llama.layer_from_hf(layer)
    block.update(self_attention_norm=_one_plus(layer.input_layernorm),
                 feed_forward_norm=_one_plus(layer.post_attention_layernorm))
    return block


def _one_plus(norm):  # Gemma's RMSNorm scales by (1 + w): stored as gamma = 1 + w
    return {"gamma": 1.0 + hf.array(norm.weight)}


def _check_tanh_gelu(key, value):
    if value not in ("gelu_pytorch_tanh", "gelu_new"):
        raise ValueError(f"{key}={value!r} is not supported (minattn's GEGLU uses the tanh GELU)")


def from_hf(model):
    # Gemma 2 and 3 (text): Llama's layout plus sandwich norms, RMSNorm with (1 + w) (stored
    # here as gamma = 1 + w), embeddings scaled by sqrt(D), the tanh-GELU gated feed-forward,
    # query_pre_attn_scalar, soft-capping, local (sliding) and global layers with their own
    # windows and RoPE bases.
    config, inner = model.config, model.model
    _check_tanh_gelu("hidden_activation", config.hidden_activation)
    one_plus = _one_plus
    layers = []
    for layer in inner.layers:
        block = llama.layer_from_hf(layer)
        for key in ("q_norm", "k_norm"):
            if key in block["self_attention"]:
                block["self_attention"][key] = one_plus(getattr(layer.self_attn, key))
        block.update({"self_attention_norm": one_plus(layer.input_layernorm),
                      "post_self_attention_norm": one_plus(layer.post_attention_layernorm),
                      "feed_forward_norm": one_plus(layer.pre_feedforward_layernorm),
                      "post_feed_forward_norm": one_plus(layer.post_feedforward_layernorm)})
        layers.append(block)
    rope_base, rope_scaling = hf.per_layer_rope(config, len(layers))
    params = {"token_embedding": hf.array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": one_plus(inner.norm), **hf.unembedding(model, inner.embed_tokens.weight)}
    scale = getattr(inner.embed_tokens, "embed_scale", None)  # the model's own (float32) value
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "d_k": config.head_dim, "norm": "rms_norm", "activation": "geglu_tanh",
              "eps": config.rms_norm_eps, "position": "rope", "rope_base": rope_base,
              "rope_scaling": rope_scaling, "window": hf.windows(config, len(layers)),
              "embedding_scale": float(scale) if scale is not None else config.hidden_size ** 0.5,
              "query_pre_attn_scalar": config.query_pre_attn_scalar,
              # transformers' Gemma3Attention does not apply attn_logit_softcapping (Gemma 3
              # checkpoints set it None): neither does minattn for gemma3_text
              "attn_logit_softcapping": None if config.model_type == "gemma3_text" else
              getattr(config, "attn_logit_softcapping", None),
              "final_logit_softcapping": getattr(config, "final_logit_softcapping", None)}
    return params, kwargs


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"gemma": gemma1_from_hf, "gemma2": from_hf, "gemma3_text": from_hf}
