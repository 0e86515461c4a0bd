"""Splitting the model dimension into heads, and merging them back."""
import autograd.numpy as np

from . import _validate


def split_heads(x, n_heads):
    # [..., L, D] -> [..., H, L, D/H]. The transpose matters: a bare reshape to [..., H, L, D/H]
    # would mix features of different tokens into one head.
    _validate.check_min_ndim("x", x, 2, "(..., L, D)")
    _validate.check_n_heads(n_heads, x.shape[-1], "x's last dim D")
    *lead, length, d_model = x.shape
    x = np.reshape(x, (*lead, length, n_heads, d_model // n_heads))  # [..., L, H, d_k]
    return np.swapaxes(x, -3, -2)  # [..., H, L, d_k]


def merge_heads(x):
    # [..., H, L, d_k] -> [..., L, H * d_k], the exact inverse of split_heads.
    _validate.check_min_ndim("x", x, 3, "(..., H, L, d_k)")
    *lead, n_heads, length, d_k = x.shape
    x = np.swapaxes(x, -3, -2)  # [..., L, H, d_k]
    return np.reshape(x, (*lead, length, n_heads * d_k))
