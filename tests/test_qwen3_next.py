"""Qwen3-Next (a hybrid of Gated DeltaNet and gated attention layers) through from_hf against
transformers' Qwen3NextForCausalLM, built from a config with random weights (nothing is
downloaded), dense layers only, eval mode: logits, greedy generation, left padding and the
cache (prefill, then single tokens).

Stock transformers computes several parts of this model in float32 even in a float64 model:
Qwen3NextRMSNorm, Qwen3NextRMSNormGated, the rotary embedding's angles, g = -A_log.float().exp()
* softplus(a.float() + dt_bias) in Qwen3NextGatedDeltaNet, and both delta-rule functions (their
inputs cast to float32). For the 1e-10 comparison the fixture `float64_islands` runs the stock
model with every float32 request answered in float64 (tests/float64_peers.py); the float64
reference is checked against the stock model at float32 tolerance, so it is still transformers'
model.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity with transformers needs torch")
transformers = pytest.importorskip("transformers", reason="parity tests need transformers")

import minattn as ma  # noqa: E402
from minattn.interop import from_hf  # noqa: E402

from .float64_peers import float64_throughout  # noqa: E402
from .test_hf_parity import _randomized  # noqa: E402

V = 37


def _qwen3_next(dtype=torch.float64, **changes):
    sizes = dict(vocab_size=V, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                 linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=6,
                 linear_value_head_dim=5, linear_conv_kernel_dim=4, num_experts=0,
                 rms_norm_eps=1e-6, max_position_embeddings=64, tie_word_embeddings=False,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="sdpa",
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 0.5})
    sizes.update(changes)
    torch.manual_seed(0)
    return _randomized(transformers.Qwen3NextForCausalLM(transformers.Qwen3NextConfig(**sizes)),
                       dtype)


def _hf_logits(model, tokens, attention_mask=None, position_ids=None):
    t = torch.from_numpy(tokens)
    mask = torch.ones_like(t) if attention_mask is None else torch.from_numpy(attention_mask)
    with torch.no_grad():
        return model(t, attention_mask=mask, position_ids=position_ids).logits.numpy()


def _tokens(b=2, length=9, seed=0):
    return np.random.default_rng(seed).integers(3, V, size=(b, length))


def test_logits_equal_transformers_float64(float64_islands):
    model = _qwen3_next()
    params, config = from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


# Other hybrids: attention first, a 2-layer interval, experts configured but every layer dense,
# tied embeddings, one kv head with RoPE on every feature.
VARIANTS = {
    "attention_first": {"layer_types": ["full_attention", "linear_attention", "linear_attention"],
                        "num_hidden_layers": 3},
    "interval_2_mlp_only": {"num_hidden_layers": 4, "full_attention_interval": 2,
                            "num_experts": 4, "mlp_only_layers": [0, 1, 2, 3]},
    "tied": {"tie_word_embeddings": True},
    "one_kv_head_full_rope": {"num_key_value_heads": 1, "linear_num_key_heads": 4,
                              "rope_parameters": {"rope_type": "default", "rope_theta": 500.0,
                                                  "partial_rotary_factor": 1.0}},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_other_hybrid_patterns_equal_transformers_float64(variant, float64_islands):
    model = _qwen3_next(**VARIANTS[variant])
    params, config = from_hf(model)
    tokens = _tokens(seed=1)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


def test_the_float64_reference_is_stock_transformers_at_float32_tolerance():
    with float64_throughout():
        model = _qwen3_next()  # (its RoPE buffers made in float64)
    tokens = _tokens()
    stock = _hf_logits(model, tokens)
    with float64_throughout():
        exact = _hf_logits(model, tokens)
    np.testing.assert_allclose(stock, exact, rtol=0, atol=1e-5)
    assert np.abs(stock - exact).max() > 1e-12  # stock really rounded through float32


def test_float32_logits_equal_transformers():
    model = _qwen3_next(torch.float32)
    params, config = from_hf(model)
    tokens = _tokens()
    ours = ma.causal_lm(params, tokens, **config)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, _hf_logits(model, tokens), rtol=0, atol=1e-4)


def test_the_cache_prefill_then_single_tokens_equals_the_full_pass():
    params, config = from_hf(_qwen3_next())
    tokens = _tokens(length=10)
    full = ma.causal_lm(params, tokens, **config)
    logits, cache = ma.causal_lm(params, tokens[:, :6], return_cache=True, **config)
    steps = [logits]
    for t in range(6, 10):
        logits, cache = ma.causal_lm(params, tokens[:, t:t + 1], cache=cache, **config)
        steps.append(logits)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-10)
    # one {"conv", "state"} of fixed size per recurrent layer (K - 1 = 3 inputs of 2 H_k d_k +
    # H_v d_v = 44 channels; H_v = 4 states of 6 x 5), a growing {"k", "v"} per attention layer
    assert [sorted(c) for c in cache] == [["conv", "state"]] * 3 + [["k", "v"]]
    assert cache[0]["state"].shape == (2, 4, 6, 5) and cache[0]["conv"].shape == (2, 3, 44)
    assert cache[3]["k"].shape == (2, 2, 10, 8)


def _hf_generate(model, tokens, n, attention_mask=None, eos_token_id=None):
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    t = torch.from_numpy(tokens)
    mask = torch.ones_like(t) if attention_mask is None else torch.from_numpy(attention_mask)
    with torch.no_grad():
        return model.generate(t, attention_mask=mask, max_new_tokens=n, do_sample=False).numpy()


def test_greedy_generation_equals_transformers_generate(float64_islands):
    model = _qwen3_next()
    params, config = from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    ours = ma.generate(params, tokens, 10, **config)
    np.testing.assert_array_equal(ours, _hf_generate(model, tokens, 10))
    np.testing.assert_array_equal(ma.generate(params, tokens, 10, use_cache=False, **config), ours)


def _left_padded(seed=5):
    # Three prompts of 6, 3 and 1 real tokens, padded on the left with token 0.
    tokens = np.random.default_rng(seed).integers(3, V, size=(3, 6))
    attention_mask = (np.arange(6) >= np.array([[0], [3], [5]])).astype(np.int64)
    return np.where(attention_mask == 1, tokens, 0), attention_mask


def test_left_padded_logits_equal_transformers_and_each_row_alone(float64_islands):
    model = _qwen3_next()
    params, config = from_hf(model)
    tokens, attention_mask = _left_padded()
    positions = np.where(attention_mask == 1, np.cumsum(attention_mask, -1) - 1, 0)
    ours = ma.causal_lm(params, tokens, attention_mask, **config)
    hf = _hf_logits(model, tokens, attention_mask, torch.from_numpy(positions))
    real = attention_mask == 1  # padded positions' logits are nobody's prediction
    np.testing.assert_allclose(ours[real], hf[real], rtol=0, atol=1e-10)
    for row in range(3):  # padding writes nothing into the recurrent state
        alone = tokens[row:row + 1, real[row]]
        np.testing.assert_allclose(ma.causal_lm(params, alone, **config)[0], ours[row][real[row]],
                                   rtol=0, atol=1e-10)


@pytest.mark.parametrize("use_cache", [True, False])
def test_left_padded_generation_with_eos_equals_transformers(use_cache, float64_islands):
    model = _qwen3_next()
    params, config = from_hf(model)
    tokens, attention_mask = _left_padded()
    plain = ma.generate(params, tokens, 10, attention_mask, **config)
    eos = int(plain[0, 8])  # a token row 0 produces on its way: some rows end early
    hf = _hf_generate(model, tokens, 10, attention_mask, eos_token_id=eos)
    ours = ma.generate(params, tokens, 10, attention_mask, eos_token_id=eos, pad_token_id=0,
                       use_cache=use_cache, **config)
    np.testing.assert_array_equal(ours, hf)


@pytest.mark.parametrize("changes, message", [
    ({"num_experts": 4}, r"Qwen3-Next with mixture of experts layers \(\[0, 1, 2, 3\] of 4; "
                         r"num_experts=4"),
    ({"num_experts": 4, "mlp_only_layers": [0, 1, 2]}, r"experts layers \(\[3\] of 4"),
    ({"num_experts": 4, "decoder_sparse_step": 2}, r"experts layers \(\[1, 3\] of 4"),
    ({"hidden_act": "gelu"}, r"hidden_act='gelu' is not supported"),
    ({"attention_bias": True}, r"attention_bias=True is not supported for Qwen3-Next"),
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}},
     r"rope_parameters with rope_type 'linear' are not supported for Qwen3-Next"),
])
def test_unsupported_configurations_are_refused_by_name(changes, message):
    model = _qwen3_next(**changes)
    with pytest.raises(ValueError, match=message):
        from_hf(model)
