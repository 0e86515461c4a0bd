import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minattn as ma

from . import reference
from .strategies import float_arrays, tolerance


@st.composite
def rows(draw, min_d=2):
    d = draw(st.integers(min_d, 8))
    x = draw(float_arrays((draw(st.integers(1, 4)), d), bound=10.0))
    assume((x.std(-1) > 1e-2).all())  # LayerNorm of a near-constant row is dominated by eps
    return x


@given(rows(), st.data())
def test_matches_loop_reference(x, data):
    d = x.shape[-1]
    gamma = data.draw(float_arrays((d,)))
    beta = data.draw(float_arrays((d,)))
    expected = [reference.layer_norm_row(r, gamma, beta, 1e-5) for r in x.tolist()]
    np.testing.assert_allclose(ma.layer_norm(x, gamma, beta), expected, **tolerance(np.float64))


@given(rows())
def test_rows_have_mean_zero_and_variance_one(x):
    d = x.shape[-1]
    y = ma.layer_norm(x, np.ones(d), np.zeros(d), eps=0.0)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-10)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-10)


@given(rows(), st.floats(0.1, 10.0), st.floats(-10.0, 10.0))
def test_invariant_to_positive_affine_maps(x, a, b):
    d = x.shape[-1]
    g, beta = np.ones(d), np.zeros(d)
    np.testing.assert_allclose(ma.layer_norm(a * x + b, g, beta, eps=0.0),
                               ma.layer_norm(x, g, beta, eps=0.0), rtol=1e-8, atol=1e-8)


def test_eps_sits_inside_the_square_root():
    x = np.array([[0.0, 2.0]])  # mean 1, biased variance 1
    y = ma.layer_norm(x, np.ones(2), np.zeros(2), eps=3.0)
    np.testing.assert_allclose(y, [[-0.5, 0.5]], rtol=1e-15)  # 1 / sqrt(1 + 3); std+eps gives 1/4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(dtype)
    assert ma.layer_norm(x, np.ones(4, dtype), np.zeros(4, dtype)).dtype == dtype
    # eps read from a config as a NumPy float64 scalar must not upcast float32 either.
    assert ma.layer_norm(x, np.ones(4, dtype), np.zeros(4, dtype), eps=np.float64(1e-5)).dtype == dtype
