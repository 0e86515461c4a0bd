"""Rotary position embedding (RoPE, Su et al. 2021): encode a position by rotating q and k.

Pairs of features are rotated by an angle proportional to the position, one frequency per pair,
so the dot product of a rotated query and key depends on their positions only through m - n
(walkthrough.md, "RoPE").
"""
import numbers

import autograd.numpy as np

from . import _validate


def apply_rope(x, positions, *, base=10000.0):
    # [..., L, d], int [..., L] (broadcasting) -> [..., L, d], d even.
    # "Rotate half" convention (Llama, GPT-NeoX, Hugging Face): feature i pairs with i + d/2.
    # GPT-J and the RoPE paper pair neighbours (2i, 2i + 1) instead ("interleaved"): the same
    # rotation on a permuted feature order, so weights trained with one do not fit the other.
    x = _check_apply_rope(x, positions, base)
    half = x.shape[-1] // 2
    # Angles in float64 from the integer positions (like=positions: x may be an autograd box),
    # then cos and sin in x's dtype: large positions keep their precision.
    exponents = np.arange(0, x.shape[-1], 2, like=positions) / x.shape[-1]  # [d/2]
    angles = positions[..., None] * float(base) ** -exponents  # [..., L, d/2]: m * theta_i
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def _check_apply_rope(x, positions, base):
    x = _validate.as_float_array("x", x)
    _validate.check_min_ndim("x", x, 2, "(..., L, d)")
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rope needs an even feature size d (features rotate in pairs), "
                         f"got x of shape {tuple(x.shape)}")
    if not hasattr(positions, "dtype") or np.dtype(positions.dtype).kind not in "iu":
        raise TypeError(f"positions must be an integer array, got "
                        f"{getattr(positions, 'dtype', type(positions).__name__)}")
    _validate.broadcast_or_raise([("positions", positions.shape), ("x[..., 0]", x.shape[:-1])],
                                 "positions and x's (..., L)")
    if tuple(np.broadcast_shapes(positions.shape, x.shape[:-1])) != tuple(x.shape[:-1]):
        raise ValueError(f"positions of shape {tuple(positions.shape)} must broadcast to x's "
                         f"(..., L) = {tuple(x.shape[:-1])}")
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not base > 1:
        raise ValueError(f"base must be a number > 1, got {base!r}")
    return x
