"""The core runs on CuPy-like arrays: every public function, on DeviceArray inputs (a double that
follows CuPy's rules, tests/array_double.py), returns DeviceArrays equal to the NumPy result."""
import autograd.numpy as anp
import numpy as np
import pytest

import minattn as ma

from .array_double import DeviceArray, DeviceGenerator, to_device
from .device_cases import CASES, leaves


def host(tree):
    return tree


@pytest.mark.parametrize("covers, run", CASES)
def test_public_function_runs_on_device_arrays(covers, run):
    expected = leaves(run(host, np.float64))
    got = leaves(run(to_device, np.float64))
    assert len(got) == len(expected)
    for device_result, host_result in zip(got, expected):
        assert isinstance(device_result, DeviceArray), f"{covers} returned a host array"
        assert device_result.dtype == host_result.dtype
        np.testing.assert_allclose(device_result.get(), host_result, rtol=1e-13, atol=1e-15)


def test_every_public_function_has_a_case():
    assert {param.values[0] for param in CASES} == set(ma.__all__)


def test_positional_encoding_without_like_stays_on_the_host():
    pe = ma.positional_encoding(4, 6)
    assert type(pe) is np.ndarray
    np.testing.assert_array_equal(ma.positional_encoding(4, 6, like=to_device(pe)).get(), pe)


def test_dropout_runs_with_a_device_generator():
    # Dropout draws its keep mask from the rng it is given: a device generator (as
    # cupy.random.default_rng) keeps everything on the device, and gives the host's numbers here.
    q, k, v = (np.random.default_rng(s).normal(size=(2, 4, 3)) for s in range(3))
    expected = ma.scaled_dot_product_attention(q, k, v, dropout=0.5, rng=np.random.default_rng(7))
    got = ma.scaled_dot_product_attention(*to_device((q, k, v)), dropout=0.5,
                                          rng=DeviceGenerator(7))
    for device_result, host_result in zip(got, expected):
        np.testing.assert_allclose(device_result.get(), host_result, rtol=1e-13)


def test_dropout_with_a_host_generator_on_device_arrays_fails_loudly():
    # A NumPy Generator makes a host keep mask; mixing it with device arrays is refused.
    q = to_device(np.ones((2, 4, 3)))
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        ma.scaled_dot_product_attention(q, q, q, dropout=0.5, rng=np.random.default_rng(0))


# --- the double itself: it must refuse what CuPy refuses, or it proves nothing ---

x = to_device(np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("mix", [
    lambda: x + np.ones(3),
    lambda: np.ones(3) + x,
    lambda: x @ np.ones((3, 2)),
    lambda: np.where(np.ones(3, dtype=bool), x, 0.0),
    lambda: np.maximum(x, np.zeros(3)),
])
def test_double_refuses_to_mix_with_host_arrays(mix):
    with pytest.raises(TypeError, match="host numpy.ndarray"):
        mix()


@pytest.mark.parametrize("convert", [
    lambda: np.asarray(x), lambda: np.array(x),
    lambda: anp.array(x), lambda: anp.stack([x, x]), lambda: anp.concatenate([x, x]),
])
def test_double_refuses_implicit_host_conversion(convert):
    # autograd's np.array / np.stack / np.concatenate build host arrays: the core must avoid them.
    with pytest.raises(TypeError):
        convert()


def test_double_accepts_python_numbers_numpy_scalars_and_0d_arrays():
    for scalar in (2, 2.0, np.float64(2.0), np.array(2.0)):
        result = x * scalar
        assert isinstance(result, DeviceArray)
        np.testing.assert_array_equal(result.get(), np.arange(6.0).reshape(2, 3) * 2)


def test_double_dispatches_functions_ufuncs_and_like():
    assert isinstance(np.max(x, axis=-1), DeviceArray)
    assert isinstance(np.max(x), DeviceArray) and float(np.max(x)) == 5.0  # 0-d, as CuPy
    assert isinstance(np.arange(3, like=x), DeviceArray)
    assert isinstance(np.add.reduce(x, axis=0), DeviceArray)
    assert isinstance(x.T @ x, DeviceArray) and (x.T @ x).shape == (3, 3)
    assert isinstance(anp.swapaxes(x, 0, 1), DeviceArray)  # autograd's wrappers pass through
    np.testing.assert_array_equal((~(x > 2) | (x == 0)).get(), [[True, True, True],
                                                                 [False, False, False]])


# --- gradients on the double: autograd registered for the device type (minattn.engine.cupy_autograd) ---
from minattn.engine import cupy_autograd  # noqa: E402

from .device_cases import GRAD_CASES, run_grad  # noqa: E402

cupy_autograd.register(DeviceArray)


@pytest.mark.parametrize("covers, index, build", GRAD_CASES)
def test_gradient_runs_on_device_arrays_and_equals_numpys(covers, index, build):
    expected = leaves(run_grad(host, np.float64, index, build))
    got = leaves(run_grad(to_device, np.float64, index, build))
    assert len(got) == len(expected)
    for device_grad, host_grad in zip(got, expected):
        assert isinstance(device_grad, DeviceArray), f"{covers}: a host gradient {type(device_grad)}"
        assert device_grad.dtype == host_grad.dtype
        np.testing.assert_allclose(device_grad.get(), host_grad, rtol=1e-12, atol=1e-14)


def test_the_registered_sums_gradient_keeps_no_copy_of_its_input():
    # register() replaces autograd's VJP of np.sum (whose zeros are host arrays) with one whose
    # zeros follow the input's device: it keeps one zero, not the input, on the tape (a loss's
    # sum would keep its whole input alive until the backward pass); the gradient is unchanged.
    from autograd import grad

    from .test_vjps import _tape_bytes

    x = np.random.default_rng(0).normal(size=(256, 1024))  # 2 MiB
    assert _tape_bytes(lambda x: anp.sum(x * 2.0), x) < 2 ** 16
    np.testing.assert_array_equal(grad(lambda x: anp.sum(x * 2.0, axis=0)[3])(x[:3, :5]),
                                  np.array([[0, 0, 0, 2, 0]] * 3, float))
    d = grad(lambda x: anp.sum(to_device(np.ones((2, 3))) * x))(to_device(np.ones((2, 3))))
    assert isinstance(d, DeviceArray) and d.shape == (2, 3)


def test_every_public_differentiable_function_has_gradient_cases():
    differentiable = {n for n in ma.__all__ if not n.startswith("init_")} - {
        "causal_mask", "padding_mask", "positional_encoding", "generate"}  # generate: int tokens
    assert {p.values[0] for p in GRAD_CASES} == differentiable


def test_a_training_step_of_the_count_model_runs_on_the_double():
    from minattn.models import count_task as train

    losses = {}

    def record(put):
        def callback(step, loss):
            losses.setdefault(put, []).append(loss)
        return callback

    host_params = train.train_count_model(seed=3, steps=2, batch_size=4, callback=record("host"))
    device_params = train.train_count_model(seed=3, steps=2, batch_size=4, callback=record("device"),
                                            to_device=to_device)
    np.testing.assert_allclose(losses["device"], losses["host"], rtol=1e-12)
    for d, h in zip(leaves(device_params), leaves(host_params)):
        assert isinstance(d, DeviceArray)
        np.testing.assert_allclose(d.get(), h, rtol=1e-10, atol=1e-12)
