"""Properties of the mask helpers that the mutation test showed no test stated
(tests/MUTANTS.md): padding_mask names `lengths` in every refusal of its argument."""
import numpy as np
import pytest

import minattn as ma


def test_padding_mask_names_lengths_when_it_is_a_ragged_list():
    with pytest.raises(ValueError, match=r"^lengths is a list that does not form an array: "):
        ma.padding_mask([[1, 2], [3]], 4)


def test_padding_mask_names_lengths_when_it_is_a_torch_tensor():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"^lengths is a torch tensor; minattn computes on NumPy"):
        ma.padding_mask(torch.tensor([1, 2]), 4)


def test_padding_mask_takes_a_list_of_lengths():
    np.testing.assert_array_equal(ma.padding_mask([1, 3], 3)[:, 0, 0],
                                  [[True, False, False], [True, True, True]])
