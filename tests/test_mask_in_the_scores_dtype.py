"""An additive mask and a 0-d scale are taken in the scores' dtype (checks.check_attention): the
promotion of q's AND k's dtypes. With float32 q and float64 k (or the other way round) the scores
are float64, so a float64 mask and scale stay float64, exactly: the result equals the formula in
float64, to rounding, not to float32's 1e-8."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
BIAS = rng.uniform(-1, 1, size=(3, 5)) / 3  # not representable in float32


@pytest.mark.parametrize("q_dtype, k_dtype", [(np.float32, np.float64), (np.float64, np.float32)])
@pytest.mark.parametrize("scale", [None, np.array(0.1)])  # 0.1: not a float32 either
def test_a_float64_mask_and_scale_stay_float64_when_q_or_k_is_float64(q_dtype, k_dtype, scale):
    q, k = Q.astype(q_dtype), K.astype(k_dtype)
    out, weights = ma.scaled_dot_product_attention(q, k, V, BIAS, scale=scale)
    assert weights.dtype == np.float64
    s = 0.5 if scale is None else 0.1  # 1/sqrt(d_k) = 1/2: exact in float32 too
    scores = (q.astype(np.float64) @ k.astype(np.float64).T) * s + BIAS
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(weights, expected, rtol=1e-13, atol=0)
    np.testing.assert_allclose(out, expected @ V, rtol=1e-12, atol=1e-15)
