"""The one rule for array arguments (minattn.engine.checks.as_array), stated as a user meets it:
arrays are taken as they are, Python lists and tuples become arrays, anything else is refused by
name, a torch tensor with a hint, and a CuPy array teaches autograd its type the first time
minattn meets it (here on a CuPy test double, tests/array_double.py)."""
import re
import subprocess
import sys

import autograd
import numpy
import pytest

import minattn as ma
from minattn.engine import cupy_autograd
from minattn.engine.checks import as_array
from tests.array_double import DeviceArray


def test_an_array_is_taken_as_it_is():
    x = numpy.arange(6.0).reshape(2, 3)
    assert as_array("x", x) is x


@pytest.mark.parametrize("value", [[[1.0, 2.0], [3.0, 4.0]], ((1, 2), (3, 4)), [True, False]])
def test_lists_and_tuples_become_the_array_numpy_makes(value):
    got = as_array("x", value)
    want = numpy.array(value)
    assert isinstance(got, numpy.ndarray) and got.dtype == want.dtype
    numpy.testing.assert_array_equal(got, want)


def test_softmax_of_a_list_equals_softmax_of_its_array():
    numpy.testing.assert_allclose(ma.softmax([1.0, 2.0, 3.0]), ma.softmax(numpy.array([1.0, 2.0, 3.0])),
                                  rtol=0, atol=0)


def test_a_ragged_list_is_refused_with_numpys_reason():
    try:
        numpy.array([[1.0, 2.0], [3.0]])
    except ValueError as error:
        reason = str(error)
    with pytest.raises(ValueError) as raised:
        as_array("lengths", [[1.0, 2.0], [3.0]])
    assert str(raised.value) == f"lengths is a list that does not form an array: {reason}"


class ShapeOnly:
    shape = (2,)


class DtypeOnly:
    dtype = numpy.dtype("float64")


class ShapeAndDtype:
    """Anything with a shape and a dtype passes as an array (CuPy arrays, autograd boxes)."""
    shape = (2,)
    dtype = numpy.dtype("float64")


@pytest.mark.parametrize("value, type_name", [
    ("abc", "str"), (3.0, "float"), (None, "NoneType"), ({"a": 1}, "dict"),
    (ShapeOnly(), "ShapeOnly"), (DtypeOnly(), "DtypeOnly"), (memoryview(b"ab"), "memoryview"),
])
def test_anything_else_is_refused_by_name_and_type(value, type_name):
    with pytest.raises(TypeError) as raised:
        as_array("q", value)
    assert str(raised.value) == f"q must be an array, got {type_name}"


def test_an_object_with_a_shape_and_a_dtype_is_taken_as_it_is():
    value = ShapeAndDtype()
    assert as_array("q", value) is value


def test_a_torch_tensor_is_refused_with_the_way_to_convert_it():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError) as raised:
        as_array("k", torch.zeros(2, 3))
    assert str(raised.value) == (
        "k is a torch tensor; minattn computes on NumPy (or CuPy) arrays: pass "
        "k.detach().cpu().numpy(), or convert a torch module's weights with "
        "minattn.interop.from_torch")


def test_numpy_work_never_loads_the_cupy_plumbing():
    # minattn.engine.cupy_autograd's promise: imported only for CuPy. A fresh interpreter, as
    # the core is used without CuPy: forward and gradient, and the module is still not loaded.
    code = ("import sys, numpy, autograd, minattn as ma\n"
            "x = numpy.array([[0.5, -1.0, 2.0]])\n"
            "ma.scaled_dot_product_attention(x, x, x)\n"
            "autograd.grad(lambda v: ma.softmax(v).sum())(x)\n"
            "print('minattn.engine.cupy_autograd' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _cupy_like_type():
    """A fresh array type that calls itself CuPy's (its module is cupy's), each test its own."""
    cupy_autograd.register(DeviceArray)  # the double's results (autograd must know them too)
    return type("ndarray", (DeviceArray,), {"__module__": "cupy._core.core"})


def test_minattn_teaches_autograd_a_cupy_type_the_first_time_it_meets_it():
    CupyArray = _cupy_like_type()
    x = numpy.array([[0.5, -1.0, 2.0], [3.0, 0.0, -2.0]])
    w = numpy.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]])

    def loss(v, w):
        return (ma.softmax(v) * w).sum()

    with pytest.raises(TypeError, match="Can't differentiate w.r.t. type"):
        autograd.grad(loss)(CupyArray(x), DeviceArray(w))  # autograd does not know it yet
    ma.softmax(CupyArray(x))  # minattn meets it: a forward pass
    got = autograd.grad(loss)(CupyArray(x), DeviceArray(w))
    numpy.testing.assert_allclose(got.get(), autograd.grad(loss)(x, w), rtol=1e-12, atol=0)


def test_only_cupy_types_are_registered(monkeypatch):
    # Registration is for CuPy's types (their module is cupy's): a NumPy array or a test double
    # under another module registers nothing. (How often it is called is not stated: registering
    # a known type again changes nothing, cupy_autograd.REGISTERED.)
    CupyArray = _cupy_like_type()
    calls = []
    monkeypatch.setattr(cupy_autograd, "register", lambda array_type=None: calls.append(array_type) or array_type)
    not_cupy = type("ndarray", (DeviceArray,), {"__module__": "notcupy.cupy"})
    as_array("x", numpy.zeros(2))
    as_array("x", not_cupy(numpy.zeros(2)))
    assert calls == []
    as_array("x", CupyArray(numpy.zeros(2)))
    as_array("x", CupyArray(numpy.ones(3)))
    assert set(calls) == {CupyArray}


@pytest.mark.parametrize("build", [lambda like: ma.causal_mask(3, like=like),
                                   lambda like: ma.positional_encoding(3, 4, like=like)])
def test_like_follows_the_array_rule(build):
    # like= picks the array library: a list is a NumPy array, anything else is refused by name.
    np_result = build(numpy.zeros(2))
    numpy.testing.assert_array_equal(build([0.0, 1.0]), np_result)
    assert type(build([0.0, 1.0])) is numpy.ndarray
    with pytest.raises(TypeError, match=r"^like must be an array, got str$"):
        build("abc")
