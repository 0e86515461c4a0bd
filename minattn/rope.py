"""Rotary position embedding (RoPE, Su et al. 2021): encode a position by rotating q and k.

Pairs of features are rotated by an angle proportional to the position, one frequency per pair,
so the dot product of a rotated query and key depends on their positions only through m - n
(walkthrough.md, "RoPE").
"""

import math

import autograd.numpy as np
import numpy

from .engine import checks, param_checks, variants
from .engine.autograd_rules import gradient_by_hand, reads
from .engine.devices import arange, concatenate
from .engine.memo import by_value
from .engine.param_checks import as_int_array, check_positions, check_rope_scaling
from .rope_scaling import rope_frequencies


@reads(x=("positions",))  # the tape keeps the positions, not x
def apply_rope_vjp(wrt, g, y, x, positions, base, scaling):
    # The rotation is orthogonal (times the schedule's factor): its transpose rotates back, by
    # -angle, which is the forward with sin's signs flipped.
    x, positions = _check_apply_rope(x, positions, base, scaling)
    *lead, d = x.shape
    cos, sin = rope_tables(positions, d, base, scaling, x.dtype)  # [..., L, 1 or 2, d/2]
    pairs = np.reshape(g, (*lead, 2, d // 2))  # [..., L, 2, d/2]
    return {"x": np.reshape(pairs * cos - pairs[..., ::-1, :] * sin, x.shape)}


@gradient_by_hand(apply_rope_vjp)
def apply_rope(x, positions, *, base=10000.0, scaling=None):
    """Rotary position embedding: rotate each feature pair (x[i], x[i + d/2]) of x [..., L, d]
    (d even) by the angle positions * base^(-2i/d), positions an int array broadcasting to
    [..., L]. Scores of rotated queries and keys depend on positions only through m - n.
    scaling: a frequency schedule of minattn.rope_scaling (a dict such as {"rope_type":
    "llama3", ...}), which may also scale the result by its attention factor (YaRN)."""
    # [..., L, d], int [..., L] -> [..., L, d], in x's dtype.
    # "Rotate half" convention (Llama, GPT-NeoX, Hugging Face): feature i pairs with i + d/2.
    # GPT-J and the RoPE paper pair neighbours (2i, 2i + 1) instead ("interleaved"): the same
    # rotation on a permuted feature order, so weights trained with one do not fit the other.
    x, positions = _check_apply_rope(x, positions, base, scaling)
    *lead, d = x.shape
    cos, sin = rope_tables(positions, d, base, scaling, x.dtype)  # [..., L, 1 or 2, d/2]
    pairs = x.reshape((*lead, 2, d // 2))  # [..., L, 2, d/2]: rows x1 and x2
    # (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin): HF's x * cos + rotate_half(x) * sin, the
    # rows swapped by reversing them and rotate_half's minus sign carried by sin's rows (-, +).
    rotated = pairs * cos + pairs[..., ::-1, :] * sin
    return rotated.reshape(x.shape)


# Its variant (interleaved=True: features paired as neighbours, below) answers the calls that
# select it (engine/variants.py).
apply_rope = variants.dispatch(apply_rope)


@variants.implements(apply_rope, "interleaved")
def apply_interleaved_rope(x, positions, *, interleaved, base=10000.0, scaling=None):
    """apply_rope(x, positions, interleaved=True): RoPE with neighbours paired, (x[2i],
    x[2i + 1]), as GPT-J, the RoPE paper and Cohere write it (transformers' rotate_every_two),
    where apply_rope pairs x[i] with x[i + d/2] (Llama's rotate_half). The same rotation on the
    features in another order: taken apart into (even..., odd...), rotated, put back."""
    # [..., L, d], int [..., L] -> [..., L, d]
    x = _check_apply_interleaved_rope(x, interleaved)
    d = x.shape[-1]
    halves = concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)  # (x0, x2, ..., x1, x3, ...)
    rotated = apply_rope(halves, positions, base=base, scaling=scaling)
    pairs = concatenate([rotated[..., :d // 2, None], rotated[..., d // 2:, None]],
                        axis=-1)  # [..., d/2, 2]
    return np.reshape(pairs, x.shape)  # (x0, x1, x2, ...) again


@by_value()  # every layer rotates by the same tables: built once (engine/memo.py)
def rope_tables(positions, d, base, scaling, dtype):
    """RoPE's tables for d features at positions (int [..., L]): cos [..., L, 1, d/2] and sin
    [..., L, 2, d/2] with rows (-sin, sin), in dtype, times the schedule's attention factor."""
    # Angles in float64 from the integer positions, then cos and sin in x's dtype: large
    # positions keep their precision.
    inv_freq, attention_factor = rope_frequencies(d, positions, base=base, scaling=scaling)
    angles = (positions[..., None] * inv_freq)[..., None, :]  # [..., L, 1, d/2]
    signs = (2 * arange(2, positions) - 1)[:, None]  # [[-1], [1]]: rotate_half's signs
    cos = (np.cos(angles) * attention_factor).astype(dtype)
    sin = (np.sin(angles) * attention_factor * signs).astype(dtype)  # [..., L, 2, d/2]
    return cos, sin


def apply_partial_rope(x, positions, partial_rotary_factor, *, base=10000.0, scaling=None):
    """Partial RoPE (GPT-NeoX, Phi, StableLM, Phi-3 variants): rotate only the first
    d_rope = rotary_width(d, partial_rotary_factor) features of x [..., L, d] with apply_rope
    (its frequencies base^(-2i/d_rope) over those d_rope features); the other d - d_rope features
    carry no position and pass through unchanged."""
    # [..., L, d], int [..., L] -> [..., L, d]: [RoPE(x[..., :d_rope]), x[..., d_rope:]]
    x, d_rope = _check_apply_partial_rope(x, partial_rotary_factor)
    rotated = apply_rope(x[..., :d_rope], positions, base=base, scaling=scaling)
    return concatenate([rotated, x[..., d_rope:]], axis=-1)  # np.concatenate (engine/devices.py)


def rotary_width(d, partial_rotary_factor):
    """The number of rotated features of a head of width d: int(d * partial_rotary_factor),
    rounded down as transformers' rope functions do (`int(head_dim * partial_rotary_factor)`)."""
    return int(d * partial_rotary_factor)


def _check_apply_partial_rope(x, partial_rotary_factor):
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d)")
    return x, param_checks.check_partial_rotary_factor(partial_rotary_factor, x.shape[-1])


def _check_apply_interleaved_rope(x, interleaved):
    # interleaved selects this variant when set; only True is one of its values (apply_rope
    # checks the rest, the feature size's parity among them)
    if interleaved is not True:
        raise TypeError(f"interleaved must be True or False, got {interleaved!r}")
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d)")
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rope needs an even feature size d (features rotate in pairs), "
                         f"got x of shape {tuple(x.shape)}")
    return x


def _check_apply_rope(x, positions, base, scaling):
    if type(x) is type(positions) is numpy.ndarray and x.dtype.kind == "f" and x.ndim >= 2 and \
            not x.shape[-1] % 2 and positions.dtype.kind in "iu" and scaling is None and \
            type(base) is float and 0 < base <= math.inf and \
            (positions.shape == x.shape[-2:-1] or checks.broadcasts_to(positions.shape,
                                                                       x.shape[:-1])):
        return x, positions  # the common case first, as the checks below return it
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d)")
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rope needs an even feature size d (features rotate in pairs), "
                         f"got x of shape {tuple(x.shape)}")
    positions = check_positions(positions, x)
    # Any base > 0 gives frequencies base^(-2i/d) (transformers takes rope_theta = 1 too).
    checks.check_positive_real("base", base, allow_inf=True)
    check_rope_scaling(scaling, "scaling")
    if scaling is not None and scaling["rope_type"] == "dynamic" and x.shape[-1] == 2 and \
            positions.size and int(positions.max()) >= scaling["max_position_embeddings"]:
        raise ValueError("dynamic RoPE scaling beyond max_position_embeddings raises the base to "
                         "the power d / (d - 2): it needs a feature size d > 2, got x of shape "
                         f"{tuple(x.shape)} and positions up to {int(positions.max())}")
    return x, positions
