"""Properties of blockwise attention's argument checks that the mutation test showed no test
stated (tests/MUTANTS.md): the key_mask's accepted forms and shapes, block_size, and the exact
messages."""
import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad, make_vjp

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


@pytest.mark.parametrize("block_size, error_type", [(0, ValueError), (-2, ValueError),
                                                     (2.0, TypeError), (True, TypeError),
                                                     ("4", TypeError), (None, TypeError)])
def test_block_size_must_be_a_positive_int(block_size, error_type):
    # a value out of range: ValueError; not an int at all: TypeError
    with pytest.raises(error_type) as error:
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


# --- the backward pass, on the shapes and rows the forward tests do not reach ---

def _gradients(f, q, k, v, scale):
    """d/dq, d/dk, d/dv and d/dscale of sum(f(q, k, v, scale) * r), r fixed."""
    r = np.random.default_rng(5).normal(size=np.shape(f(q, k, v, scale)))
    loss = lambda *a: anp.sum(f(*a) * r)
    return [grad(loss, i)(q, k, v, scale) for i in range(4)]


def _sdpa(causal, key_mask):
    def f(q, k, v, scale):
        mask = None
        if causal:
            mask = ma.causal_mask(q.shape[-2], k.shape[-2])
        if key_mask is not None:
            keep = np.asarray(key_mask)[..., None, :]
            mask = keep if mask is None else mask & keep
        return ma.scaled_dot_product_attention(q, k, v, mask, scale=scale)[0]
    return f


@pytest.mark.parametrize("shapes", [
    ((6, 1), (6, 1), (6, 2)),                    # no batch axis, d_k = 1 < block_size
    ((2, 6, 2), (6, 2), (6, 3)),                 # only q has a batch: k, v shared
    ((6, 2), (2, 6, 2), (6, 3)),                 # only k has one
    ((6, 2), (6, 2), (2, 6, 3)),                 # only v has one
    ((2, 1, 6, 2), (1, 3, 6, 2), (2, 3, 6, 2)),  # one head axis of 1 in q, batch 1 in k
    ((3, 1, 7, 5), (3, 1, 7, 5), (3, 1, 7, 5)),  # one head, d_k larger than block_size
])
@pytest.mark.parametrize("causal", [False, True])
def test_gradients_equal_attentions_for_every_broadcast_shape(shapes, causal):
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=s) for s in shapes)
    blockwise = lambda q, k, v, scale: ma.blockwise_attention(
        q, k, v, causal=causal, scale=scale, block_size=3)
    got, expected = _gradients(blockwise, q, k, v, 0.7), _gradients(_sdpa(causal, None), q, k, v, 0.7)
    for name, a, b in zip("qkvs", got, expected):
        assert np.shape(a) == np.shape(b), name
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


def test_a_query_with_no_key_gets_zero_gradients_not_nan():
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 5, 2))
    key_mask = np.array([[False] * 5, [True, False, True, True, False]])  # row 0 sees nothing
    blockwise = lambda q, k, v, scale: ma.blockwise_attention(
        q, k, v, key_mask=key_mask, scale=scale, block_size=2)
    got = _gradients(blockwise, q, k, v, 0.5)
    for name, a, b in zip("qkvs", got, _gradients(_sdpa(False, key_mask), q, k, v, 0.5)):
        assert np.all(np.isfinite(a)), name
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)
    assert np.all(got[0][0] == 0) and np.all(got[1][0] == 0) and np.all(got[2][0] == 0)


def test_differentiating_the_gradient_by_the_incoming_gradient_says_first_order_only():
    """The backward is linear in the incoming gradient g; differentiating it by g alone (no
    input boxed, only g) must also name the limitation, not fail inside NumPy."""
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    backward, _ = make_vjp(lambda q: ma.blockwise_attention(q, k, v, block_size=2))(q)
    with pytest.raises(NotImplementedError, match="blockwise_attention's gradient is first-order only"):
        grad(lambda g: anp.sum(backward(g) ** 2))(np.ones((4, 2)))
