import numpy as np
import pytest
from autograd import grad
from autograd.test_util import check_grads

from minattn.models import count_task as train


def test_count_targets_match_a_loop():
    tokens, targets = train.make_count_task(np.random.default_rng(0), 20, 7, 3)
    for seq, tgt in zip(tokens.tolist(), targets.tolist()):
        assert tgt == [seq.count(t) - 1 for t in seq]


def test_cross_entropy_matches_formula():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 3, 4))
    targets = rng.integers(0, 4, size=(2, 3))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    expected = -np.mean(np.log(np.take_along_axis(p, targets[..., None], -1)))
    assert train.cross_entropy(logits, targets) == pytest.approx(expected, rel=1e-12)


def test_model_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    params = train.init_count_model(rng, 3, 4, d_model=4, n_heads=2, d_ff=6)
    tokens, targets = train.make_count_task(rng, 2, 4, 3)
    check_grads(lambda p: train.cross_entropy(train.count_model(p, tokens, n_heads=2), targets),
                modes=["rev"], order=1)(params)


def test_training_is_deterministic_for_a_seed():
    a = train.train_count_model(seed=3, steps=3)
    b = train.train_count_model(seed=3, steps=3)
    np.testing.assert_array_equal(a["embedding"], b["embedding"])
    c = train.train_count_model(seed=4, steps=3)
    assert not np.array_equal(a["embedding"], c["embedding"])


def test_default_model_learns_to_count_on_held_out_sequences():
    # The tour's promise: >= 95% per-token accuracy on sequences never seen in training.
    losses = []
    params = train.train_count_model(seed=0, callback=lambda step, loss: losses.append(loss))
    tokens, targets = train.make_count_task(np.random.default_rng(12345), 500, train.LENGTH,
                                            train.VOCAB_SIZE)
    assert train.accuracy(params, tokens, targets) >= 0.95
    assert np.mean(losses[-50:]) < 0.2 * np.mean(losses[:50])
