"""Arrays made on the device of another array: the CuPy policy for the few functions that build
an array from sizes alone (masks, positional tables), where no input array carries a library.

Everywhere else the library follows the inputs: autograd.numpy dispatches NumPy's functions to
CuPy arrays through NumPy's __array_function__ protocol, and the core creates its arrays from
its inputs (np.zeros_like(x)), never on the host.
"""
import autograd.numpy as np
from autograd.tracer import getval

from . import checks


def arange(n, like=None):
    """np.arange(n) in the array library of `like` (NumPy if None, CuPy for a CuPy array; an
    autograd box stands for its value). `like` follows the array rule (checks.as_array): a list
    is a NumPy array, anything that is no array is refused by name."""
    like = None if like is None else checks.as_array("like", getval(like))
    return np.arange(n, like=like)  # like=None: NumPy's own default
