"""Exercise 4: splitting into heads and merging back (walkthrough.md, section 5).
Grade it: python -m minattn check my_attention/04_heads.py"""
import numpy as np


def split_heads(x, n_heads):
    """[..., L, D] -> [..., H, L, d_k] with H = n_heads, d_k = D / H: head h gets features
    h*d_k .. (h+1)*d_k - 1 of every token. x's dtype is kept; L may be 0 (no token yet).

    Hint: reshape to [..., L, H, d_k], then swap the L and H axes. A bare reshape to
    [..., H, L, d_k] has the right shape and the wrong contents.
    """
    raise NotImplementedError


def merge_heads(x):
    """x [..., H, L, d_k] -> [..., L, H * d_k], the exact inverse of split_heads."""
    raise NotImplementedError
