import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from . import reference
from .strategies import additive_biases, attention_inputs, bool_masks, tolerance


@given(attention_inputs(batch=False))
def test_matches_loop_reference(qkv):
    q, k, v = qkv
    out, w = ma.scaled_dot_product_attention(q, k, v)
    ref_out, ref_w = reference.attention(q, k, v)
    np.testing.assert_allclose(w, ref_w, **tolerance(np.float64))
    np.testing.assert_allclose(out, ref_out, **tolerance(np.float64))


def test_worked_example_against_hand_formula():
    # Q = K = [[1,0],[0,1],[1,1]]: the scores are dot products / sqrt(2), written out by hand.
    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]])
    s = 1 / np.sqrt(2)
    scores = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 2]]) * s
    e = np.exp(scores)
    weights = e / e.sum(1, keepdims=True)
    out, w = ma.scaled_dot_product_attention(q, q, v)
    np.testing.assert_allclose(w, weights, rtol=1e-14)
    np.testing.assert_allclose(out, weights @ v, rtol=1e-14)


@given(attention_inputs())
def test_weights_nonnegative_and_rows_sum_to_one(qkv):
    _, w = ma.scaled_dot_product_attention(*qkv)
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)


@given(attention_inputs(), st.floats(0.01, 3.0))
def test_explicit_scale(qkv, scale):
    q, k, v = qkv
    out, w = ma.scaled_dot_product_attention(q, k, v, scale=scale)
    ref_out, ref_w = reference.attention(q[0], k[0], v[0], scale=scale)
    np.testing.assert_allclose(w[0], ref_w, **tolerance(np.float64))
    np.testing.assert_allclose(out[0], ref_out, **tolerance(np.float64))


@given(st.data())
def test_masked_keys_get_zero_weight_and_do_not_matter(data):
    q, k, v = data.draw(attention_inputs(batch=False))
    mask = data.draw(bool_masks((q.shape[0], k.shape[0])))
    out, w = ma.scaled_dot_product_attention(q, k, v, mask)
    assert (w[~mask] == 0).all()
    ref_out, ref_w = reference.attention(q, k, v, keep=mask.tolist())
    np.testing.assert_allclose(out, ref_out, **tolerance(np.float64))
    # Keys no query may see: change them (and their values) arbitrarily -> same output.
    hidden = ~mask.any(axis=0)
    k2 = np.where(hidden[:, None], k + 5.0, k)
    v2 = np.where(hidden[:, None], -v - 7.0, v)
    out2, w2 = ma.scaled_dot_product_attention(q, k2, v2, mask)
    np.testing.assert_array_equal(w2, w)
    np.testing.assert_allclose(out2, out, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_fully_masked_row_gives_zero_weights_and_output(dtype, kind, recwarn):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 3, 4)).astype(dtype) for _ in range(3))
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(dtype)
    out, w = ma.scaled_dot_product_attention(q, k, v, mask)
    assert not recwarn.list
    assert out.dtype == w.dtype == dtype
    assert np.isfinite(out).all() and np.isfinite(w).all()
    assert (w[:, 1] == 0).all() and (out[:, 1] == 0).all()
    np.testing.assert_allclose(w[:, [0, 2]].sum(-1).astype(np.float64), 1.0, **tolerance(dtype))


@given(st.data())
def test_additive_mask_equals_bool_mask_with_minus_inf(data):
    q, k, v = data.draw(attention_inputs(batch=False))
    mask = data.draw(bool_masks((q.shape[0], k.shape[0])))
    additive = np.where(mask, 0.0, -np.inf)
    out_b, w_b = ma.scaled_dot_product_attention(q, k, v, mask)
    out_a, w_a = ma.scaled_dot_product_attention(q, k, v, additive)
    np.testing.assert_allclose(w_a, w_b, rtol=1e-12, atol=0)
    np.testing.assert_allclose(out_a, out_b, rtol=1e-12, atol=1e-15)


@given(st.data())
def test_finite_additive_bias_is_added_to_scores(data):
    q, k, v = data.draw(attention_inputs(batch=False))
    bias = data.draw(additive_biases((q.shape[0], k.shape[0])))
    _, w = ma.scaled_dot_product_attention(q, k, v, bias)
    scores = q @ k.T / np.sqrt(q.shape[-1]) + bias
    expected = np.array([reference.softmax_row(r) for r in scores.tolist()])
    np.testing.assert_allclose(w, expected, **tolerance(np.float64))


@given(st.data())
def test_causal_output_ignores_the_future(data):
    q, k, v = data.draw(attention_inputs(batch=False))
    n = min(q.shape[0], k.shape[0])
    q, k, v = q[:n], k[:n], v[:n]
    i = data.draw(st.integers(0, n - 1))
    out, _ = ma.scaled_dot_product_attention(q, k, v, ma.causal_mask(n))
    future = np.arange(n)[:, None] > i
    out2, _ = ma.scaled_dot_product_attention(
        np.where(future, q + 1.0, q), np.where(future, k - 2.0, k), np.where(future, v * 3 + 1, v),
        ma.causal_mask(n))
    np.testing.assert_allclose(out2[: i + 1], out[: i + 1], rtol=1e-12, atol=1e-14)


@given(attention_inputs(batch=False), st.randoms(use_true_random=False))
def test_permutation_equivariance(qkv, random):
    q, k, v = qkv
    pq = random.sample(range(q.shape[0]), q.shape[0])
    pk = random.sample(range(k.shape[0]), k.shape[0])
    out, w = ma.scaled_dot_product_attention(q, k, v)
    # Permuting queries permutes output rows; permuting keys+values together changes nothing.
    out2, w2 = ma.scaled_dot_product_attention(q[pq], k[pk], v[pk])
    np.testing.assert_allclose(out2, out[pq], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w2, w[pq][:, pk], rtol=1e-12, atol=1e-14)


@given(attention_inputs())
def test_batch_elements_are_independent(qkv):
    q, k, v = qkv
    out, w = ma.scaled_dot_product_attention(q, k, v)
    for b in range(q.shape[0]):
        out_b, w_b = ma.scaled_dot_product_attention(q[b], k[b], v[b])
        np.testing.assert_allclose(out[b], out_b, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(w[b], w_b, rtol=1e-12, atol=1e-14)


def test_leading_dims_broadcast():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 3, 4, 5))  # [B, H, L_q, d_k]
    k = rng.normal(size=(1, 3, 6, 5))  # shared across the batch
    v = rng.normal(size=(6, 7))  # shared everywhere, d_v != d_k
    out, w = ma.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 7) and w.shape == (2, 3, 4, 6)
    ref_out, _ = reference.attention(q[1, 2], k[0, 2], v)
    np.testing.assert_allclose(out[1, 2], ref_out, **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, 4, 8)).astype(dtype) for _ in range(3))
    for mask in (None, ma.causal_mask(4), np.zeros((4, 4))):  # float64 additive mask included
        out, w = ma.scaled_dot_product_attention(q, k, v, mask)
        assert out.dtype == dtype and w.dtype == dtype
        ref_out, _ = reference.attention(q[0], k[0], v[0],
                                         None if mask is None or mask.dtype != bool else mask)
        np.testing.assert_allclose(out[0].astype(np.float64), ref_out, **tolerance(dtype))


def test_dropout_zeroes_and_rescales_weights():
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(64, 64)) for _ in range(3))
    _, w = ma.scaled_dot_product_attention(q, k, v)
    _, w_drop = ma.scaled_dot_product_attention(q, k, v, dropout=0.25,
                                                rng=np.random.default_rng(4))
    dropped = w_drop == 0
    assert 0.2 < dropped.mean() < 0.3
    np.testing.assert_allclose(w_drop[~dropped], w[~dropped] / 0.75, rtol=1e-12)
    # Same seed, same result: the randomness comes only from the Generator passed in.
    _, again = ma.scaled_dot_product_attention(q, k, v, dropout=0.25,
                                               rng=np.random.default_rng(4))
    np.testing.assert_array_equal(again, w_drop)
