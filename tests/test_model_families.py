"""The pieces the model families add, each against a slow reference: RoPE frequency schedules,
soft-capping, QK-norm, padding, end-of-sequence handling, nucleus sampling, integer inputs."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
from minattn.rope_scaling import rope_frequencies
from minattn.softcap import capped_attention, soft_cap

from .strategies import perturbed

V = 13
LLAMA = dict(n_heads=4, n_kv_heads=2, norm="rms_norm", activation="swiglu", position="rope",
             eps=1e-6)


def _llama(seed=0, **init):
    params, _ = ma.init_causal_lm(np.random.default_rng(seed), V, 2, 16, 4, 24, position="rope",
                               tied=False, bias=False, n_kv_heads=2, norm="rms_norm",
                               activation="swiglu", **init)
    return perturbed(params, seed)


def _llama3_loop(d, base, factor, low, high, n):
    # Meta's reference (llama-models, apply_scaling) written out pair by pair.
    out = []
    for i in range(0, d, 2):
        freq = base ** (-i / d)
        wavelength = 2 * math.pi / freq
        if wavelength < n / high:
            out.append(freq)
        elif wavelength > n / low:
            out.append(freq / factor)
        else:
            smooth = (n / wavelength - low) / (high - low)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return np.array(out)


@given(d=st.sampled_from([8, 16, 64, 128]), base=st.floats(100, 1e6),
       factor=st.floats(1.5, 16), n=st.integers(16, 10000))
def test_llama3_schedule_equals_the_pairwise_reference(d, base, factor, n):
    scaling = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": n}
    inv_freq, attention_factor = rope_frequencies(d, np.arange(3), base=base, scaling=scaling)
    np.testing.assert_allclose(inv_freq, _llama3_loop(d, base, factor, 1.0, 4.0, n), rtol=1e-12)
    assert attention_factor == 1.0


@given(d=st.sampled_from([4, 8, 16]), base=st.floats(100, 1e6), n=st.integers(2, 64),
       length=st.integers(1, 128), factor=st.floats(0.5, 64), seed=st.integers(0, 99))
def test_longrope_equals_the_pairwise_reference(d, base, n, length, factor, seed):
    # Microsoft's LongRoPE (Phi-3's modeling code) written out pair by pair: frequency i divided
    # by ext[i], the long factors once the sequence outgrows n; sqrt(1 + ln factor / ln n).
    rng = np.random.default_rng(seed)
    short, long = rng.uniform(1, 4, d // 2), rng.uniform(1, 40, d // 2)
    scaling = {"rope_type": "longrope", "short_factor": list(short), "long_factor": list(long),
               "factor": factor, "original_max_position_embeddings": n}
    inv_freq, attention_factor = rope_frequencies(d, np.arange(length), base=base,
                                                  scaling=scaling)
    ext = long if length > n else short
    np.testing.assert_allclose(inv_freq, [1 / (ext[i] * base ** (2 * i / d))
                                          for i in range(d // 2)], rtol=1e-12)
    expected = math.sqrt(1 + math.log(factor) / math.log(n)) if factor > 1 else 1.0
    assert attention_factor == pytest.approx(expected, rel=1e-15)


def test_linear_scaling_is_default_rope_at_positions_divided_by_factor():
    x = np.random.default_rng(0).normal(size=(2, 6, 8))
    scaled = ma.apply_rope(x, np.arange(0, 24, 4), scaling={"rope_type": "linear", "factor": 4.0})
    np.testing.assert_allclose(scaled, ma.apply_rope(x, np.arange(6)), atol=1e-12)


def test_dynamic_scaling_is_default_rope_within_the_original_context():
    scaling = {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 16}
    inside, _ = rope_frequencies(8, np.arange(16), scaling=scaling)
    beyond, _ = rope_frequencies(8, np.arange(40), scaling=scaling)
    np.testing.assert_array_equal(inside, rope_frequencies(8, np.arange(1))[0])
    assert (beyond[1:] < inside[1:]).all() and beyond[0] == inside[0]


def test_yarn_attention_factor_scales_queries_and_keys():
    x = np.random.default_rng(1).normal(size=(5, 8))
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1000,
               "attention_factor": 1.5, "beta_fast": 1e6, "beta_slow": 1e5}  # every pair kept
    np.testing.assert_allclose(ma.apply_rope(x, np.arange(5), scaling=scaling),
                               1.5 * ma.apply_rope(x, np.arange(5)), atol=1e-12)


@pytest.mark.parametrize("scaling, match", [
    ({"rope_type": "su"}, "rope_type"), ({"rope_type": "linear"}, "missing: \\['factor'\\]"),
    ({"rope_type": "linear", "factor": 2.0, "beta": 1}, "unknown: \\['beta'\\]"),
    ("linear", "dict")])
def test_unknown_rope_scaling_is_refused_by_name(scaling, match):
    with pytest.raises(ValueError, match=match):
        ma.apply_rope(np.ones((3, 4)), np.arange(3), scaling=scaling)


def test_soft_cap_is_near_identity_small_and_bounded_large():
    x = np.array([-1e6, -3.0, 1e-4, 3.0, 1e6])
    capped = soft_cap(x, 2.0)
    assert np.all(np.abs(capped) < 2.0 + 1e-12) and abs(capped[2] - 1e-4) < 1e-12


def test_capped_attention_equals_a_loop_over_heads():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(4, 5, 3)), rng.normal(size=(2, 6, 3)), rng.normal(size=(2, 6, 3))
    mask = ma.causal_mask(5, 6, align="bottom_right")
    out, _ = capped_attention(q, k, v, mask, scale=0.3, cap=1.2)
    for h in range(4):
        scores = 1.2 * np.tanh(q[h] @ k[h // 2].T * 0.3 / 1.2)
        scores = np.where(mask, scores, -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        np.testing.assert_allclose(out[h], (w / w.sum(-1, keepdims=True)) @ v[h // 2], atol=1e-12)


def test_qk_norm_makes_attention_invariant_to_scaling_q_and_k_weights():
    params = _llama(qk_norm=True)
    tokens = np.random.default_rng(3).integers(0, V, size=(2, 6))
    config = dict(LLAMA, eps=1e-30)  # RMSNorm is then scale-invariant to rounding
    logits = ma.causal_lm(params, tokens, **config)
    for layer in params["layers"]:
        attention = layer["self_attention"]
        attention["w_q"], attention["w_k"] = 7.0 * attention["w_q"], 0.1 * attention["w_k"]
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), logits, atol=1e-12)


def test_head_width_other_than_d_model_over_n_heads():
    params = _llama(d_k=6)
    assert params["layers"][0]["self_attention"]["w_q"].shape == (16, 24)
    tokens = np.random.default_rng(4).integers(0, V, size=(1, 7))
    full = ma.causal_lm(params, tokens, d_k=6, **LLAMA)
    _, cache = ma.causal_lm(params, tokens[:, :4], d_k=6, return_cache=True, **LLAMA)
    step, _ = ma.causal_lm(params, tokens[:, 4:], d_k=6, cache=cache, **LLAMA)
    np.testing.assert_allclose(step, full[:, 4:], atol=1e-12)


def test_sliding_window_layer_ignores_tokens_beyond_the_window():
    params = _llama()
    tokens = np.random.default_rng(5).integers(0, V, size=(1, 9))
    changed = tokens.copy()
    changed[0, 0] = (tokens[0, 0] + 1) % V
    # two layers of window 3: the last token sees back 2 + 2 positions, not position 0
    a, b = (ma.causal_lm(params, t, window=3, **LLAMA)[0, -1] for t in (tokens, changed))
    np.testing.assert_array_equal(a, b)
    a, b = (ma.causal_lm(params, t, window=[3, None], **LLAMA)[0, -1] for t in (tokens, changed))
    assert not np.allclose(a, b)


def test_a_left_padded_row_equals_the_prompt_alone():
    params = _llama()
    tokens = np.random.default_rng(6).integers(0, V, size=(2, 7))
    attention_mask = np.array([[1] * 7, [0, 0, 0, 1, 1, 1, 1]])
    padded = ma.causal_lm(params, tokens, attention_mask, **LLAMA)
    np.testing.assert_allclose(padded[1, 3:], ma.causal_lm(params, tokens[1:, 3:], **LLAMA)[0],
                               atol=1e-12)
    np.testing.assert_allclose(padded[0], ma.causal_lm(params, tokens[:1], **LLAMA)[0], atol=1e-12)


def test_generate_pads_ended_rows_and_stops_when_all_have_ended():
    params = _llama()
    tokens = np.random.default_rng(7).integers(0, V, size=(3, 4))
    free = ma.generate(params, tokens, 8, **LLAMA)
    eos = int(free[0, 5])  # row 0 ends at its second new token
    out = ma.generate(params, tokens, 8, eos_token_id=eos, pad_token_id=0, **LLAMA)
    for row in range(3):  # each row: the free run up to its first eos, then padding
        new = free[row, 4:4 + out.shape[1] - 4]
        ends = np.flatnonzero(new == eos)
        stop = ends[0] + 1 if ends.size else len(new)
        expected = np.r_[new[:stop], [0] * (len(new) - stop)]
        np.testing.assert_array_equal(out[row, 4:], expected)
    assert out.shape[1] == 12 or (out[:, 4:] == eos).any(axis=1).all()
    with pytest.raises(ValueError, match="pad_token_id"):
        ma.generate(params, tokens, 2, eos_token_id=eos, **LLAMA)


def test_top_p_equals_transformers_top_p_warper():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from minattn.generation import _nucleus
    logits = np.random.default_rng(8).normal(size=(4, 30)) * 2
    for top_p in (0.1, 0.5, 0.9, 1.0):
        warped = transformers.TopPLogitsWarper(top_p)(None, torch.from_numpy(logits)).numpy()
        np.testing.assert_array_equal(_nucleus(logits, top_p), np.isfinite(warped))


def test_top_p_samples_only_from_the_nucleus():
    params = _llama()
    tokens = np.random.default_rng(9).integers(0, V, size=(2, 3))
    out = ma.generate(params, tokens, 1, temperature=1.0, top_p=1e-9,
                      rng=np.random.default_rng(0), **LLAMA)
    np.testing.assert_array_equal(out, ma.generate(params, tokens, 1, **LLAMA))  # = greedy


def test_token_lists_are_converted_and_torch_tensors_refused():
    params = _llama()
    tokens = [[1, 2, 3], [4, 5, 6]]
    np.testing.assert_array_equal(ma.causal_lm(params, tokens, **LLAMA),
                                  ma.causal_lm(params, np.array(tokens), **LLAMA))
    np.testing.assert_array_equal(ma.generate(params, tokens, 2, **LLAMA),
                                  ma.generate(params, np.array(tokens), 2, **LLAMA))
    torch = pytest.importorskip("torch")
    for call in (ma.causal_lm, lambda p, t, **c: ma.generate(p, t, 2, **c)):
        with pytest.raises(TypeError, match="tokens is a torch tensor.*numpy"):
            call(params, torch.tensor(tokens), **LLAMA)


def test_init_causal_lm_returns_the_model_as_from_hf_does():
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 1, 16, 4, 24, position="rope",
                                       n_kv_heads=2, norm="rms_norm", activation="swiglu")
    assert config == {"n_heads": 4, "n_kv_heads": 2, "d_k": None, "norm": "rms_norm",
                      "activation": "swiglu", "position": "rope"}
    assert ma.causal_lm(params, [[1, 2, 3]], **config).shape == (1, 3, V)


@pytest.mark.parametrize("keyword, value", [
    ("position", "learned"), ("norm", "layer_norm"), ("activation", "relu"),
    ("n_kv_heads", None), ("n_kv_heads", 1), ("d_k", 2)])
def test_a_config_keyword_contradicting_params_is_refused_by_name(keyword, value):
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 1, 16, 4, 24, position="rope",
                                       n_kv_heads=2, norm="rms_norm", activation="swiglu")
    with pytest.raises(ValueError, match=keyword):
        ma.causal_lm(params, [[1, 2, 3]], **{**config, keyword: value})


@pytest.mark.parametrize("keyword, value", [
    ("position", "rope"), ("norm", "rms_norm"), ("activation", "swiglu")])
def test_a_gpt2_style_model_refuses_llama_keywords(keyword, value):
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 1, 16, 4, 24, n_positions=8)
    with pytest.raises(ValueError, match=keyword):
        ma.causal_lm(params, [[1, 2, 3]], **{**config, keyword: value})
