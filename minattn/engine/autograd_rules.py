"""Autograd rules that minattn owns, where autograd's own would change a dtype or a device.

autograd's VJP of `np.where` builds its zeros with `np.zeros(g.shape)`: float64, and on the host.
That turns a float32 gradient into float64 (and would move a CuPy gradient to the CPU). `where`
below is the same selection, with a gradient made from g itself, so it keeps g's dtype and device.
"""
import autograd.numpy as np
from autograd.extend import defvjp, primitive
from autograd.numpy.numpy_vjps import unbroadcast_f


@primitive
def where(condition, x, y):
    # bool [...], [...], [...] -> [...] (broadcasting): x where condition holds, else y.
    return np.where(condition, x, y)


defvjp(
    where,
    None,  # the condition is not differentiable
    lambda ans, condition, x, y: unbroadcast_f(x, lambda g: where(condition, g, np.zeros_like(g))),
    lambda ans, condition, x, y: unbroadcast_f(y, lambda g: where(condition, np.zeros_like(g), g)),
)
