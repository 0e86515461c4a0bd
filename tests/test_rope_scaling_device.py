"""Every RoPE frequency schedule runs on a device array (the CuPy double of
tests/array_double.py): apply_rope on a device array gives a device array, equal to NumPy's
result. A schedule that built a host array (np.arange without like=) fails here as on CuPy."""
import numpy as np
import pytest

import minattn as ma

from .array_double import DeviceArray

SCALINGS = [
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 4},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "mscale": 1.0,
     "mscale_all_dim": 0.5, "truncate": False},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8},
]


@pytest.mark.parametrize("scaling", SCALINGS, ids=lambda s: s["rope_type"])
def test_every_schedule_runs_on_device_arrays(scaling):
    x = np.random.default_rng(0).normal(size=(2, 3, 7, 16))
    positions = np.arange(3, 10)
    expected = ma.apply_rope(x, positions, scaling=scaling)
    got = ma.apply_rope(DeviceArray(x), DeviceArray(positions), scaling=scaling)
    assert isinstance(got, DeviceArray)
    np.testing.assert_allclose(got.get(), expected, rtol=1e-13, atol=1e-15)
