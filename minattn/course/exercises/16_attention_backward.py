"""Exercise 16: attention's backward pass (walkthrough.md, section 11, Part III).
Grade it: python -m minattn check my_attention/16_attention_backward.py --part 3"""
import math

import numpy as np

# What the walkthrough's plain form uses: the forward pass, and the softmax's VJP (exercise 12);
# or use your own.
from minattn.course.teaching import scaled_dot_product_attention, softmax_vjp


def attention_vjp(q, k, v, g, mask=None):
    """The vector-Jacobian product of attention: O = softmax(Q K^T / sqrt(d_k)) V, the output of
    scaled_dot_product_attention(q, k, v, mask) with its default scale, and g = dL/dO.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v] and g [..., L_q, d_v], with the same
    leading dimensions. mask: None (no mask), or bool broadcasting to [..., L_q, L_k], True where
    a query may attend to a key, as in scaled_dot_product_attention.
    Returns the tuple (dq, dk, dv): dL/dq, dL/dk and dL/dv, each of its input's shape and dtype
    (float32 stays float32).

    The grader compares them with central finite differences of attention, with no mask and
    with a mask that hides a whole row and a whole column, and in float64 with the chain rule
    computed exactly in float64 (to 1e-10).

    Hint: run the forward pass again for the weights P; then dv = P^T g, dP = g V^T,
    dS = softmax_vjp(P, dP), dq = dS K / sqrt(d_k), dk = dS^T Q / sqrt(d_k).
    """
    raise NotImplementedError
