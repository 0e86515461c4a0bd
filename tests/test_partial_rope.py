"""apply_partial_rope: RoPE on the first int(d * partial_rotary_factor) features of a head, the
rest passed through, against a slow loop and against transformers' own partial rotary code."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minattn.rope import apply_partial_rope, rotary_width

from .peers import undocumented
from .strategies import float_arrays, tolerance


def _partial_rope_loop(x, positions, factor, base=10000.0):
    # Independent reference: pairs (x[i], x[i + r/2]) of the first r = int(d * factor) features
    # turn by positions * base^(-2i/r), one position and one pair at a time; the rest are copied.
    length, d = x.shape
    r = int(d * factor)
    out = x.copy()
    for t in range(length):
        for i in range(r // 2):
            theta = positions[t] * base ** (-2.0 * i / r)
            c, s = np.cos(theta), np.sin(theta)
            a, b = x[t, i], x[t, i + r // 2]
            out[t, i], out[t, i + r // 2] = c * a - s * b, s * a + c * b
    return out


@given(st.integers(1, 5), st.sampled_from([(8, 0.25), (8, 0.5), (12, 0.5), (10, 0.4),
                                           (16, 0.75), (6, 1.0), (20, 0.3)]), st.data())
def test_matches_the_partial_rotation_loop(length, shape, data):
    d, factor = shape
    x = data.draw(float_arrays((length, d)))
    positions = np.array(data.draw(st.lists(st.integers(0, 5000), min_size=length,
                                            max_size=length)))
    np.testing.assert_allclose(apply_partial_rope(x, positions, factor, base=500.0),
                               _partial_rope_loop(x, positions, factor, base=500.0),
                               **tolerance(np.float64))


def test_equals_transformers_gpt_neox_partial_rotary():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    neox = "transformers.models.gpt_neox.modeling_gpt_neox"
    config = transformers.GPTNeoXConfig(hidden_size=48, num_attention_heads=2, rope_parameters={
        "rope_type": "default", "rope_theta": 1000.0, "partial_rotary_factor": 0.25})
    rotary = undocumented(neox, "GPTNeoXRotaryEmbedding")(config).to(torch.float64)
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 1, 2, 7, 24)), rng.normal(size=(2, 1, 2, 7, 24))
    positions = torch.arange(3, 10)[None]
    cos, sin = rotary(torch.from_numpy(q[0]), positions)
    # no public entry point applies GPT-NeoX's partial RoPE alone (the whole model's parity is in
    # tests/test_hf_families.py): the model file's function, at the version the lock holds
    apply_rotary_pos_emb = undocumented(neox, "apply_rotary_pos_emb")
    hf_q, hf_k = apply_rotary_pos_emb(torch.from_numpy(q[0]), torch.from_numpy(k[0]), cos, sin)
    # transformers builds inv_freq in float32: compared at float32 precision
    np.testing.assert_allclose(apply_partial_rope(q[0], np.arange(3, 10), 0.25, base=1000.0),
                               hf_q.numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(apply_partial_rope(k[0], np.arange(3, 10), 0.25, base=1000.0),
                               hf_k.numpy(), rtol=0, atol=1e-5)
    assert rotary_width(24, 0.25) == cos.shape[-1] == 6


def test_scaling_applies_to_the_rotated_features_only():
    x = np.random.default_rng(1).normal(size=(5, 8))
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1000,
               "attention_factor": 1.5, "beta_fast": 1e6, "beta_slow": 1e5}  # every pair kept
    out = apply_partial_rope(x, np.arange(5), 0.5, scaling=scaling)
    np.testing.assert_allclose(out[:, :4], 1.5 * _partial_rope_loop(x, np.arange(5), 0.5)[:, :4],
                               atol=1e-12)
    np.testing.assert_array_equal(out[:, 4:], x[:, 4:])


@pytest.mark.parametrize("factor, match", [
    (0.0, "partial_rotary_factor must be a positive"), (1.5, "int\\(8 \\* 1.5\\) = 12"),
    (0.1, "int\\(8 \\* 0.1\\) = 0"), (0.375, "int\\(8 \\* 0.375\\) = 3"),
    (float("nan"), "partial_rotary_factor must be a positive")])
def test_a_factor_that_rotates_no_whole_pair_is_refused_by_name(factor, match):
    with pytest.raises(ValueError, match=match):
        apply_partial_rope(np.ones((3, 8)), np.arange(3), factor)


def test_causal_lm_refuses_a_partial_rotary_factor_its_heads_cannot_take():
    import minattn as ma

    params, config = ma.init_causal_lm(np.random.default_rng(0), 11, 1, 16, 2, 24,
                                       position="rope", norm="rms_norm", activation="swiglu")
    with pytest.raises(ValueError, match="int\\(8 \\* 0.375\\) = 3"):
        ma.causal_lm(params, [[1, 2, 3]], partial_rotary_factor=0.375, **config)


def test_self_attention_rotates_the_first_features_of_each_head_only():
    import minattn as ma

    rng = np.random.default_rng(2)
    params = ma.init_decoder_block(rng, 16, 2, 8)["self_attention"]
    x = rng.normal(size=(1, 5, 16))
    out, cache = ma.self_attention(params, x, n_heads=2, positions=np.arange(5),
                                   partial_rotary_factor=0.5, cache={})
    k = (x @ params["w_k"] + params["b_k"]).reshape(1, 5, 2, 8).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(cache["k"][0, 1], _partial_rope_loop(k[0, 1], np.arange(5), 0.5),
                               atol=1e-12)
