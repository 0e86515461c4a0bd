"""What exercise 12, the softmax's backward pass (section 11), is held to: the properties its
command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/12_softmax_backward.py --part 3
"""
import math

import numpy as np
from hypothesis import strategies as st

from ._machinery import _CURRENT, close, floats, prop, sizes
from ._references import ref_softmax


def ref_softmax_vjp(y, g, axis):
    # slice by slice along axis, in float64 with an exactly rounded sum: y_j (g_j - sum_i g_i y_i)
    rows, grads = np.moveaxis(y, axis, -1), np.moveaxis(g, axis, -1)
    out = np.empty(rows.shape)
    for index in np.ndindex(rows.shape[:-1]):
        total = math.fsum(float(a) * float(b) for a, b in zip(rows[index], grads[index]))
        out[index] = [float(a) * (float(b) - total) for a, b in zip(rows[index], grads[index])]
    return np.moveaxis(out, -1, axis)


@prop("softmax_vjp_matches_finite_differences", "softmax_vjp", "softmax_vjp(y, g, axis) with y = "
      "softmax(x) is the gradient of sum(g · softmax(x)) with respect to x, as central finite "
      "differences give it, along any axis (axis=0 included, and the middle axis of a 3-D y); "
      "and, in float64, it equals y ⊙ (g - Σ g ⊙ y) computed exactly in float64 (to 1e-12: no "
      "float32 inside), along every axis of a 3-D y", set(),
      "dL/dx = y * (g - sum(g * y, axis, keepdims=True)): the sum runs over the softmax's "
      "axis, whichever it is; compute in the inputs' dtype, and if you move the axis to the end, "
      "move it back with np.moveaxis(r, -1, axis)", part=3)
def _(data):
    shape = (data.draw(sizes, "n0"), data.draw(sizes, "n1"))
    x, g = data.draw(floats(shape), "x"), data.draw(floats(shape), "g")
    drawn = data.draw(st.sampled_from([None, -1, 1]), "axis")
    x3, g3 = data.draw(floats((2, 3, 2)), "x3"), data.draw(floats((2, 3, 2)), "g3")
    # axis=0, the boundary (`axis or -1` loses it), and the middle axis of a 3-D array, in every
    # example
    for x, g, axis in ((x, g, drawn), (x, g, 0), (x3, g3, 1)):
        shape = x.shape
        along = -1 if axis is None else axis
        soft = lambda z: np.apply_along_axis(ref_softmax, along, z)
        h, expected = 1e-6, np.zeros(shape)
        for index in np.ndindex(shape):
            step = np.zeros(shape)
            step[index] = h
            expected[index] = np.sum(g * (soft(x + step) - soft(x - step))) / (2 * h)
        axis, call = (-1, {}) if axis is None else (axis, {"axis": axis})
        got = _CURRENT["softmax_vjp"](soft(x), g, **call)
        close(got, expected, 1e-6, f"softmax_vjp(y, g{f', axis={axis}' if call else ''}) with y "
                                   f"of shape {list(shape)}")
    # float64 against the exact float64 product, at float64's tolerance, along every axis of the
    # 3-D array (finite differences cannot see a float32 step inside)
    y3 = np.apply_along_axis(ref_softmax, -1, x3)
    for axis in (0, 1, 2, -1, -2, -3):
        close(_CURRENT["softmax_vjp"](y3, g3, axis=axis), ref_softmax_vjp(y3, g3, axis), 1e-12,
              f"softmax_vjp(y, g, axis={axis}) with y of shape {list(y3.shape)}, in float64")


@prop("softmax_vjp_keeps_float32", "softmax_vjp", "softmax_vjp of float32 y and g is float32",
      set(), "a float64 scalar or array created inside upcasts float32", part=3)
def _(data):
    y = np.full((2, 3), 1 / 3, np.float32)
    g = data.draw(floats((2, 3), dtype=np.float32), "g")
    got = np.asarray(_CURRENT["softmax_vjp"](y, g))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"
