"""Boolean attention masks: True = may attend (torch's scaled_dot_product_attention, JAX/Flax).

torch.nn.MultiheadAttention's masks mean the opposite (True = ignore). Masks combine with `&`:
`causal_mask(L) & padding_mask(lengths, L)` broadcasts to (B, 1, L, L).
`like=` builds the mask with the array library of `like` (pass a CuPy array to get a CuPy mask).
"""
import numbers

import autograd.numpy as np


def _check_length(name, n):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise TypeError(f"{name} must be a non-negative int, got {n!r}")


def causal_mask(n_q, n_k=None, *, align="top_left", window=None, like=None):
    # -> bool [n_q, n_k]; no query sees a key after its own position.
    # align="top_left" (default, torch's is_causal=True): query i sits at position i, sees keys
    #   0..i. Right for a square mask, wrong for a query block that continues a sequence.
    # align="bottom_right" (flash-attn, a KV cache): the n_q queries are the LAST n_q positions,
    #   query i sits at position i + n_k - n_q, so the newest query sees all n_k keys.
    # window=w (sliding window, Mistral): a query sees only its w most recent keys, itself included.
    n_k = n_q if n_k is None else n_k
    _check_causal_mask_args(n_q, n_k, align, window)
    if like is None:
        rows, cols = np.arange(n_q), np.arange(n_k)
    else:
        rows, cols = np.arange(n_q, like=like), np.arange(n_k, like=like)
    position = rows[:, None] + (n_k - n_q if align == "bottom_right" else 0)  # [n_q, 1]
    mask = position >= cols[None, :]
    return mask if window is None else mask & (cols[None, :] > position - window)


def _check_causal_mask_args(n_q, n_k, align, window):
    _check_length("n_q", n_q)
    _check_length("n_k", n_k)
    if align not in ("top_left", "bottom_right"):
        raise ValueError(f"align must be 'top_left' or 'bottom_right', got {align!r}")
    if window is not None and (isinstance(window, bool) or not isinstance(window, numbers.Integral)
                               or window < 1):
        raise TypeError(f"window must be None or a positive int, got {window!r}")


def padding_mask(lengths, n):
    # int [B] -> bool [B, 1, 1, n]; True at the first lengths[b] (real) tokens. The two singleton
    # axes broadcast over heads and queries: every query may look at every real key.
    _check_length("n", n)
    if isinstance(lengths, (list, tuple)):
        lengths = np.array(lengths)
    if not hasattr(lengths, "dtype") or np.dtype(lengths.dtype).kind not in "iu":
        raise TypeError(f"lengths must be an integer array, got {getattr(lengths, 'dtype', type(lengths).__name__)}")
    if lengths.ndim != 1:
        raise ValueError(f"lengths must have shape (B,), got shape {tuple(lengths.shape)}")
    if lengths.size and (int(lengths.min()) < 0 or int(lengths.max()) > n):
        raise ValueError(f"lengths must lie in [0, n={n}], got min {int(lengths.min())}, max {int(lengths.max())}")
    positions = np.arange(n, like=lengths)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]
