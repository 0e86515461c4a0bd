import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from . import reference
from .strategies import bool_masks, float_arrays, model_sizes, seeds, tolerance


def _params(seed, d_model, n_heads):
    p = ma.init_multi_head_attention(np.random.default_rng(seed), d_model, n_heads)
    # Non-zero biases, so a bias bug cannot hide behind the zero initialisation.
    rng = np.random.default_rng(seed + 1)
    return {k: (v + rng.normal(size=v.shape) if k.startswith("b_") else v) for k, v in p.items()}


@given(st.data(), model_sizes(), seeds)
def test_equals_loop_over_heads_with_projection_slices(data, sizes, seed):
    b, l_q, d_model, n_heads, _ = sizes
    l_k = data.draw(st.integers(1, 5))
    query = data.draw(float_arrays((l_q, d_model)))
    memory = data.draw(float_arrays((l_k, d_model)))  # cross-attention: L_q != L_k
    mask = data.draw(bool_masks((l_q, l_k)))
    params = _params(seed, d_model, n_heads)
    out, w = ma.multi_head_attention(params, query, memory, memory, mask, n_heads=n_heads)
    expected = reference.multi_head_attention_loop(params, query, memory, memory, mask.tolist(),
                                                   n_heads)
    assert w.shape == (n_heads, l_q, l_k)
    np.testing.assert_allclose(out, expected, **tolerance(np.float64))


@given(model_sizes(), seeds, st.data())
def test_one_head_equals_single_head_attention_with_same_projections(sizes, seed, data):
    b, length, d_model, _, _ = sizes
    x = data.draw(float_arrays((b, length, d_model)))
    p = _params(seed, d_model, 1)
    out, w = ma.multi_head_attention(p, x, x, x, n_heads=1)
    proj = {c: x @ p[f"w_{c}"] + p[f"b_{c}"] for c in "qkv"}
    ref, ref_w = ma.scaled_dot_product_attention(proj["q"], proj["k"], proj["v"])
    np.testing.assert_allclose(w[:, 0], ref_w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, ref @ p["w_o"] + p["b_o"], rtol=1e-10, atol=1e-12)


@given(model_sizes(), seeds, st.data())
def test_self_attention_is_permutation_equivariant(sizes, seed, data):
    b, length, d_model, n_heads, _ = sizes
    x = data.draw(float_arrays((b, length, d_model)))
    perm = data.draw(st.permutations(range(length)))
    p = _params(seed, d_model, n_heads)
    out, w = ma.multi_head_attention(p, x, x, x, n_heads=n_heads)
    out2, w2 = ma.multi_head_attention(p, x[:, perm], x[:, perm], x[:, perm], n_heads=n_heads)
    np.testing.assert_allclose(out2, out[:, perm], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w2, w[:, :, perm][..., perm], rtol=1e-10, atol=1e-12)


def test_weights_are_per_head_unless_averaging_is_asked():
    rng = np.random.default_rng(0)
    p = _params(0, 8, 4)
    x = rng.normal(size=(2, 5, 8))
    _, w = ma.multi_head_attention(p, x, x, x, n_heads=4)
    _, w_avg = ma.multi_head_attention(p, x, x, x, n_heads=4, average_weights=True)
    assert w.shape == (2, 4, 5, 5) and w_avg.shape == (2, 5, 5)
    np.testing.assert_allclose(w_avg, w.sum(1) / 4, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    p = {k: v.astype(dtype) for k, v in _params(0, 8, 2).items()}
    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype(dtype)
    out, w = ma.multi_head_attention(p, x, x, x, ma.padding_mask(np.array([5, 3]), 5), n_heads=2)
    assert out.dtype == w.dtype == dtype


def test_padding_mask_keeps_real_tokens_independent_of_padding():
    rng = np.random.default_rng(2)
    p = _params(2, 8, 2)
    x = rng.normal(size=(2, 6, 8))
    mask = ma.padding_mask(np.array([6, 4]), 6)
    out, _ = ma.multi_head_attention(p, x, x, x, mask, n_heads=2)
    x2 = x.copy()
    x2[1, 4:] = rng.normal(size=(2, 8)) * 10
    out2, _ = ma.multi_head_attention(p, x2, x2, x2, mask, n_heads=2)
    np.testing.assert_allclose(out2[1, :4], out[1, :4], rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(out2[0], out[0])


def test_per_batch_mask_with_head_axis_equals_per_sequence_calls():
    rng = np.random.default_rng(3)
    p = _params(3, 8, 2)
    x = rng.normal(size=(2, 4, 8))
    keep = rng.random((2, 4, 4)) > 0.3  # [B, L, L], one mask per sequence
    out, _ = ma.multi_head_attention(p, x, x, x, keep[:, None], n_heads=2)
    for b in range(2):
        alone, _ = ma.multi_head_attention(p, x[b], x[b], x[b], keep[b], n_heads=2)
        np.testing.assert_allclose(out[b], alone, rtol=1e-12, atol=1e-13)
