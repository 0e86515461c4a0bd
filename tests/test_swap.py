"""minattn.swap: a replacement is used everywhere minattn calls the function (the composites
included), and everything is restored afterwards, even when the block raises."""
import numpy as np
import pytest

import minattn as ma
from minattn import attention, multi_head

X = np.random.default_rng(0).normal(size=(2, 3, 4))
PARAMS = ma.init_encoder(np.random.default_rng(0), 1, 4, 2, 8)


def uniform_softmax(x, axis=-1, mask=None):
    return np.ones_like(x) / x.shape[axis]  # ignores the scores: every weight 1/n


def test_a_swapped_softmax_reaches_attention_multi_head_attention_and_the_encoder():
    before_weights = ma.scaled_dot_product_attention(X, X, X)[1]
    before_encoder = ma.encoder(PARAMS, X, n_heads=2)
    with ma.swap(softmax=uniform_softmax):
        weights = ma.scaled_dot_product_attention(X, X, X)[1]
        _, head_weights = ma.multi_head_attention(PARAMS["layers"][0]["self_attention"], X, X, X,
                                                  n_heads=2)
        encoded = ma.encoder(PARAMS, X, n_heads=2)
    np.testing.assert_array_equal(weights, np.full((2, 3, 3), 1 / 3))
    np.testing.assert_array_equal(head_weights, np.full((2, 2, 3, 3), 1 / 3))
    assert not np.allclose(encoded, before_encoder)
    np.testing.assert_array_equal(ma.scaled_dot_product_attention(X, X, X)[1], before_weights)


def test_everything_is_restored_after_an_exception():
    real = (ma.softmax, attention.softmax, multi_head.scaled_dot_product_attention)
    with pytest.raises(RuntimeError):
        with ma.swap(softmax=uniform_softmax, scaled_dot_product_attention=lambda *a, **k: None):
            assert attention.softmax is uniform_softmax
            raise RuntimeError("a student's bug")
    assert (ma.softmax, attention.softmax, multi_head.scaled_dot_product_attention) == real


def test_unknown_names_and_non_callables_are_refused():
    with pytest.raises(ValueError, match="'sofmax' is not a public minattn function"):
        with ma.swap(sofmax=uniform_softmax):
            pass
    with pytest.raises(TypeError, match="replacement for softmax must be callable, got int"):
        with ma.swap(softmax=3):
            pass
