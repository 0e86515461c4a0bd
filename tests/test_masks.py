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


@given(st.integers(0, 8), st.integers(0, 8))
def test_bottom_right_causal_mask_puts_queries_at_the_last_positions(n_q, n_k):
    m = ma.causal_mask(n_q, n_k, align="bottom_right")
    assert m.shape == (n_q, n_k) and m.dtype == bool
    for i in range(n_q):
        for j in range(n_k):
            assert m[i, j] == (j <= i + n_k - n_q)  # query i is at position n_k - n_q + i


@given(st.integers(1, 8), st.integers(0, 8))
def test_bottom_right_rows_are_the_last_rows_of_the_square_mask(n_q, extra):
    n_k = n_q + extra
    np.testing.assert_array_equal(ma.causal_mask(n_q, n_k, align="bottom_right"),
                                  ma.causal_mask(n_k)[n_k - n_q:])


def test_the_causal_mask_1_5_trap():
    # One new token continuing a 5-token sequence must see all 5 keys; top-left shows it 1.
    assert ma.causal_mask(1, 5).tolist() == [[True, False, False, False, False]]
    assert ma.causal_mask(1, 5, align="bottom_right").tolist() == [[True] * 5]


@given(st.integers(0, 8), st.integers(0, 8), st.integers(1, 9),
       st.sampled_from(["top_left", "bottom_right"]))
def test_sliding_window_keeps_the_window_most_recent_keys(n_q, n_k, window, align):
    m = ma.causal_mask(n_q, n_k, align=align, window=window)
    offset = n_k - n_q if align == "bottom_right" else 0
    for i in range(n_q):
        for j in range(n_k):
            assert m[i, j] == (i + offset - window < j <= i + offset)


def test_causal_mask_rejects_bad_align_and_window():
    import pytest
    with pytest.raises(ValueError, match="align"):
        ma.causal_mask(2, 3, align="bottom")
    for bad in (0, -1, 1.5, True):
        with pytest.raises(TypeError, match="window"):
            ma.causal_mask(2, 3, window=bad)
