"""apply_rope's refusals, whole: each names the argument, the layout it needs and what it got
(as tests/test_error_messages.py does for attention)."""
import numpy as np
import pytest

import minattn as ma

X, P = np.ones((3, 4)), np.arange(3)
DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 4}

CASES = [
    (lambda: ma.apply_rope(X.astype(int), P), TypeError,
     "x must be a floating-point array, got dtype int64 (convert it with x.astype(np.float32) "
     "or np.float64)"),
    (lambda: ma.apply_rope(np.ones(4), np.arange(1)), ValueError,
     "x must have shape (..., L, d), got shape (4,)"),
    (lambda: ma.apply_rope(np.ones((3, 3)), P), ValueError,
     "apply_rope needs an even feature size d (features rotate in pairs), got x of shape (3, 3)"),
    (lambda: ma.apply_rope(X, np.arange(3.0)), TypeError,
     "positions must be an integer array, got dtype float64"),
    (lambda: ma.apply_rope(X, [0.0, 1.0, 2.0]), TypeError,
     "positions must be an integer array, got dtype float64"),
    (lambda: ma.apply_rope(X, "abc"), TypeError, "positions must be an array, got str"),
    (lambda: ma.apply_rope(X, np.arange(5)), ValueError,
     "positions of shape (5,) must broadcast to x's (..., L) = (3,)"),
    (lambda: ma.apply_rope(np.ones((2, 3, 4)), np.ones((3, 3), int)), ValueError,
     "positions of shape (3, 3) must broadcast to x's (..., L) = (2, 3)"),
    (lambda: ma.apply_rope(X, P, scaling={"rope_type": "nope"}), ValueError,
     "scaling must be None or a dict with 'rope_type' one of 'linear', 'dynamic', 'yarn', "
     "'llama3', 'longrope', got 'nope'"),
    (lambda: ma.apply_rope(X, P, scaling={"rope_type": "linear"}), ValueError,
     "scaling of rope_type 'linear' takes ['factor']; unknown: [], missing: ['factor']"),
    (lambda: ma.apply_rope(np.ones((3, 2)), P + 10, scaling=DYNAMIC), ValueError,
     "dynamic RoPE scaling beyond max_position_embeddings raises the base to the power "
     "d / (d - 2): it needs a feature size d > 2, got x of shape (3, 2) and positions up to 12"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_apply_rope_refuses_with_the_whole_message(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value) == message


def test_positions_as_a_list_of_ints_and_batched_positions_are_accepted():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    batched = np.array([[0, 1, 2], [5, 6, 7]])
    np.testing.assert_array_equal(ma.apply_rope(x[0], [0, 1, 2]), ma.apply_rope(x[0], P))
    rows = [ma.apply_rope(x[i], batched[i]) for i in range(2)]
    np.testing.assert_array_equal(ma.apply_rope(x, batched), np.stack(rows))
