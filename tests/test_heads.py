import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from .strategies import float_arrays


@st.composite
def head_inputs(draw):
    n_heads = draw(st.integers(1, 4))
    d_k = draw(st.integers(1, 4))
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 5)), n_heads * d_k)
    return draw(float_arrays(shape)), n_heads


@given(head_inputs())
def test_split_heads_takes_contiguous_feature_slices(xh):
    x, n_heads = xh
    heads = ma.split_heads(x, n_heads)
    d_k = x.shape[-1] // n_heads
    assert heads.shape == (x.shape[0], n_heads, x.shape[1], d_k)
    for h in range(n_heads):
        np.testing.assert_array_equal(heads[:, h], x[..., h * d_k:(h + 1) * d_k])


@given(head_inputs())
def test_merge_is_the_exact_inverse_of_split(xh):
    x, n_heads = xh
    np.testing.assert_array_equal(ma.merge_heads(ma.split_heads(x, n_heads)), x)


def test_reshape_without_transpose_is_wrong():
    # The classic bug: reshape [B, L, D] straight to [B, H, L, d_k]. With L > 1 and H > 1 it
    # mixes tokens inside a head, so it must differ from the real split.
    x = np.arange(2 * 3 * 4, dtype=float).reshape(2, 3, 4)
    buggy = x.reshape(2, 2, 3, 2)
    assert not np.array_equal(buggy, ma.split_heads(x, 2))
