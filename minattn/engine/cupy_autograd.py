"""autograd on CuPy arrays: boxes, and a vector space whose zeros and ones live on the device.

autograd knows numpy.ndarray only. Its ArrayVSpace starts with np.asarray(value) (a copy to the
host, which CuPy refuses) and makes its zeros and ones with np.zeros(shape), on the host. This
module registers an array type with autograd the same way autograd registers numpy.ndarray, but
with a vector space that makes zeros and ones *like* the value, so with the value's own library,
on its device. minattn's own VJPs (minattn/engine/autograd_rules.py) likewise build nothing on the host.

Imported only for CuPy (never by `import minattn` unless cupy is already imported):

    import cupy, minattn              # cupy imported first: registered when minattn loads
    minattn.engine.cupy_autograd.register()  # or explicitly, at any time

`register(array_type)` takes any CuPy-like type; the tests use it on a CuPy test double.
"""
import numpy
import autograd.numpy as anp
from autograd.extend import VSpace, defvjp
from autograd.numpy.numpy_boxes import ArrayBox

REGISTERED = set()


class DeviceArrayVSpace(VSpace):
    """autograd's ArrayVSpace for arrays that must stay on their device."""

    def __init__(self, value):
        self.shape, self.dtype = value.shape, value.dtype
        self._like = value  # zeros and ones are made like it: same library, same device

    size = property(lambda self: int(numpy.prod(self.shape)))
    ndim = property(lambda self: len(self.shape))

    def zeros(self):
        return numpy.zeros_like(self._like)

    def ones(self):
        return numpy.ones_like(self._like)

    def _inner_prod(self, x, y):
        return numpy.sum(x * y)

    def standard_basis(self):  # for finite-difference checks only; builds on the device too
        for index in numpy.ndindex(*self.shape):
            yield numpy.where(numpy.arange(self.size, like=self._like).reshape(self.shape)
                              == numpy.ravel_multi_index(index, self.shape), 1, 0).astype(self.dtype)


def _sum_vjp(ans, x, axis=None, keepdims=False, dtype=None, **kwargs):
    # autograd's own broadcasts g back with `+ np.zeros(shape)`, a host array; this one adds
    # zeros of x's dtype on x's device instead: one zero, broadcast, so that the tape keeps no
    # copy of x (a loss's sum would keep its whole input alive until the backward pass).
    shape = anp.shape(x)
    axes = range(len(shape)) if axis is None else [axis] if isinstance(axis, int) else axis
    kept = [1 if (a in axes or a - len(shape) in axes) else n for a, n in enumerate(shape)]
    zero = anp.zeros_like(x, shape=())
    return lambda g: anp.reshape(g, kept) + anp.broadcast_to(zero, shape)


def register(array_type=None):
    """Let autograd differentiate through arrays of `array_type` (default: cupy.ndarray).
    Also replaces autograd's VJP of np.sum (the one autograd VJP on minattn's path that builds a
    host array) with an equivalent one that builds its zeros like the input."""
    if array_type is None:
        import cupy

        array_type = cupy.ndarray
    if array_type not in REGISTERED:
        ArrayBox.register(array_type)
        VSpace.register(array_type, DeviceArrayVSpace)
        defvjp(anp.sum, _sum_vjp)
        REGISTERED.add(array_type)
    return array_type
