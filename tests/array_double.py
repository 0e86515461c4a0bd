"""DeviceArray: a test double that follows CuPy's rules, so the core can be checked without a GPU.

It wraps a NumPy array (the "device memory") and, like cupy.ndarray:
- refuses implicit conversion to the host: np.asarray(x) / np.array(x) raise TypeError;
- runs NumPy functions through __array_function__ and ufuncs through __array_ufunc__, returning
  DeviceArrays (0-d ones for full reductions, as CuPy does);
- refuses to mix with a host numpy.ndarray (ndim > 0): TypeError. Python numbers, NumPy scalars
  and 0-d arrays are fine;
- defers (NotImplemented) to operands of another type with its own __array_ufunc__ or
  __array_function__, such as autograd's ArrayBox, as numpy.ndarray does;
- answers like= (np.arange(n, like=x) builds a DeviceArray);
- dispatches only ufuncs it knows: NumPy's, and scipy.special's (CuPy >= 11 forwards those to
  cupyx.scipy.special, cupy/cupy#6341);
- .get() copies back to a NumPy array.
A core function that creates a host array, or calls np.asarray/np.array on an input, fails here
just as it would on CuPy.
"""
import numpy
import numpy.lib.mixins
import scipy.special


class DeviceArray(numpy.lib.mixins.NDArrayOperatorsMixin):
    """An array "on the device": operators come from the mixin, which calls the ufuncs below."""

    def __init__(self, data):
        if not isinstance(data, numpy.ndarray):
            raise TypeError(f"DeviceArray wraps a numpy.ndarray, got {type(data).__name__}")
        self._data = data

    # --- no implicit host conversion (cupy.ndarray.__array__ raises TypeError too) ---
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def get(self):
        return self._data.copy()

    def view(self, dtype=None):
        # cupy.ndarray.view takes a dtype only: viewing as numpy.ndarray (autograd's
        # np.concatenate does .view(ndarray)) cannot give a host array.
        if isinstance(dtype, type) and issubclass(dtype, numpy.ndarray):
            raise TypeError("a device array cannot be viewed as a host numpy.ndarray")
        return DeviceArray(self._data.view(dtype) if dtype is not None else self._data.view())

    # --- the two dispatch protocols ---
    def __array_function__(self, func, types, args, kwargs):
        if any(_foreign(t) for t in types):
            return NotImplemented
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # Like numpy.ndarray, defer to another type with its own override (an autograd box
        # wrapping a device array): NumPy then asks that type, which unboxes and calls back.
        if not _is_dispatchable(ufunc) or any(_foreign(type(x)) for x in inputs):
            return NotImplemented
        out = kwargs.get("out")
        result = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        if out is not None:  # results were written into the outputs' device buffers
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    # --- ndarray attributes and methods the core and the tests use ---
    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    T = property(lambda self: DeviceArray(self._data.T))

    def reshape(self, *shape, **kwargs):
        return DeviceArray(self._data.reshape(*shape, **kwargs))

    def astype(self, dtype, **kwargs):
        return DeviceArray(self._data.astype(dtype, **kwargs))

    def swapaxes(self, axis1, axis2):
        return DeviceArray(self._data.swapaxes(axis1, axis2))

    def transpose(self, *axes):
        return DeviceArray(self._data.transpose(*axes))

    def sum(self, *args, **kwargs):
        return numpy.sum(self, *args, **kwargs)

    def mean(self, *args, **kwargs):
        return numpy.mean(self, *args, **kwargs)

    def max(self, *args, **kwargs):
        return numpy.max(self, *args, **kwargs)

    def min(self, *args, **kwargs):
        return numpy.min(self, *args, **kwargs)

    def __getitem__(self, index):
        return _wrap(self._data[_unwrap(index, refuse_host=False)])

    def __setitem__(self, index, value):  # item assignment, on the device (as cupy.ndarray)
        self._data[_unwrap(index, refuse_host=False)] = _unwrap(value)

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # Scalars come back to the host explicitly (CuPy synchronizes and copies here).
    def __bool__(self):
        return bool(self._data)

    def __int__(self):
        return int(self._data)

    def __float__(self):
        return float(self._data)

    def __repr__(self):
        return f"DeviceArray({self._data!r})"


class DeviceGenerator:
    """Like cupy.random.Generator: random numbers made on the device (here: wrapped)."""

    def __init__(self, seed):
        self._rng = numpy.random.default_rng(seed)

    def random(self, size=None):
        return DeviceArray(numpy.asarray(self._rng.random(size)))


def to_device(tree):
    """Copy every array in a nested dict/list/tuple to the "device" (as cupy.asarray)."""
    if isinstance(tree, dict):
        return {key: to_device(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_device(value) for value in tree)
    return DeviceArray(numpy.array(tree))


def to_host(tree):
    """Copy every DeviceArray in a nested dict/list/tuple back to NumPy (as cupy.asnumpy)."""
    if isinstance(tree, dict):
        return {key: to_host(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(to_host(value) for value in tree)
    if not isinstance(tree, DeviceArray):
        raise TypeError(f"expected a DeviceArray, got {type(tree).__name__}")
    return tree.get()


def _foreign(cls):
    # A type with its own dispatch (e.g. autograd's ArrayBox) that is none of ours or NumPy's.
    return (not issubclass(cls, (DeviceArray, numpy.ndarray, numpy.generic))
            and (hasattr(cls, "__array_ufunc__") or hasattr(cls, "__array_function__")))


def _is_dispatchable(ufunc):
    name = ufunc.__name__
    return getattr(numpy, name, None) is ufunc or getattr(scipy.special, name, None) is ufunc


def _unwrap(value, refuse_host=True):
    # DeviceArray -> its NumPy data, through lists, tuples and dicts; a host array -> TypeError.
    if isinstance(value, DeviceArray):
        return value._data
    if isinstance(value, numpy.ndarray) and value.ndim > 0 and refuse_host:
        raise TypeError(f"a host numpy.ndarray of shape {value.shape} cannot be mixed with "
                        "device arrays (CuPy refuses implicit host-to-device copies); "
                        "create it on the device, e.g. with like=")
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, refuse_host) for v in value)
    if isinstance(value, dict):
        return {key: _unwrap(v, refuse_host) for key, v in value.items()}
    return value


def _wrap(value):
    # NumPy results -> DeviceArrays (NumPy scalars become 0-d arrays, as CuPy's reductions).
    if isinstance(value, (numpy.ndarray, numpy.generic)):
        return DeviceArray(numpy.asarray(value))
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(v) for v in value)
    return value
