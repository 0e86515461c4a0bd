"""engine/memo.py's `@by_value()` applied inside the tests (its wrapper is made when it
decorates): the edges its mutants showed untested (tests/MUTANTS.md). The default keeps the last
4 results; a result that is one array is read-only too, and what is not an array is returned
as it is; an array of another kind (here a NumPy subclass, as a CuPy array is to NumPy: shape,
dtype and bytes, not numpy.ndarray) is keyed by its value; an unhashable argument with bytes but
no shape or dtype (array.array) runs as written; a value being differentiated is never
remembered, so it evicts nothing."""
import array

import autograd.numpy as anp
import numpy as np
from autograd import grad

from minattn.engine.memo import by_value


def counted(maxsize=None, result=lambda *args: np.arange(3.0)):
    calls = []

    def f(*args, **kwargs):
        calls.append(1)
        return result(*args, **kwargs)

    return calls, (by_value() if maxsize is None else by_value(maxsize=maxsize))(f)


def test_the_default_keeps_the_last_four():
    calls, f = counted()
    for n in (1, 2, 3, 4, 1):  # four values: 1 is still remembered
        f(n)
    assert len(calls) == 4
    for n in (5, 3):  # 5 pushes out 2 (the least recently used: 1 was just used); 3 stays
        f(n)
    assert len(calls) == 5
    f(2)
    assert len(calls) == 6


def test_one_array_is_read_only_and_other_results_are_returned_as_they_are():
    calls, f = counted(result=lambda n: np.arange(float(n)))
    table = f(3)
    assert not table.flags.writeable
    np.testing.assert_array_equal(table, [0.0, 1.0, 2.0])
    calls, g = counted(result=lambda n: (np.arange(float(n)), 2.5, None))
    table, number, nothing = g(2)
    assert not table.flags.writeable and number == 2.5 and nothing is None


class Subclass(np.ndarray):
    pass


def test_an_array_of_another_kind_is_keyed_by_its_value():
    calls, f = counted()
    a = np.array([1.0, 2.0]).view(Subclass)
    f(a)
    f(np.array([1.0, 2.0]).view(Subclass))  # another object, the same value: remembered
    assert len(calls) == 1
    a[0] = 7.0  # changed in place: a new value
    f(a)
    assert len(calls) == 2
    f(a.view(np.int64))  # the same bytes read as another dtype: another value
    f(a.reshape(1, 2))  # the same bytes in another shape: another value
    assert len(calls) == 4


def test_lists_are_keyed_by_their_items():
    calls, f = counted()
    f([1, 2])
    f([1, 2])
    assert len(calls) == 1
    f([1, 3])  # the same length, another item
    f((1, 2))  # the same items in a tuple: another type
    assert len(calls) == 3


def test_an_unhashable_argument_without_shape_runs_as_written():
    calls, f = counted()
    values = array.array("d", [1.0, 2.0])  # has tobytes, no shape or dtype, unhashable
    f(values)
    f(values)
    assert len(calls) == 2


def test_a_value_being_differentiated_evicts_nothing():
    calls, f = counted(maxsize=2, result=lambda x, s: x * s)
    x = np.array([1.0, 2.0])
    f(x, 1.0)
    for s in (2.0, 3.0):  # two differentiated calls: run as written, not remembered
        assert grad(lambda s: anp.sum(f(x, s)))(s) == 3.0
    assert len(calls) == 3
    f(x, 1.0)  # still remembered
    assert len(calls) == 3
