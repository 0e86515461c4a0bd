"""Boolean attention masks: True = may attend (torch's scaled_dot_product_attention, JAX/Flax).

torch.nn.MultiheadAttention's masks mean the opposite (True = ignore). Masks combine with `&`:
`causal_mask(L) & padding_mask(lengths, L)` broadcasts to (B, 1, L, L).
`like=` builds the mask with the array library of `like` (pass a CuPy array to get a CuPy mask).
"""
import numbers

import autograd.numpy as np

from .engine import checks
from .engine.devices import arange


def _check_length(name, n):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise TypeError(f"{name} must be a non-negative int, got {n!r}")


def causal_mask(n_q, n_k=None, *, align="top_left", window=None, like=None):
    """-> bool [n_q, n_k] (n_k defaults to n_q), True where query i may attend to key j: no
    position sees the future. align="top_left" (default, torch's is_causal=True): query i is
    position i. align="bottom_right" (a KV cache, flash-attn): the queries are the last n_q
    positions, so the newest sees all n_k keys. window=w: only the w most recent keys (itself
    included), a sliding window. like=: build it with the array library of `like` (e.g. CuPy)."""
    # -> bool [n_q, n_k]. causal_mask(1, 5) is [[T, F, F, F, F]]: right for the first token of a
    # sequence, wrong for a 6th token continuing a cache of 5 (walkthrough.md, "The KV
    # cache").
    n_q, n_k = _check_causal_mask(n_q, n_k, align, window)
    query = arange(n_q, like)[:, None] + (n_k - n_q if align == "bottom_right" else 0)  # [n_q, 1]
    key = arange(n_k, like)[None, :]  # [1, n_k]
    mask = query >= key  # [n_q, n_k]: no key from the future
    return mask if window is None else mask & (key > query - window)


def _check_causal_mask(n_q, n_k, align="top_left", window=None):
    n_k = n_q if n_k is None else n_k
    _check_length("n_q", n_q)
    _check_length("n_k", n_k)
    if align not in ("top_left", "bottom_right"):
        raise ValueError(f"align must be 'top_left' or 'bottom_right', got {align!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, numbers.Integral)
                               or window < 1):
        raise TypeError(f"window must be None or a positive int, got {window!r}")
    return n_q, n_k


def _check_padding_mask(lengths, n, side="right"):
    _check_length("n", n)
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' (padding after the tokens) or 'left' (before "
                         f"them), got {side!r}")
    if not hasattr(lengths, "dtype") and not isinstance(lengths, (list, tuple)):
        raise TypeError(f"lengths must be an integer array, got {type(lengths).__name__}")
    lengths = checks.as_array("lengths", lengths)
    if np.dtype(lengths.dtype).kind not in "iu":
        raise TypeError(f"lengths must be an integer array, got {lengths.dtype}")
    if lengths.ndim != 1:
        raise ValueError(f"lengths must have shape (B,), got shape {tuple(lengths.shape)}")
    if lengths.size and (int(lengths.min()) < 0 or int(lengths.max()) > n):
        raise ValueError(f"lengths must lie in [0, n={n}], got min {int(lengths.min())}, max {int(lengths.max())}")
    return lengths


def padding_mask(lengths, n, *, side="right"):
    """int lengths [B] -> bool [B, 1, 1, n], True at the lengths[b] real tokens of sequence b:
    every query may look at every real key. side="right" (the default): the first lengths[b]
    tokens are real, the padding after them; side="left": the last lengths[b], the padding
    before them (transformers' padding_side="left", as it pads prompts for generation).
    Broadcasts over heads and queries; combine with causal_mask by `&`."""
    # int [B] -> bool [B, 1, 1, n]. The two singleton axes broadcast over heads and queries.
    lengths = _check_padding_mask(lengths, n, side)
    positions = arange(n, lengths)  # [n]: each token's index from the start ...
    counted = positions if side == "right" else positions[::-1]  # ... or (left) from the end
    return (counted[None, :] < lengths[:, None])[:, None, None, :]
