import math

import numpy as np
import pytest
from hypothesis import given

import minattn as ma

from .strategies import float_arrays, tolerance


def _scalar_activation(name):
    # Independent scalar formulas from the math module.
    return {
        "relu": lambda t: max(t, 0.0),
        "gelu": lambda t: 0.5 * t * (1 + math.erf(t / math.sqrt(2))),
        "gelu_tanh": lambda t: 0.5 * t * (1 + math.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t**3))),
    }[name]


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@given(x=float_arrays((3, 4)))
def test_matches_per_token_loop(activation, x):
    p = ma.init_feed_forward(np.random.default_rng(0), 4, 6)
    act = _scalar_activation(activation)
    expected = []
    for token in x:  # position-wise: each token on its own
        hidden = [act(h) for h in token @ p["w_1"] + p["b_1"]]
        expected.append(np.array(hidden) @ p["w_2"] + p["b_2"])
    np.testing.assert_allclose(ma.feed_forward(p, x, activation=activation), expected,
                               **tolerance(np.float64))


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(activation, dtype):
    p = {k: v.astype(dtype) for k, v in ma.init_feed_forward(np.random.default_rng(0), 4, 6).items()}
    x = np.ones((2, 3, 4), dtype=dtype)
    assert ma.feed_forward(p, x, activation=activation).dtype == dtype
