"""Linear attention (minattn.linear_attention): the loop over time and the chunked form both
equal the quadratic form (q kᵀ masked causally) v, computed here with NumPy; gradients equal
finite differences; bad input is named."""
import numpy as np
import pytest
from autograd.test_util import check_grads
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from .strategies import float_arrays, tolerance


@given(st.data())
def test_both_forms_equal_the_masked_quadratic_form(data):
    batch, length = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 9))
    d_k, d_v = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    q = data.draw(float_arrays((batch, length, d_k)))
    k = data.draw(float_arrays((batch, length, d_k)))
    v = data.draw(float_arrays((batch, length, d_v)))
    scores = np.einsum("bid,bjd->bij", q, k) * np.tril(np.ones((length, length)))  # s <= t
    expected = np.einsum("bij,bjd->bid", scores, v)
    for chunk_size in (None, data.draw(st.integers(1, 10))):
        out = ma.linear_attention(q, k, v, chunk_size=chunk_size)
        np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_gradients_equal_finite_differences(chunk_size):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))
    r = rng.normal(size=(2, 5, 2))
    check_grads(lambda q, k, v: np.sum(ma.linear_attention(q, k, v, chunk_size=chunk_size) * r),
                modes=["rev"], order=1)(q, k, v)


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_float32_stays_float32_and_leading_dims_broadcast(chunk_size):
    rng = np.random.default_rng(1)
    q = rng.normal(size=(3, 4, 6, 2)).astype(np.float32)  # [B, H, L, d_k]
    k, v = rng.normal(size=(6, 2)).astype(np.float32), rng.normal(size=(4, 6, 5)).astype(np.float32)
    out = ma.linear_attention(q, k, v, chunk_size=chunk_size)
    assert out.dtype == np.float32 and out.shape == (3, 4, 6, 5)
    expected = (np.tril(q.astype(float) @ k.T.astype(float))) @ v.astype(float)
    np.testing.assert_allclose(out, expected, **tolerance(np.float32))


@pytest.mark.parametrize("call, error, message", [
    (lambda: ma.linear_attention(np.ones((5, 4)), np.ones((5, 3)), np.ones((5, 2))), ValueError,
     "q and k must have the same feature size d_k: q (5, 4), k (5, 3)"),
    (lambda: ma.linear_attention(np.ones((4, 3)), np.ones((5, 3)), np.ones((5, 2))), ValueError,
     "q and k must have the same length L (one query per token): q (4, 3), k (5, 3)"),
    (lambda: ma.linear_attention(np.ones((5, 3)), np.ones((5, 3)), np.ones((5, 2)),
                                 chunk_size=-1), ValueError,
     "chunk_size must be None or a positive int, got -1"),
])
def test_a_bad_call_raises_this_whole_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message
