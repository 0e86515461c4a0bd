"""The core on real CuPy arrays (forward only): every public function returns CuPy arrays whose
values, brought back with cupy.asnumpy, equal the NumPy result within float32 tolerance.
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
