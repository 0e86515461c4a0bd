"""Properties of the feed-forward networks that the mutation test showed no test stated
(tests/MUTANTS.md): the gated (SwiGLU) network's initialisation ranges and its dtype, that its
three weights are drawn independently, and the float32 GELU's chunking."""
import math

import numpy as np
import pytest

import minattn as ma
from tests.array_double import DeviceArray
from minattn import position_wise


def test_init_gated_feed_forward_is_uniform_within_one_over_sqrt_fan_in():
    d_model, d_ff = 64, 160
    p = ma.init_gated_feed_forward(np.random.default_rng(0), d_model, d_ff)
    assert set(p) == {"w_gate", "w_up", "w_down"}  # no biases (Llama)
    shapes = {"w_gate": (d_model, d_ff), "w_up": (d_model, d_ff), "w_down": (d_ff, d_model)}
    # torch.nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)); fan_in is the input width.
    for name, fan_in in (("w_gate", d_model), ("w_up", d_model), ("w_down", d_ff)):
        a, bound = p[name], 1 / math.sqrt(fan_in)
        assert a.shape == shapes[name] and a.dtype == np.float64, name
        assert -bound <= a.min() < -0.98 * bound and 0.98 * bound < a.max() <= bound, name
        # a uniform law on [-b, b] has mean 0 and variance b² / 3
        assert abs(a.mean()) < 0.05 * bound, name
        np.testing.assert_allclose(a.var(), bound ** 2 / 3, rtol=0.05, err_msg=name)


def test_init_gated_feed_forward_draws_each_weight_on_its_own():
    p = ma.init_gated_feed_forward(np.random.default_rng(0), 8, 8)
    assert not np.allclose(p["w_gate"], p["w_up"])
    assert not np.allclose(p["w_gate"], p["w_down"]) and not np.allclose(p["w_up"], p["w_down"])
    same = ma.init_gated_feed_forward(np.random.default_rng(0), 8, 8)  # the rng decides it all
    for name in p:
        np.testing.assert_array_equal(p[name], same[name])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_init_gated_feed_forward_casts_to_dtype_after_drawing_in_float64(dtype):
    p = ma.init_gated_feed_forward(np.random.default_rng(1), 4, 6, dtype=dtype)
    ref = ma.init_gated_feed_forward(np.random.default_rng(1), 4, 6)
    for name in p:
        assert p[name].dtype == dtype
        np.testing.assert_array_equal(p[name], ref[name].astype(dtype))


@pytest.mark.parametrize("size", [0, 1, 5, 2 ** 17 - 1, 2 ** 17, 2 ** 17 + 3, 3 * 2 ** 17 + 1])
def test_float32_gelu_in_chunks_equals_the_gelu_of_each_element(size):
    # The float32 GELU runs chunk by chunk over the flattened input: every element, the last
    # partial chunk included, must get its own GELU, in place, shape kept.
    x = np.random.default_rng(size).normal(scale=3.0, size=size).astype(np.float32)
    from scipy.special import erf
    expected = 0.5 * x.astype(np.float64) * (1.0 + erf(x.astype(np.float64) / math.sqrt(2.0)))
    got = position_wise.gelu(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-7)
    shaped = position_wise.gelu(x[: size - size % 4].reshape(-1, 2, 2)) if size >= 4 else None
    if shaped is not None:
        np.testing.assert_array_equal(shaped.reshape(-1), got[: size - size % 4])


@pytest.mark.parametrize("shape", [(0,), (1,), (3, 5), (2, 70000)])  # the last: two chunks
def test_float32_gelu_of_a_device_array_equals_numpys(shape):
    """A CuPy-like array (tests/array_double.py) goes through the float32 GELU in one piece, a
    NumPy one chunk by chunk: elementwise, so the values are the same, bit for bit."""
    x = np.random.default_rng(0).normal(scale=4.0, size=shape).astype(np.float32)
    on_device = position_wise.gelu(DeviceArray(x))
    assert isinstance(on_device, DeviceArray) and on_device.dtype == np.float32
    np.testing.assert_array_equal(on_device.get(), position_wise.gelu(x))
