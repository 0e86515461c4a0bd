import math

import numpy as np
import pytest

import minattn as ma


@pytest.mark.parametrize("d_model", [1, 4, 7])
def test_matches_the_paper_formula(d_model):
    pe = ma.positional_encoding(10, d_model)
    for pos in range(10):
        for j in range(d_model):
            angle = pos / 10000 ** (2 * (j // 2) / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[pos, j] == pytest.approx(expected, abs=1e-12)


def test_dtype_argument():
    assert ma.positional_encoding(3, 4, dtype=np.float32).dtype == np.float32
