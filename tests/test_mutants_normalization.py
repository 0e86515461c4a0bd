"""Properties of the normalizations that the mutation test showed no test stated
(tests/MUTANTS.md): float16 LayerNorm and RMSNorm are float32 inside (not float64), and
init_layer_norm names d_model when it refuses it."""
import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

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
    # The float32 result, rounded once: minattn's own float32 function (its sums' order is
    # BLAS's), and within one float16 rounding of the formula written out here.
    np.testing.assert_array_equal(out, ma.rms_norm(x.astype(np.float32),
                                                   gamma.astype(np.float32), 1e-6).astype(np.float16))
    _within_one_float16_rounding(out, _float32_rms_norm(x, gamma, 1e-6))


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
    np.testing.assert_array_equal(out, ma.layer_norm(
        x.astype(np.float32), gamma.astype(np.float32), beta.astype(np.float32),
        1e-5).astype(np.float16))
    _within_one_float16_rounding(out, _float32_layer_norm(x, gamma, beta, 1e-5))


def _within_one_float16_rounding(out, reference):
    spacing = np.spacing(np.abs(reference.astype(np.float32)).astype(np.float16))
    assert np.all(np.abs(out.astype(np.float32) - reference.astype(np.float32)) <= spacing)


@pytest.mark.parametrize("d_model", [0, -3])
def test_init_layer_norm_names_d_model(d_model):
    with pytest.raises(ValueError) as error:
        ma.init_layer_norm(d_model)
    assert str(error.value) == f"d_model must be a positive int, got {d_model}"


def test_eps_zero_rms_norm_differentiates_a_constant_row_and_refuses_a_zero_one():
    """eps = 0 is refused only where the norm is 0 / 0: for RMSNorm a row of zeros (mean square
    0), not a constant row (its variance is 0, its mean square is not): in the forward pass
    and in the gradient alike."""
    x, gamma = np.array([[2.0, 2.0, 2.0], [1.0, -2.0, 0.5]]), np.array([1.0, 0.5, 2.0])
    f = lambda x: anp.sum(ma.rms_norm(x, gamma, 0.0) * np.arange(6.0).reshape(2, 3))
    expected = grad(lambda x: anp.sum(x * gamma / anp.sqrt(anp.mean(x * x, axis=-1, keepdims=True))
                                      * np.arange(6.0).reshape(2, 3)))(x)
    np.testing.assert_allclose(grad(f)(x), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="eps=0 leaves the norm undefined"):
        grad(f)(np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="eps=0 leaves the norm undefined"):
        ma.layer_norm(x, gamma, np.zeros(3), 0.0)  # LayerNorm: the constant row's variance is 0


def test_one_feature_layer_norm_is_beta_and_rms_norm_is_the_sign_times_gamma_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[3.0], [-0.5], [2e-3]])
    gamma, beta = np.array([1.5]), np.array([0.25])
    np.testing.assert_allclose(ma.layer_norm(x, gamma, beta, 1e-5), np.full((3, 1), 0.25))
    expected = torch.nn.functional.rms_norm(torch.tensor(x), (1,), torch.tensor(gamma), eps=1e-6)
    np.testing.assert_allclose(ma.rms_norm(x, gamma, 1e-6), expected.numpy(), rtol=1e-12)
