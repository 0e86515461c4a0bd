"""The dtype policy: float16 is computed in float32 and returned as float16.

float16 has 10 bits of mantissa and overflows at 65504: a score q·k of two 256-wide vectors of
ones is already out of range, (x - mean)² overflows at |x| ~ 256, and scipy's erf has no float16
loop. torch does the same on the CPU (its float16 softmax, attention and LayerNorm accumulate in
float32). So the core functions that need it carry one decorator line,

    @float16_in_float32("q", "k", "v")

which, when the named inputs are all float16, takes every floating argument as float16 (an
additive mask of -1e9 given in float64 becomes -inf, which is what it is in float16: the rule
"an additive mask is taken in the inputs' dtype" holds for every dtype), computes in float32,
and returns every floating result as float16. Any other dtype passes through untouched (and
the checks take an auxiliary argument in the inputs' dtype: engine/checks.py, in_dtype). Arrays
keep their library (NumPy, CuPy) and autograd boxes stay boxes, so gradients flow through the
casts.
"""
import functools

import numpy
from autograd.tracer import box_types as _BOX_TYPES  # isbox(x): type(x) in it

from . import autograd_rules
from .signatures import binder, call_by_name


def _floating(x):
    dtype = getattr(x, "dtype", None)
    return hasattr(x, "astype") and isinstance(dtype, numpy.dtype) and dtype.kind == "f"


def _in_float32(x):
    # Every floating argument is taken as float16 first, a float32 one too (a float32 -1e9 mask
    # is -inf in float16), then computed in float32.
    if not _floating(x):
        return x
    if x.dtype != numpy.float16:
        with numpy.errstate(over="ignore"):  # -1e9 becomes -inf: meant (module docstring)
            x = x.astype(numpy.float16)
    return x.astype(numpy.float32)


def _as_float16(result):
    if isinstance(result, tuple):
        return tuple(_as_float16(r) for r in result)
    return result.astype(numpy.float16) if _floating(result) else result


def float16_in_float32(*inputs):
    """Decorator: see the module docstring. `inputs` name the arguments whose dtype decides."""
    def decorate(f):
        names, bind = binder(f)
        decide = [names.index(name) for name in inputs]
        last = max(decide)

        # f's own function where f is gradient_by_hand's wrapper: called here where no argument
        # is an autograd box, as that wrapper would call it (a frame fewer a call of a decode step)
        unrecorded = autograd_rules.unrecorded(f)

        @functools.wraps(f)
        def computed_in_float32_if_float16(*args, **kwargs):
            # The common case first, without binding: the deciding inputs given by position.
            given = args if len(args) > last else bind(args, kwargs)
            for i in decide:
                if getattr(given[i], "dtype", None) != numpy.float16 or not _floating(given[i]):
                    if unrecorded is not None and _BOX_TYPES.isdisjoint(map(type, args)) and \
                            (not kwargs or _BOX_TYPES.isdisjoint(map(type, kwargs.values()))):
                        return unrecorded(*args, **kwargs)
                    return f(*args, **kwargs)
            values = bind(args, kwargs)
            return _as_float16(call_by_name(f, names, [_in_float32(v) for v in values]))

        return computed_in_float32_if_float16

    return decorate
