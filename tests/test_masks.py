import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma


@given(st.integers(0, 8), st.integers(0, 8))
def test_causal_mask_lets_query_i_see_keys_up_to_i(n_q, n_k):
    m = ma.causal_mask(n_q, n_k)
    assert m.shape == (n_q, n_k) and m.dtype == bool
    for i in range(n_q):
        for j in range(n_k):
            assert m[i, j] == (j <= i)


def test_causal_mask_defaults_to_square():
    np.testing.assert_array_equal(ma.causal_mask(3), np.tril(np.ones((3, 3), dtype=bool)))


@given(st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_padding_mask_is_true_at_real_tokens(lens):
    m = ma.padding_mask(np.array(lens), 6)
    assert m.shape == (len(lens), 1, 1, 6) and m.dtype == bool
    for b, n in enumerate(lens):
        assert m[b, 0, 0].tolist() == [True] * n + [False] * (6 - n)


def test_masks_combine_with_and():
    m = ma.causal_mask(4) & ma.padding_mask(np.array([4, 2]), 4)
    assert m.shape == (2, 1, 4, 4)
    assert m[1, 0].tolist() == [[True, False, False, False], [True, True, False, False],
                                [True, True, False, False], [True, True, False, False]]
