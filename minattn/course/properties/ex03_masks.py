"""What exercise 3, masks (section 4; align and window, section 9), is held to: the properties its
command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/03_masks.py
"""
import numpy as np
from hypothesis import strategies as st

import minattn

from ._machinery import prop


@prop("causal_mask_hides_the_future", "causal_mask", "causal_mask(n_q, n_k)[i, j] is True "
      "exactly when j <= i (top-left aligned when n_q != n_k; n_k defaults to n_q)",
      {"causal_mask"}, "query i may see keys 0..i: rows[:, None] >= cols[None, :] (>=, not >)")
def _(data):
    n_q = data.draw(st.integers(0, 6), "n_q")
    drawn = data.draw(st.one_of(st.none(), st.integers(0, 6)), "n_k")
    for n_k in (drawn, 0):  # n_k=0 (no key: shape [n_q, 0], not n_k defaulting to n_q) always
        cols = n_q if n_k is None else n_k
        expected = np.array([[j <= i for j in range(cols)] for i in range(n_q)], bool).reshape(n_q, cols)
        got = np.asarray(minattn.causal_mask(n_q) if n_k is None else minattn.causal_mask(n_q, n_k))
        assert got.dtype == bool and got.shape == (n_q, cols), (
            f"causal_mask({n_q}{'' if n_k is None else f', {n_k}'}): got {got.dtype} {got.shape}, "
            f"expected bool {(n_q, cols)}")
        assert (got == expected).all(), f"got\n{got.astype(int)}\nexpected\n{expected.astype(int)}"


@prop("causal_mask_takes_any_length", "causal_mask", "causal_mask(n_q, n_k) for lengths far past "
      "1024 (1000 to 1100) is still True exactly when j <= i", {"causal_mask"},
      "build the mask for the lengths asked (compare a column of query indices with a row of key "
      "indices): a precomputed mask of a fixed size (1024) does not reach them all")
def _(data):
    n_q, n_k = data.draw(st.integers(1000, 1100), "n_q"), data.draw(st.integers(1000, 1100), "n_k")
    got = np.asarray(minattn.causal_mask(n_q, n_k))
    expected = np.tril(np.ones((n_q, n_k), bool))  # numpy's lower triangle: j <= i
    assert got.dtype == bool and got.shape == (n_q, n_k), (
        f"causal_mask({n_q}, {n_k}): got {got.dtype} {got.shape}, expected bool {(n_q, n_k)}")
    wrong = np.argwhere(got != expected)
    assert not len(wrong), (f"causal_mask({n_q}, {n_k}) is wrong at {len(wrong)} entries, the "
                            f"first [{wrong[0][0]}, {wrong[0][1]}]")


@prop("causal_mask_aligns_and_windows", "causal_mask", "causal_mask(n_q, n_k, align='bottom_"
      "right')[i, j] is True exactly when j <= i + n_k - n_q; with window=w also j > (that "
      "position) - w", {"causal_mask"}, "bottom-right: query i sits at position i + n_k - n_q; a "
      "window of w keeps keys position - w + 1 .. position", part=2)
def _(data):
    n_q, n_k = data.draw(st.integers(0, 6), "n_q"), data.draw(st.integers(0, 6), "n_k")
    align = data.draw(st.sampled_from(["top_left", "bottom_right"]), "align")
    window = data.draw(st.one_of(st.none(), st.integers(1, 7)), "window")
    offset = n_k - n_q if align == "bottom_right" else 0
    expected = np.array([[j <= i + offset and (window is None or j > i + offset - window)
                          for j in range(n_k)] for i in range(n_q)], bool).reshape(n_q, n_k)
    got = np.asarray(minattn.causal_mask(n_q, n_k, align=align, window=window))
    assert got.shape == (n_q, n_k), f"shape {got.shape}"
    assert (got == expected).all(), f"got\n{got.astype(int)}\nexpected\n{expected.astype(int)}"


@prop("padding_mask_keeps_real_tokens", "padding_mask", "padding_mask(lengths, n) has shape "
      "(B, 1, 1, n) and is True exactly at the first lengths[b] positions of sequence b, for "
      "lengths of any integer dtype (unsigned and narrow ones included)",
      {"padding_mask"}, "positions < lengths[:, None], then add the two singleton axes: "
      "[:, None, None, :]; no subtraction from lengths (an unsigned 0 - 1 wraps around)")
def _(data):
    n = data.draw(st.integers(1, 6), "n")
    drawn = np.array(data.draw(st.lists(st.integers(0, n), min_size=1, max_size=4), "lengths"))
    # n=0 and every integer dtype of lengths too, in every example
    for n, lengths in [(n, drawn.astype(dtype)) for dtype in (np.int64, np.uint8, np.int32, np.uint64)] \
            + [(0, np.zeros_like(drawn))]:
        got = np.asarray(minattn.padding_mask(lengths, n))
        expected = np.array([[j < length for j in range(n)] for length in lengths],
                            bool).reshape(len(lengths), n)[:, None, None, :]
        assert got.shape == expected.shape, (f"padding_mask({lengths.tolist()}, {n}) has shape "
                                             f"{got.shape}, expected {expected.shape}")
        shown = f"padding_mask(np.array({lengths.tolist()}, {lengths.dtype}), {n})"
        assert got.dtype == bool, f"{shown}: dtype {got.dtype}, expected bool"
        assert (got == expected).all(), \
            f"{shown}:\ngot\n{got.astype(int)}\nexpected\n{expected.astype(int)}"
