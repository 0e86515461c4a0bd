"""Input checks shared by the core functions.

Every public function checks its arguments here *before* computing, so that a wrong shape or
dtype surfaces as a ValueError/TypeError that names the argument and the shapes involved,
never as NumPy's own broadcast or matmul error half-way through the math.
Only shapes and dtypes are read, so these checks work the same on NumPy, CuPy and autograd
boxes, and never move data.
"""
import numbers

import autograd.numpy as np
from autograd.builtins import DictBox, SequenceBox

# Under autograd.grad, dicts and lists of params arrive boxed; they still count as dicts/lists.
DICT_TYPES = (dict, DictBox)
LIST_TYPES = (list, tuple, SequenceBox)


def as_float_array(name, x):
    """Return `x` if it is a floating-point array; lists/tuples are converted first."""
    if isinstance(x, (list, tuple)):
        x = np.array(x)
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(
            f"{name} must be a floating-point array, got dtype {x.dtype} "
            f"(convert it with {name}.astype(np.float32) or np.float64)"
        )
    return x


def check_min_ndim(name, x, ndim, layout):
    if x.ndim < ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {tuple(x.shape)}")


def broadcast_or_raise(names_and_shapes, what):
    """np.broadcast_shapes, with an error that names every argument and its shape."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) for _, s in names_and_shapes)))
    except ValueError:
        listed = ", ".join(f"{n} {tuple(s)}" for n, s in names_and_shapes)
        raise ValueError(f"{what} do not broadcast: {listed}") from None


def check_qkv(q, k, v):
    """Attention's inputs: q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v], leading dims
    broadcasting. Returns (q, k, v, the broadcast leading dims)."""
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    for name, x, layout in (("q", q, "(..., L_q, d_k)"), ("k", k, "(..., L_k, d_k)"),
                            ("v", v, "(..., L_k, d_v)")):
        check_min_ndim(name, x, 2, layout)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same feature size d_k: q {tuple(q.shape)}, k {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length L_k: k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    batch = broadcast_or_raise(
        [("q", q.shape[:-2]), ("k", k.shape[:-2]), ("v", v.shape[:-2])],
        "the leading (batch/head) dims of q, k, v",
    )
    return q, k, v, batch


def check_mask(mask, target_shape, target_name="the scores"):
    """A mask must be boolean (True = may attend) or floating (added), and broadcast to target."""
    if mask is None:
        return None
    if isinstance(mask, (list, tuple)):
        mask = np.array(mask)
    if not hasattr(mask, "dtype"):
        raise TypeError(f"mask must be a boolean or floating-point array, got {type(mask).__name__}")
    kind = np.dtype(mask.dtype).kind
    if kind not in "bf":
        raise TypeError(
            f"mask must be boolean (True = may attend) or floating (added to the scores), "
            f"got dtype {mask.dtype}"
        )
    target_shape = tuple(target_shape)
    try:
        ok = tuple(np.broadcast_shapes(tuple(mask.shape), target_shape)) == target_shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to {target_name} "
            f"of shape {target_shape}"
        )
    return mask


def check_mask_has_head_axis(mask, scores_shape):
    # A (B, L_q, L_k) mask would broadcast against (B, H, L_q, L_k) with B read as H: silently
    # wrong whenever B == H. Masks with batch dims must spell out the head axis.
    if mask is not None and 2 < mask.ndim < len(scores_shape):
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} is ambiguous for the per-head scores of shape "
            f"{tuple(scores_shape)}: give (L_q, L_k), or a per-batch mask with its head axis, "
            f"(B, 1, L_q, L_k) (e.g. mask[:, None])"
        )


def check_dropout(dropout, rng):
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
        raise TypeError(f"dropout must be a float in [0, 1), got {dropout!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
    if dropout > 0.0:
        if rng is None:
            raise ValueError(
                f"dropout={dropout!r} needs an rng (np.random.Generator), e.g. "
                "rng=np.random.default_rng(0); nothing here seeds a global RNG"
            )
        if not callable(getattr(rng, "random", None)):
            raise TypeError(f"rng must be a np.random.Generator, got {type(rng).__name__}")


def check_n_heads(n_heads, d_model, d_model_name="d_model"):
    if isinstance(n_heads, bool) or not isinstance(n_heads, numbers.Integral) or n_heads < 1:
        raise TypeError(f"n_heads must be a positive int, got {n_heads!r}")
    if d_model % n_heads:
        raise ValueError(
            f"{d_model_name}={d_model} is not divisible by n_heads={n_heads}"
        )


def check_n_kv_heads(n_kv_heads, n_heads):
    if n_kv_heads is None:
        return
    if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, numbers.Integral) \
            or n_kv_heads < 1:
        raise TypeError(f"n_kv_heads must be None or a positive int, got {n_kv_heads!r}")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} (each kv head "
                         "serves a group of n_heads // n_kv_heads query heads)")


def _format_shape(shape):
    inner = ", ".join(str(d) for d in shape)  # str() so symbolic sizes print as d_ff, not 'd_ff'
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def check_shape(name, x, expected):
    """`expected` is a tuple of ints, or of names (str) for sizes that may be anything."""
    x = as_float_array(name, x)
    ok = len(x.shape) == len(expected) and all(
        isinstance(e, str) or s == e for s, e in zip(x.shape, expected)
    )
    if not ok:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {_format_shape(expected)}")
    return x


def check_params(params, expected, where="params"):
    """`expected` maps each key to the shape its array must have (see check_shape)."""
    if not isinstance(params, DICT_TYPES):
        raise TypeError(f"{where} must be a dict of arrays, got {type(params).__name__}")
    for key, shape in expected.items():
        if key not in params:
            raise ValueError(
                f"{where} is missing key {key!r} (expected keys: {', '.join(map(repr, expected))})"
            )
        check_shape(f"{where}[{key!r}]", params[key], shape)


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
