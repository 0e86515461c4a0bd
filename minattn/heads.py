"""Splitting the model dimension into heads, and merging them back."""
from .engine import checks


def split_heads(x, n_heads):
    """[..., L, D] -> [..., H, L, D/H]: head h gets features h*d_k .. (h+1)*d_k - 1 of every
    token. Raises ValueError if D is not divisible by n_heads."""
    # [..., L, D] -> [..., H, L, d_k]. The transpose matters: a bare reshape to [..., H, L, d_k]
    # would mix features of different tokens into one head.
    x = checks.check_split_heads(x, n_heads)
    *lead, length, d_model = x.shape
    x = x.reshape((*lead, length, n_heads, d_model // n_heads))  # [..., L, H, d_k]
    return x.swapaxes(-3, -2)  # [..., H, L, d_k]


def merge_heads(x):
    """[..., H, L, d_k] -> [..., L, H * d_k], the exact inverse of split_heads."""
    # [..., H, L, d_k] -> [..., L, H * d_k]
    x = checks.check_merge_heads(x)
    *lead, n_heads, length, d_k = x.shape
    x = x.swapaxes(-3, -2)  # [..., L, H, d_k]
    return x.reshape((*lead, length, n_heads * d_k))
