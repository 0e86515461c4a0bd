"""A catalogue of the argument checks in minattn/engine/checks.py (and blockwise's key_mask
check), as a user meets them: each bad call and the WHOLE message it must raise, written from
what the reader should be told; and for each condition, a call at its boundary that must NOT
raise (a check that refuses too much is as wrong as one that refuses too little)."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
x2 = rng.normal(size=(3, 4))  # [L, D]
q = rng.normal(size=(2, 3, 4))  # [B, L, d_k]
k_batched = rng.normal(size=(2, 5, 4))  # [B, L_k, d_k]: only k has the batch dim
k_plain = rng.normal(size=(5, 4))
v_batched = rng.normal(size=(2, 5, 4))
v_plain = rng.normal(size=(5, 4))
ONES, ZEROS = np.ones(4), np.zeros(4)
CONSTANT_ROWS = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]])  # row 1: variance 0
ZERO_ROWS = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 0.0, 0.0]])  # row 1: mean square 0
RNG_ADVICE = "rng must be a np.random.Generator (e.g. np.random.default_rng(0)), got "
KEYS_SHAPE = "key_mask of shape {} does not broadcast to the keys' shape (..., L_k) = {}"

CATALOGUE = [
    # softmax's axis: out of range for x, named with x's shape and ndim
    (lambda: ma.softmax(x2, axis=2), ValueError,
     "axis 2 is out of range for x of shape (3, 4) (ndim 2)"),
    (lambda: ma.softmax(x2, axis=-3), ValueError,
     "axis -3 is out of range for x of shape (3, 4) (ndim 2)"),
    # attention sinks: one logit per query row, [..., L_q]
    (lambda: ma.scaled_dot_product_attention(q, q, q, sinks=np.zeros(5)), ValueError,
     "sinks of shape (5,) does not broadcast to the scores without their key axis (..., L_q) of "
     "shape (2, 3) (one logit per query row; per head: [H, 1])"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, sinks=np.zeros((2, 3, 1))), ValueError,
     "sinks of shape (2, 3, 1) does not broadcast to the scores without their key axis "
     "(..., L_q) of shape (2, 3) (one logit per query row; per head: [H, 1])"),
    # eps = 0 where the norm is 0 / 0: LayerNorm's variance, RMSNorm's mean square
    (lambda: ma.layer_norm(CONSTANT_ROWS, ONES, ZEROS, eps=0.0), ValueError,
     "eps=0 leaves the norm undefined (0 / 0) on a row of x (shape (2, 4)) whose variance is 0; "
     "give eps > 0 (torch returns NaN there)"),
    (lambda: ma.rms_norm(ZERO_ROWS, ONES, eps=0.0), ValueError,
     "eps=0 leaves the norm undefined (0 / 0) on a row of x (shape (2, 4)) whose mean square is "
     "0; give eps > 0 (torch returns NaN there)"),
    # dropout's rng: the legacy global module or a RandomState is named as what it is
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1, rng=np.random), TypeError,
     RNG_ADVICE + "numpy.random"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1,
                                             rng=np.random.RandomState(0)), TypeError,
     RNG_ADVICE + "RandomState"),
    # blockwise_attention's key_mask broadcasts to the keys' shape: the batch dims of q, k AND v
    (lambda: ma.blockwise_attention(x2, k_batched, v_plain, key_mask=np.ones((3, 5), bool)),
     ValueError, KEYS_SHAPE.format("(3, 5)", "(2, 5)")),
    (lambda: ma.blockwise_attention(x2, k_plain, v_batched, key_mask=np.ones((3, 5), bool)),
     ValueError, KEYS_SHAPE.format("(3, 5)", "(2, 5)")),
    (lambda: ma.blockwise_attention(x2, k_plain, v_plain, key_mask=np.ones((2, 5), bool)),
     ValueError, KEYS_SHAPE.format("(2, 5)", "(5,)")),
]


@pytest.mark.parametrize("call, error, message", CATALOGUE)
def test_a_bad_call_raises_this_whole_message(call, error, message):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message


ALLOWED = [
    # the last and the first axis are in range
    lambda: ma.softmax(x2, axis=1),
    lambda: ma.softmax(x2, axis=-2),
    # sinks per query row, and per batch row as [B, 1]
    lambda: ma.scaled_dot_product_attention(q, q, q, sinks=np.zeros(3)),
    lambda: ma.scaled_dot_product_attention(q, q, q, sinks=np.zeros((2, 1))),
    # eps = 0 where no row is 0 / 0: RMSNorm of a constant non-zero row (variance 0, mean square
    # 4), LayerNorm of rows that vary
    lambda: ma.rms_norm(CONSTANT_ROWS, ONES, eps=0.0),
    lambda: ma.layer_norm(ZERO_ROWS[:1], ONES, ZEROS, eps=0.0),
    # dropout with a Generator
    lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1, rng=np.random.default_rng(0)),
    # a key_mask with the batch dim that only k (or only v) has
    lambda: ma.blockwise_attention(x2, k_batched, v_plain, key_mask=np.ones((2, 5), bool)),
    lambda: ma.blockwise_attention(x2, k_plain, v_batched, key_mask=np.ones((2, 5), bool)),
]


@pytest.mark.parametrize("call", ALLOWED)
def test_a_call_at_the_boundary_is_not_refused(call):
    call()


def test_a_key_mask_over_a_batch_only_k_has_masks_that_batch_row_s_keys():
    # Not only accepted: batch row b's key_mask masks row b's keys (reference: the formula)
    key_mask = np.array([[True, True, False, True, False], [False, True, True, True, True]])
    for k, v in ((k_batched, v_plain), (k_plain, v_batched)):
        out = ma.blockwise_attention(x2, k, v, key_mask=key_mask, block_size=2)
        scores = np.where(key_mask[:, None, :], x2 @ np.swapaxes(k, -1, -2) / 2.0, -np.inf)
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        expected = e / e.sum(axis=-1, keepdims=True) @ v
        np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [lambda torch: torch.ones(3, 4, dtype=torch.float64),
                                  lambda torch: torch.nn.Parameter(torch.ones(3, 4))])
def test_a_torch_tensor_or_parameter_is_refused_by_name(make):
    # torch.nn.Parameter's class lives in torch.nn.parameter: still a torch tensor, with the same
    # advice (it has a shape and a dtype, so it would otherwise pass for an array).
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError) as caught:
        ma.scaled_dot_product_attention(make(torch), x2, x2)
    assert str(caught.value) == (
        "q is a torch tensor; minattn computes on NumPy (or CuPy) arrays: pass "
        "q.detach().cpu().numpy(), or convert a torch module's weights with "
        "minattn.interop.from_torch")
