"""from_torch on the pieces a kernel author's own model is made of: nn.Linear (-> linear, weight
transposed to [d_in, d_out], its bias where it has one) and nn.RMSNorm (-> rms_norm, torch's
eps=None as the dtype's machine epsilon), each equal to the module in float64 and float32."""
import numpy as np
import pytest

from minattn.linear import linear
from minattn.normalization import rms_norm

torch = pytest.importorskip("torch")
from minattn.interop import from_torch  # noqa: E402

X = np.random.default_rng(0).normal(size=(2, 3, 6))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_linear_layer_is_its_weight_transposed_and_its_bias(bias, dtype):
    torch.manual_seed(0)
    module = torch.nn.Linear(6, 5, bias=bias).to(dtype)
    params, kwargs = from_torch(module)
    assert kwargs == {} and set(params) == ({"w", "b"} if bias else {"w"})
    assert params["w"].shape == (6, 5)
    x = X.astype(torch.empty(0, dtype=dtype).numpy().dtype)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(linear(x, **params), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("eps", [1e-6, None])
def test_an_rms_norm_is_its_weight_and_eps(eps):
    module = torch.nn.RMSNorm(6, eps=eps).double()
    with torch.no_grad():
        module.weight.uniform_(0.5, 1.5)
    params, kwargs = from_torch(module)
    assert kwargs == {"eps": 1e-6 if eps else float(torch.finfo(torch.float64).eps)}
    with torch.no_grad():
        expected = module(torch.from_numpy(X)).numpy()
    np.testing.assert_allclose(rms_norm(X, **params, **kwargs), expected, rtol=0, atol=1e-12)
