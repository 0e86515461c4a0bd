"""The grader's machinery for the properties: the Property record and the @prop registry
(PROPERTIES, in the order the files are imported), the drawing of arrays and params, and the
report of a mismatch (close, show). The properties themselves are in the exercise files beside
this one (ex01_softmax.py, ...); the references they compare with in _references.py."""
import contextlib
import math
import re
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..contract import show


@dataclass(frozen=True)
class Property:
    name: str  # short, for the report and the tests
    statement: str  # the property, in plain language
    uses: frozenset  # the functions it exercises (composites include their parts)
    hint: str  # what usually breaks it (in the function the property is about)
    check: object  # a function of hypothesis-drawn data: asserts the property
    of: str  # the function the property is about (the others in `uses` run inside it)
    part: int  # what teaches it: 1 to 3 walkthrough.md's Parts I to III, 4 the second reading
    exercise: int = 0  # the exercise whose file holds it (ex08_encoder_block.py: 8)


def floats(shape, bound=3.0, dtype=np.float64):
    # multiples of bound / 12 (0.25 for the default bound): exact in every float dtype, and short
    # to read in a counterexample
    # every element drawn (no fill value): arrays of one repeated value hide most bugs
    return hnp.arrays(dtype, shape, elements=st.integers(-12, 12).map(lambda i: i * bound / 12),
                      fill=st.nothing())


def close(got, expected, tol=1e-8, what="the result"):
    # a report a student can read: both arrays whole (they are small), and where they differ
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what} has shape {got.shape}, expected {expected.shape}"
    assert np.all(np.isfinite(got) == np.isfinite(expected)), (
        f"{what} has NaN or inf where it should not\ngot:\n{show(got)}\nexpected:\n{show(expected)}")
    bad = ~np.isclose(got, expected, rtol=tol, atol=tol)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} entries differ (the first at index "
                             f"{where}: {float(got[where]):.6g}, expected {float(expected[where]):.6g})\n"
                             f"got:\n{show(got)}\nexpected:\n{show(expected)}")


def random_params(seed, d_model, d_ff=None, d_kv=None):
    # params of an encoder block with non-trivial biases, gammas and betas; d_kv: the width of
    # the key/value projections (grouped-query attention)
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.normal(0.0, 0.5, size=shape)
    d_kv = d_kv or d_model
    attention = {"w_q": w(d_model, d_model), "b_q": w(d_model), "w_k": w(d_model, d_kv),
                 "b_k": w(d_kv), "w_v": w(d_model, d_kv), "b_v": w(d_kv),
                 "w_o": w(d_model, d_model), "b_o": w(d_model)}
    d_ff = d_ff or 2 * d_model
    norm = lambda: {"gamma": 1.0 + w(d_model), "beta": w(d_model)}
    return {"self_attention": attention, "self_attention_norm": norm(), "feed_forward_norm": norm(),
            "feed_forward": {"w_1": w(d_model, d_ff), "b_1": w(d_ff), "w_2": w(d_ff, d_model),
                             "b_2": w(d_model)}}


def as_dtype(tree, dtype):
    return {k: as_dtype(v, dtype) if isinstance(v, dict) else v.astype(dtype) for k, v in tree.items()}


def check_dropout(got, undropped, rate, what, some=True):
    # inverted dropout: every entry is 0 or its undropped value / (1 - rate), and (some=True: on
    # enough entries that a draw keeping them all is as good as impossible) some are 0
    got = np.asarray(got)
    dropped = got == 0
    kept = np.isclose(got, np.asarray(undropped) / (1 - rate), rtol=1e-7, atol=1e-12)
    assert (dropped | kept).all(), (f"{what} with dropout={rate}: an entry is neither 0 nor its "
                                    f"value without dropout / (1 - {rate}):\ngot:\n{show(got)}\n"
                                    f"without dropout:\n{show(undropped)}")
    assert dropped.any() or not some, \
        f"{what} with dropout={rate}: nothing was dropped:\n{show(got)}"


def hoeffding(n, failure=1e-9):
    # the t with P(|mean of n independent 0/1 draws - their expectation| >= t) <= failure
    # (Hoeffding: 2 exp(-2 n t²)), whatever the draws' probability: a bound, not a fit to a run
    return math.sqrt(math.log(2 / failure) / (2 * n))


def check_draws(kept, rate, axes, what):
    """kept: bool, True where dropout with rate p kept an entry; axes: {axis: its name}.
    The kept fraction is 1 - p, and along each axis the slices 0 and 1, 2 and 3, ... are both
    kept with frequency (1 - p)² (independent draws), each within Hoeffding's bound for a
    failure probability of 1e-9: a correct dropout never fails it, at any seed. One mask reused
    along an axis gives (1 - p) there, p (1 - p) >= 0.18 too many for the rates drawn."""
    kept = np.asarray(kept)
    bound = hoeffding(kept.size)
    share = float(kept.mean())
    assert abs(share - (1 - rate)) < bound, (
        f"{what} with dropout={rate}: {share:.3f} of the {kept.size} entries are kept, expected "
        f"1 - {rate} = {1 - rate:g} (within ±{bound:.3f}, Hoeffding's bound for 1e-9): dropout "
        f"zeroes each entry with probability {rate}")
    for axis, name in axes.items():
        n = kept.shape[axis] // 2 * 2
        first, second = (np.take(kept, np.arange(start, n, 2), axis=axis) for start in (0, 1))
        both = float((first & second).mean())
        bound = hoeffding(first.size)
        assert abs(both - (1 - rate) ** 2) < bound, (
            f"{what} with dropout={rate}: the same entry of two different {name} is kept in "
            f"both {both:.3f} of the time, expected (1 - {rate})² = {(1 - rate) ** 2:.3f} (within "
            f"±{bound:.3f}, Hoeffding's bound for 1e-9) if each is drawn on its own: the "
            f"{name} share one dropout mask")


def check_seeds(run, what):
    # the rng argument is the only source of randomness: the same seed gives the same result,
    # another seed another
    first, again, other = run(np.random.default_rng(1)), run(np.random.default_rng(1)), \
        run(np.random.default_rng(2))
    assert np.array_equal(first, again), f"{what}: two rngs with the same seed gave different results (use the rng you are given)"
    assert not np.array_equal(first, other), f"{what}: rngs with seeds 1 and 2 gave the same result (use the rng you are given)"


def softmax_vjp(y, g, axis=-1):
    """The softmax's backward pass: y = softmax(x) and g = dLoss/dy -> dLoss/dx (same shape)."""
    return y * (g - np.sum(g * y, axis=axis, keepdims=True))


def attention_vjp(q, k, v, g, mask=None):
    """Attention's backward pass: g = dLoss/dO of scaled_dot_product_attention's output ->
    (dLoss/dq, dLoss/dk, dLoss/dv), as autograd finds it by tracing minattn's attention."""
    import autograd
    import autograd.numpy as anp

    import minattn
    loss = lambda qkv: anp.sum(minattn.scaled_dot_product_attention(*qkv, mask)[0] * g)
    return tuple(autograd.grad(loss)((q, k, v)))


COURSE = {"softmax_vjp": softmax_vjp, "attention_vjp": attention_vjp}
_CURRENT = dict(COURSE)


@contextlib.contextmanager
def student(**functions):
    """Use the student's versions of the course's own functions while grading."""
    saved = dict(_CURRENT)
    _CURRENT.update(functions)
    try:
        yield
    finally:
        _CURRENT.update(saved)


ATTENTION = {"scaled_dot_product_attention", "softmax"}
MULTI_HEAD = {"multi_head_attention", "split_heads", "merge_heads"} | ATTENTION
BLOCK = {"encoder_block", "layer_norm", "feed_forward"} | MULTI_HEAD
PROPERTIES = []


def prop(name, of, statement, uses, hint, part=1):
    def register(check):
        exercise = int(re.search(r"\bex(\d+)_\w+$", check.__module__)[1])
        PROPERTIES.append(Property(name, statement, frozenset(uses) | {of}, hint, check, of, part,
                                   exercise))
        return check
    return register


sizes = st.integers(1, 5)
seeds = st.integers(0, 99)
