"""Arrays made on the device of another array: the CuPy policy for the few functions that build
an array from sizes alone (masks, positional tables), where no input array carries a library.

Everywhere else the library follows the inputs: autograd.numpy dispatches NumPy's functions to
CuPy arrays through NumPy's __array_function__ protocol, and the core creates its arrays from
its inputs (np.zeros_like(x)), never on the host. And `concatenate`, where autograd's own would
take the arrays to the host.
"""
import autograd.numpy as np
import numpy
from autograd.extend import defvjp_argnum, primitive
from autograd.tracer import getval

from . import checks


def arange(n, like=None):
    """np.arange(n) in the array library of `like` (NumPy if None, CuPy for a CuPy array; an
    autograd box stands for its value). `like` follows the array rule (checks.as_array): a list
    is a NumPy array, anything that is no array is refused by name."""
    like = None if like is None else checks.as_array("like", getval(like))
    return np.arange(n, like=like)  # like=None: NumPy's own default



def concatenate(arrays, axis=0):
    """np.concatenate in the arrays' own library, differentiable. autograd's np.concatenate views
    its result as a host ndarray, which CuPy refuses; this one calls NumPy's, which dispatches to
    CuPy, inside an autograd primitive whose gradient slices g (on g's device)."""
    return _concatenate(axis, *arrays)


@primitive
def _concatenate(axis, *arrays):
    return numpy.concatenate(arrays, axis=axis)


def _concatenate_vjp(argnum, ans, args, kwargs):
    # the gradient of the argnum-th argument (the (argnum - 1)-th array): its slice of g
    axis, arrays = args[0], args[1:]
    start = sum(np.shape(a)[axis] for a in arrays[:argnum - 1])
    index = [slice(None)] * len(np.shape(ans))
    index[axis] = slice(start, start + np.shape(arrays[argnum - 1])[axis])
    return lambda g: g[tuple(index)]


defvjp_argnum(_concatenate, _concatenate_vjp)
