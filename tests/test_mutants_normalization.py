"""Properties of the normalizations that the mutation test showed no test stated
(tests/MUTANTS.md): float16 LayerNorm and RMSNorm are float32 inside (not float64), and
init_layer_norm names d_model when it refuses it."""
import numpy as np
import pytest

import minattn as ma


def _float32_rms_norm(x, gamma, eps):
    # The formula in float32, written out, then rounded once to float16.
    x32, g32 = x.astype(np.float32), gamma.astype(np.float32)
    rms = np.sqrt(np.sum(x32 * x32, axis=-1, keepdims=True) / np.float32(x.shape[-1])
                  + np.float32(eps))
    return (x32 / rms * g32).astype(np.float16)


def test_float16_rms_norm_is_the_float32_result_rounded_once():
    # float64 inside would round twice (float64 -> float16 directly differs from the float32
    # value rounded to float16 in a few of these 128k entries): the float32 path is the rule.
    rng = np.random.default_rng(0)
    x = (3 * rng.normal(size=(2000, 64))).astype(np.float16)
    gamma = rng.normal(size=64).astype(np.float16)
    out = ma.rms_norm(x, gamma, 1e-6)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, _float32_rms_norm(x, gamma, 1e-6))


def _float32_layer_norm(x, gamma, beta, eps):
    x32, d = x.astype(np.float32), x.shape[-1]
    centered = x32 - np.sum(x32, axis=-1, keepdims=True) / d
    variance = np.sum(centered * centered, axis=-1, keepdims=True) / d
    out = centered / np.sqrt(variance + np.float32(eps)) * gamma.astype(np.float32)
    return (out + beta.astype(np.float32)).astype(np.float16)


def test_float16_layer_norm_is_the_float32_result_rounded_once():
    rng = np.random.default_rng(1)
    x = (3 * rng.normal(size=(2000, 64))).astype(np.float16)
    gamma, beta = rng.normal(size=(2, 64)).astype(np.float16)
    out = ma.layer_norm(x, gamma, beta, 1e-5)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, _float32_layer_norm(x, gamma, beta, 1e-5))


@pytest.mark.parametrize("d_model", [0, -3])
def test_init_layer_norm_names_d_model(d_model):
    with pytest.raises(ValueError) as error:
        ma.init_layer_norm(d_model)
    assert str(error.value) == f"d_model must be a positive int, got {d_model}"
