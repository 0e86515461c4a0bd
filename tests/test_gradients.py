"""Gradients from autograd against central finite differences (autograd.test_util.check_grads),
in float64, for the encoder side (softmax to encoder, blockwise attention); hypothesis picks
the shapes. tests/test_gradients_decoder.py checks the decoder side."""
import numpy as np
import pytest
from autograd import grad
from autograd.test_util import check_grads
from hypothesis import given, settings
from hypothesis import strategies as st

import minattn as ma

from .strategies import (attention_inputs, bool_masks, cast_params, float_arrays, model_sizes,
                         perturbed, seeds)


def _rev(f, *args):
    check_grads(f, modes=["rev"], order=1)(*args)


def _projector(shape, seed):
    # A fixed random direction turns any output into a scalar loss whose gradient is non-trivial.
    return np.random.default_rng(seed).normal(size=shape)


@given(st.data())
def test_softmax_with_and_without_mask(data):
    shape = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)))
    x = data.draw(float_arrays(shape))
    mask = data.draw(bool_masks(shape))
    r = _projector(shape, 0)
    _rev(lambda x: np.sum(ma.softmax(x) * r), x)
    _rev(lambda x: np.sum(ma.softmax(x, mask=mask) * r), x)


def test_softmax_fully_masked_rows_have_finite_zero_gradient():
    x = np.random.default_rng(0).normal(size=(3, 4))
    mask = np.array([[True, False, True, True], [False] * 4, [True] * 4])
    r = _projector(x.shape, 1)
    g = grad(lambda x: np.sum(ma.softmax(x, mask=mask) * r))(x)
    assert np.isfinite(g).all()
    assert (g[~mask] == 0).all()
    _rev(lambda x: np.sum(ma.softmax(x, mask=mask) * r), x)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "causal", "additive", "fully_masked_row"])
@given(qkv=attention_inputs())
def test_scaled_dot_product_attention(mask_kind, qkv):
    q, k, v = qkv
    l_q, l_k = q.shape[-2], k.shape[-2]
    rng = np.random.default_rng(2)
    mask = {
        "none": None,
        "bool": rng.random((l_q, l_k)) > 0.3,
        "causal": ma.causal_mask(l_q, l_k),
        "additive": rng.normal(size=(l_q, l_k)),
        "fully_masked_row": np.arange(l_q)[:, None] % 2 == np.zeros((1, l_k)),  # odd rows empty
    }[mask_kind]
    r_out = _projector(q.shape[:-1] + v.shape[-1:], 3)
    r_w = _projector(q.shape[:-1] + (l_k,), 4)

    def loss(q, k, v):
        out, w = ma.scaled_dot_product_attention(q, k, v, mask)
        return np.sum(out * r_out) + np.sum(w * r_w)

    _rev(loss, q, k, v)
    for g in grad(loss, (0, 1, 2))(q, k, v):
        assert np.isfinite(g).all()


@given(x=float_arrays((2, 3, 6)))
def test_split_and_merge_heads(x):
    _rev(lambda x: np.sum(ma.split_heads(x, 3) * _projector((2, 3, 3, 2), 5)), x)
    h = x.reshape(2, 3, 3, 2)
    _rev(lambda h: np.sum(ma.merge_heads(h) * _projector((2, 3, 6), 6)), h)


@given(x=float_arrays((3, 5), bound=5.0), gamma=float_arrays((5,)), beta=float_arrays((5,)))
def test_layer_norm(x, gamma, beta):
    x = x + np.arange(5)  # keep rows away from constant, where the function is ill-conditioned
    r = _projector(x.shape, 7)
    _rev(lambda x, g, b: np.sum(ma.layer_norm(x, g, b) * r), x, gamma, beta)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@given(x=float_arrays((2, 3, 4)), seed=seeds)
def test_feed_forward(activation, x, seed):
    params = ma.init_feed_forward(np.random.default_rng(seed), 4, 6)
    r = _projector((2, 3, 4), 8)
    _rev(lambda p, x: np.sum(ma.feed_forward(p, x, activation=activation) * r), params, x)


@given(sizes=model_sizes(), seed=seeds, data=st.data())
def test_multi_head_attention(sizes, seed, data):
    b, length, d_model, n_heads, _ = sizes
    params = perturbed(ma.init_multi_head_attention(np.random.default_rng(seed), d_model, n_heads), seed)
    x = data.draw(float_arrays((b, length, d_model)))
    mem = data.draw(float_arrays((b, length + 1, d_model)))
    r = _projector((b, length, d_model), 9)
    loss = lambda p, x, mem: np.sum(ma.multi_head_attention(p, x, mem, mem, n_heads=n_heads)[0] * r)
    _rev(loss, params, x, mem)


@pytest.mark.parametrize("norm_first", [False, True])
@given(sizes=model_sizes(), seed=seeds, data=st.data())
@settings(max_examples=10)
def test_encoder_block(norm_first, sizes, seed, data):
    b, length, d_model, n_heads, d_ff = sizes
    params = perturbed(ma.init_encoder_block(np.random.default_rng(seed), d_model, n_heads, d_ff), seed)
    x = data.draw(float_arrays((b, length, d_model))) + np.arange(d_model)  # LayerNorm: no flat rows
    mask = ma.causal_mask(length)
    r = _projector(x.shape, 10)
    loss = lambda p, x: np.sum(ma.encoder_block(p, x, mask, n_heads=n_heads, norm_first=norm_first,
                                                activation="gelu") * r)
    _rev(loss, params, x)


@given(seed=seeds)
@settings(max_examples=5)
def test_encoder_stack(seed):
    params = perturbed(ma.init_encoder(np.random.default_rng(seed), 2, 4, 2, 8, final_norm=True), seed)
    x = np.random.default_rng(seed).normal(size=(2, 3, 4)) + np.arange(4)
    mask = ma.padding_mask(np.array([3, 2]), 3)
    r = _projector(x.shape, 11)
    _rev(lambda p, x: np.sum(ma.encoder(p, x, mask, n_heads=2, norm_first=True) * r), params, x)


@given(qkv=attention_inputs(), block=st.integers(1, 4))
@settings(max_examples=10)
def test_blockwise_attention(qkv, block):
    q, k, v = qkv
    r = _projector(q.shape[:-1] + v.shape[-1:], 12)
    _rev(lambda q, k, v: np.sum(ma.blockwise_attention(q, k, v, causal=True, block_size=block) * r),
         q, k, v)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_float32_in_gives_float32_gradients(activation, norm_first):
    # autograd's own np.mean VJP promotes float32 to float64 under NumPy 2; the core avoids it.
    params = cast_params(ma.init_encoder(np.random.default_rng(0), 2, 8, 2, 16, final_norm=True), np.float32)
    x = np.random.default_rng(1).normal(size=(2, 3, 8)).astype(np.float32)
    loss = lambda p, x: np.sum(ma.encoder(p, x, ma.causal_mask(3), n_heads=2, activation=activation,
                                          norm_first=norm_first)) * np.float32(0.5)
    g_params, g_x = grad(loss, (0, 1))(params, x)
    leaves = [g_x, g_params["final_norm"]["gamma"]] + [
        leaf for layer in g_params["layers"] for sub in layer.values() for leaf in sub.values()]
    assert all(leaf.dtype == np.float32 for leaf in leaves)


def test_relu_gradient_at_zero_is_zero_as_in_torch():
    # ReLU has no derivative at 0; frameworks (torch's threshold_backward) use 0 there.
    from minattn.position_wise import relu

    g = grad(lambda x: np.sum(relu(x)))(np.array([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])
