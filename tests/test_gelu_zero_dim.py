"""GELU of a 0-d array (one number) is x Φ(x) = x (1 + erf(x / √2)) / 2, a 0-d array of x's
dtype: the float32 path (computed chunk by chunk over the flattened input) takes it too."""
import math

import numpy as np
import pytest

from minattn.position_wise import gelu


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("value", [-3.0, -0.5, 0.0, 0.7, 2.5])
def test_gelu_of_one_number(value, dtype):
    out = gelu(np.array(value, dtype))
    assert out.shape == () and out.dtype == dtype
    x = float(np.array(value, dtype))
    exact = x * (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    # float32: within the error the float32 GELU is documented (and tested, tests/test_vjps.py)
    # to keep on every CPU: the approximation's 2.2e-7 plus 4 float32 ulps of max(|x|, 1)
    tolerance = dict(abs=2.2e-7 + 2.0 ** -21 * max(abs(x), 1.0)) if dtype == np.float32 else \
        dict(rel=1e-14, abs=1e-300)
    assert float(out) == pytest.approx(exact, **tolerance)
