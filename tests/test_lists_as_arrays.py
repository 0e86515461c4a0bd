"""The array rule (minattn.engine.checks.as_array) holds everywhere: every public function, with
every array it takes (inputs, masks, and each array in its params) given as nested Python lists,
returns what it returns for the arrays. The cases are tests/device_cases.py's, one per public
function but the init_* ones (they return their params: nothing is given to them). Float and
bool arrays become lists; 0-d arrays stay arrays (a bare Python number is not an array: it is
refused by name), and so do int arrays (tokens and positions, which the cases slice)."""
import numpy as np
import pytest

from .device_cases import CASES, leaves, tree_map


def as_lists(tree):
    return tree_map(lambda a: a.tolist() if isinstance(a, np.ndarray) and a.ndim
                    and a.dtype.kind in "fb" else a, tree)


@pytest.mark.parametrize("covers, run", [case for case in CASES
                                          if not case.values[0].startswith("init_")])
def test_public_function_takes_nested_lists_as_arrays(covers, run):
    expected = leaves(run(lambda tree: tree, np.float64))
    got = leaves(run(as_lists, np.float64))
    assert len(got) == len(expected)
    for from_lists, from_arrays in zip(got, expected):
        from_lists = np.asarray(from_lists)
        assert from_lists.dtype == np.asarray(from_arrays).dtype, covers
        np.testing.assert_array_equal(from_lists, from_arrays)
