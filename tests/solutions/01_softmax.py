"""A correct answer to exercise 1, in plain NumPy, with only what section 2 teaches."""
import numpy as np


def softmax(x, axis=-1, mask=None):
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(top == -np.inf, 0, top)  # a fully masked slice: shift by 0
    e = np.exp(x - top)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1, total)
