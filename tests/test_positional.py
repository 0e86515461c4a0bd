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


@pytest.mark.parametrize("n_positions, d_model, message", [
    (-1, 4, "n_positions must be a non-negative int, got -1"),
    (2.0, 4, "n_positions must be a non-negative int, got 2.0"),
    (True, 4, "n_positions must be a non-negative int, got True"),
    (3, 0, "d_model must be a positive int, got 0"),
    (3, "4", "d_model must be a positive int, got '4'"),
])
def test_bad_sizes_are_refused_by_name(n_positions, d_model, message):
    with pytest.raises(TypeError) as info:
        ma.positional_encoding(n_positions, d_model)
    assert str(info.value) == message
