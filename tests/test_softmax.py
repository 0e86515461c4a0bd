import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from . import reference
from .strategies import bool_masks, float_arrays, lengths, tolerance


@given(st.data())
def test_matches_loop_reference(data):
    x = data.draw(float_arrays((data.draw(lengths), data.draw(lengths)), bound=30.0))
    expected = np.array([reference.softmax_row(row) for row in x.tolist()])
    np.testing.assert_allclose(ma.softmax(x), expected, **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@given(data=st.data())
def test_rows_are_nonnegative_and_sum_to_one(dtype, data):
    x = data.draw(float_arrays((3, data.draw(lengths)), dtype, bound=10.0))
    w = ma.softmax(x)
    assert w.dtype == dtype
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1, dtype=np.float64), 1.0, **tolerance(dtype))


@given(float_arrays((4, 5), bound=10.0), float_arrays((4, 1), bound=100.0))
def test_invariant_to_adding_a_constant_per_row(x, c):
    np.testing.assert_allclose(ma.softmax(x + c), ma.softmax(x), rtol=1e-9, atol=1e-12)


@given(float_arrays((3, 4, 5)))
def test_axis_argument_normalizes_that_axis(x):
    w = ma.softmax(x, axis=1)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(w, np.moveaxis(ma.softmax(np.moveaxis(x, 1, -1)), -1, 1), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_huge_logits_give_finite_results(dtype):
    # exp(1e4) overflows every dtype; only the max-subtraction keeps these finite.
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, -1e4]], dtype=dtype)
    w = ma.softmax(x)
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.astype(np.float64), [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-3)


@given(st.data())
def test_masked_entries_get_exactly_zero(data):
    shape = (data.draw(lengths), data.draw(lengths))
    x = data.draw(float_arrays(shape, bound=10.0))
    mask = data.draw(bool_masks(shape))
    w = ma.softmax(x, mask=mask)
    assert (w[~mask] == 0).all()
    expected = np.array([reference.softmax_row(r, m) for r, m in zip(x.tolist(), mask.tolist())])
    np.testing.assert_allclose(w, expected, **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fully_masked_row_is_zero_without_warning(dtype, recwarn):
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=dtype)
    mask = np.array([[True, False], [False, False]])
    w = ma.softmax(x, mask=mask)
    assert not recwarn.list
    np.testing.assert_array_equal(w, np.array([[1.0, 0.0], [0.0, 0.0]], dtype=dtype))
