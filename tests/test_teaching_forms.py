"""The walkthrough's first reading shows plain teaching forms (minattn/course/teaching.py) in
place of minattn's production functions: each must compute what the production function
computes. The references are the production functions, which the rest of the suite holds to
loops, formulas and torch; the teaching forms are written independently of them (plain NumPy, no
checks, no policies), so a wrong teaching form fails here."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minattn as ma
from minattn import position_wise, rope
from minattn.attention import softmax_vjp
from minattn.course import teaching as t
from minattn.generation import _next_token
from minattn.linear import linear
from tests.strategies import attention_inputs, bool_masks, float_arrays, seeds

CLOSE = dict(rtol=1e-12, atol=1e-12)


@settings(deadline=None)
@given(float_arrays((3, 5), bound=50.0), bool_masks((3, 5)), st.sampled_from([-1, 0]))
def test_softmax(x, mask, axis):
    np.testing.assert_allclose(t.softmax(x, axis), ma.softmax(x, axis), **CLOSE)
    np.testing.assert_allclose(t.masked_softmax(x, mask, axis), ma.softmax(x, axis, mask=mask),
                               **CLOSE)


def test_masked_softmax_of_a_fully_masked_row_is_zeros_in_both():
    x, mask = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(t.masked_softmax(x, mask), ma.softmax(x, mask=mask))


@settings(deadline=None)
@given(attention_inputs(), seeds, st.booleans(), st.sampled_from([None, 0.7]))
def test_scaled_dot_product_attention(qkv, seed, masked, scale):
    q, k, v = qkv
    rng = np.random.default_rng(seed)
    mask = rng.random(q.shape[:-1] + (k.shape[-2],)) < 0.7 if masked else None
    ours = t.scaled_dot_product_attention(q, k, v, mask, scale=scale)
    theirs = ma.scaled_dot_product_attention(q, k, v, mask, scale=scale)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **CLOSE)


@pytest.mark.parametrize("n_q, n_k", [(1, 1), (4, None), (3, 5), (5, 3), (1, 6)])
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
@pytest.mark.parametrize("window", [None, 1, 2])
def test_causal_mask(n_q, n_k, align, window):
    np.testing.assert_array_equal(t.causal_mask(n_q, n_k, align=align, window=window),
                                  ma.causal_mask(n_q, n_k, align=align, window=window))


def test_padding_mask():
    lengths = np.array([0, 2, 5, 3])
    np.testing.assert_array_equal(t.padding_mask(lengths, 5), ma.padding_mask(lengths, 5))


@settings(deadline=None)
@given(float_arrays((2, 3, 6)), st.sampled_from([1, 2, 3, 6]))
def test_heads(x, n_heads):
    np.testing.assert_array_equal(t.split_heads(x, n_heads), ma.split_heads(x, n_heads))
    heads = ma.split_heads(x, n_heads)
    np.testing.assert_array_equal(t.merge_heads(heads), ma.merge_heads(heads))


@settings(deadline=None)
@given(seeds, st.sampled_from([(4, 4), (4, 2), (4, 1), (6, 3)]),
       st.sampled_from(["none", "shared", "per_head"]))
def test_grouped_attention(seed, heads, mask_kind):
    from minattn.multi_head import grouped_attention

    n_heads, n_kv_heads = heads
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(2, n_heads, 3, 4))
    k, v = rng.normal(size=(2, 2, n_kv_heads, 5, 4))
    mask = {"none": None, "shared": rng.random((2, 1, 3, 5)) < 0.6,
            "per_head": rng.random((2, n_heads, 3, 5)) < 0.6}[mask_kind]
    ours = t.grouped_attention(q, k, v, mask)
    theirs = grouped_attention(q, k, v, mask)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **CLOSE)


@settings(deadline=None)
@given(float_arrays((2, 3, 4)), float_arrays((4, 5)), float_arrays((5,)), float_arrays((4,)),
       float_arrays((4,)))
def test_linear_and_norms(x, w, b, gamma, beta):
    np.testing.assert_allclose(t.linear(x, w, b), linear(x, w, b), **CLOSE)
    np.testing.assert_allclose(t.layer_norm(x, gamma, beta), ma.layer_norm(x, gamma, beta),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(t.rms_norm(x, gamma), ma.rms_norm(x, gamma), rtol=1e-10,
                               atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu(dtype):
    # float32: minattn's fit of erfc against scipy's erf in float32, within the fit's error
    x = np.linspace(-8, 8, 2001).astype(dtype)
    atol = 1e-14 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(t.gelu(x), position_wise.gelu(x), rtol=0, atol=atol)


@pytest.mark.parametrize("n, d", [(1, 2), (7, 16), (50, 6)])
def test_positional_encoding(n, d):
    np.testing.assert_allclose(t.positional_encoding(n, d), ma.positional_encoding(n, d), **CLOSE)


@settings(deadline=None)
@given(float_arrays((2, 3, 5, 8)), st.lists(st.integers(0, 5000), min_size=5, max_size=5),
       st.sampled_from([10000.0, 500000.0]))
def test_apply_rope(x, positions, base):
    positions = np.array(positions)
    np.testing.assert_allclose(t.apply_rope(x, positions, base=base),
                               rope.apply_rope(x, positions, base=base), rtol=1e-9, atol=1e-9)


@settings(deadline=None)
@given(float_arrays((2, 4, 7), bound=30.0), seeds)
def test_cross_entropy(logits, seed):
    targets = np.random.default_rng(seed).integers(0, 7, size=(2, 4))
    np.testing.assert_allclose(t.cross_entropy(logits, targets), ma.cross_entropy(logits, targets),
                               **CLOSE)


@settings(deadline=None)
@given(float_arrays((3, 4, 5)), float_arrays((3, 4, 5)), st.sampled_from([-1, 0, 1]))
def test_softmax_vjp(x, g, axis):
    y = ma.softmax(x, axis)
    theirs = softmax_vjp(["x"], g, y, x, axis, None)["x"]
    np.testing.assert_allclose(t.softmax_vjp(y, g, axis), theirs, **CLOSE)


@settings(deadline=None)
@given(attention_inputs(), seeds, st.booleans())
def test_attention_vjp(qkv, seed, masked):
    # the plain form's chain rule against autograd tracing minattn's attention
    from autograd import grad
    q, k, v = qkv
    rng = np.random.default_rng(seed)
    g = rng.normal(size=q.shape[:-1] + v.shape[-1:])
    mask = rng.random(q.shape[:-1] + (k.shape[-2],)) < 0.7 if masked else None
    traced = grad(lambda qkv: np.sum(ma.scaled_dot_product_attention(*qkv, mask)[0] * g))
    for mine, theirs in zip(t.attention_vjp(q, k, v, g, mask), traced((q, k, v))):
        np.testing.assert_allclose(mine, theirs, **CLOSE)


@pytest.mark.parametrize("sampling", [dict(), dict(temperature=0.8), dict(temperature=1.3, top_k=4),
                                      dict(temperature=0.9, top_p=0.8),
                                      dict(temperature=1.0, top_k=6, top_p=0.5)])
def test_next_token(sampling):
    logits = np.random.default_rng(2).normal(size=(64, 13)) * 3
    draw = lambda: np.random.default_rng(3) if sampling else None
    full = dict(dict(temperature=0.0, top_k=None, top_p=None), **sampling)
    np.testing.assert_array_equal(
        t.next_token(logits, rng=draw(), **sampling),
        _next_token(logits, full["temperature"], full["top_k"], full["top_p"], draw()))
    # generate, the first reading's, is tested in tests/test_teaching_forms_first_reading.py
