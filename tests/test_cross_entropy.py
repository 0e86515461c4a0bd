"""cross_entropy(logits, targets): the mean of -log softmax(logits)[target] over the positions,
against scipy's logsumexp (a reference computed apart) on logits of any scale, any number of
leading axes (none included) and one class; and every refusal's whole message."""
import numpy as np
import pytest
from scipy.special import logsumexp

import minattn as ma


def _reference(logits, targets):
    # -log p[target] = logsumexp(row) - row[target], position by position, in a loop.
    rows, picked = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    return np.mean([logsumexp(row) - row[t] for row, t in zip(rows, picked)])


@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 7), (2, 3, 1), (1,)])
@pytest.mark.parametrize("scale", [1.0, 300.0, 1e5])  # exp(300) and beyond overflow unshifted
def test_equals_logsumexp_minus_the_target_logit(shape, scale):
    rng = np.random.default_rng(len(shape) + int(scale))
    logits = rng.normal(size=shape) * scale
    targets = rng.integers(0, shape[-1], size=shape[:-1])
    loss = ma.cross_entropy(logits, targets)
    assert np.ndim(loss) == 0 and np.isfinite(loss)
    np.testing.assert_allclose(loss, _reference(logits, targets), rtol=1e-12, atol=1e-12)


def test_rows_far_apart_in_scale_are_each_shifted_by_their_own_max():
    # Row 0 near 1000, row 1 near 0: a shift by a max shared between rows would send row 1's
    # exponentials to 0 and its log-sum to -inf.
    logits = np.array([[1000.0, 1001.0, 999.0], [0.0, 1.0, -1.0]])
    targets = np.array([1, 2])
    np.testing.assert_allclose(ma.cross_entropy(logits, targets), _reference(logits, targets),
                               rtol=1e-12)
    np.testing.assert_allclose(ma.cross_entropy(logits[:, None], targets[:, None]),
                               _reference(logits, targets), rtol=1e-12)


def test_one_class_costs_nothing():
    assert ma.cross_entropy(np.array([[3.0], [-2.0]]), np.array([0, 0])) == 0.0


LOGITS = np.zeros((2, 3, 5))
TARGETS = np.array([[0, 1, 2], [3, 4, 0]])
CASES = [  # (logits, targets, error, the whole message)
    (LOGITS.astype(int), TARGETS, TypeError, "logits must be a floating-point array, got dtype "
     "int64 (convert it with logits.astype(np.float32) or np.float64)"),
    ("text", TARGETS, TypeError, "logits must be an array, got str"),
    (LOGITS, "text", TypeError, "targets must be an array, got str"),
    (LOGITS, TARGETS.astype(float), TypeError,
     "targets must be an integer array (token ids), got dtype float64"),
    (LOGITS, TARGETS[:, :2], ValueError, "targets must have the shape of logits without its last "
     "axis: logits (2, 3, 5), targets (2, 2)"),
    (np.float64(1.0), np.int64(0), ValueError, "targets must have the shape of logits without its "
     "last axis: logits (), targets ()"),
    (np.zeros((2, 3, 0)), TARGETS, ValueError, "cross_entropy needs at least one target and one "
     "class: logits (2, 3, 0), targets (2, 3)"),
    (np.zeros((0, 5)), np.zeros(0, int), ValueError, "cross_entropy needs at least one target and "
     "one class: logits (0, 5), targets (0,)"),
    (LOGITS, TARGETS + 3, ValueError, "targets must lie in [0, 5) (the last axis of logits "
     "(2, 3, 5)), got values from 3 to 7"),
    (np.zeros((2, 5, 3)), -np.ones((2, 5), int), ValueError, "targets must lie in [0, 3) (the last "
     "axis of logits (2, 5, 3)), got values from -1 to -1"),
]


@pytest.mark.parametrize("logits, targets, error, message", CASES)
def test_bad_arguments_are_refused_with_this_message(logits, targets, error, message):
    with pytest.raises(error) as info:
        ma.cross_entropy(logits, targets)
    assert str(info.value) == message
