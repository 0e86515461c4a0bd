"""The core on real CuPy arrays: every public function returns CuPy arrays whose values, brought
back with cupy.asnumpy, equal the NumPy result within float32 tolerance; gradients of every
public function (and a count-model training step) run on CuPy and equal NumPy's.
Skipped where CuPy is not installed or no CUDA device is visible; tests/test_array_double.py
checks the same cases everywhere with a CuPy-like double."""
import numpy as np
import pytest

cupy = pytest.importorskip("cupy")


def _cuda_devices():
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no driver / no device: CuPy raises CUDARuntimeError (or similar)
        return 0


if _cuda_devices() == 0:
    pytest.skip("CuPy is installed but no CUDA device is available", allow_module_level=True)

from .device_cases import CASES, leaves, tree_map  # noqa: E402
from .strategies import tolerance  # noqa: E402


def host(tree):
    return tree


def to_gpu(tree):
    return tree_map(cupy.asarray, tree)


@pytest.mark.parametrize("covers, run", CASES)
def test_public_function_runs_on_cupy(covers, run):
    expected = leaves(run(host, np.float32))
    got = leaves(run(to_gpu, np.float32))
    assert len(got) == len(expected)
    for gpu_result, host_result in zip(got, expected):
        assert isinstance(gpu_result, cupy.ndarray), f"{covers} returned {type(gpu_result)}"
        assert gpu_result.dtype == host_result.dtype
        np.testing.assert_allclose(cupy.asnumpy(gpu_result), host_result,
                                   **tolerance(np.float32))


def test_host_arrays_are_refused():
    # What the double imitates: CuPy will not mix a host array into device arithmetic.
    with pytest.raises(TypeError):
        cupy.ones(3) + np.ones(3)


from minattn.engine import cupy_autograd  # noqa: E402

from .device_cases import GRAD_CASES, run_grad  # noqa: E402

cupy_autograd.register()


@pytest.mark.parametrize("covers, index, build", GRAD_CASES)
def test_gradient_runs_on_cupy_and_equals_numpys(covers, index, build):
    expected = leaves(run_grad(host, np.float64, index, build))
    got = leaves(run_grad(to_gpu, np.float64, index, build))
    assert len(got) == len(expected)
    for gpu_grad, host_grad in zip(got, expected):
        assert isinstance(gpu_grad, cupy.ndarray), f"{covers}: gradient is {type(gpu_grad)}"
        assert gpu_grad.dtype == host_grad.dtype
        np.testing.assert_allclose(cupy.asnumpy(gpu_grad), host_grad, rtol=1e-10, atol=1e-12)


def test_float32_gradients_stay_float32_on_cupy():
    for covers, index, build in (p.values for p in GRAD_CASES):
        for leaf in leaves(run_grad(to_gpu, np.float32, index, build)):
            assert leaf.dtype == np.float32, covers


def test_a_training_step_of_the_count_model_runs_on_cupy():
    from minattn.models import count_task as train

    losses = {"host": [], "gpu": []}
    train.train_count_model(seed=3, steps=2, batch_size=4,
                            callback=lambda step, loss: losses["host"].append(loss))
    params = train.train_count_model(seed=3, steps=2, batch_size=4, to_device=to_gpu,
                                     callback=lambda step, loss: losses["gpu"].append(loss))
    np.testing.assert_allclose(losses["gpu"], losses["host"], rtol=1e-10)
    assert all(isinstance(leaf, cupy.ndarray) for leaf in leaves(params))
