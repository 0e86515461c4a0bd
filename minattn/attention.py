"""Softmax and scaled dot-product attention: the engine every other function is built on.

Mask convention (as torch.nn.functional.scaled_dot_product_attention and JAX/Flax):
a boolean mask is True where a query MAY attend to a key. torch.nn.MultiheadAttention uses the
opposite polarity (True = ignore); minattn.interop.mask_from_torch converts.
"""
import numbers

import autograd.numpy as np
from autograd.tracer import getval

from . import _validate
from .dropout import dropout as _dropout


def softmax(x, axis=-1, mask=None):
    # [..., n] -> [..., n]; masked entries (mask False) get exactly 0, and a row with nothing
    # left gets all zeros instead of 0/0 = NaN.
    x = _validate.as_float_array("x", x)
    mask = _validate.check_mask(mask, x.shape, "x")
    if mask is not None and np.dtype(mask.dtype).kind != "b":
        raise TypeError(f"softmax's mask must be boolean (True = keep), got dtype {mask.dtype}")
    if mask is not None:
        # -inf through `where` (not adding -1e9): exp(-inf) is exactly 0 in every dtype, and
        # -1e9 overflows float16 to -inf anyway, then poisons the row with inf - inf = NaN.
        x = np.where(mask, x, -np.inf)
    # Subtracting the row max keeps exp() from overflowing and leaves softmax unchanged, so the
    # shift is a constant: getval reads it without autograd tracing a (zero) gradient through it.
    # A fully masked row has max -inf; shift it by 0 instead so no inf - inf appears.
    x_max = np.max(getval(x), axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0.0)
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None):
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v] -> [..., L_q, d_v], [..., L_q, L_k]
    # Leading (batch, head) dims broadcast. See walkthrough.md, "Scaled dot-product attention".
    q, k, v, batch = _validate.check_qkv(q, k, v)
    mask = _validate.check_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    _validate.check_dropout(dropout, rng)

    if scale is None:
        # Why 1/sqrt(d_k): a dot product of d_k unit-variance terms has variance d_k.
        scale = q.shape[-1] ** -0.5
    # Python floats, so float32 stays float32 (np.sqrt(d_k) would be a float64 scalar).
    scale = float(scale) if isinstance(scale, numbers.Real) else scale
    scores = (q * scale) @ np.swapaxes(k, -1, -2)  # [..., L_q, L_k]; scaling q is the cheaper side
    if mask is not None and np.dtype(mask.dtype).kind == "f":
        # An additive mask (-inf, or biases such as ALiBi) in the scores' dtype: no upcast.
        weights = softmax(scores + mask.astype(scores.dtype))
    else:
        weights = softmax(scores, mask=mask)
    weights = _dropout(weights, dropout, rng)
    return weights @ v, weights  # [..., L_q, d_v], [..., L_q, L_k]
