"""A correct answer to exercise 12 (section 13)."""
import numpy as np


def softmax_vjp(y, g, axis=-1):
    return y * (g - np.sum(g * y, axis=axis, keepdims=True))
