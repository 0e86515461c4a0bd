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
from ..engine import checks
from ..engine.decoder_checks import _check_decoder_block
from ..engine.variants import implements
from ..kv_cache import self_attention
from ..transformer_decoder import decoder_block, eps_given, normalize, position_wise
from . import hf, llama


def from_hf(model):
    # OLMo 2 and 3: Llama's block with its norms after the sublayers only,
    # x + post_norm(sublayer(x)), and QK-norm over all heads at once (gammas [H d_k] and
    # [H_kv d_k]); OLMo 3 adds local (sliding) and global layers with their own RoPE.
    rope = None if model.config.model_type == "olmo2" else hf.per_layer_rope
    return llama.from_hf(model, layer_from_hf, rope=rope)


def norms_after_only(params, x=None, mask=None, *, norm_first=False, **config):
    """Whether a block's params and norm_first are OLMo 2's: norms after the sublayers only."""
    return norm_first and isinstance(params, checks.DICT_TYPES) and \
        "post_self_attention_norm" in params and "post_feed_forward_norm" in params and \
        "self_attention_norm" not in params and "feed_forward_norm" not in params


@implements(decoder_block, when=norms_after_only, priority=20)
def block(params, x, mask=None, *, n_heads, norm_first, norm="layer_norm", activation="relu",
          eps=None, cache=None, attention=None, feed_forward=None, memory=None,
          memory_mask=None, **attention_config):
    """OLMo 2's block: the norms after the sublayers only (params "post_self_attention_norm",
    "post_feed_forward_norm"), x = x + norm(sublayer(x)). Keywords as minattn.decoder_block's."""
    # [..., L, D] -> [..., L, D] (with a cache: and the new cache)
    params, x, _ = _check_decoder_block(params, x, memory, memory_mask, n_heads,
                                        attention_config.get("n_kv_heads"), norm, activation, eps,
                                        False, norm_first)
    if memory is not None:  # OLMo 2 is decoder-only: its cross-attention would be left unread
        raise ValueError("memory (cross-attention to an encoder's output) is not supported by "
                         "OLMo 2's block (norms after the sublayers only)")
    out, new_cache = (attention or self_attention)(params["self_attention"], x, mask,
                                                   n_heads=n_heads, cache=cache, **eps_given(eps),
                                                   **attention_config)
    x = x + normalize(out, params["post_self_attention_norm"], norm, eps)
    out = (feed_forward or position_wise)(params["feed_forward"], x, activation)
    x = x + normalize(out, params["post_feed_forward_norm"], norm, eps)
    return x if cache is None else (x, new_cache)


def layer_from_hf(layer):
    return {**llama.sublayers_from_hf(layer),
            "post_self_attention_norm": {"gamma": hf.array(layer.post_attention_layernorm.weight)},
            "post_feed_forward_norm": {"gamma": hf.array(layer.post_feedforward_layernorm.weight)}}


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"olmo2": from_hf, "olmo3": from_hf}
