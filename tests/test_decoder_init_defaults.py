"""The documented defaults of init_decoder_block and init_causal_lm, spelled out: what params
(keys, biases, norms, dtype) and what config a call without the keyword returns."""
import numpy as np
import pytest

import minattn as ma

BLOCK_KEYS = ["feed_forward", "feed_forward_norm", "self_attention", "self_attention_norm"]


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    return [tree]


def test_init_decoder_block_defaults():
    # no cross-attention, LayerNorm, a relu feed-forward with biases, attention biases, no
    # QK-norm, float64
    block = ma.init_decoder_block(np.random.default_rng(0), 8, 2, 16)
    assert sorted(block) == BLOCK_KEYS
    assert sorted(block["self_attention"]) == ["b_k", "b_o", "b_q", "b_v",
                                               "w_k", "w_o", "w_q", "w_v"]
    assert sorted(block["feed_forward"]) == ["b_1", "b_2", "w_1", "w_2"]
    assert sorted(block["self_attention_norm"]) == ["beta", "gamma"]
    assert all(leaf.dtype == np.float64 for leaf in _leaves(block))


@pytest.mark.parametrize("d_k", [None, 6])  # 6: the head width other than d_model / n_heads
@pytest.mark.parametrize("bias", [True, False])
def test_bias_applies_to_every_attention_and_norm_to_every_norm(d_k, bias):
    block = ma.init_decoder_block(np.random.default_rng(0), 8, 2, 16, d_k=d_k,
                                  cross_attention=True, norm="rms_norm", bias=bias,
                                  dtype=np.float32)
    assert sorted(block) == sorted(BLOCK_KEYS + ["cross_attention", "cross_attention_norm"])
    for key in ("self_attention", "cross_attention"):
        assert ("b_q" in block[key]) == bias and ("b_o" in block[key]) == bias
    for key in ("self_attention_norm", "cross_attention_norm", "feed_forward_norm"):
        assert sorted(block[key]) == ["gamma"]
    assert all(leaf.dtype == np.float32 for leaf in _leaves(block))


def test_init_causal_lm_defaults():
    # GPT-2 style: 1024 learned positions, tied embeddings (no lm_head), gelu_tanh, LayerNorm
    params, config = ma.init_causal_lm(np.random.default_rng(0), 11, 1, 8, 2, 16)
    assert params["position_embedding"].shape == (1024, 8)
    assert "lm_head" not in params
    assert config == {"n_heads": 2, "n_kv_heads": None, "d_k": None, "norm": "layer_norm",
                      "activation": "gelu_tanh", "position": "learned"}
    assert sorted(params["layers"][0]["feed_forward"]) == ["b_1", "b_2", "w_1", "w_2"]


def test_init_causal_lm_config_carries_the_block_keywords():
    params, config = ma.init_causal_lm(np.random.default_rng(0), 11, 1, 8, 2, 16, d_k=6,
                                       n_kv_heads=1, norm="rms_norm", position="rope",
                                       activation="swiglu", tied=False)
    assert config == {"n_heads": 2, "n_kv_heads": 1, "d_k": 6, "norm": "rms_norm",
                      "activation": "swiglu", "position": "rope"}
    assert params["lm_head"].shape == (8, 11) and "position_embedding" not in params
    assert ma.causal_lm(params, np.array([[1, 2]]), **config).shape == (1, 2, 11)
