"""Exercise 12: the softmax's backward pass (walkthrough.md, section 11, Part III).
Grade it: python -m minattn check my_attention/12_softmax_backward.py --part 3"""
import numpy as np


def softmax_vjp(y, g, axis=-1):
    """The vector-Jacobian product of the softmax: y = softmax(x) along `axis`, g = dL/dy, both
    of one shape -> dL/dx, of that shape and dtype (float32 stays float32).

    The grader compares it with central finite differences of the softmax, along any axis, and
    in float64 with the exact float64 product (to 1e-12) along every axis of a 3-D y.

    Hint: dy_i/dx_j = y_i (δ_ij - y_j), so dL/dx_j = y_j (g_j - Σ_i g_i y_i), the sum along axis.
    """
    raise NotImplementedError
