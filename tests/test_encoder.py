import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from . import reference
from .strategies import cast_params, float_arrays, model_sizes, perturbed, seeds


@pytest.mark.parametrize("norm_first", [False, True])
@given(sizes=model_sizes(), seed=seeds, data=st.data())
def test_block_matches_hand_written_block(norm_first, sizes, seed, data):
    b, length, d_model, n_heads, d_ff = sizes
    p = perturbed(ma.init_encoder_block(np.random.default_rng(seed), d_model, n_heads, d_ff), seed)
    x = data.draw(float_arrays((b, length, d_model)))
    lens = np.array(data.draw(st.lists(st.integers(1, length), min_size=b, max_size=b)))
    y = ma.encoder_block(p, x, ma.padding_mask(lens, length), n_heads=n_heads, norm_first=norm_first)
    for i in range(b):
        keep = [[j < lens[i] for j in range(length)]] * length
        expected = reference.encoder_block_loop(p, x[i], n_heads, keep=keep, norm_first=norm_first)
        np.testing.assert_allclose(y[i], expected, rtol=1e-8, atol=1e-8)


@given(sizes=model_sizes(), seed=seeds, data=st.data())
def test_stack_is_blocks_in_sequence_then_final_norm(sizes, seed, data):
    b, length, d_model, n_heads, d_ff = sizes
    p = perturbed(ma.init_encoder(np.random.default_rng(seed), 2, d_model, n_heads, d_ff,
                                   final_norm=True), seed)
    x = data.draw(float_arrays((b, length, d_model)))
    kw = dict(n_heads=n_heads, norm_first=True, activation="gelu")
    y, weights = ma.encoder(p, x, ma.causal_mask(length), return_weights=True, **kw)
    h = x
    for i, layer in enumerate(p["layers"]):
        h, w = ma.encoder_block(layer, h, ma.causal_mask(length), return_weights=True, **kw)
        np.testing.assert_array_equal(weights[i], w)
    h = ma.layer_norm(h, p["final_norm"]["gamma"], p["final_norm"]["beta"])
    np.testing.assert_array_equal(y, h)
    assert len(weights) == 2 and weights[0].shape == (b, n_heads, length, length)


@pytest.mark.parametrize("norm_first", [False, True])
@given(sizes=model_sizes(), seed=seeds, data=st.data())
def test_block_and_stack_are_permutation_equivariant(norm_first, sizes, seed, data):
    b, length, d_model, n_heads, d_ff = sizes
    p = perturbed(ma.init_encoder(np.random.default_rng(seed), 2, d_model, n_heads, d_ff), seed)
    x = data.draw(float_arrays((b, length, d_model)))
    perm = data.draw(st.permutations(range(length)))
    kw = dict(n_heads=n_heads, norm_first=norm_first)
    for f, params in ((ma.encoder_block, p["layers"][0]), (ma.encoder, p)):
        np.testing.assert_allclose(f(params, x[:, perm], **kw), f(params, x, **kw)[:, perm],
                                   rtol=1e-9, atol=1e-9)


@given(sizes=model_sizes(), seed=seeds, data=st.data())
def test_batch_independence_and_padding_invariance(sizes, seed, data):
    b, length, d_model, n_heads, d_ff = sizes
    p = perturbed(ma.init_encoder(np.random.default_rng(seed), 2, d_model, n_heads, d_ff), seed)
    x = data.draw(float_arrays((b, length, d_model)))
    lens = np.array(data.draw(st.lists(st.integers(1, length), min_size=b, max_size=b)))
    mask = ma.padding_mask(lens, length)
    y = ma.encoder(p, x, mask, n_heads=n_heads)
    noise = data.draw(float_arrays(x.shape, bound=50.0))
    pad = ~mask[:, 0, 0, :, None]
    y2 = ma.encoder(p, np.where(pad, noise, x), mask, n_heads=n_heads)
    for i in range(b):
        alone = ma.encoder(p, x[i:i + 1, : lens[i]], n_heads=n_heads)  # no padding at all
        np.testing.assert_allclose(y[i, : lens[i]], alone[0], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(y2[i, : lens[i]], y[i, : lens[i]], rtol=1e-9, atol=1e-9)


def test_post_norm_and_pre_norm_differ():
    p = perturbed(ma.init_encoder_block(np.random.default_rng(0), 8, 2, 16), 0)
    x = np.random.default_rng(1).normal(size=(2, 4, 8))
    assert not np.allclose(ma.encoder_block(p, x, n_heads=2),
                           ma.encoder_block(p, x, n_heads=2, norm_first=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    p = ma.init_encoder(np.random.default_rng(0), 2, 8, 2, 16, final_norm=True)
    x = np.ones((2, 4, 8), dtype=dtype)
    for activation in ("relu", "gelu", "gelu_tanh"):
        y, w = ma.encoder(cast_params(p, dtype), x, ma.causal_mask(4), n_heads=2,
                          activation=activation,
                          return_weights=True)
        assert y.dtype == dtype and all(wi.dtype == dtype for wi in w)


def test_dropout_is_reproducible_and_off_by_default():
    p = ma.init_encoder(np.random.default_rng(0), 2, 8, 2, 16)
    x = np.random.default_rng(1).normal(size=(2, 4, 8))
    a = ma.encoder(p, x, n_heads=2, dropout=0.5, rng=np.random.default_rng(7))
    b = ma.encoder(p, x, n_heads=2, dropout=0.5, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, ma.encoder(p, x, n_heads=2))
