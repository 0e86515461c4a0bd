"""What exercise 1, softmax (walkthrough.md, section 2; its mask, section 4), is held to: the
properties its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/01_softmax.py
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import close, floats, prop, show, sizes
from ._references import ref_softmax


@prop("softmax_rows_sum_to_one", "softmax", "softmax(x) is non-negative and each row (the last "
      "axis) sums to one", {"softmax"},
      "normalise over the last axis: divide exp(x) by its sum over axis=-1, keepdims=True")
def _(data):
    x = data.draw(floats((data.draw(sizes, "rows"), data.draw(sizes, "n"))), "x")
    w = np.asarray(minattn.softmax(x))
    assert w.shape == x.shape, f"shape {w.shape}, expected {x.shape}"
    assert (w >= 0).all(), f"negative weights:\n{show(w)}"
    close(w.sum(axis=-1), np.ones(x.shape[0]), 1e-9, "the row sums")


@prop("softmax_matches_the_formula", "softmax", "softmax(x) equals exp(x_i) / sum_j exp(x_j), row "
      "by row, also for huge logits (|x| up to 1e4) and for rows all of one sign far from zero "
      "(x + 1000, x - 1000, in every example)", {"softmax"},
      "subtract each row's own max before exp() (not max(row max, 0), not a constant): softmax "
      "is unchanged by it, exp() cannot overflow, and the largest entry of every row is exp(0)")
def _(data):
    bound = data.draw(st.sampled_from([3.0, 1e4]), "bound")
    x = data.draw(floats((data.draw(sizes, "rows"), data.draw(sizes, "n")), bound), "x")
    # the drawn rows, then the same rows moved far from zero, above it and below it: a shift by
    # anything but the row's own max underflows (or overflows) one of them
    for shifted, what in ((x, "softmax(x)"), (x + 1000, "softmax(x + 1000)"),
                          (x - 1000, "softmax(x - 1000)")):
        close(minattn.softmax(shifted), np.array([ref_softmax(r) for r in shifted]), 1e-9, what)


@prop("softmax_along_any_axis", "softmax", "softmax(x, axis=a) normalises along axis a, "
      "every axis of a 3-D x (0, 1, 2, -1, -2, -3) in every example", {"softmax"},
      "use the axis argument in the max and the sum, not a fixed -1; `axis or -1` turns axis=0 "
      "into -1: test `if axis is None`, or use axis as given; an axis moved to the end goes back "
      "with np.moveaxis(r, -1, axis)")
def _(data):
    x = data.draw(floats((data.draw(sizes, "n0"), data.draw(sizes, "n1"), data.draw(sizes, "n2"))), "x")
    for axis in (0, 1, 2, -1, -2, -3):  # 0, the boundary, and every other, in every example
        expected = np.apply_along_axis(ref_softmax, axis, x)
        close(minattn.softmax(x, axis=axis), expected, 1e-9, f"softmax(x, axis={axis})")


def ref_softmax_along(x, keep, axis):
    # softmax of x along `axis` with the bool mask keep (broadcasting to x), slice by slice
    rows = np.moveaxis(x, axis, -1)
    kept = np.moveaxis(np.broadcast_to(keep, x.shape), axis, -1)
    expected = np.array([ref_softmax(r, k) for r, k in zip(rows.reshape(-1, rows.shape[-1]),
                                                          kept.reshape(-1, rows.shape[-1]))])
    return np.moveaxis(expected.reshape(rows.shape), -1, axis)


@prop("softmax_masked_entries_are_zero", "softmax", "with a boolean mask (True = keep) of x's "
      "shape or one that broadcasts to it ([n], [rows, 1], [1, n], ...), along the last axis or "
      "axis=0, masked entries get weight exactly 0, the kept ones are the softmax of the kept "
      "scores, a row with nothing kept is all zeros (not NaN), and x itself is left as it was",
      {"softmax"},
      "a masked entry must act as -inf before the exponential and a row with nothing kept must "
      "come out as zeros, for any mask that broadcasts to x, without writing into x")
def _(data):
    lead = data.draw(st.sampled_from([(), (2,)]), "leading axes of x")
    shape = lead + (data.draw(sizes, "rows"), data.draw(sizes, "n"))
    x = data.draw(floats(shape), "x")
    # the mask's shape: x's, or x's with some axes of length 1, or fewer leading axes
    ones = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)),
                     "mask axes of length 1")
    drop = data.draw(st.integers(0, len(shape) - 1), "leading axes the mask leaves out")
    keep = data.draw(hnp.arrays(bool, tuple(1 if o else n for o, n in zip(ones, shape))[drop:]),
                     "mask")
    axis = data.draw(st.sampled_from([-1, 0]), "axis")
    given = x.copy()
    got = minattn.softmax(x, mask=keep) if axis == -1 else minattn.softmax(x, axis=0, mask=keep)
    close(x, given, 0, "x after the call (softmax must not change its input)")
    close(got, ref_softmax_along(x, keep, axis), 1e-9, f"softmax(x{'' if axis == -1 else ', axis=0'}"
                                                       f", mask=mask) with a mask of shape {keep.shape}")


@prop("softmax_ignores_masked_values_however_large", "softmax", "what a masked entry holds "
      "never matters: masked entries far larger (or smaller) than the kept ones, up to ±1e4, leave "
      "the kept entries' weights what they are without them", {"softmax"},
      "mask BEFORE the max and the exponential: np.where(mask, x, -np.inf), then the max of what is "
      "left; a max taken over masked entries, or a mask applied after exp(), underflows every kept "
      "entry to 0 when a masked one is much larger")
def _(data):
    shape = (data.draw(sizes, "rows"), data.draw(st.integers(2, 5), "n"))
    x = data.draw(floats(shape), "x (kept entries)")
    keep = data.draw(hnp.arrays(bool, shape), "mask")
    loud = data.draw(st.sampled_from([1e4, -1e4, 1e3]), "masked entries set to")
    x = np.where(keep, x, loud)
    data.show("x", x)
    expected = np.array([ref_softmax(r, k) for r, k in zip(x, keep)])
    close(minattn.softmax(x, mask=keep), expected, 1e-9,
          f"softmax(x, mask=mask) with the masked entries at {loud:g}")


@prop("softmax_takes_minus_inf_without_a_mask", "softmax", "with no boolean mask (mask=None, an "
      "additive mask already added to x), entries of -inf get weight exactly 0 and a row of "
      "nothing but -inf is all zeros, not NaN, along the last axis or axis=0; and the same with "
      "a boolean mask given too", {"softmax"},
      "the guard for a row with nothing left (shift by 0 where the max is -inf, divide by 1 "
      "where the sum is 0) belongs on every path, not only the one with a mask", part=4)
def _(data):
    shape = (data.draw(st.integers(2, 4), "rows"), data.draw(st.integers(1, 4), "n"))
    x = data.draw(floats(shape), "x (finite entries)")
    dropped = data.draw(hnp.arrays(bool, shape), "entries set to -inf")
    axis = data.draw(st.sampled_from([-1, 0]), "axis")
    dropped[(0, slice(None)) if axis == -1 else (slice(None), 0)] = True  # a slice of only -inf
    x = np.where(dropped, -np.inf, x)
    data.show("x", x)
    call = {} if axis == -1 else {"axis": 0}
    close(minattn.softmax(x, **call), ref_softmax_along(x, ~dropped, axis), 1e-9,
          f"softmax(x{', axis=0' if call else ''}) with -inf entries and no mask")
    keep = np.ones(shape, bool)
    close(minattn.softmax(x, mask=keep, **call), ref_softmax_along(x, ~dropped, axis), 1e-9,
          f"softmax(x{', axis=0' if call else ''}, mask=mask) with -inf entries, every one kept")


@prop("softmax_keeps_float32", "softmax", "softmax of a float32 array is float32, masked or not",
      {"softmax"}, "a NumPy float64 scalar (np.float64, np.sqrt of a Python int) upcasts float32 "
      "arrays")
def _(data):
    x = data.draw(floats((2, data.draw(sizes, "n")), dtype=np.float32), "x")
    mask = data.draw(st.one_of(st.none(), hnp.arrays(bool, x.shape)), "mask")
    got = np.asarray(minattn.softmax(x, mask=mask))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"
