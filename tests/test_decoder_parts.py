"""The modern block's parts: rms_norm, SwiGLU, and grouped-query attention."""
import numpy as np
import pytest
from autograd import grad
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
from minattn.normalization import rms_norm
from minattn.position_wise import gated_feed_forward, init_gated_feed_forward, silu

from . import reference
from .strategies import float_arrays, seeds, tolerance


@given(st.integers(1, 4), st.integers(1, 6), st.data())
def test_rms_norm_matches_loop_reference(rows, d, data):
    x = data.draw(float_arrays((rows, d)))
    gamma = data.draw(float_arrays((d,)))
    expected = np.array([[x[r, i] / np.sqrt(sum(v * v for v in x[r]) / d + 1e-6) * gamma[i]
                          for i in range(d)] for r in range(rows)])
    np.testing.assert_allclose(rms_norm(x, gamma), expected, **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rms_norm_keeps_dtype_with_gradients(dtype):
    x = np.random.default_rng(0).normal(size=(2, 5)).astype(dtype)
    gamma = np.ones(5, dtype=dtype)
    assert rms_norm(x, gamma).dtype == dtype
    assert grad(lambda x: rms_norm(x, gamma, np.float64(1e-6)).sum())(x).dtype == dtype


def test_silu_is_x_times_logistic_and_finite_for_huge_inputs():
    x = np.array([-1000.0, -3.0, 0.0, 2.0, 1000.0])
    np.testing.assert_allclose(silu(x), x / (1 + np.exp(-np.clip(x, -700, 700))), rtol=1e-12,
                               atol=1e-300)


@given(seeds, st.integers(1, 4), st.integers(1, 5), st.data())
def test_gated_feed_forward_matches_loop(seed, d_model, d_ff, data):
    params = init_gated_feed_forward(np.random.default_rng(seed), d_model, d_ff)
    x = data.draw(float_arrays((3, d_model)))
    expected = np.zeros((3, d_model))
    for t in range(3):
        for j in range(d_ff):
            g = sum(x[t, i] * params["w_gate"][i, j] for i in range(d_model))
            u = sum(x[t, i] * params["w_up"][i, j] for i in range(d_model))
            expected[t] += g / (1 + np.exp(-g)) * u * params["w_down"][j]
    np.testing.assert_allclose(gated_feed_forward(params, x), expected, **tolerance(np.float64))


def _gqa_params(seed, d_model, n_heads, n_kv_heads, bias):
    p = ma.init_multi_head_attention(np.random.default_rng(seed), d_model, n_heads,
                                     n_kv_heads=n_kv_heads, bias=bias)
    rng = np.random.default_rng(seed + 1)
    return {k: v + rng.normal(size=v.shape) if k.startswith("b_") else v for k, v in p.items()}


@given(st.sampled_from([(4, 4), (4, 2), (4, 1), (6, 3), (6, 2), (2, 1)]), st.integers(1, 3),
       st.booleans(), seeds, st.data())
def test_gqa_equals_full_attention_with_repeated_kv_heads(heads, d_k, bias, seed, data):
    # Reference: HF's repeat_kv made explicit: copy kv head h // G into query head h's slot,
    # giving ordinary multi-head attention with [D, D] key and value projections.
    n_heads, n_kv_heads = heads
    d_model, group = n_heads * d_k, n_heads // n_kv_heads
    params = _gqa_params(seed, d_model, n_heads, n_kv_heads, bias)
    full = dict(params)
    cols = np.concatenate([np.arange(h // group * d_k, (h // group + 1) * d_k)
                           for h in range(n_heads)])
    for p in "kv":
        full[f"w_{p}"] = params[f"w_{p}"][:, cols]
        if bias:
            full[f"b_{p}"] = params[f"b_{p}"][cols]
    if not bias:
        full.update({f"b_{p}": np.zeros(d_model) for p in "qkvo"})
    x = data.draw(float_arrays((2, 3, d_model)))
    mask = data.draw(st.sampled_from([None, ma.causal_mask(3),
                                      np.array([True, True, False])[None, None, None, :]]))
    out, w = ma.multi_head_attention(params, x, x, x, mask, n_heads=n_heads, n_kv_heads=n_kv_heads)
    expected = reference.multi_head_attention_loop(full, x[0], x[0], x[0], None if mask is None
                                                   else np.broadcast_to(mask, (1, 1, 3, 3))[0, 0]
                                                   .tolist(), n_heads)
    assert w.shape == (2, n_heads, 3, 3)
    np.testing.assert_allclose(out[0], expected, **tolerance(np.float64))


def test_gqa_takes_a_mask_per_head():
    params = _gqa_params(0, 8, 4, 2, True)
    x = np.random.default_rng(1).normal(size=(1, 3, 8))
    per_head = np.random.default_rng(2).random((1, 4, 3, 3)) < 0.7
    _, w = ma.multi_head_attention(params, x, x, x, per_head, n_heads=4, n_kv_heads=2)
    assert np.all(w[~np.broadcast_to(per_head, w.shape)] == 0)


@pytest.mark.parametrize("n_kv_heads, error", [(3, ValueError), (0, TypeError),
                                               (1.0, TypeError), (True, TypeError)])
def test_n_kv_heads_must_divide_n_heads(n_kv_heads, error):
    params = ma.init_multi_head_attention(np.random.default_rng(0), 8, 4)
    x = np.ones((2, 8))
    with pytest.raises(error, match="n_kv_heads"):
        ma.multi_head_attention(params, x, x, x, n_heads=4, n_kv_heads=n_kv_heads)
    with pytest.raises(error, match="n_kv_heads"):
        ma.init_multi_head_attention(np.random.default_rng(0), 8, 4, n_kv_heads=n_kv_heads)


def test_gqa_params_of_the_wrong_width_are_refused():
    params = ma.init_multi_head_attention(np.random.default_rng(0), 8, 4)  # [8, 8] w_k
    x = np.ones((2, 8))
    with pytest.raises(ValueError, match="w_k"):
        ma.multi_head_attention(params, x, x, x, n_heads=4, n_kv_heads=2)
