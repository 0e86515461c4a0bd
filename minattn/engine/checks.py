"""Input checks shared by the core functions.

Every public function checks its arguments here *before* computing, so that a wrong shape or
dtype surfaces as a ValueError/TypeError that names the argument and the shapes involved,
never as NumPy's own broadcast or matmul error half-way through the math.
Only shapes and dtypes are read, so these checks work the same on NumPy, CuPy and autograd
boxes, and never move data.
"""
import math
import numbers
import types

import autograd.numpy as np
import numpy
from autograd.builtins import DictBox, SequenceBox
from autograd.numpy.numpy_boxes import ArrayBox
from autograd.tracer import getval, isbox

# Under autograd.grad, dicts and lists of params arrive boxed; they still count as dicts/lists.
DICT_TYPES = (dict, DictBox)
LIST_TYPES = (list, tuple, SequenceBox)


def as_array(name, x):
    """The one rule for every array argument: an array (NumPy, CuPy, an autograd box) is taken
    as it is; a (nested) Python list or tuple is converted with np.array; anything else, a torch
    tensor included, is refused with a TypeError naming the argument."""
    if type(x) is numpy.ndarray:  # the common case first: the checks run on every call
        return x
    if type(x).__module__.split(".")[0] == "torch":
        raise TypeError(
            f"{name} is a torch tensor; minattn computes on NumPy (or CuPy) arrays: pass "
            f"{name}.detach().cpu().numpy(), or convert a torch module's weights with "
            "minattn.interop.from_torch"
        )
    if isinstance(x, (list, tuple)):
        try:
            x = np.array(x)
        except ValueError as error:  # ragged nesting
            raise ValueError(f"{name} is a list that does not form an array: {error}") from None
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        raise TypeError(f"{name} must be an array, got {type(x).__name__}")
    if type(x).__module__.split(".")[0] == "cupy" and type(x) not in _cupy_registered:
        from . import cupy_autograd  # CuPy met for the first time: teach autograd its arrays

        _cupy_registered.add(cupy_autograd.register(type(x)))
    return x


_cupy_registered = set()


def as_float_array(name, x):
    """as_array, then require a floating-point dtype."""
    if type(x) is numpy.ndarray and x.dtype.kind == "f" or _plain_float(x):  # the common case
        return x
    x = as_array(name, x)
    if numpy.dtype(x.dtype).kind != "f":
        raise TypeError(
            f"{name} must be a floating-point array, got dtype {x.dtype} "
            f"(convert it with {name}.astype(np.float32) or np.float64)"
        )
    return x


def check_min_ndim(name, x, ndim, layout):
    if x.ndim < ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {tuple(x.shape)}")


def broadcasts_to(shape, target):
    """True where an array of `shape` broadcasts to exactly `target` (no growing of target)."""
    # Each of shape's dims, aligned on the right with target's, is 1 or target's own (the rule of
    # np.broadcast_shapes(shape, target) == target, without its cost: this runs on every call).
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(
        s == 1 or s == t for s, t in zip(shape[::-1], target[::-1]))


def broadcast_or_raise(names_and_shapes, what):
    """np.broadcast_shapes, with an error that names every argument and its shape."""
    shapes = [tuple(s) for _, s in names_and_shapes]
    result = _broadcast_sizes(shapes)  # the common case, without np.broadcast_shapes' cost
    if result is not None:
        return result
    try:
        return tuple(numpy.broadcast_shapes(*shapes))
    except ValueError:
        listed = ", ".join(f"{n} {tuple(s)}" for n, s in names_and_shapes)
        raise ValueError(f"{what} do not broadcast: {listed}") from None


def _broadcast_sizes(shapes):
    # Shapes of one length -> their broadcast shape (each axis: its sizes are 1 or one size n,
    # which it takes), or None where they have other lengths or do not broadcast.
    n = len(shapes[0])
    for s in shapes:  # (loops here, not generators: this runs on every attention call)
        if len(s) != n:
            return None
    result = []
    for sizes in zip(*shapes):  # the one size other than 1 (or 1), without a set made an axis
        n = 1
        for size in sizes:
            if size != 1:
                if n == 1:
                    n = size
                elif size != n:
                    return None
        result.append(n)
    return tuple(result)


def _plain_float(x):
    # A NumPy float array, or one boxed by autograd while a gradient is recorded (the same
    # checks hold, without the general path's conversions)
    if type(x) is ArrayBox:
        x = x._value
    return type(x) is numpy.ndarray and x.dtype.kind == "f"


def _plain_floats(q, k, v):
    # _plain_float of each (NumPy float arrays, in one frame where they are, the common case)
    if type(q) is type(k) is type(v) is numpy.ndarray:
        return q.dtype.kind == k.dtype.kind == v.dtype.kind == "f"
    return _plain_float(q) and _plain_float(k) and _plain_float(v)


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


def check_softmax(x, axis, mask):
    if (type(x) is numpy.ndarray and x.dtype.kind == "f" or _plain_float(x)) and x.ndim and \
            axis == -1 and type(axis) is int and (mask is None or (
            type(mask) is numpy.ndarray and mask.dtype == bool and
            broadcasts_to(mask.shape, x.shape))):
        return x, axis, mask  # the common case first (what the checks below return for it)
    x = as_float_array("x", x)
    axis = check_axis(axis, x)
    mask = check_mask(mask, x.shape, "x")
    if mask is not None and numpy.dtype(mask.dtype).kind != "b":
        raise TypeError(f"softmax's mask must be boolean (True = keep), got dtype {mask.dtype}")
    return x, axis, mask


def check_grouped_attention(q, k, v, mask, dropout, rng):
    """grouped_attention's arguments: q [..., H, L_q, d_k], k [..., H_kv, L_k, d_k], v [...,
    H_kv, L_k, d_v], H_kv dividing H, their batch dims broadcasting; mask broadcasting to the
    per-head scores [..., H, L_q, L_k]. Returns q, k, v, mask (as arrays)."""
    if _plain_floats(q, k, v) and q.ndim == k.ndim == v.ndim >= 3 and \
            q.shape[:-3] == k.shape[:-3] == v.shape[:-3] and \
            k.shape[-1] == q.shape[-1] and k.shape[-3:-1] == v.shape[-3:-1] and \
            k.shape[-3] and not q.shape[-3] % k.shape[-3] and \
            type(dropout) is float and dropout == 0.0 and \
            (mask is None or type(mask) is numpy.ndarray and mask.dtype == bool and broadcasts_to(
                mask.shape, q.shape[:-3] + (q.shape[-3], q.shape[-2], k.shape[-2]))):
        return q, k, v, mask  # the common case first (a model's layers), as below
    q, k, v = as_float_array("q", q), as_float_array("k", k), as_float_array("v", v)
    check_min_ndim("q", q, 3, "(..., H, L_q, d_k)")
    check_min_ndim("k", k, 3, "(..., H_kv, L_k, d_k)")
    check_min_ndim("v", v, 3, "(..., H_kv, L_k, d_v)")
    if k.shape[-1] != q.shape[-1] or k.shape[-3:-1] != v.shape[-3:-1]:
        raise ValueError(f"q, k and v must be (..., H, L_q, d_k), (..., H_kv, L_k, d_k) and "
                         f"(..., H_kv, L_k, d_v): got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    if n_kv_heads == 0 or n_heads % n_kv_heads:
        raise ValueError(f"the key-value heads must divide the query heads: q has H={n_heads} "
                         f"heads and k, v H_kv={n_kv_heads} (axis -3 of each; query head h reads "
                         f"kv head h // (H / H_kv)): q {tuple(q.shape)}, k {tuple(k.shape)}")
    batch = broadcast_or_raise([("q", q.shape[:-3]), ("k", k.shape[:-3]), ("v", v.shape[:-3])],
                               "the batch dims of q, k, v")
    scores = batch + (n_heads, q.shape[-2], k.shape[-2])
    mask = check_mask(mask, scores, "the per-head scores (..., H, L_q, L_k)")
    check_dropout(dropout, rng)
    return q, k, v, mask


def check_attention(q, k, v, mask, scale, dropout, rng, sinks=None):
    """scaled_dot_product_attention's arguments; returns q, k, v, keep, bias, scale and sinks: the
    mask split by kind, keep (a boolean mask, or None) and bias (a floating mask, added to the
    scores, in the scores' dtype; None without one), scale as a float (1/sqrt(d_k) by default: a
    dot product of d_k unit-variance terms has variance d_k; 0 is allowed: uniform weights, as in
    torch), and the attention sinks (None, or
    one logit per query row)."""
    if _plain_floats(q, k, v) and q.dtype == k.dtype == v.dtype and \
            q.ndim == k.ndim == v.ndim >= 2 and q.shape[-1] == k.shape[-1] and \
            k.shape[-2] == v.shape[-2] and scale is None and sinks is None and \
            type(dropout) is float and dropout == 0.0:
        # the common case first, as the checks below would take it: no broadcasting of q
        batch = _broadcast_sizes([q.shape[:-2], k.shape[:-2], v.shape[:-2]])
        if batch == q.shape[:-2] and (mask is None or type(mask) is numpy.ndarray and
                                      mask.dtype == bool and broadcasts_to(
                                          mask.shape, batch + (q.shape[-2], k.shape[-2]))):
            return q, k, v, mask, None, _default_scale(q.shape[-1]), None
    q, k, v, batch = check_qkv(q, k, v)
    if tuple(q.shape[:-2]) != batch:
        # q takes every batch dim (a view): the scores then have v's too, so that a mask or sinks
        # over a batch dim only v has apply
        q = np.reshape(q, (1,) * (len(batch) + 2 - q.ndim) + tuple(q.shape))
        q = np.broadcast_to(q, batch + tuple(q.shape[-2:]))
    mask = check_mask(mask, batch + (q.shape[-2], k.shape[-2]))
    dtype = q.dtype if q.dtype == k.dtype else numpy.result_type(q.dtype, k.dtype)  # the scores'
    scale = _default_scale(q.shape[-1]) if scale is None else check_positive_real("scale", scale, allow_zero=True,
                                                              dtype=dtype)
    check_dropout(dropout, rng)
    sinks = check_sinks(sinks, batch + (q.shape[-2],))
    if mask is None or numpy.dtype(mask.dtype).kind == "b":
        return q, k, v, mask, None, scale, sinks
    # An additive mask (-inf, or biases such as ALiBi) is taken in the scores' dtype: no upcast.
    return q, k, v, None, in_dtype(mask, dtype), scale, sinks


def _default_scale(d_k):
    return 1.0 / math.sqrt(d_k) if d_k else 1.0


def check_sinks(sinks, rows_shape, rows_name="the scores without their key axis (..., L_q)"):
    """Attention sinks: None, or a floating array broadcasting to rows_shape (one logit a row)."""
    if sinks is None:
        return None
    sinks = as_float_array("sinks", sinks)
    ok = broadcasts_to(sinks.shape, tuple(rows_shape))
    if not ok:
        raise ValueError(f"sinks of shape {tuple(sinks.shape)} does not broadcast to {rows_name} "
                         f"of shape {tuple(rows_shape)} (one logit per query row; per head: "
                         "[H, 1])")
    return sinks


def check_split_heads(x, n_heads):
    if (type(x) is numpy.ndarray and x.dtype.kind == "f" or _plain_float(x)) and \
            x.ndim >= 2 and type(n_heads) is int and n_heads > 0 and \
            x.shape[-1] % n_heads == 0:
        return x  # the common case first
    x = as_float_array("x", x)
    check_min_ndim("x", x, 2, "(..., L, D)")
    check_n_heads(n_heads, x.shape[-1], "x's last dim D")
    return x


def check_merge_heads(x):
    if (type(x) is numpy.ndarray and x.dtype.kind == "f" or _plain_float(x)) and x.ndim >= 3:
        return x  # the common case first
    x = as_float_array("x", x)
    check_min_ndim("x", x, 3, "(..., H, L, d_k)")
    return x


def check_layer_norm(x, gamma, beta, eps, centered=True):
    """layer_norm's (centered) or rms_norm's arguments: gamma and beta [D] and a 0-d eps taken
    in x's dtype. eps = 0 is allowed where no row's variance (mean square, uncentered) is 0:
    there the norm would be 0 / 0, so it is refused, naming eps, rather than returned as NaN."""
    if (type(x) is numpy.ndarray and x.dtype.kind == "f" or _plain_float(x)) and x.ndim and \
            type(gamma) is type(beta) is numpy.ndarray and \
            gamma.dtype == beta.dtype == x.dtype and gamma.shape == beta.shape == x.shape[-1:] \
            and type(eps) is float and 0 < eps < math.inf:
        return x, gamma, beta, eps  # the common case first, as the checks below return it
    x = as_float_array("x", x)
    check_min_ndim("x", x, 1, "(..., D)")
    gamma = check_shape("gamma", gamma, x.shape[-1:], x.dtype)
    beta = check_shape("beta", beta, x.shape[-1:], x.dtype)
    eps = check_positive_real("eps", eps, allow_zero=True, dtype=x.dtype)
    if eps == 0 and x.size:
        values = getval(x)
        spread = values - np.mean(values, axis=-1, keepdims=True) if centered else values
        if bool(np.any(np.mean(spread * spread, axis=-1) == 0)):
            raise ValueError(
                f"eps=0 leaves the norm undefined (0 / 0) on a row of x (shape {tuple(x.shape)}) "
                f"whose {'variance' if centered else 'mean square'} is 0; give eps > 0 (torch "
                "returns NaN there)")
    return x, gamma, beta, eps


def check_mask(mask, target_shape, target_name="the scores", name="mask"):
    """A mask must be boolean (True = may attend) or floating (added), and broadcast to target;
    `name`: the argument's (memory_mask for a decoder's cross-attention)."""
    if mask is None:
        return None
    if not hasattr(mask, "dtype") and not isinstance(mask, (list, tuple)):
        raise TypeError(f"{name} must be a boolean or floating-point array, got "
                        f"{type(mask).__name__}")
    mask = as_array(name, mask)
    kind = numpy.dtype(mask.dtype).kind
    if kind not in "bf":
        raise TypeError(
            f"{name} must be boolean (True = may attend) or floating (added to the scores), "
            f"got dtype {mask.dtype}"
        )
    if kind == "f":
        check_not_keep_mask(mask, name)
    target_shape = tuple(target_shape)
    ok = broadcasts_to(mask.shape, target_shape)
    if not ok:
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} does not broadcast to {target_name} "
            f"of shape {target_shape}"
        )
    return mask


def check_not_keep_mask(mask, name):
    # A floating mask is ADDED to the scores (torch's convention too), so a 0/1 "keep" mask such
    # as np.tril(np.ones((L, L))) would remove nothing while looking right: it adds 1 to the
    # allowed scores, so a masked key keeps its weight divided by only e. Refuse it rather than
    # guess: a keep/drop mask is boolean.
    values = getval(mask)
    if values.size and bool(np.all((values == 0) | (values == 1))) and bool(np.any(values == 1)):
        raise ValueError(
            f"{name} is a floating-point array of only 0s and 1s (dtype {mask.dtype}); a floating "
            "mask is added to the scores, so this would remove no key (it adds 1 to the kept "
            "scores). For a keep/drop mask pass "
            "booleans (True = may attend), e.g. mask.astype(bool); for an additive mask use 0 "
            "and -inf"
        )


def check_positive_real(name, value, allow_zero=False, dtype=None, allow_inf=False):
    """A real, finite, positive number (scale, eps). A Python or NumPy number comes back as a
    Python float (a NumPy float64 scalar would upcast float32 arrays); a 0-d floating array or
    an autograd box (to differentiate with respect to it) comes back as it is, in `dtype` when
    given (the inputs' dtype: an auxiliary argument never changes the result's dtype)."""
    if type(value) is float and (0 < value < math.inf or allow_zero and value == 0):
        return value  # the common case first (a config's float), without the ABC checks below
    if hasattr(value, "dtype") and not isinstance(value, numbers.Number):
        if getattr(value, "ndim", None) != 0 or numpy.dtype(value.dtype).kind != "f":
            raise TypeError(f"{name} must be a positive float or a 0-d floating array, got "
                            f"{type(value).__name__} of shape {tuple(value.shape)}, dtype {value.dtype}")
        number = float(getval(value))
        value = in_dtype(value, dtype)
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive float, got {value!r} ({type(value).__name__})")
    else:
        number = value = float(value)
    finite = math.isfinite(number) or allow_inf and number == math.inf
    if not (finite and (number > 0 or allow_zero and number == 0)):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind}{'' if allow_inf else ', finite'} float, "
                         f"got {number!r}")
    return value


def in_dtype(x, dtype):
    """The one rule for an auxiliary floating argument (a mask, sinks, a 0-d scale or eps, the
    params' weights, a KV cache): it is taken in the inputs' dtype, so float32 inputs give float32 results
    whatever the dtype of the params or the mask (NumPy would promote to float64), and float16
    inputs stay float16 (engine/dtypes.py). None: leave it as it is."""
    if dtype is None or x.dtype == dtype:
        return x
    with numpy.errstate(over="ignore"):  # -1e9 is -inf in float16: meant (engine/dtypes.py)
        return x.astype(dtype)


def check_first_order(function, *values):
    """Called at the start of a hand-written VJP that is first-order only (it accumulates into
    arrays in place): if autograd is differentiating it again (grad of grad), one of the values
    it reads (the incoming gradient, the forward's inputs or outputs) arrives boxed. Say so by
    name, rather than fail in NumPy with "operand type(s) all returned NotImplemented"."""
    if any(isbox(value) for value in values):
        raise NotImplementedError(
            f"{function}'s gradient is first-order only: its hand-written backward accumulates "
            "into arrays in place, so autograd cannot differentiate it again (grad of grad). "
            "For second derivatives use scaled_dot_product_attention, which computes the same "
            "output"
        )


def check_axis(axis, x, name="x"):
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for {name} of shape {tuple(x.shape)} "
                         f"(ndim {x.ndim})")
    return int(axis)


def check_size(name, n, minimum=1):
    """A size argument of init_* (d_model, d_ff, n_heads, n_layers): an int >= minimum."""
    if type(n) is int and n >= minimum:
        return n  # the common case first (isinstance of numbers.Integral is an ABC's check)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name} must be a positive int, got {n!r}")
    if n < minimum:
        raise ValueError(f"{name} must be a positive int, got {n!r}")
    return int(n)


def check_init(rng, dtype, need_rng=True):
    """init_*'s common arguments: a np.random.Generator (not a seed, not None, not the legacy
    np.random module) and a floating dtype for the params."""
    if need_rng and not isinstance(rng, numpy.random.Generator):
        raise TypeError(
            f"rng must be a np.random.Generator, e.g. np.random.default_rng(0), "
            f"got {type(rng).__name__}"
        )
    try:
        dtype = numpy.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype!r}") from None
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating-point dtype (e.g. np.float32), got {dtype}")
    return dtype


def check_mask_has_head_axis(mask, scores_shape, name="mask"):
    # A (B, L_q, L_k) mask would broadcast against (B, H, L_q, L_k) with B read as H: silently
    # wrong whenever B == H. A 3-D mask is read neither way: a per-batch mask spells out its
    # head axis, a per-head one (ALiBi's bias) its batch axis.
    if mask is not None and 2 < mask.ndim < len(scores_shape):
        raise ValueError(
            f"{name} of shape {tuple(mask.shape)} is ambiguous for the per-head scores of shape "
            f"{tuple(scores_shape)}: give (L_q, L_k), or a per-batch mask with its head axis, "
            f"(B, 1, L_q, L_k) (e.g. mask[:, None]), or a per-head mask or bias with its batch "
            f"axis, (1, H, L_q, L_k) (e.g. mask[None])"
        )


def check_dropout(dropout, rng):
    # 1 is allowed: every entry dropped, zeros (torch's dropout p=1 too).
    if type(dropout) is float and dropout == 0.0:
        return  # the common case first (no dropout), without the checks below
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
        raise TypeError(f"dropout must be a float in [0, 1], got {dropout!r}")
    if not 0.0 <= dropout <= 1.0:
        raise ValueError(f"dropout must be in [0, 1], got {dropout!r}")
    if dropout > 0.0:
        if rng is None:
            raise ValueError(
                f"dropout={dropout!r} needs an rng (np.random.Generator), e.g. "
                "rng=np.random.default_rng(0); nothing here seeds a global RNG"
            )
        # A Generator-like object (NumPy's, or CuPy's for arrays on the GPU); not the legacy
        # global np.random module or a RandomState, which would pass for one by duck typing.
        legacy = isinstance(rng, (types.ModuleType, numpy.random.RandomState))
        if legacy or not callable(getattr(rng, "random", None)):
            raise TypeError(f"rng must be a np.random.Generator (e.g. np.random.default_rng(0)), "
                            f"got {getattr(rng, '__name__', type(rng).__name__)}")


def check_n_heads(n_heads, d_model, d_model_name="d_model"):
    if type(n_heads) is int and n_heads >= 1 and type(d_model) is int and not d_model % n_heads:
        return  # the common case first
    if isinstance(n_heads, bool) or not isinstance(n_heads, numbers.Integral) or n_heads < 1:
        raise TypeError(f"n_heads must be a positive int, got {n_heads!r}")
    if d_model % n_heads:
        raise ValueError(
            f"{d_model_name}={d_model} is not divisible by n_heads={n_heads}"
        )


def check_n_kv_heads(n_kv_heads, n_heads):
    if n_kv_heads is None or type(n_kv_heads) is int and n_kv_heads >= 1 and \
            type(n_heads) is int and not n_heads % n_kv_heads:
        return  # (the common cases first)
    if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, numbers.Integral) \
            or n_kv_heads < 1:
        raise TypeError(f"n_kv_heads must be None or a positive int, got {n_kv_heads!r}")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads} (each kv head "
                         "serves a group of n_heads // n_kv_heads query heads)")


def _format_shape(shape):
    inner = ", ".join(str(d) for d in shape)  # str() so symbolic sizes print as d_ff, not 'd_ff'
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def check_shape(name, x, expected, dtype=None):
    """`expected` is a tuple of ints, or of names (str) for sizes that may be anything; x comes
    back in `dtype` when given (in_dtype: the inputs' dtype)."""
    x = in_dtype(as_float_array(name, x), dtype)
    ok = tuple(x.shape) == expected or len(x.shape) == len(expected) and all(
        isinstance(e, str) or s == e for s, e in zip(x.shape, expected)
    )
    if not ok:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {_format_shape(expected)}")
    return x


def check_params(params, expected, where, dtype=None):
    """`expected` maps each key to the shape its array must have (see check_shape). Returns a
    new dict (the caller's is never changed) whose checked leaves are arrays, lists converted,
    in `dtype` when given (the inputs' dtype: in_dtype)."""
    if type(params) is dict:  # the common case first, in one pass: nothing to convert or refuse
        for key, shape in expected.items():
            if not _plain(params.get(key), shape, dtype):
                break
        else:
            return dict(params)
    if not isinstance(params, DICT_TYPES):
        raise TypeError(f"{where} must be a dict of arrays, got {type(params).__name__}")
    checked = {}
    for key, shape in expected.items():
        if key not in params:
            raise ValueError(
                f"{where} is missing key {key!r} (expected keys: {', '.join(map(repr, expected))})"
            )
        checked[key] = check_shape(f"{where}[{key!r}]", params[key], shape, dtype)
    return {**{key: params[key] for key in params}, **checked}


def _plain(x, shape, dtype):
    # A NumPy float array of this shape (a name: any size) in this dtype (if given).
    if not _plain_float(x) or dtype is not None and x.dtype != dtype:
        return False
    return x.shape == shape or len(x.shape) == len(shape) and all(
        type(e) is str or s == e for s, e in zip(x.shape, shape))


def check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


def check_unused_keywords(name, others):
    """An attention variant's keywords meant for other variants (a decoder block passes them all)
    must be None: refused by name, never ignored."""
    given = sorted(key for key, value in others.items() if value is not None)
    if given:
        raise ValueError(f"{name} does not support {', '.join(given)} (got "
                         f"{', '.join(f'{key}={others[key]!r}' for key in given)})")


# A block's params before the one naming (attention, norm1..3, post_norm1/3): refused by name,
# never run with a leftover key silently ignored.
RENAMED_BLOCK_KEYS = {
    "attention": "self_attention", "norm1": "self_attention_norm",
    "norm2": "feed_forward_norm (encoder) or cross_attention_norm (decoder)",
    "norm3": "feed_forward_norm", "post_norm1": "post_self_attention_norm",
    "post_norm3": "post_feed_forward_norm",
}


def check_no_renamed_block_keys(params, where, known=None):
    """A block's params under the old, torch-style names refused, naming the new ones; with
    known (the keys the block reads), any other key refused too: a weight left unread."""
    old = [key for key in RENAMED_BLOCK_KEYS if key in params]
    if old:
        raise ValueError(f"{where} has key(s) {', '.join(map(repr, old))}, the old names of a "
                         "block's params; they are now " + "; ".join(
                             f"{key!r} -> {RENAMED_BLOCK_KEYS[key]!r}" for key in old))
    unknown = [] if known is None else [key for key in params if key not in known]
    if unknown:
        raise ValueError(f"{where} has keys {unknown}, which this block does not read (its "
                         f"keys: {', '.join(map(repr, known))})")
