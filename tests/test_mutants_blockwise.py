"""Properties of blockwise attention's argument checks that the mutation test showed no test
stated (tests/MUTANTS.md): the key_mask's accepted forms and shapes, block_size, and the exact
messages."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
Q = rng.normal(size=(2, 5, 4))
V = rng.normal(size=(2, 5, 3))


def _reference(key_mask):
    mask = None if key_mask is None else np.asarray(key_mask)[..., None, :]
    return ma.scaled_dot_product_attention(Q, Q, V, mask)[0]


@pytest.mark.parametrize("key_mask", [
    [True, False, True, True, False],  # a list, one mask for the whole batch
    np.array([[True, True, False, True, True], [False, True, True, True, True]]),  # per batch
    np.array([[True] * 5]),  # a batch axis of 1 broadcasts
])
def test_key_mask_forms_equal_the_full_mask(key_mask):
    out = ma.blockwise_attention(Q, Q, V, key_mask=key_mask, block_size=2)
    np.testing.assert_allclose(out, _reference(key_mask), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("key_mask", [np.ones(4, bool), np.ones((3, 5), bool),
                                      np.ones((2, 2, 5), bool), np.array(True)])
def test_a_key_mask_that_does_not_fit_the_keys_is_refused_naming_its_shape(key_mask):
    with pytest.raises(ValueError) as error:
        ma.blockwise_attention(Q, Q, V, key_mask=key_mask)
    assert str(error.value) == (
        f"key_mask of shape {key_mask.shape} does not broadcast to the keys' shape (..., L_k) = "
        "(2, 5)")


@pytest.mark.parametrize("key_mask, got", [
    ([1, 0, 1, 1, 0], "int64"), ("abc", "str"), (np.ones(5), "float64")])
def test_a_key_mask_that_is_not_boolean_is_a_type_error(key_mask, got):
    with pytest.raises(TypeError) as error:
        ma.blockwise_attention(Q, Q, V, key_mask=key_mask)
    assert str(error.value) == (
        f"key_mask must be a boolean array (True = may be attended), got {got}")


@pytest.mark.parametrize("block_size", [0, -2, 2.0, True, "4", None])
def test_block_size_must_be_a_positive_int(block_size):
    with pytest.raises(TypeError) as error:
        ma.blockwise_attention(Q, Q, V, block_size=block_size)
    assert str(error.value) == f"block_size must be a positive int, got {block_size!r}"


@pytest.mark.parametrize("block_size", [1, np.int64(3), 5, 7])
def test_any_positive_int_block_size_gives_the_same_output(block_size):
    out = ma.blockwise_attention(Q, Q, V, causal=True, block_size=block_size)
    np.testing.assert_allclose(out, ma.scaled_dot_product_attention(
        Q, Q, V, ma.causal_mask(5))[0], rtol=1e-12, atol=1e-14)


def test_a_torch_key_mask_is_refused_naming_key_mask():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"^key_mask is a torch tensor; minattn computes on NumPy"):
        ma.blockwise_attention(Q, Q, V, key_mask=torch.ones(5, dtype=torch.bool))


def test_a_ragged_key_mask_list_is_refused_naming_key_mask():
    with pytest.raises(ValueError, match=r"^key_mask is a list that does not form an array: "):
        ma.blockwise_attention(Q, Q, V, key_mask=[[True, False], [True]])
