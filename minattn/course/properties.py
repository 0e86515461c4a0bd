"""What attention must satisfy, stated once: the properties `python -m minattn check` grades a
student's functions by (tests/test_grader.py holds minattn itself to them too). Each belongs to
the part of walkthrough.md that teaches it, and names the function it is about (`of`).

Each property calls the PUBLIC minattn function through the package (`minattn.softmax`, ...),
so that under `minattn.swap` it exercises a student's version, and every composite that calls
it. Each compares with an independent reference written here: slow loops in plain NumPy, in
float64, that share no code with minattn. Optional: needs hypothesis; the core never imports it.
"""
import contextlib
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from . import contract


@dataclass(frozen=True)
class Property:
    name: str  # short, for the report and the tests
    statement: str  # the property, in plain language
    uses: frozenset  # the functions it exercises (composites include their parts)
    hint: str  # what usually breaks it (in the function the property is about)
    check: object  # a function of hypothesis-drawn data: asserts the property
    of: str  # the function the property is about (the others in `uses` run inside it)
    part: int  # what teaches it: 1 to 3 walkthrough.md's Parts I to III, 4 the second reading


def floats(shape, bound=3.0, dtype=np.float64):
    # multiples of bound / 12 (0.25 for the default bound): exact in every float dtype, and short
    # to read in a counterexample
    # every element drawn (no fill value): arrays of one repeated value hide most bugs
    return hnp.arrays(dtype, shape, elements=st.integers(-12, 12).map(lambda i: i * bound / 12),
                      fill=st.nothing())


def show(a):
    return np.array2string(np.asarray(a), precision=5, separator=", ", threshold=120,
                           max_line_width=96)


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


# --- references: slow, obvious, float64, independent of minattn -----------------------------

def ref_softmax(row, keep=None):
    # one row -> weights; masked entries 0; nothing kept -> zeros
    row = np.asarray(row, np.float64)
    keep = np.ones(row.shape, bool) if keep is None else keep
    if not keep.any():
        return np.zeros_like(row)
    top = max(r for r, k in zip(row, keep) if k)
    e = np.array([math.exp(r - top) if k else 0.0 for r, k in zip(row, keep)])
    return e / e.sum()


def ref_attention(q, k, v, keep=None, scale=None):
    # q [L_q, d], k [L_k, d], v [L_k, d_v], keep bool [L_q, L_k] -> out [L_q, d_v], w [L_q, L_k]
    d_k = q.shape[-1]
    scale = 1 / math.sqrt(d_k) if scale is None else scale
    weights = np.zeros((q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):
        scores = [sum(q[i, c] * k[j, c] for c in range(d_k)) * scale for j in range(k.shape[0])]
        weights[i] = ref_softmax(scores, None if keep is None else keep[i])
    return weights @ v, weights


def ref_layer_norm(x, gamma, beta, eps):
    out = np.empty_like(x, dtype=np.float64)
    for index in np.ndindex(x.shape[:-1]):
        row = x[index].astype(np.float64)
        mean = sum(row) / len(row)
        variance = sum((r - mean) ** 2 for r in row) / len(row)
        out[index] = (row - mean) / math.sqrt(variance + eps) * gamma + beta
    return out


def ref_multi_head(p, query, key, value, n_heads, keep=None):
    # one sequence: query [L_q, D], key/value [L_k, D] -> [L_q, D], weights [H, L_q, L_k]
    d_k = query.shape[-1] // n_heads
    q, k, v = (x @ p[f"w_{c}"] + p[f"b_{c}"] for x, c in ((query, "q"), (key, "k"), (value, "v")))
    heads, weights = [], []
    for h in range(n_heads):
        part = slice(h * d_k, (h + 1) * d_k)
        out, w = ref_attention(q[:, part], k[:, part], v[:, part], keep)
        heads.append(out)
        weights.append(w)
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], np.array(weights)


def ref_feed_forward(p, x, activation="relu"):
    act = {"relu": lambda h: np.maximum(h, 0.0),
           "gelu": lambda h: 0.5 * h * (1 + np.vectorize(math.erf, otypes=[float])(h / math.sqrt(2))),
           "gelu_tanh": lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))}
    return act[activation](x @ p["w_1"] + p["b_1"]) @ p["w_2"] + p["b_2"]


def ref_encoder_block(p, x, n_heads, keep=None, norm_first=False, eps=1e-5, activation="relu"):
    # one sequence x [L, D] -> (out [L, D], the attention weights [H, L, L])
    ln = lambda h, n: ref_layer_norm(h, p[n]["gamma"], p[n]["beta"], eps)
    attend = lambda h: ref_multi_head(p["self_attention"], h, h, h, n_heads, keep)
    feed = lambda h: ref_feed_forward(p["feed_forward"], h, activation)
    if norm_first:
        out, weights = attend(ln(x, "self_attention_norm"))
        x = x + out
        return x + feed(ln(x, "feed_forward_norm")), weights
    out, weights = attend(x)
    x = ln(x + out, "self_attention_norm")
    return ln(x + feed(x), "feed_forward_norm"), weights


def ref_rope(x, positions, base=10000.0):
    # slow rotate-half RoPE: feature i pairs with i + d/2, rotated by positions * base^(-2i/d)
    out = np.array(x, dtype=np.float64)
    d = x.shape[-1]
    positions = np.broadcast_to(positions, x.shape[:-1])
    for index in np.ndindex(x.shape[:-1]):
        m = positions[index]
        for i in range(d // 2):
            angle = m * base ** (-2.0 * i / d)
            a, b = x[index][i], x[index][i + d // 2]
            out[index][i] = a * math.cos(angle) - b * math.sin(angle)
            out[index][i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def ref_self_attention(p, x, n_heads, n_kv_heads, keep=None, positions=None, base=10000.0):
    # one sequence x [L, D]: grouped-query attention, RoPE on q and k when positions are given
    d_k = x.shape[-1] // n_heads
    q, k, v = x @ p["w_q"] + p["b_q"], x @ p["w_k"] + p["b_k"], x @ p["w_v"] + p["b_v"]
    heads = []
    for h in range(n_heads):
        g = h // (n_heads // n_kv_heads)
        qh, kh = q[:, h * d_k:(h + 1) * d_k], k[:, g * d_k:(g + 1) * d_k]
        if positions is not None:
            qh, kh = ref_rope(qh, positions, base), ref_rope(kh, positions, base)
        heads.append(ref_attention(qh, kh, v[:, g * d_k:(g + 1) * d_k], keep)[0])
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"]


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


# --- the course's own functions: exercises with no public minattn counterpart ---------------

def softmax_vjp(y, g, axis=-1):
    """The softmax's backward pass: y = softmax(x) and g = dLoss/dy -> dLoss/dx (same shape)."""
    return y * (g - np.sum(g * y, axis=axis, keepdims=True))


COURSE = {"softmax_vjp": softmax_vjp}
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


# --- the properties --------------------------------------------------------------------------

ATTENTION = {"scaled_dot_product_attention", "softmax"}
MULTI_HEAD = {"multi_head_attention", "split_heads", "merge_heads"} | ATTENTION
BLOCK = {"encoder_block", "layer_norm", "feed_forward"} | MULTI_HEAD
PROPERTIES = []


def prop(name, of, statement, uses, hint, part=1):
    def register(check):
        PROPERTIES.append(Property(name, statement, frozenset(uses) | {of}, hint, check, of, part))
        return check
    return register


sizes = st.integers(1, 5)
seeds = st.integers(0, 99)


@prop("softmax_rows_sum_to_one", "softmax", "softmax(x) is non-negative and each row (the last "
      "axis) sums to one", {"softmax"},
      "normalise over the last axis: divide exp(x) by its sum over axis=-1, keepdims=True")
def _(data):
    x = data.draw(floats((data.draw(sizes, "rows"), data.draw(sizes, "n"))), "x")
    w = np.asarray(minattn.softmax(x))
    assert w.shape == x.shape, f"shape {w.shape}, expected {x.shape}"
    assert (w >= 0).all(), f"negative weights:\n{show(w)}"
    close(w.sum(axis=-1), np.ones(x.shape[0]), 1e-9, "the row sums")


@prop("softmax_matches_the_formula", "softmax", "softmax(x) equals exp(x_i) / sum_j exp(x_j), row "
      "by row, also for huge logits (|x| up to 1e4) and for rows all of one sign far from zero "
      "(x + 1000, x - 1000, in every example)", {"softmax"},
      "subtract each row's own max before exp() (not max(row max, 0), not a constant): softmax "
      "is unchanged by it, exp() cannot overflow, and the largest entry of every row is exp(0)")
def _(data):
    bound = data.draw(st.sampled_from([3.0, 1e4]), "bound")
    x = data.draw(floats((data.draw(sizes, "rows"), data.draw(sizes, "n")), bound), "x")
    # the drawn rows, then the same rows moved far from zero, above it and below it: a shift by
    # anything but the row's own max underflows (or overflows) one of them
    for shifted, what in ((x, "softmax(x)"), (x + 1000, "softmax(x + 1000)"),
                          (x - 1000, "softmax(x - 1000)")):
        close(minattn.softmax(shifted), np.array([ref_softmax(r) for r in shifted]), 1e-9, what)


@prop("softmax_along_any_axis", "softmax", "softmax(x, axis=a) normalises along axis a, "
      "every axis of a 3-D x (0, 1, 2, -1, -2, -3) in every example", {"softmax"},
      "use the axis argument in the max and the sum, not a fixed -1; `axis or -1` turns axis=0 "
      "into -1: test `if axis is None`, or use axis as given; an axis moved to the end goes back "
      "with np.moveaxis(r, -1, axis)")
def _(data):
    x = data.draw(floats((data.draw(sizes, "n0"), data.draw(sizes, "n1"), data.draw(sizes, "n2"))), "x")
    for axis in (0, 1, 2, -1, -2, -3):  # 0, the boundary, and every other, in every example
        expected = np.apply_along_axis(ref_softmax, axis, x)
        close(minattn.softmax(x, axis=axis), expected, 1e-9, f"softmax(x, axis={axis})")


def ref_softmax_along(x, keep, axis):
    # softmax of x along `axis` with the bool mask keep (broadcasting to x), slice by slice
    rows = np.moveaxis(x, axis, -1)
    kept = np.moveaxis(np.broadcast_to(keep, x.shape), axis, -1)
    expected = np.array([ref_softmax(r, k) for r, k in zip(rows.reshape(-1, rows.shape[-1]),
                                                          kept.reshape(-1, rows.shape[-1]))])
    return np.moveaxis(expected.reshape(rows.shape), -1, axis)


@prop("softmax_masked_entries_are_zero", "softmax", "with a boolean mask (True = keep) of x's "
      "shape or one that broadcasts to it ([n], [rows, 1], [1, n], ...), along the last axis or "
      "axis=0, masked entries get weight exactly 0, the kept ones are the softmax of the kept "
      "scores, a row with nothing kept is all zeros (not NaN), and x itself is left as it was",
      {"softmax"},
      "a masked entry must act as -inf before the exponential and a row with nothing kept must "
      "come out as zeros, for any mask that broadcasts to x, without writing into x")
def _(data):
    lead = data.draw(st.sampled_from([(), (2,)]), "leading axes of x")
    shape = lead + (data.draw(sizes, "rows"), data.draw(sizes, "n"))
    x = data.draw(floats(shape), "x")
    # the mask's shape: x's, or x's with some axes of length 1, or fewer leading axes
    ones = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)),
                     "mask axes of length 1")
    drop = data.draw(st.integers(0, len(shape) - 1), "leading axes the mask leaves out")
    keep = data.draw(hnp.arrays(bool, tuple(1 if o else n for o, n in zip(ones, shape))[drop:]),
                     "mask")
    axis = data.draw(st.sampled_from([-1, 0]), "axis")
    given = x.copy()
    got = minattn.softmax(x, mask=keep) if axis == -1 else minattn.softmax(x, axis=0, mask=keep)
    close(x, given, 0, "x after the call (softmax must not change its input)")
    close(got, ref_softmax_along(x, keep, axis), 1e-9, f"softmax(x{'' if axis == -1 else ', axis=0'}"
                                                       f", mask=mask) with a mask of shape {keep.shape}")


@prop("softmax_ignores_masked_values_however_large", "softmax", "what a masked entry holds "
      "never matters: masked entries far larger (or smaller) than the kept ones, up to ±1e4, leave "
      "the kept entries' weights what they are without them", {"softmax"},
      "mask BEFORE the max and the exponential: np.where(mask, x, -np.inf), then the max of what is "
      "left; a max taken over masked entries, or a mask applied after exp(), underflows every kept "
      "entry to 0 when a masked one is much larger")
def _(data):
    shape = (data.draw(sizes, "rows"), data.draw(st.integers(2, 5), "n"))
    x = data.draw(floats(shape), "x (kept entries)")
    keep = data.draw(hnp.arrays(bool, shape), "mask")
    loud = data.draw(st.sampled_from([1e4, -1e4, 1e3]), "masked entries set to")
    x = np.where(keep, x, loud)
    data.show("x", x)
    expected = np.array([ref_softmax(r, k) for r, k in zip(x, keep)])
    close(minattn.softmax(x, mask=keep), expected, 1e-9,
          f"softmax(x, mask=mask) with the masked entries at {loud:g}")


@prop("softmax_takes_minus_inf_without_a_mask", "softmax", "with no boolean mask (mask=None, an "
      "additive mask already added to x), entries of -inf get weight exactly 0 and a row of "
      "nothing but -inf is all zeros, not NaN, along the last axis or axis=0; and the same with "
      "a boolean mask given too", {"softmax"},
      "the guard for a row with nothing left (shift by 0 where the max is -inf, divide by 1 "
      "where the sum is 0) belongs on every path, not only the one with a mask", part=4)
def _(data):
    shape = (data.draw(st.integers(2, 4), "rows"), data.draw(st.integers(1, 4), "n"))
    x = data.draw(floats(shape), "x (finite entries)")
    dropped = data.draw(hnp.arrays(bool, shape), "entries set to -inf")
    axis = data.draw(st.sampled_from([-1, 0]), "axis")
    dropped[(0, slice(None)) if axis == -1 else (slice(None), 0)] = True  # a slice of only -inf
    x = np.where(dropped, -np.inf, x)
    data.show("x", x)
    call = {} if axis == -1 else {"axis": 0}
    close(minattn.softmax(x, **call), ref_softmax_along(x, ~dropped, axis), 1e-9,
          f"softmax(x{', axis=0' if call else ''}) with -inf entries and no mask")
    keep = np.ones(shape, bool)
    close(minattn.softmax(x, mask=keep, **call), ref_softmax_along(x, ~dropped, axis), 1e-9,
          f"softmax(x{', axis=0' if call else ''}, mask=mask) with -inf entries, every one kept")


@prop("softmax_keeps_float32", "softmax", "softmax of a float32 array is float32, masked or not",
      {"softmax"}, "a NumPy float64 scalar (np.float64, np.sqrt of a Python int) upcasts float32 "
      "arrays")
def _(data):
    x = data.draw(floats((2, data.draw(sizes, "n")), dtype=np.float32), "x")
    mask = data.draw(st.one_of(st.none(), hnp.arrays(bool, x.shape)), "mask")
    got = np.asarray(minattn.softmax(x, mask=mask))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"


@st.composite
def qkv(draw, batch=True, dtype=np.float64):
    b = (draw(st.integers(1, 2)),) if batch else ()
    l_q, l_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    return (draw(floats(b + (l_q, d_k), dtype=dtype)), draw(floats(b + (l_k, d_k), dtype=dtype)),
            draw(floats(b + (l_k, d_v), dtype=dtype)))


@prop("attention_matches_the_formula", "scaled_dot_product_attention", "scaled_dot_product_"
      "attention(q, k, v) returns softmax(q kᵀ / √d_k) v and those weights, for any L_q, L_k, d_k, "
      "d_v, L_q = 0 included (a slow loop computes the reference)", ATTENTION,
      "scores = q @ swapaxes(k, -1, -2) / sqrt(d_k); softmax over the keys (the last axis); then @ v")
def _(data):
    q, k, v = data.draw(qkv(), "q, k, v")
    none, no_weights = minattn.scaled_dot_product_attention(q[:, :0], k, v)  # no query at all
    assert np.shape(none) == (q.shape[0], 0, v.shape[-1]) and \
        np.shape(no_weights) == (q.shape[0], 0, k.shape[1]), (
            f"with no query (q of shape {q[:, :0].shape}) the output has shape {np.shape(none)} "
            f"and the weights {np.shape(no_weights)}, expected {(q.shape[0], 0, v.shape[-1])} and "
            f"{(q.shape[0], 0, k.shape[1])}")
    out, weights = minattn.scaled_dot_product_attention(q, k, v)
    for b in range(q.shape[0]):
        ref_out, ref_w = ref_attention(q[b], k[b], v[b])
        close(np.asarray(weights)[b], ref_w, 1e-9, f"the weights of batch entry {b}")
        close(np.asarray(out)[b], ref_out, 1e-9, f"the output of batch entry {b}")


@prop("attention_uses_the_given_scale", "scaled_dot_product_attention", "with scale=s the scores "
      "are q kᵀ · s (s replaces 1/√d_k; s = 0 gives every key the same weight)", ATTENTION,
      "scale = d_k ** -0.5 only when scale is None (`scale or d_k ** -0.5` ignores scale=0, which "
      "gives uniform weights); otherwise multiply the scores by the scale given")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    drawn = data.draw(st.sampled_from([0.1, 1.0, 2.5]), "scale")
    for scale in (drawn, 0.0):  # 0, the boundary, in every example
        out, weights = minattn.scaled_dot_product_attention(q, k, v, scale=scale)
        ref_out, ref_w = ref_attention(q, k, v, scale=scale)
        close(weights, ref_w, 1e-9, f"the weights with scale={scale}")
        close(out, ref_out, 1e-9, f"the output with scale={scale}")


@prop("attention_mask_hides_keys", "scaled_dot_product_attention", "a key the boolean mask hides "
      "(False) gets weight 0 and its value does not change the output; True means may attend",
      ATTENTION,
      "True = may attend: np.where(mask, scores, -np.inf), not the other way round, and not -1e9")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    keep = data.draw(hnp.arrays(bool, (q.shape[0], k.shape[0])), "mask")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    ref_out, ref_w = ref_attention(q, k, v, keep)
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_fully_masked_query_is_zero", "scaled_dot_product_attention", "a query whose keys "
      "are all masked gets all-zero weights and a zero output, with no NaN", ATTENTION,
      "softmax of an all -inf row is 0/0: give such rows zeros (divide by 1 where the sum is 0)")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    keep = np.ones((q.shape[0], k.shape[0]), bool)
    keep[0] = False
    data.show("mask", keep)
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    close(np.asarray(weights)[0], np.zeros(k.shape[0]), 0, "the fully masked query's weights")
    close(np.asarray(out)[0], np.zeros(v.shape[-1]), 0, "the fully masked query's output")


@prop("attention_dropout_zeroes_and_rescales", "scaled_dot_product_attention", "with dropout=p "
      "and an rng, each weight is 0 or its value without dropout / (1 - p), the output is those "
      "weights times v, and the rng's seed alone decides which", ATTENTION,
      "keep = rng.random(weights.shape) >= p; weights = np.where(keep, weights / (1 - p), 0), "
      "with the rng given, before the product with v", part=4)
def _(data):
    l_q, l_k = data.draw(st.integers(3, 5), "L_q"), data.draw(st.integers(3, 5), "L_k")
    q, k, v = (data.draw(floats((2, n, 2)), name) for n, name in ((l_q, "q"), (l_k, "k"), (l_k, "v")))
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    attend = lambda rng: minattn.scaled_dot_product_attention(q, k, v, dropout=rate, rng=rng)
    out, weights = attend(np.random.default_rng(0))
    undropped = np.stack([ref_attention(q[b], k[b], v[b])[1] for b in range(2)])
    check_dropout(weights, undropped, rate, "the weights")
    close(out, np.asarray(weights) @ v, 1e-9, "the output (the dropped weights @ v)")
    check_seeds(lambda rng: np.asarray(attend(rng)[1]), "the weights")


@prop("attention_dropout_draws_one_p_per_weight", "scaled_dot_product_attention", "with "
      "dropout=p each weight is dropped on its own with probability p: on q, k, v [2, 4, 32, 3] "
      "(2 batch entries, 4 heads), a fraction 1 - p of the 8192 weights is kept (each divided by 1 - p), and "
      "no two batch entries, heads, queries or keys share their draws (Hoeffding's bound for a "
      "failure probability of 1e-9, at the fixed seed and any other)", ATTENTION,
      "p is the probability of dropping a weight, and every weight of every batch entry and "
      "head is an independent draw", part=4)
def _(data):
    rng = np.random.default_rng(data.draw(seeds, "seed of q, k and v"))
    q, k, v = (rng.normal(0.0, 0.5, (2, 4, 32, 3)) for _ in range(3))
    rate = data.draw(st.sampled_from([0.25, 0.4]), "dropout")
    _, weights = minattn.scaled_dot_product_attention(
        q, k, v, dropout=rate, rng=np.random.default_rng(data.draw(seeds, "seed of the rng")))
    scores = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(3)  # all finite: no weight is 0
    undropped = np.exp(scores - scores.max(axis=-1, keepdims=True))
    undropped /= undropped.sum(axis=-1, keepdims=True)
    check_dropout(weights, undropped, rate, "the weights")
    check_draws(np.asarray(weights) != 0, rate, {0: "batch entries", 1: "heads", 2: "queries",
                                                 3: "keys"}, "the weights")


@prop("attention_broadcasts_leading_axes", "scaled_dot_product_attention", "q [B, H, L_q, d_k] "
      "with k, v [B, H, L_k, ...] or [B, 1, L_k, ...] (one head of keys for all: leading axes "
      "broadcast), or q [L_q, d_k] against a batch of keys, under a mask that broadcasts ([L_q, "
      "L_k], [B, 1, 1, L_k] padding, [B, 1, L_q, L_k]): each (batch entry, head) is attention on "
      "its own", ATTENTION,
      "leading axes broadcast as in any NumPy product: use the last two axes for the queries and "
      "keys, and index nothing else")
def _(data):
    batch, n_heads = data.draw(st.integers(1, 2), "B"), data.draw(st.integers(1, 3), "H")
    l_q, l_k, d_k, d_v = (data.draw(sizes, n) for n in ("L_q", "L_k", "d_k", "d_v"))
    form = data.draw(st.sampled_from(["heads", "one head of keys", "one query sequence"]), "form")
    q_lead = () if form == "one query sequence" else (batch, n_heads)
    k_lead = (batch, 1) if form == "one head of keys" else (batch, n_heads)
    q = data.draw(floats(q_lead + (l_q, d_k)), "q")
    k, v = data.draw(floats(k_lead + (l_k, d_k)), "k"), data.draw(floats(k_lead + (l_k, d_v)), "v")
    mask_shape = data.draw(st.sampled_from([None, (l_q, l_k), (batch, 1, 1, l_k),
                                            (batch, 1, l_q, l_k)]), "mask shape")
    keep = None if mask_shape is None else data.draw(hnp.arrays(bool, mask_shape), "mask")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    out, weights = np.asarray(out), np.asarray(weights)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2],
                               () if keep is None else keep.shape[:-2])
    assert out.shape == lead + (l_q, d_v) and weights.shape == lead + (l_q, l_k), (
        f"output {out.shape} and weights {weights.shape}, expected {lead + (l_q, d_v)} and "
        f"{lead + (l_q, l_k)}")
    full = lambda a: np.broadcast_to(a, lead + a.shape[-2:])  # noqa: E731
    qs, ks, vs = full(q), full(k), full(v)
    keeps = None if keep is None else np.broadcast_to(keep, lead + (l_q, l_k))
    for index in np.ndindex(lead):
        ref_out, ref_w = ref_attention(qs[index], ks[index], vs[index],
                                       None if keeps is None else keeps[index])
        close(weights[index], ref_w, 1e-9, f"the weights at {index}")
        close(out[index], ref_out, 1e-9, f"the output at {index}")


@prop("attention_ignores_masked_scores_however_large", "scaled_dot_product_attention", "a key the "
      "mask hides changes nothing even when its score is thousands above (or below) the others': "
      "the weights and the output are those of the kept keys alone", ATTENTION,
      "mask the scores before the softmax (np.where(mask, scores, -np.inf)), never the weights "
      "after it: exp(score - max) of the kept keys underflows to 0 when the max is a masked key's")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    hidden = data.draw(hnp.arrays(bool, (k.shape[0],)), "hidden keys")
    k = np.where(hidden[:, None], k * data.draw(st.sampled_from([1000.0, -1000.0]), "hidden keys "
                                                                                   "scaled by"), k)
    data.show("k", k)
    keep = np.broadcast_to(~hidden, (q.shape[0], k.shape[0]))
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    ref_out, ref_w = ref_attention(q, k, v, keep)
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_keeps_float32", "scaled_dot_product_attention", "attention on float32 q, k, v "
      "returns float32 output and weights, with or without a mask or a scale", ATTENTION,
      "scale by a Python float (d_k ** -0.5 or 1 / math.sqrt(d_k)), not np.sqrt(d_k)")
def _(data):
    q, k, v = data.draw(qkv(dtype=np.float32), "q, k, v")
    scale = data.draw(st.sampled_from([None, 0.5]), "scale")
    keep = data.draw(st.one_of(st.none(), hnp.arrays(bool, (q.shape[-2], k.shape[-2]))), "mask")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, scale=scale)
    out, weights = np.asarray(out), np.asarray(weights)
    assert out.dtype == weights.dtype == np.float32, f"got {out.dtype}, {weights.dtype}"


@prop("causal_mask_hides_the_future", "causal_mask", "causal_mask(n_q, n_k)[i, j] is True "
      "exactly when j <= i (top-left aligned when n_q != n_k; n_k defaults to n_q)",
      {"causal_mask"}, "query i may see keys 0..i: rows[:, None] >= cols[None, :] (>=, not >)")
def _(data):
    n_q = data.draw(st.integers(0, 6), "n_q")
    drawn = data.draw(st.one_of(st.none(), st.integers(0, 6)), "n_k")
    for n_k in (drawn, 0):  # n_k=0 (no key: shape [n_q, 0], not n_k defaulting to n_q) always
        cols = n_q if n_k is None else n_k
        expected = np.array([[j <= i for j in range(cols)] for i in range(n_q)], bool).reshape(n_q, cols)
        got = np.asarray(minattn.causal_mask(n_q) if n_k is None else minattn.causal_mask(n_q, n_k))
        assert got.dtype == bool and got.shape == (n_q, cols), (
            f"causal_mask({n_q}{'' if n_k is None else f', {n_k}'}): got {got.dtype} {got.shape}, "
            f"expected bool {(n_q, cols)}")
        assert (got == expected).all(), f"got\n{got.astype(int)}\nexpected\n{expected.astype(int)}"


@prop("causal_mask_takes_any_length", "causal_mask", "causal_mask(n_q, n_k) for lengths far past "
      "1024 (1000 to 1100) is still True exactly when j <= i", {"causal_mask"},
      "build the mask for the lengths asked (compare a column of query indices with a row of key "
      "indices): a precomputed mask of a fixed size (1024) does not reach them all")
def _(data):
    n_q, n_k = data.draw(st.integers(1000, 1100), "n_q"), data.draw(st.integers(1000, 1100), "n_k")
    got = np.asarray(minattn.causal_mask(n_q, n_k))
    expected = np.tril(np.ones((n_q, n_k), bool))  # numpy's lower triangle: j <= i
    assert got.dtype == bool and got.shape == (n_q, n_k), (
        f"causal_mask({n_q}, {n_k}): got {got.dtype} {got.shape}, expected bool {(n_q, n_k)}")
    wrong = np.argwhere(got != expected)
    assert not len(wrong), (f"causal_mask({n_q}, {n_k}) is wrong at {len(wrong)} entries, the "
                            f"first [{wrong[0][0]}, {wrong[0][1]}]")


@prop("causal_mask_aligns_and_windows", "causal_mask", "causal_mask(n_q, n_k, align='bottom_"
      "right')[i, j] is True exactly when j <= i + n_k - n_q; with window=w also j > (that "
      "position) - w", {"causal_mask"}, "bottom-right: query i sits at position i + n_k - n_q; a "
      "window of w keeps keys position - w + 1 .. position", part=2)
def _(data):
    n_q, n_k = data.draw(st.integers(0, 6), "n_q"), data.draw(st.integers(0, 6), "n_k")
    align = data.draw(st.sampled_from(["top_left", "bottom_right"]), "align")
    window = data.draw(st.one_of(st.none(), st.integers(1, 7)), "window")
    offset = n_k - n_q if align == "bottom_right" else 0
    expected = np.array([[j <= i + offset and (window is None or j > i + offset - window)
                          for j in range(n_k)] for i in range(n_q)], bool).reshape(n_q, n_k)
    got = np.asarray(minattn.causal_mask(n_q, n_k, align=align, window=window))
    assert got.shape == (n_q, n_k), f"shape {got.shape}"
    assert (got == expected).all(), f"got\n{got.astype(int)}\nexpected\n{expected.astype(int)}"


@prop("padding_mask_keeps_real_tokens", "padding_mask", "padding_mask(lengths, n) has shape "
      "(B, 1, 1, n) and is True exactly at the first lengths[b] positions of sequence b, for "
      "lengths of any integer dtype (unsigned and narrow ones included)",
      {"padding_mask"}, "positions < lengths[:, None], then add the two singleton axes: "
      "[:, None, None, :]; no subtraction from lengths (an unsigned 0 - 1 wraps around)")
def _(data):
    n = data.draw(st.integers(1, 6), "n")
    drawn = np.array(data.draw(st.lists(st.integers(0, n), min_size=1, max_size=4), "lengths"))
    # n=0 and every integer dtype of lengths too, in every example
    for n, lengths in [(n, drawn.astype(dtype)) for dtype in (np.int64, np.uint8, np.int32, np.uint64)] \
            + [(0, np.zeros_like(drawn))]:
        got = np.asarray(minattn.padding_mask(lengths, n))
        expected = np.array([[j < length for j in range(n)] for length in lengths],
                            bool).reshape(len(lengths), n)[:, None, None, :]
        assert got.shape == expected.shape, (f"padding_mask({lengths.tolist()}, {n}) has shape "
                                             f"{got.shape}, expected {expected.shape}")
        shown = f"padding_mask(np.array({lengths.tolist()}, {lengths.dtype}), {n})"
        assert got.dtype == bool, f"{shown}: dtype {got.dtype}, expected bool"
        assert (got == expected).all(), \
            f"{shown}:\ngot\n{got.astype(int)}\nexpected\n{expected.astype(int)}"


@prop("split_heads_takes_feature_slices", "split_heads", "split_heads(x, H)[..., h, i, :] is "
      "token i's features h*d_k .. (h+1)*d_k - 1, in x's dtype, for x [L, D], [B, L, D] or "
      "[B, B', L, D], L = 0 (no token yet) included in every example", {"split_heads"},
      "reshape to [..., L, H, d_k] THEN swap the L and H axes: a bare reshape mixes tokens; give "
      "reshape every length (x.shape[:-1] + (H, d_k)), not -1, which cannot be solved when L = 0")
def _(data):
    n_heads, d_k = data.draw(st.integers(1, 3), "n_heads"), data.draw(st.integers(1, 3), "d_k")
    dtype = data.draw(st.sampled_from([np.float64, np.float32]), "dtype")
    lead = data.draw(st.sampled_from([(2,), (), (2, 3)]), "leading axes of x")
    x = data.draw(floats(lead + (data.draw(sizes, "L"), n_heads * d_k), dtype=dtype), "x")
    for x in (x, x[..., :0, :]):  # the drawn length, and L = 0, in every example
        got = np.asarray(minattn.split_heads(x, n_heads))
        expected = lead + (n_heads, x.shape[-2], d_k)
        assert got.shape == expected, (f"split_heads of x {x.shape} has shape {got.shape}, "
                                       f"expected {expected}")
        assert got.dtype == x.dtype, f"{x.dtype} in, {got.dtype} out"
        for h in range(n_heads):
            close(got[..., h, :, :], x[..., h * d_k:(h + 1) * d_k], 0, f"head {h}")


@prop("merge_heads_inverts_split_heads", "merge_heads", "merge_heads(split_heads(x, H)) == x, in "
      "x's dtype, for heads [H, L, d_k], [B, H, L, d_k] or [B, B', H, L, d_k], L = 0 included "
      "in every example", {"merge_heads"},
      "swap the H and L axes back, then reshape to [..., L, H * d_k] (every length given, not "
      "-1, which cannot be solved when L = 0)")
def _(data):
    n_heads, d_k = data.draw(st.integers(1, 3), "n_heads"), data.draw(st.integers(1, 3), "d_k")
    dtype = data.draw(st.sampled_from([np.float64, np.float32]), "dtype")
    lead = data.draw(st.sampled_from([(2,), (), (2, 3)]), "leading axes of x")
    x = data.draw(floats(lead + (data.draw(sizes, "L"), n_heads * d_k), dtype=dtype), "x")
    for x in (x, x[..., :0, :]):  # the drawn length, and L = 0, in every example
        heads = np.stack([x[..., h * d_k:(h + 1) * d_k] for h in range(n_heads)], axis=-3)
        got = np.asarray(minattn.merge_heads(heads))
        assert got.dtype == x.dtype, f"{x.dtype} in, {got.dtype} out"
        close(got, x, 0, f"merge_heads(heads) of heads {list(heads.shape)}")


def draw_multi_head(data, n_kv=False):
    n_heads = data.draw(st.integers(1, 3), "n_heads")
    d_model = n_heads * data.draw(st.integers(1, 3), "d_k")
    p = random_params(data.draw(seeds, "params seed"), d_model)["self_attention"]
    return n_heads, d_model, p


def draw_mask(data, batch, l_q, l_k, form=None, name="mask"):
    # a mask for a batch of [B, L_q, L_k] attention with heads, in one of its documented forms
    # (or the form given): None, causal [L_q, L_k], padding [B, 1, 1, L_k], both [B, 1, L_q,
    # L_k] -> (the mask, keep(b): the bool [L_q, L_k] batch entry b attends with)
    causal = np.array([[j <= i for j in range(l_k)] for i in range(l_q)], bool).reshape(l_q, l_k)
    form = form or data.draw(st.sampled_from(["causal [L_q, L_k]", "padding [B, 1, 1, L_k]", "none",
                                              "causal and padding [B, 1, L_q, L_k]"]), "mask form")
    if form == "none":
        return None, lambda b: None
    if form.startswith("causal ["):
        data.show(name, causal)
        return causal, lambda b: causal
    lengths = data.draw(hnp.arrays(int, (batch,), elements=st.integers(0, l_k)), f"lengths ({name})")
    padding = (np.arange(l_k)[None, :] < lengths[:, None])[:, None, None, :]
    mask = padding if form.startswith("padding") else padding & causal
    data.show(name, mask)
    return mask, lambda b: np.broadcast_to(mask[b, 0], (l_q, l_k))


@prop("multi_head_attention_matches_a_loop_over_heads", "multi_head_attention", "multi_head_"
      "attention projects query, key and value, attends in each head separately, concatenates the "
      "heads and projects back: self- and cross-attention (L_q != L_k), one sequence [L, D], a "
      "batch [B, L, D] or two leading axes [B, B', L, D], under a mask of any documented form "
      "(causal [L_q, L_k], padding [B, 1, 1, L_k], both [B, 1, L_q, L_k])", MULTI_HEAD,
      "each head attends over its own d_k features of every batch entry; the mask broadcasts over "
      "the head axis; merge the heads before the output projection")
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    l_q, l_k = data.draw(sizes, "L_q"), data.draw(sizes, "L_k")
    batch = data.draw(st.sampled_from([(1,), (2,), (), (2, 2)]), "batch shape")
    query = data.draw(floats(batch + (l_q, d_model)), "query")
    key, value = data.draw(floats(batch + (l_k, d_model)), "key"), \
        data.draw(floats(batch + (l_k, d_model)), "value")
    causal = np.array([[j <= i for j in range(l_k)] for i in range(l_q)], bool).reshape(l_q, l_k)
    if len(batch) == 1:  # the form drawn, a padding mask [B, 1, 1, L_k], and in every example
        # the batch under one more leading axis [1, B, L, D] (causal)
        cases = [((), draw_mask(data, batch[0], l_q, l_k)),
                 ((), draw_mask(data, batch[0], l_q, l_k, "padding [B, 1, 1, L_k]", "padding mask")),
                 ((1,), (causal, lambda b: causal))]
    else:  # one sequence [L, D] or [B, B', L, D], under a causal mask [L_q, L_k]
        cases = [((), (causal, lambda b: causal))]
    for extra, (mask, keep) in cases:
        lead = extra + batch
        out, weights = minattn.multi_head_attention(
            p, *(a.reshape(extra + a.shape) for a in (query, key, value)), mask, n_heads=n_heads)
        out, weights = np.asarray(out), np.asarray(weights)
        assert out.shape == lead + (l_q, d_model) and weights.shape == lead + (n_heads, l_q, l_k), (
            f"for query {list(lead + (l_q, d_model))}: output {out.shape} and weights "
            f"{weights.shape}, expected {lead + (l_q, d_model)} and {lead + (n_heads, l_q, l_k)}")
        shown = "no mask" if mask is None else f"a mask {list(np.shape(mask))}"
        for at in np.ndindex(batch):
            ref_out, ref_w = ref_multi_head(p, query[at], key[at], value[at], n_heads,
                                            keep(at[0] if len(batch) == 1 else None))
            where = (0,) * len(extra) + at
            close(weights[where], ref_w, 1e-8, f"the per-head weights [H, L_q, L_k] of batch "
                                               f"entry {where} with {shown}")
            close(out[where], ref_out, 1e-8, f"the output of batch entry {where} with {shown}")


@prop("multi_head_attention_averages_weights_over_heads", "multi_head_attention", "with "
      "average_weights=True the weights are the per-head weights averaged over the heads, "
      "[B, L_q, L_k]", MULTI_HEAD, "average over the head axis (-3), not the batch or the queries",
      part=4)
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    l_q, l_k = data.draw(sizes, "L_q"), data.draw(sizes, "L_k")
    batch = data.draw(st.sampled_from([(2,), ()]), "batch shape")  # [B, H, L_q, L_k] or [H, L_q, L_k]
    query = data.draw(floats(batch + (l_q, d_model)), "query")
    key = data.draw(floats(batch + (l_k, d_model)), "key")
    _, weights = minattn.multi_head_attention(p, query, key, key, n_heads=n_heads,
                                              average_weights=True)
    expected = np.stack([ref_multi_head(p, q, k, k, n_heads)[1].mean(axis=0)
                         for q, k in zip(query.reshape(-1, l_q, d_model), key.reshape(-1, l_k, d_model))])
    close(weights, expected.reshape(batch + (l_q, l_k)), 1e-8,
          f"the weights averaged over heads {list(batch + (l_q, l_k))}")


def ref_output_of_weights(p, value, weights):
    # one sequence: the multi-head output that attention weights [H, L_q, L_k] give, value [L_k, D]
    n_heads = weights.shape[0]
    d_k = value.shape[-1] // n_heads
    v = value @ p["w_v"] + p["b_v"]
    heads = [weights[h] @ v[:, h * d_k:(h + 1) * d_k] for h in range(n_heads)]
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"]


@prop("multi_head_attention_passes_dropout_on", "multi_head_attention", "with dropout=p and an rng "
      "each head's weights are 0 or their value without dropout / (1 - p), the rng's seed "
      "alone decides which, and the weights returned are those the output was computed with",
      MULTI_HEAD, "pass dropout and rng on to the attention of the heads, and return the weights "
      "of that same call", part=4)
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    length = data.draw(st.integers(3, 5), "L")
    x = data.draw(floats((2, length, d_model)), "query = key = value")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    attend = lambda rng: minattn.multi_head_attention(p, x, x, x,  # noqa: E731
                                                      n_heads=n_heads, dropout=rate, rng=rng)
    out, weights = (np.asarray(a) for a in attend(np.random.default_rng(0)))
    check_dropout(weights, np.stack([ref_multi_head(p, a, a, a, n_heads)[1] for a in x]), rate,
                  "the weights")
    for b in range(2):
        close(out[b], ref_output_of_weights(p, x[b], weights[b]), 1e-8,
              f"the output of batch entry {b} (the one the weights returned give)")
    check_seeds(lambda rng: np.asarray(attend(rng)[1]), "the weights")


@prop("multi_head_attention_keeps_float32", "multi_head_attention", "multi-head attention on "
      "float32 inputs and params returns float32 output and weights", MULTI_HEAD,
      "a NumPy float64 scalar (np.sqrt(d_k)) or a float64 array created inside upcasts float32")
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    x = data.draw(floats((1, data.draw(sizes, "L"), d_model), dtype=np.float32), "x")
    out, weights = minattn.multi_head_attention(as_dtype(p, np.float32), x, x, x, n_heads=n_heads)
    assert np.asarray(out).dtype == np.asarray(weights).dtype == np.float32, \
        f"got {np.asarray(out).dtype}, {np.asarray(weights).dtype}"


@prop("layer_norm_matches_the_formula", "layer_norm", "layer_norm(x, gamma, beta, eps) = (x - mean)"
      " / sqrt(var + eps) * gamma + beta over the last axis of x [..., D] (any leading axes, none "
      "included), with the biased variance (divide by D), as torch.nn.LayerNorm — also for rows "
      "of tiny variance, rows of mean 1e6 (in every example) and any eps", {"layer_norm"},
      "mean and variance over axis=-1 with keepdims; variance divides by D, as the mean of "
      "(x - mean)² (E[x²] - E[x]² cancels to nothing, even below 0, when the mean is large); eps "
      "(the argument, even 0: `eps or 1e-5` ignores it) inside the sqrt")
def _(data):
    d = data.draw(st.integers(2, 6), "D")
    lead = data.draw(st.sampled_from([(data.draw(sizes, "rows"),), (2, 3), (), (0,)]),
                     "leading axes")
    x = data.draw(floats(lead + (d,)), "x")
    scale = data.draw(st.sampled_from([1.0, 1e-3]), "x scaled by")
    unscaled, x = x, x * scale  # tiny variances show eps
    gamma, beta = data.draw(floats((d,)), "gamma"), data.draw(floats((d,)), "beta")
    drawn = data.draw(st.sampled_from([0.1, None, 1e-5]), "eps")
    # eps=0 too, in every example whose rows all vary (eps=0 is refused on a constant row)
    for eps in (drawn, 0.0) if (np.ptp(x, axis=-1) > 0).all() else (drawn,):
        got = minattn.layer_norm(x, gamma, beta) if eps is None else minattn.layer_norm(x, gamma, beta, eps)
        close(got, ref_layer_norm(x, gamma, beta, 1e-5 if eps is None else eps), 1e-7,
              f"layer_norm(x, gamma, beta{'' if eps is None else f', eps={eps}'})")
    # and in every example, rows with a large common offset (mean 1e6, exact in float64): the
    # variance as E[x²] - E[x]² loses every digit to cancellation there
    offset = unscaled + 1e6
    data.show("x + 1e6 (x unscaled)", offset)
    close(minattn.layer_norm(offset, gamma, beta, 1e-5), ref_layer_norm(offset, gamma, beta, 1e-5),
          1e-7, "layer_norm(x + 1e6, gamma, beta, eps=1e-5), rows of mean near 1e6")


@prop("layer_norm_keeps_float32", "layer_norm", "layer_norm of float32 inputs is float32",
      {"layer_norm"}, "a NumPy float64 scalar (np.float64(eps), np.mean's dtype) upcasts float32")
def _(data):
    x = data.draw(floats((2, 4), dtype=np.float32), "x")
    out = minattn.layer_norm(x, np.ones(4, np.float32), np.zeros(4, np.float32))
    assert np.asarray(out).dtype == np.float32, f"got {np.asarray(out).dtype}"


def check_feed_forward(data, activations):
    d = data.draw(st.integers(1, 4), "D")
    p = random_params(data.draw(seeds, "params seed"), d)["feed_forward"]
    lead = data.draw(st.sampled_from([(2, data.draw(sizes, "L")), (3,), ()]), "leading axes")
    x = data.draw(floats(lead + (d,)), "x")
    for activation in activations:  # every one, in every example
        got = minattn.feed_forward(p, x) if activation is None else \
            minattn.feed_forward(p, x, activation=activation)
        close(got, ref_feed_forward(p, x, activation or "relu"), 1e-8,
              f"feed_forward(params, x, activation={activation!r})")


@prop("feed_forward_matches_the_formula", "feed_forward", "feed_forward(params, x) = relu(x w_1 + "
      "b_1) w_2 + b_2 for every token of x [..., D] (any leading axes, none included)",
      {"feed_forward"}, "the activation goes between the two linear maps, on the hidden width F")
def _(data):
    check_feed_forward(data, (None, "relu"))


@prop("feed_forward_takes_gelu", "feed_forward", "feed_forward(params, x, activation=a) = "
      "a(x w_1 + b_1) w_2 + b_2 for gelu and gelu_tanh too, float32 kept", {"feed_forward"},
      "check which activation was asked for; np.vectorize(math.erf) and NumPy float64 scalars "
      "return float64: cast back to x.dtype", part=4)
def _(data):
    check_feed_forward(data, ("gelu", "gelu_tanh"))
    p = as_dtype(random_params(data.draw(seeds, "params seed"), 3)["feed_forward"], np.float32)
    x = data.draw(floats((1, data.draw(sizes, "L"), 3), dtype=np.float32), "float32 x")
    for activation in ("gelu", "gelu_tanh"):
        out = np.asarray(minattn.feed_forward(p, x, activation=activation))
        assert out.dtype == np.float32, f"float32 in, {out.dtype} out ({activation})"


@prop("feed_forward_dropout_is_unbiased", "feed_forward", "with dropout=p and an rng, the output "
      "averaged over many tokens equals the output without dropout (inverted dropout rescales "
      "the kept units by 1 / (1 - p)), and the rng's seed alone decides what is dropped",
      {"feed_forward"}, "drop hidden units with the rng given and scale the kept ones by "
      "1 / (1 - p): the expected output must not change", part=4)
def _(data):
    d = data.draw(st.integers(2, 4), "D")
    p = random_params(data.draw(seeds, "params seed"), d, d_ff=8)["feed_forward"]
    token = data.draw(floats((d,), bound=2.0), "x (one token, repeated 4000 times)")
    rate = data.draw(st.sampled_from([0.5, 0.3]), "dropout")
    x = np.tile(token, (4000, 1))
    run = lambda rng: np.asarray(minattn.feed_forward(p, x, activation="gelu", dropout=rate, rng=rng))
    got = run(np.random.default_rng(0))
    expected = ref_feed_forward(p, token, "gelu")
    error = np.abs(got.mean(axis=0) - expected)
    spread = got.std(axis=0) / math.sqrt(len(x)) + 1e-9
    assert (error < 6 * spread).all() and got.std(axis=0).max() > 0, (
        f"the mean output over 4000 copies of one token with dropout={rate} is "
        f"{show(got.mean(axis=0))}, without dropout {show(expected)} (more than 6 standard errors "
        "apart, or no dropout at all)")
    check_seeds(lambda rng: run(rng)[:8], "the output")


@prop("feed_forward_drops_hidden_units", "feed_forward", "with dropout=p, each token's output is "
      "act(x w_1 + b_1) ⊙ m / (1 - p) w_2 + b_2 for some 0/1 mask m over the F hidden units: "
      "dropout acts on the hidden layer, after the activation, not on the input or the output; "
      "dropout=1 drops every unit (the output is b_2)",
      {"feed_forward"},
      "drop the hidden units h = act(x @ w_1 + b_1): np.where(keep, h / (1 - p), 0) with keep of "
      "h's shape, THEN @ w_2 + b_2; dropping the output instead keeps the mean but not the form; "
      "np.where(keep, h / (1 - p), 0), not h * keep / (1 - p), which is 0 / 0 = NaN at p = 1",
      part=4)
def _(data):
    d = data.draw(st.integers(1, 3), "D")
    p = random_params(data.draw(seeds, "params seed"), d, d_ff=3)["feed_forward"]
    x = data.draw(floats((8, d), bound=2.0), "x")
    rate = data.draw(st.sampled_from([0.5, 0.25]), "dropout")
    activation = data.draw(st.sampled_from(["relu", "gelu"]), "activation")
    got = np.asarray(minattn.feed_forward(p, x, activation=activation, dropout=rate,
                                          rng=np.random.default_rng(0)))
    hidden = ref_feed_forward({**p, "w_2": np.eye(3), "b_2": np.zeros(3)}, x, activation)
    masks = np.array(list(np.ndindex(2, 2, 2)), float)  # every 0/1 mask of the 3 hidden units
    outs = (hidden[:, None, :] * masks[None] / (1 - rate)) @ p["w_2"] + p["b_2"]  # [8, 8 masks, D]
    assert got.shape == x.shape, f"the output has shape {got.shape}, expected {x.shape}"
    every = np.asarray(minattn.feed_forward(p, x, activation=activation, dropout=1.0,
                                            rng=np.random.default_rng(0)))
    close(every, np.broadcast_to(p["b_2"], x.shape), 0, "the output with dropout=1.0 (every "
          "hidden unit dropped: b_2, never 0 / 0)")
    for t in range(len(x)):
        assert np.isclose(outs[t], got[t], rtol=1e-7, atol=1e-9).all(axis=-1).any(), (
            f"token {t}'s output {show(got[t])} is not act(x w_1 + b_1) ⊙ m / (1 - {rate}) w_2 + "
            f"b_2 for any 0/1 mask m of the hidden units (without dropout it is "
            f"{show(ref_feed_forward(p, x[t], activation))}): is dropout applied somewhere else "
            "than to the hidden units?")


@prop("feed_forward_dropout_draws_one_p_per_unit", "feed_forward", "with dropout=p each hidden "
      "unit of each token is dropped on its own with probability p: on x [2, 500, 8] with F = 8 "
      "hidden units (w_1 = w_2 = I, b_1 = 1, b_2 = 0, so the output shows the units), a fraction "
      "1 - p of the 8000 units is kept (each divided by 1 - p), and no two batch entries, tokens "
      "or units share their draws (Hoeffding's bound for a failure probability of 1e-9, at the "
      "fixed seed and any other)", {"feed_forward"},
      "p is the probability of dropping a unit, and every unit of every token is an independent "
      "draw", part=4)
def _(data):
    rate = data.draw(st.sampled_from([0.25, 0.4]), "dropout")
    p = {"w_1": np.eye(8), "b_1": np.ones(8), "w_2": np.eye(8), "b_2": np.zeros(8)}
    x = np.ones((2, 500, 8))  # every hidden unit is relu(1 + 1) = 2
    got = np.asarray(minattn.feed_forward(p, x, dropout=rate,
                                          rng=np.random.default_rng(data.draw(seeds, "seed"))))
    assert got.shape == x.shape, f"the output has shape {got.shape}, expected {x.shape}"
    check_dropout(got, np.full(x.shape, 2.0), rate, "the hidden units (the output)")
    check_draws(got != 0, rate, {0: "batch entries", 1: "tokens", 2: "hidden units"},
                "the hidden units")


@prop("feed_forward_keeps_float32", "feed_forward", "the feed-forward network on float32 inputs "
      "and params returns float32", {"feed_forward"},
      "a NumPy float64 scalar or a float64 array created inside upcasts float32")
def _(data):
    p = as_dtype(random_params(data.draw(seeds, "params seed"), 3)["feed_forward"], np.float32)
    x = data.draw(floats((1, data.draw(sizes, "L"), 3), dtype=np.float32), "x")
    out = np.asarray(minattn.feed_forward(p, x))
    assert out.dtype == np.float32, f"float32 in, {out.dtype} out"


@prop("encoder_block_matches_the_paper", "encoder_block", "encoder_block is x = "
      "self_attention_norm(x + self_attention(x)), then feed_forward_norm(x + feed_forward(x)) "
      "(post-norm); with norm_first=True x + self_attention(self_attention_norm(x)), then "
      "x + feed_forward(feed_forward_norm(x)) (pre-norm), for one sequence [L, D] or a batch "
      "[B, L, D]; the mask (causal [L, L], padding [B, 1, 1, L], both) reaches the attention, "
      "and eps both norms", BLOCK,
      "each sublayer's output is ADDED to its input (the residual), the norm sits after the add "
      "(post-norm) or before the sublayer (pre-norm); pass mask, n_heads and eps on")
def _(data):
    check_encoder_block(data, later=False)


@prop("encoder_block_returns_weights_and_passes_activation_on", "encoder_block", "with "
      "return_weights=True encoder_block returns its attention's weights beside the output, and "
      "activation reaches the feed-forward network", BLOCK,
      "return the weights of the attention whose output the block used; pass activation on",
      part=4)
def _(data):
    check_encoder_block(data, later=True)


def check_encoder_block(data, later):
    # later: the second reading's options too (an activation drawn, return_weights=True)
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model = n_heads * data.draw(st.integers(1, 3), "d_k")
    length = data.draw(sizes, "L")
    activation = data.draw(st.sampled_from(["relu", "gelu", "gelu_tanh"]), "activation") \
        if later else "relu"
    drawn = data.draw(st.sampled_from([0.5, 1e-5]), "eps")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    batch = data.draw(st.sampled_from([(1,), (2,), ()]), "batch shape")
    x = data.draw(floats(batch + (length, d_model)), "x") * \
        data.draw(st.sampled_from([1.0, 0.1]), "x scaled by")
    if batch:
        mask, keep = draw_mask(data, batch[0], length, length)
    else:  # one sequence [L, D], under a causal mask
        mask = np.tril(np.ones((length, length), bool))
        keep = lambda b: mask  # noqa: E731
        data.show("mask", mask)
    # both norms, and eps=0 too when every row of x varies (eps=0 is refused on a constant row)
    for norm_first, eps in [(False, drawn), (True, drawn)] + (
            [(False, 0.0), (True, 0.0)] if (np.ptp(x, axis=-1) > 0).all() else []):
        options = dict(activation=activation, return_weights=True) if later else {}
        got = minattn.encoder_block(p, x, mask, n_heads=n_heads, norm_first=norm_first, eps=eps,
                                    **options)
        got, weights = (np.asarray(a) for a in got) if later else (np.asarray(got), None)
        assert got.shape == x.shape, f"output {got.shape}, expected {x.shape}"
        assert not later or weights.shape == batch + (n_heads, length, length), (
            f"weights {weights.shape}, expected {batch + (n_heads, length, length)}")
        for b in range(batch[0] if batch else 1):
            at = (b,) if batch else ()
            ref_out, ref_w = ref_encoder_block(p, x[at], n_heads, keep(b), norm_first, eps,
                                               activation)
            close(got[at], ref_out, 1e-7, f"encoder_block (norm_first={norm_first}, eps={eps}), "
                                          f"batch entry {b}")
            if later:
                close(weights[at], ref_w, 1e-7, "the attention weights (return_weights=True, "
                                                f"norm_first={norm_first}), batch entry {b}")
        if later:
            plain = minattn.encoder_block(p, x, mask, n_heads=n_heads, norm_first=norm_first,
                                          activation=activation, eps=eps)
            close(plain, got, 0, "encoder_block without return_weights (the output alone)")


@prop("encoder_block_passes_dropout_on", "encoder_block", "with dropout=p and an rng, the "
      "attention weights (return_weights=True) are 0 or their value without dropout / (1 - p), "
      "the rng's seed alone decides the output, and dropout and rng reach multi_head_attention "
      "and feed_forward (when the block calls them)", BLOCK,
      "pass dropout and rng on to multi_head_attention and feed_forward", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model, length = 2 * n_heads, data.draw(st.integers(3, 5), "L")
    norm_first = data.draw(st.sampled_from([True, False]), "norm_first")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    x = data.draw(floats((length, d_model)), "x")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    block = lambda rng: minattn.encoder_block(p, x[None], n_heads=n_heads, norm_first=norm_first,
                                              dropout=rate, rng=rng, return_weights=True)
    calls = []  # what the block passes to the parts it calls through minattn (if it does)

    def spy(name):
        inner = getattr(minattn, name)

        def spying(*args, **kwargs):
            if not contract.calling_again():  # the grader's second calls get copies of the rng
                calls.append((name, kwargs.get("dropout", 0.0), kwargs.get("rng")))
            return inner(*args, **kwargs)
        return spying
    rng = np.random.default_rng(0)
    with minattn.swap(multi_head_attention=spy("multi_head_attention"),
                      feed_forward=spy("feed_forward")):
        _, weights = block(rng)
    for name, rate_given, rng_given in calls:
        assert rate_given == rate and rng_given is rng, (
            f"encoder_block(..., dropout={rate}, rng=rng) called {name} with dropout={rate_given}, "
            f"rng={'the rng given' if rng_given is rng else rng_given!r}")
    check_dropout(np.asarray(weights)[0], ref_encoder_block(p, x, n_heads, None, norm_first)[1],
                  rate, "the attention weights")
    check_seeds(lambda rng: np.asarray(block(rng)[0]), "the output")


@prop("encoder_block_keeps_dropout_off_the_residual_path", "encoder_block", "dropout acts inside "
      "the sublayers (and on their outputs), never on the residual path: with sublayers whose "
      "output is zero (w_o, b_o, w_2, b_2 all 0), the block with dropout returns exactly what it "
      "returns without (x for pre-norm, the two norms of x for post-norm)", BLOCK,
      "drop the sublayer's output before adding it to x: x + dropout(sublayer(x)); never "
      "dropout(x + sublayer(x)), and never the block's output", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model, length = 2 * n_heads, data.draw(st.integers(2, 5), "L")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    zero = lambda a: np.zeros_like(a)
    p = {**p, "self_attention": {**p["self_attention"], "w_o": zero(p["self_attention"]["w_o"]),
                                 "b_o": zero(p["self_attention"]["b_o"])},
         "feed_forward": {**p["feed_forward"], "w_2": zero(p["feed_forward"]["w_2"]),
                          "b_2": zero(p["feed_forward"]["b_2"])}}
    x = data.draw(floats((length, d_model)), "x")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    for norm_first in (False, True):
        got = minattn.encoder_block(p, x[None], n_heads=n_heads, norm_first=norm_first,
                                    dropout=rate, rng=np.random.default_rng(0))
        close(np.asarray(got)[0], ref_encoder_block(p, x, n_heads, None, norm_first)[0], 1e-9,
              f"the block's output with dropout={rate} and sublayers that output 0 "
              f"(norm_first={norm_first})")


@prop("encoder_block_returns_the_weights_it_used", "encoder_block", "with dropout=p and "
      "return_weights=True the weights returned are the ones the block's output was computed "
      "with: with a feed-forward network that outputs 0 (w_2, b_2 all 0), each token's output is "
      "the block's formula with the attention output those weights give, reaching the residual "
      "add whole or through dropout (each feature 0 or divided by 1 - p)", BLOCK,
      "return the weights of the very attention call whose output the block adds to x: another "
      "call draws other dropout masks", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model, length = 2 * n_heads, data.draw(st.integers(3, 5), "L")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    p = {**p, "feed_forward": {**p["feed_forward"], "w_2": np.zeros_like(p["feed_forward"]["w_2"]),
                               "b_2": np.zeros_like(p["feed_forward"]["b_2"])}}
    x = data.draw(floats((2, length, d_model)), "x")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    norm = lambda h, which: ref_layer_norm(h, p[which]["gamma"], p[which]["beta"], 1e-5)  # noqa: E731
    masks = np.array(list(np.ndindex(*(2,) * d_model)), float)  # every 0/1 mask of a token's D
    for norm_first in (False, True):
        got, weights = minattn.encoder_block(p, x, n_heads=n_heads, norm_first=norm_first,
                                             dropout=rate, rng=np.random.default_rng(0),
                                             return_weights=True)
        got, weights = np.asarray(got), np.asarray(weights)
        for b in range(2):
            h = norm(x[b], "self_attention_norm") if norm_first else x[b]
            used = ref_output_of_weights(p["self_attention"], h, weights[b])  # [L, D]
            added = np.concatenate([used[:, None], used[:, None] * masks / (1 - rate)], axis=1)
            outs = x[b][:, None] + added  # [L, 1 + 2^D, D]: every way it reaches the residual
            if not norm_first:
                outs = norm(norm(outs, "self_attention_norm"), "feed_forward_norm")
            for t in range(length):
                assert np.isclose(outs[t], got[b, t], rtol=1e-7, atol=1e-9).all(axis=-1).any(), (
                    f"norm_first={norm_first}, batch entry {b}, token {t}: the output "
                    f"{show(got[b, t])} is not what the weights returned give (the attention "
                    f"output they give: {show(used[t])}): are they from another attention call "
                    "than the one whose output the block uses (or is dropout applied elsewhere "
                    "than inside the sublayers or on their outputs)?")


@prop("encoder_block_draws_each_sublayers_dropout_on_its_own", "encoder_block", "when the "
      "block drops its sublayers' outputs (as torch does; optional), each sublayer draws its own "
      "mask: with constant sublayer outputs (attention b_o = 1, feed-forward b_2 = 4, every weight "
      "w_o, w_2 zero) the pre-norm block's output minus x is, feature by feature, (1 or 0 or "
      "1 / (1 - p)) + (4 or 0 or 4 / (1 - p)), and the two sublayers' dropped features are not "
      "the same ones", BLOCK,
      "draw a new mask for each sublayer (rng.random(shape) >= p each time): one mask reused "
      "drops the same features of both", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model = 2 * n_heads
    p = random_params(data.draw(seeds, "params seed"), d_model)
    p = {**p, "self_attention": {**p["self_attention"], "w_o": np.zeros((d_model, d_model)),
                                 "b_o": np.ones(d_model)},
         "feed_forward": {**p["feed_forward"], "w_2": np.zeros_like(p["feed_forward"]["w_2"]),
                          "b_2": np.full(d_model, 4.0)}}
    x = data.draw(floats((16, d_model)), "x")
    rate = 0.5
    got = np.asarray(minattn.encoder_block(p, x[None], n_heads=n_heads, norm_first=True,
                                           dropout=rate, rng=np.random.default_rng(0)))[0]
    added = got - x  # [L, D]: what the two sublayers added, feature by feature
    options = {(a, f): a + f for a in (1.0, 0.0, 1 / (1 - rate)) for f in (4.0, 0.0, 4 / (1 - rate))}
    attention_dropped, feed_forward_dropped = np.zeros(added.shape, bool), np.zeros(added.shape, bool)
    for index in np.ndindex(added.shape):
        found = [key for key, total in options.items() if abs(added[index] - total) < 1e-9]
        assert found, (f"token {index[0]}, feature {index[1]}: the block added {added[index]:.6g} "
                       f"to x, not (1, 0 or {1 / (1 - rate):g}) + (4, 0 or {4 / (1 - rate):g}) "
                       f"for sublayers that output 1 and 4 with dropout={rate}")
        attention_dropped[index], feed_forward_dropped[index] = found[0][0] == 0, found[0][1] == 0
    assert not (attention_dropped.any() and feed_forward_dropped.any()
                and (attention_dropped == feed_forward_dropped).all()), (
        f"the attention's and the feed-forward network's outputs are dropped at exactly the "
        f"same {attention_dropped.sum()} of {attention_dropped.size} features (each drawn on its "
        f"own, they would share about a half): one dropout mask serves both sublayers\n"
        f"dropped:\n{show(attention_dropped.astype(int))}")


@prop("encoder_block_keeps_float32", "encoder_block", "an encoder block on float32 inputs and "
      "params returns float32", BLOCK, "a float64 scalar or array created inside upcasts float32")
def _(data):
    p = as_dtype(random_params(data.draw(seeds, "params seed"), 4), np.float32)
    x = data.draw(floats((1, data.draw(sizes, "L"), 4), dtype=np.float32), "x")
    norm_first = data.draw(st.sampled_from([True, False]), "norm_first")
    out = np.asarray(minattn.encoder_block(p, x, n_heads=2, norm_first=norm_first))
    assert out.dtype == np.float32, f"got {out.dtype}"


# --- Part II: the decoder ---


def ref_grouped_multi_head(p, query, key, n_heads, n_kv_heads, keep=None):
    # one sequence, grouped-query attention: query head h reads key/value head h // (H / H_kv);
    # keep: None, [L_q, L_k] or one per query head [H, L_q, L_k] -> out [L_q, D], w [H, L_q, L_k]
    d_k = query.shape[-1] // n_heads
    q, k, v = query @ p["w_q"] + p["b_q"], key @ p["w_k"] + p["b_k"], key @ p["w_v"] + p["b_v"]
    heads, weights = [], []
    for h in range(n_heads):
        g = h // (n_heads // n_kv_heads)
        out, w = ref_attention(q[:, h * d_k:(h + 1) * d_k], k[:, g * d_k:(g + 1) * d_k],
                               v[:, g * d_k:(g + 1) * d_k],
                               None if keep is None else keep if keep.ndim == 2 else keep[h])
        heads.append(out)
        weights.append(w)
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], np.array(weights)


@prop("grouped_query_attention_shares_kv_heads", "multi_head_attention", "multi_head_attention "
      "with n_kv_heads < n_heads (GQA; MQA when 1): K and V are projected to n_kv_heads heads, and "
      "query head h reads key/value head h // (n_heads // n_kv_heads); the weights are one per "
      "query head [..., H, L_q, L_k] (averaged over them with average_weights=True), for one "
      "sequence [L, D], a batch [B, L, D] or two leading axes [B, B', L, D], under a mask of "
      "any documented form or one per head [B, H, L_q, L_k]", MULTI_HEAD,
      "project K and V to n_kv_heads * d_k features; give each group of n_heads // n_kv_heads "
      "consecutive query heads the same K/V head (broadcast over a group axis, or repeat along "
      "axis -3, never a fixed axis 1); return the weights [..., H, L_q, L_k] as in exercise 5",
      part=4)
def _(data):
    n_kv_heads = data.draw(st.integers(1, 2), "n_kv_heads")
    n_heads = n_kv_heads * data.draw(st.integers(2, 3), "n_heads / n_kv_heads")
    d_k = data.draw(st.integers(1, 2), "d_k")
    d_model, l_q, l_k = n_heads * d_k, data.draw(sizes, "L_q"), data.draw(sizes, "L_k")
    p = random_params(data.draw(seeds, "params seed"), d_model, d_kv=n_kv_heads * d_k)["self_attention"]
    batch = data.draw(st.sampled_from([(1,), (2,), (), (2, 2)]), "batch shape")
    query = data.draw(floats(batch + (l_q, d_model)), "query")
    key = data.draw(floats(batch + (l_k, d_model)), "key")
    if len(batch) == 1:  # a mask of a documented form, one per query head [B, H, L_q, L_k], and
        # in every example the first sequence alone [L, D] under its heads' masks [H, L_q, L_k]
        mask, keep = draw_mask(data, batch[0], l_q, l_k)
        per_head = data.draw(hnp.arrays(bool, batch + (n_heads, l_q, l_k)), "mask per head")
        cases = [(query, key, mask, lambda at: keep(at[0])),
                 (query, key, per_head, lambda at: per_head[at[0]]),
                 (query[0], key[0], per_head[0], lambda at: per_head[0])]
    else:  # one sequence or [B, B', L, D], under a causal mask [L_q, L_k]
        causal = np.tril(np.ones((l_q, l_k), bool))
        cases = [(query, key, causal, lambda at: causal)]
        data.show("mask", causal)
    for query, key, mask, keep_of in cases:
        lead = query.shape[:-2]
        out, weights = minattn.multi_head_attention(p, query, key, key, mask, n_heads=n_heads,
                                                    n_kv_heads=n_kv_heads)
        _, averaged = minattn.multi_head_attention(p, query, key, key, mask, n_heads=n_heads,
                                                   n_kv_heads=n_kv_heads, average_weights=True)
        out, weights, averaged = np.asarray(out), np.asarray(weights), np.asarray(averaged)
        assert out.shape == query.shape and weights.shape == lead + (n_heads, l_q, l_k), (
            f"for query {list(query.shape)}: output {out.shape} and weights {weights.shape}, "
            f"expected {query.shape} and {lead + (n_heads, l_q, l_k)} (one per query head)")
        shown = f"a mask {list(np.shape(mask))}" if mask is not None else "no mask"
        for at in np.ndindex(lead):
            ref_out, ref_w = ref_grouped_multi_head(p, query[at], key[at], n_heads, n_kv_heads,
                                                    keep_of(at))
            what = (f"of batch entry {at} of query {list(query.shape)} with {n_heads} query "
                    f"heads, {n_kv_heads} key/value heads and {shown}")
            close(out[at], ref_out, 1e-8, f"the output {what}")
            close(weights[at], ref_w, 1e-8, f"the weights {what}")
            close(averaged[at], ref_w.mean(axis=0), 1e-8, f"the weights averaged over the heads {what}")


def draw_positions(data, lead, length, name="positions"):
    # int positions for x [*lead, L, ...]: [L] (the same for every sequence), or one row per
    # sequence, [B, L] with lead (B,), [B, 1, L] with lead (B, H)
    form = data.draw(st.sampled_from(["[L]", "one row per sequence"] if lead else ["[L]"]),
                     f"{name} form")
    shape = (length,) if form == "[L]" else (lead[0],) + (1,) * (len(lead) - 1) + (length,)
    return data.draw(hnp.arrays(int, shape, elements=st.integers(0, 1000)), name)


@prop("apply_rope_rotates_feature_pairs", "apply_rope", "apply_rope(x, positions, base=b) "
      "rotates each feature pair (x[i], x[i + d/2]) of the token at position m by the angle m · "
      "b^(-2i/d) (the rotate-half convention of Llama and Hugging Face; b defaults to 10000), for "
      "x [L, d], [B, L, d] or [B, H, L, d] (L = 0 included) and positions that broadcast to x's "
      "[..., L]: [L] or one row per sequence ([B, L], [B, 1, L])", {"apply_rope"},
      "pair feature i with i + d/2 (not 2i with 2i + 1); the angle of pair i is m / base^(2i/d), "
      "with the base given; positions may have leading axes of their own, so keep them", part=2)
def _(data):
    d, length = 2 * data.draw(st.integers(1, 3), "d / 2"), data.draw(st.integers(0, 5), "L")
    lead = data.draw(st.sampled_from([(2,), (2, 3)]), "leading axes of x")
    x = data.draw(floats(lead + (length, d)), "x")
    positions = draw_positions(data, lead, length)
    drawn = data.draw(st.sampled_from([None, 10000.0, 500000.0]), "base")
    # the first sequence alone too, x [L, d] with its positions [L], in every example
    first = (0,) * len(lead)
    alone = x[first], np.broadcast_to(positions, lead + (length,))[first]
    for (x, positions), base in [((x, positions), drawn), ((x, positions), 100.0), (alone, drawn)]:
        got = minattn.apply_rope(x, positions) if base is None else \
            minattn.apply_rope(x, positions, base=base)
        close(got, ref_rope(x, positions, base or 10000.0), 1e-9,
              f"apply_rope(x, positions{'' if base is None else f', base={base}'}) with x "
              f"{list(x.shape)} and positions {list(np.shape(positions))}")


@prop("apply_rope_is_exact_far_into_the_sequence", "apply_rope", "apply_rope of float32 or float16 "
      "x at positions up to 100000 (far past 1024) is the rotation by the exact angles, rounded "
      "once to x's dtype: within 2e-5 (float32) or 0.02 (float16) of the float64 rotation",
      {"apply_rope"}, "form the angles positions * base ** (-2i/d) in float64 (position 3001 is "
      "3000 in float16, and float32 keeps 3 digits of an angle near 100000), take cos and sin, "
      "THEN cast them to x.dtype; a table of angles for the first 1024 (or any fixed number of) "
      "positions does not reach them all", part=2)
def _(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float16]), "dtype")
    d, length = 2 * data.draw(st.integers(2, 4), "d / 2"), data.draw(sizes, "L")
    x = data.draw(floats((length, d), dtype=dtype), "x")
    positions = data.draw(hnp.arrays(int, (length,), elements=st.integers(1000, 100000)),
                          "positions")
    got = np.asarray(minattn.apply_rope(x, positions))
    assert got.dtype == dtype, f"{np.dtype(dtype)} in, {got.dtype} out"
    close(got.astype(np.float64), ref_rope(x.astype(np.float64), positions),
          2e-5 if dtype == np.float32 else 0.02, f"apply_rope(x, positions) in {np.dtype(dtype)}")


@prop("apply_rope_keeps_float32", "apply_rope", "apply_rope of float32 x is float32",
      {"apply_rope"}, "the angles are float64 (positions times a float64 power): cast cos and sin "
      "to x.dtype before multiplying", part=2)
def _(data):
    x = data.draw(floats((1, data.draw(sizes, "L"), 4), dtype=np.float32), "x")
    got = np.asarray(minattn.apply_rope(x, np.arange(x.shape[1])))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"


SELF_ATTENTION = {"self_attention", "apply_rope"} | (MULTI_HEAD - {"multi_head_attention"})


def draw_self_attention(data, rope=None, grouped=False):
    # grouped: fewer key/value heads than query heads (the second reading's grouped-query
    # attention); otherwise one per query head and n_kv_heads left at its default, so that a
    # first-reading answer without the parameter is checked
    if grouped:
        n_kv_heads = data.draw(st.integers(1, 2), "n_kv_heads")
        n_heads = n_kv_heads * data.draw(st.integers(2, 3), "n_heads / n_kv_heads")
    else:
        n_heads = n_kv_heads = data.draw(st.integers(1, 3), "n_heads")
    d_k = 2 * data.draw(st.sampled_from([2, 3]), "d_k / 2")  # d_k = 2 would not show rope_base
    p = random_params(data.draw(seeds, "params seed"), n_heads * d_k, d_kv=n_kv_heads * d_k)
    if rope is None:
        rope = data.draw(st.sampled_from([True, False]), "with RoPE")
    base = data.draw(st.sampled_from([50.0, 10000.0, 500.0]), "rope_base")
    return n_heads, n_kv_heads, n_heads * d_k, p["self_attention"], rope, base


def ref_cache(p, x, n_heads, n_kv_heads, positions, base):
    # one sequence x [L, D] -> the keys (rotated when positions are given) and the values of its
    # key/value heads, [H_kv, L, d_k] each
    d_k = x.shape[-1] // n_heads
    k, v = x @ p["w_k"] + p["b_k"], x @ p["w_v"] + p["b_v"]
    k, v = (np.stack([a[:, g * d_k:(g + 1) * d_k] for g in range(n_kv_heads)]) for a in (k, v))
    return (k if positions is None else ref_rope(k, positions, base)), v


def row(positions, b):
    # the positions of batch entry b: [L] are everyone's, [B, L] one row per entry
    return None if positions is None else positions if positions.ndim == 1 else positions[b]


def given_kv_heads(n_heads, n_kv_heads):
    # the n_kv_heads a check passes: None (the default) when every query head has its own
    return None if n_kv_heads == n_heads else n_kv_heads


def self_attention_matches_a_loop(data, grouped):
    n_heads, n_kv_heads, d_model, p, rope, base = draw_self_attention(data, rope=True,
                                                                      grouped=grouped)
    length, batch = data.draw(st.integers(2, 5), "L"), data.draw(st.integers(1, 2), "B")
    x = data.draw(floats((batch, length, d_model)), "x")
    positions = draw_positions(data, (batch,), length)
    mask, keep = draw_mask(data, batch, length, length)
    out, cache = minattn.self_attention(p, x, mask, n_heads=n_heads,
                                        n_kv_heads=given_kv_heads(n_heads, n_kv_heads),
                                        positions=positions, rope_base=base)
    for b in range(batch):
        check_sequence(np.asarray(out)[b], {n: np.asarray(a)[b] for n, a in cache.items()}, p,
                       x[b], n_heads, n_kv_heads, keep(b), row(positions, b), base,
                       f"batch entry {b}")


def check_sequence(out, cache, p, x, n_heads, n_kv_heads, keep, positions, base, what):
    # self-attention's output [L, D] and cache {'k', 'v'} [H_kv, L, d_k] of one sequence x [L, D]
    # against the slow loop
    close(out, ref_self_attention(p, x, n_heads, n_kv_heads, keep, positions, base), 1e-8,
          f"the output of {what}")
    k, v = ref_cache(p, x, n_heads, n_kv_heads, positions, base)
    close(np.asarray(cache["k"]), k, 1e-8, f"cache['k'] [H_kv, L, d_k] of {what}")
    close(np.asarray(cache["v"]), v, 1e-8, f"cache['v'] [H_kv, L, d_k] of {what}")


@prop("self_attention_matches_a_loop", "self_attention", "self_attention(params, x, mask, n_heads="
      "H, positions=p, rope_base=b) projects x [B, L, D], rotates q and k by RoPE at positions "
      "[L] or [B, L] (one row per sequence), attends in H heads under the mask (any documented "
      "form), and returns the cache {'k', 'v'} of the rotated keys and the values [B, H, L, d_k]",
      SELF_ATTENTION,
      "RoPE on q and k only, with rope_base, at each sequence's own positions (q and k have a head "
      "axis that positions [B, L] lack); the cache holds k after RoPE", part=2)
def _(data):
    self_attention_matches_a_loop(data, grouped=False)


@prop("grouped_self_attention_matches_a_loop", "self_attention", "self_attention with n_kv_heads="
      "H_kv < n_heads=H (grouped-query attention, the second reading): query head h reads "
      "key/value head h // (H / H_kv), and the cache holds the H_kv key/value heads "
      "[B, H_kv, L, d_k]", SELF_ATTENTION,
      "w_k and w_v project to n_kv_heads * d_k features; query head h reads key/value head "
      "h // (H / H_kv); the cache keeps the H_kv heads, not copies for every query head", part=4)
def _(data):
    self_attention_matches_a_loop(data, grouped=True)


@prop("kv_cache_decoding_matches_the_full_pass", "self_attention", "a sequence fed in chunks of "
      "any lengths (a prompt, then one or several tokens at a time), each with the cache the call "
      "before returned, its own positions and the bottom-right causal mask over all the keys so "
      "far (or no mask for a single token), gives the outputs of one full causal pass, and the "
      "last cache holds the keys and values of the whole sequence, in order; for a batch "
      "[B, L, D] or one sequence [L, D]", SELF_ATTENTION,
      "the cache is the past: the new keys and values come after the cached ones, and a chunk's "
      "queries are the last positions of the keys it sees; x [L, D] has no batch axis (use "
      "axis -2 and -3, never 1 or 2)", part=2)
def _(data):
    n_heads, n_kv_heads, d_model, p, rope, base = draw_self_attention(data)
    length, batch = data.draw(st.integers(2, 6), "L"), data.draw(st.integers(1, 2), "B")
    starts = sorted(data.draw(st.sets(st.integers(1, length - 1), min_size=1, max_size=3),
                              "where chunks after the first start"))
    x = data.draw(floats((batch, length, d_model)), "x")
    positions = draw_positions(data, (batch,), length) if rope else None
    chunks = list(zip([0, *starts], [*starts, length]))
    masks = []
    for a, b in chunks:
        mask = np.arange(a, b)[:, None] >= np.arange(b)[None, :]  # query i sits at position a + i
        masks.append(None if b - a == 1 and data.draw(st.booleans(), f"no mask for the token at {a}")
                     else mask)

    def decode(x, positions):
        cache, outs = None, []
        for (a, b), mask in zip(chunks, masks):
            out, cache = minattn.self_attention(
                p, x[..., a:b, :], mask, n_heads=n_heads,
                n_kv_heads=given_kv_heads(n_heads, n_kv_heads), rope_base=base, cache=cache,
                positions=None if positions is None else positions[..., a:b])
            outs.append(np.asarray(out))
        return np.concatenate(outs, axis=-2), cache

    causal = np.tril(np.ones((length, length), bool))
    shown = ", ".join(f"{a}..{b - 1}" for a, b in chunks)
    # the batch [B, L, D], and in every example its first sequence alone [L, D]
    for alone in (False, True):
        got, cache = decode(x[0], row(positions, 0)) if alone else decode(x, positions)
        for e in range(1 if alone else batch):
            at = () if alone else (e,)
            what = "the sequence alone (x [L, D])" if alone else f"batch entry {e}"
            check_sequence(got[at], {n: np.asarray(a)[at] for n, a in cache.items()}, p, x[e],
                           n_heads, n_kv_heads, causal, row(positions, e), base,
                           f"{what}, fed as the chunks of tokens {shown} (the last cache)")


@prop("self_attention_continues_a_long_cache", "self_attention", "given a cache of L_past keys "
      "and values (1000 to 1100 of them: far past 1024), self_attention of L new tokens attends "
      "over all L_past + L keys under the bottom-right causal mask, or with mask=None over all "
      "of them unmasked (in every example), and returns the cache with "
      "the new keys and values after the old ones, for a batch [1, L, D] or one sequence [L, D]",
      SELF_ATTENTION, "append to the cache given (np.concatenate along axis -2), whatever its "
      "length: no buffer of a fixed size (1024), and never the caller's cache changed; mask=None "
      "means no mask, a cache or not (never a causal mask imposed)", part=2)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_k, length = 2, data.draw(sizes, "L")
    p = random_params(data.draw(seeds, "params seed"), n_heads * d_k)["self_attention"]
    past = data.draw(st.integers(1000, 1100), "L_past")
    batch = data.draw(st.sampled_from([(1,), ()]), "batch shape")
    rng = np.random.default_rng(data.draw(seeds, "seed of the cache"))
    cache = {"k": rng.normal(size=batch + (n_heads, past, d_k)),
             "v": rng.normal(size=batch + (n_heads, past, d_k))}
    x = data.draw(floats(batch + (length, n_heads * d_k)), "x")
    keep = np.arange(length)[:, None] + past >= np.arange(past + length)[None, :]
    check_long_cache(p, x, keep, n_heads, cache, batch, past, length, d_k)
    # mask=None is no mask, with a cache too, in every example: every query sees every key
    check_long_cache(p, x, None, n_heads, cache, batch, past, length, d_k)


def check_long_cache(p, x, keep, n_heads, cache, batch, past, length, d_k):
    out, new = minattn.self_attention(p, x, keep, n_heads=n_heads, cache=cache)
    out, new_k, new_v = np.asarray(out), np.asarray(new["k"]), np.asarray(new["v"])
    assert new_k.shape == batch + (n_heads, past + length, d_k), (
        f"the new cache['k'] has shape {new_k.shape}, expected {batch + (n_heads, past + length, d_k)}")
    one = (0,) if batch else ()
    x1, old_k, old_v = x[one], cache["k"][one], cache["v"][one]
    q, k, v = (x1 @ p[f"w_{c}"] + p[f"b_{c}"] for c in "qkv")
    heads = []
    for h in range(n_heads):
        part = slice(h * d_k, (h + 1) * d_k)
        keys = np.concatenate([old_k[h], k[:, part]])
        values = np.concatenate([old_v[h], v[:, part]])
        heads.append(ref_attention(q[:, part], keys, values, keep)[0])
        close(new_k[one][h], keys, 1e-12, f"the new cache['k'] of head {h}")
        close(new_v[one][h], values, 1e-12, f"the new cache['v'] of head {h}")
    close(out[one], np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], 1e-8,
          f"the output of {length} tokens after {past} cached ones, "
          + ("mask=None (no mask)" if keep is None else "under the bottom-right causal mask"))


@prop("self_attention_keeps_float32", "self_attention", "self-attention on float32 inputs and "
      "params returns a float32 output and cache, with RoPE or without", SELF_ATTENTION,
      "cast RoPE's cos and sin to x.dtype; a float64 scalar or array created inside upcasts",
      part=2)
def _(data):
    n_heads, n_kv_heads, d_model, p, rope, base = draw_self_attention(data)
    x = data.draw(floats((1, data.draw(sizes, "L"), d_model), dtype=np.float32), "x")
    out, cache = minattn.self_attention(as_dtype(p, np.float32), x, n_heads=n_heads,
                                        n_kv_heads=given_kv_heads(n_heads, n_kv_heads),
                                        rope_base=base,
                                        positions=np.arange(x.shape[1]) if rope else None)
    dtypes = {np.asarray(out).dtype, np.asarray(cache["k"]).dtype, np.asarray(cache["v"]).dtype}
    assert dtypes == {np.dtype(np.float32)}, f"float32 in, {dtypes} out"


@prop("rope_attention_depends_on_offsets_only", "self_attention", "self_attention with RoPE "
      "positions p and with p + c (the same tokens, numbered from c) gives the same output",
      {"self_attention", "apply_rope"},
      "apply RoPE to q and k only: rotating the values stamps absolute positions on the output",
      part=2)
def _(data):
    n_heads, shift = data.draw(st.integers(1, 2), "n_heads"), data.draw(st.integers(1, 500), "shift")
    d_model, length = 4 * n_heads, data.draw(sizes, "L")
    p = random_params(data.draw(seeds, "params seed"), d_model)["self_attention"]
    x = data.draw(floats((1, length, d_model)), "x")
    positions = np.arange(length)
    a = minattn.self_attention(p, x, n_heads=n_heads, positions=positions)[0]
    b = minattn.self_attention(p, x, n_heads=n_heads, positions=positions + shift)[0]
    close(np.asarray(b), np.asarray(a), 1e-8, f"the output with positions shifted by {shift}")


@prop("causal_lm_cache_matches_the_full_pass", "causal_lm", "feeding tokens one at a time "
      "through the KV cache gives the logits of one full causal_lm pass", {"causal_lm"},
      "a token fed after a cache of L_past tokens sits at position L_past, not 0; its mask is "
      "bottom-right aligned", part=2)
def _(data):
    length, seed = data.draw(st.integers(2, 5), "L"), data.draw(seeds, "seed")
    lm, _ = minattn.init_causal_lm(np.random.default_rng(seed), 7, 1, 4, 2, 8, n_positions=8)
    tokens = np.random.default_rng(seed).integers(0, 7, size=(1, length))
    data.show("tokens", tokens)
    full = np.asarray(minattn.causal_lm(lm, tokens, n_heads=2))
    cache, steps = None, []
    for t in range(length):
        logits, cache = minattn.causal_lm(lm, tokens[:, t:t + 1], n_heads=2, cache=cache,
                                          return_cache=True)
        steps.append(np.asarray(logits))
    close(np.concatenate(steps, axis=1), full, 1e-9, "the step-by-step logits")


def ref_attention_with_sinks(q, k, v, sinks, keep=None, scale=None):
    # one head: q [L_q, d_k], k [L_k, d_k], v [L_k, d_v], sinks [L_q] (one logit a row), keep
    # bool [L_q, L_k] -> out [L_q, d_v], w [L_q, L_k]: w_ij = exp(S_ij) / (exp(s_i) + the sum of
    # exp(S_ij') over the kept keys); masked keys 0; nothing kept and a sink of -inf -> zeros
    d_k = q.shape[-1]
    scale = 1 / math.sqrt(d_k) if scale is None else scale
    weights = np.zeros((q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):
        kept = [j for j in range(k.shape[0]) if keep is None or keep[i, j]]
        scores = {j: sum(q[i, c] * k[j, c] for c in range(d_k)) * scale for j in kept}
        top = max([float(sinks[i]), *scores.values()])
        if top == -math.inf:
            continue
        denominator = math.exp(sinks[i] - top) + sum(math.exp(s - top) for s in scores.values())
        for j, s in scores.items():
            weights[i, j] = math.exp(s - top) / denominator
    return weights @ v, weights


def draw_heads(data, dtype=np.float64):
    # q [B, H, L_q, d_k], k [B, H, L_k, d_k], v [B, H, L_k, d_v], and H
    n_heads, batch = data.draw(st.integers(1, 3), "H"), data.draw(st.integers(1, 2), "B")
    l_q, l_k, d_k, d_v = (data.draw(sizes, n) for n in ("L_q", "L_k", "d_k", "d_v"))
    q = data.draw(floats((batch, n_heads, l_q, d_k), dtype=dtype), "q")
    k = data.draw(floats((batch, n_heads, l_k, d_k), dtype=dtype), "k")
    return n_heads, q, k, data.draw(floats((batch, n_heads, l_k, d_v), dtype=dtype), "v")


@prop("attention_sinks_take_their_share", "scaled_dot_product_attention", "with sinks=s of "
      "shape [H, 1] (one logit per head, broadcasting over the queries), p_ij = exp(S_ij) / "
      "(exp(s_h) + Σ_j' exp(S_ij')): each row sums to 1 − exp(s_h) / (exp(s_h) + Σ_j' "
      "exp(S_ij')), the sink's share, and the output is Σ_j p_ij v_j (a slow loop over the rows "
      "computes the reference); also with a scale given (S = q kᵀ · scale) and under a mask "
      "[B, 1, L_q, L_k]; with dropout=p too, the weights dropped are those",
      ATTENTION,
      "the sink is one more logit in the denominator and holds no value: append it to the scores "
      "as a last column, softmax, then drop that column without renormalising; head h uses "
      "sinks[h]; the scores are scaled as without sinks, and the mask broadcasts as without "
      "them (give its last axis a column of True for the sink)", part=4)
def _(data):
    n_heads, q, k, v = draw_heads(data)
    sinks = data.draw(floats((n_heads, 1)), "sinks")
    scale = data.draw(st.sampled_from([None, 0.5]), "scale")
    mask = data.draw(hnp.arrays(bool, q.shape[:1] + (1,) + q.shape[2:3] + k.shape[2:3]),
                     "mask [B, 1, L_q, L_k]")
    # the scale drawn without a mask, and in every example scale=2.0 with the mask
    for scale, keep in ((scale, None), (2.0, mask)):
        weights = check_sinks(q, k, v, sinks, keep, scale)
    out, dropped = (np.asarray(a) for a in minattn.scaled_dot_product_attention(
        q, k, v, keep, scale=scale, sinks=sinks, dropout=0.5, rng=np.random.default_rng(0)))
    check_dropout(dropped, weights, 0.5, "the weights with sinks", some=False)
    close(out, dropped @ v, 1e-9, "the output with sinks and dropout=0.5 (the dropped weights @ v)")


def check_sinks(q, k, v, sinks, keep, scale):
    # attention with sinks [H, 1] on q [B, H, L_q, d_k] against the slow loop -> the weights
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, scale=scale, sinks=sinks)
    out, weights = np.asarray(out), np.asarray(weights)
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    given = f"scale={scale}, {'no mask' if keep is None else f'a mask {list(keep.shape)}'}"
    for b, h in np.ndindex(q.shape[:2]):
        s = sinks[h, 0]
        if keep is None:  # the sink's share, stated on its own
            scores = [[sum(q[b, h, i] * k[b, h, j]) * factor for j in range(k.shape[2])]
                      for i in range(q.shape[2])]
            share = [1 / (1 + sum(math.exp(x - s) for x in row)) for row in scores]
            close(weights[b, h].sum(axis=-1), 1 - np.array(share), 1e-9,
                  f"the row sums of batch entry {b}, head {h} (sink {s}, {given})")
        ref_out, ref_w = ref_attention_with_sinks(q[b, h], k[b, h], v[b, h], np.full(q.shape[2], s),
                                                  None if keep is None else keep[b, 0], scale)
        close(weights[b, h], ref_w, 1e-9, f"the weights of batch entry {b}, head {h} ({given})")
        close(out[b, h], ref_out, 1e-9, f"the output of batch entry {b}, head {h} ({given})")
    return weights


@prop("attention_sinks_join_after_masking", "scaled_dot_product_attention", "with a boolean mask "
      "and sinks (one per query row, shape [L_q]), the masked keys leave the denominator and the "
      "sink stays in it (it is never masked): a query whose keys are all masked gets all-zero "
      "weights and a zero output", ATTENTION,
      "mask the scores first, then append the sink's column with a mask column of True (the "
      "sink is never masked, whatever the mask says of the keys); masking the weights after "
      "the softmax leaves the masked keys in the denominator", part=4)
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    keep = data.draw(hnp.arrays(bool, (q.shape[0], k.shape[0])), "mask")
    keep[0] = False  # query 0 sees no key
    data.show("mask", keep)
    sinks = data.draw(floats((q.shape[0],)), "sinks")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, sinks=sinks)
    ref_out, ref_w = ref_attention_with_sinks(q, k, v, sinks, keep)
    close(np.asarray(weights)[0], np.zeros(k.shape[0]), 0, "the fully masked query's weights")
    close(np.asarray(out)[0], np.zeros(v.shape[-1]), 0, "the fully masked query's output")
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_sinks_of_minus_inf_are_plain_attention", "scaled_dot_product_attention", "sinks "
      "of -inf (or very negative, -1e4) take no share: the weights and the output equal "
      "attention's without sinks, masked or not", ATTENTION,
      "exp(-inf - max) is 0: shift by the row's max over the kept keys and the sink together, and "
      "by 0 where that max is -inf", part=4)
def _(data):
    n_heads, q, k, v = draw_heads(data)
    keep = data.draw(st.one_of(st.none(), hnp.arrays(bool, (q.shape[2], k.shape[2]))), "mask")
    sinks = np.full((n_heads, 1), data.draw(st.sampled_from([-np.inf, -1e4]), "every sink"))
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, sinks=sinks)
    for b, h in np.ndindex(q.shape[:2]):
        ref_out, ref_w = ref_attention(q[b, h], k[b, h], v[b, h], keep)
        close(np.asarray(weights)[b, h], ref_w, 1e-9, f"the weights of batch entry {b}, head {h}")
        close(np.asarray(out)[b, h], ref_out, 1e-9, f"the output of batch entry {b}, head {h}")


@prop("attention_sinks_keep_float32", "scaled_dot_product_attention", "attention with sinks on "
      "float32 q, k, v returns float32 output and weights, whether the sinks are float32 or "
      "float64", ATTENTION,
      "cast the sinks to the scores' dtype before appending them: a float64 column upcasts",
      part=4)
def _(data):
    n_heads, q, k, v = draw_heads(data, np.float32)
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), "sinks dtype")
    sinks = data.draw(floats((n_heads, 1), dtype=dtype), "sinks")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, sinks=sinks)
    out, weights = np.asarray(out), np.asarray(weights)
    assert out.dtype == weights.dtype == np.float32, f"got {out.dtype}, {weights.dtype}"


# --- Attention and recurrence (the second reading, part 4): the gated delta rule ---

def ref_delta_rule(q, k, v, beta, g, scale, state):
    # one sequence, the papers' column form: q, k [L, d_k], v [L, d_v], beta, g [L], state
    # [d_k, d_v] -> out [L, d_v], final state. M = stateᵀ [d_v, d_k]:
    # M ← e^{g_t} M (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,  o_t = M (scale q_t)
    m, out = np.array(state, np.float64).T, np.zeros((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        kt, vt = k[t][:, None], v[t][:, None]
        m = math.exp(g[t]) * m @ (np.eye(k.shape[1]) - beta[t] * kt @ kt.T) + beta[t] * vt @ kt.T
        out[t] = m @ (scale * q[t])
    return out, m.T


def draw_delta_rule(data, dtype=np.float64, heads=False):
    # q [B, L, d_k], keys k [B, L, d_k] of any length (the formula holds for every key: unit
    # keys alone would hide keys normalised again), v [B, L, d_v], beta in [0, 1] and g in
    # [-2, 0] [B, L], a state [B, d_k, d_v]; heads=True: [B, H, ...] instead of [B, ...] too
    lead = (data.draw(st.integers(1, 2), "B"),)
    if heads and data.draw(st.booleans(), "with a head axis"):
        lead += (data.draw(st.integers(1, 3), "H"),)
    length = data.draw(sizes, "L")
    d_k, d_v = data.draw(sizes, "d_k"), data.draw(sizes, "d_v")
    q = data.draw(floats(lead + (length, d_k), dtype=dtype), "q")
    k = data.draw(floats(lead + (length, d_k), dtype=dtype), "k")
    k = k / dtype(3)  # norms up to sqrt(5): a few steps of (I - beta k k^T) stay small
    data.show("k", k)
    v = data.draw(floats(lead + (length, d_v), dtype=dtype), "v")
    beta = data.draw(floats(lead + (length,), 1.0, dtype).map(np.abs), "beta")
    g = data.draw(floats(lead + (length,), 2.0, dtype).map(lambda a: -np.abs(a)), "g")
    state = data.draw(floats(lead + (d_k, d_v), dtype=dtype), "initial_state")
    return q, k, v, beta, g, state


@prop("delta_rule_matches_a_loop", "delta_rule", "delta_rule(q, k, v, beta, g, scale=s, "
      "initial_state=S_0, return_state=True) equals a slow loop of the papers' update, S_t = "
      "e^{g_t} (I − β_t k_tᵀ k_t) S_{t−1} + β_t k_tᵀ v_t and o_t = (s q_t) S_t, in its output "
      "and its final state, for q [B, L, d_k] or with heads [B, H, L, d_k], keys of any length, "
      "with a decay g and without one (g=None)", {"delta_rule"},
      "forget first (S ← e^{g_t} S), then predict with the forgotten state (k_t S), write "
      "β_t k_tᵀ (v_t − k_t S), and read with the new state; scale multiplies the query; start "
      "from initial_state; scale=0 is a valid scale (zeros), not 'not given'; use the keys as "
      "given (never normalise them)", part=4)
def _(data):
    q, k, v, beta, drawn, state = draw_delta_rule(data, heads=True)
    scale = data.draw(st.sampled_from([None, 0.0, 0.5, 2.0]), "scale")
    s = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    for g in (drawn, None):  # and no decay, g=None, in every example
        out, final = minattn.delta_rule(q, k, v, beta, g, scale=scale, initial_state=state,
                                        return_state=True)
        decay = np.zeros(beta.shape) if g is None else g  # g=None: no decay, e^0 = 1
        for b in np.ndindex(q.shape[:-2]):
            ref_out, ref_state = ref_delta_rule(q[b], k[b], v[b], beta[b], decay[b], s, state[b])
            close(np.asarray(out)[b], ref_out, 1e-8, f"the output of entry {b}"
                  + (" with g=None" if g is None else ""))
            close(np.asarray(final)[b], ref_state, 1e-8, f"the final state of entry {b}"
                  + (" with g=None" if g is None else ""))


@prop("delta_rule_is_linear_attention_for_orthonormal_keys", "delta_rule", "with β = 1, no "
      "decay (g=None), no initial state and orthonormal keys, nothing the state holds is "
      "predicted by a new key, so every value is written whole: the output is linear attention, "
      "scale · (q kᵀ masked causally) v", {"delta_rule"},
      "the prediction k_t S uses the state before this token's write; with g=None leave the "
      "state as it is (e^0 = 1), and start from zeros", part=4)
def _(data):
    d_k = data.draw(st.integers(1, 5), "d_k")
    length = data.draw(st.integers(1, d_k), "L")
    basis = np.linalg.qr(data.draw(floats((d_k, d_k)), "a matrix whose Q factor gives the keys")
                         + 4 * np.eye(d_k))[0]
    k = basis.T[:length]  # orthonormal rows
    q = data.draw(floats((length, d_k)), "q")
    v = data.draw(floats((length, data.draw(sizes, "d_v"))), "v")
    out = minattn.delta_rule(q, k, v, np.ones(length))
    close(out, np.tril(q @ k.T) @ v / math.sqrt(d_k), 1e-8, "the output")


@prop("delta_rule_continues_from_its_state", "delta_rule", "a sequence cut in two: the first "
      "part's final state (return_state=True), given as initial_state to the second part, gives "
      "the outputs and the final state of the whole sequence", {"delta_rule"},
      "return the state after the last token, and start the loop from initial_state when one is "
      "given", part=4)
def _(data):
    q, k, v, beta, g, state = draw_delta_rule(data)
    cut = data.draw(st.integers(0, q.shape[1]), "cut")
    part = lambda a, s: a[:, s] if a.ndim == 2 else a[:, s, :]  # noqa: E731
    first, second = slice(0, cut), slice(cut, None)
    whole, end = minattn.delta_rule(q, k, v, beta, g, return_state=True)
    if cut:
        out1, middle = minattn.delta_rule(*(part(a, first) for a in (q, k, v, beta, g)),
                                          return_state=True)
    else:
        out1, middle = whole[:, :0], np.zeros_like(state)
    if cut < q.shape[1]:
        out2, end2 = minattn.delta_rule(*(part(a, second) for a in (q, k, v, beta, g)),
                                        initial_state=middle, return_state=True)
    else:
        out2, end2 = whole[:, :0], middle
    close(np.concatenate([np.asarray(out1), np.asarray(out2)], axis=1), whole, 1e-8,
          "the two parts' outputs, joined")
    close(end2, end, 1e-8, "the second part's final state")


@prop("delta_rule_with_decay_zero_forgets", "delta_rule", "a decay of zero (g = -inf, e^g = 0) "
      "forgets the initial state and every earlier token: o_t = scale · (q_t · k_t) β_t v_t",
      {"delta_rule"},
      "multiply the state by e^{g_t} before the token's prediction and write", part=4)
def _(data):
    q, k, v, beta, _, state = draw_delta_rule(data)
    g = np.full(beta.shape, data.draw(st.sampled_from([-np.inf, -1e4]), "every g"))
    out = minattn.delta_rule(q, k, v, beta, g, initial_state=state)
    own = np.sum(q * k, axis=-1, keepdims=True) * beta[..., None] * v / math.sqrt(q.shape[-1])
    close(out, own, 1e-8, "the output")


@prop("delta_rule_keeps_float32", "delta_rule", "delta_rule of float32 q, k, v, beta and g is "
      "float32, and so is its final state", {"delta_rule"},
      "make the zero state in q's dtype; a float64 scalar array (np.float64(...)) or a state made "
      "with np.zeros(shape) upcasts float32", part=4)
def _(data):
    q, k, v, beta, g, _ = draw_delta_rule(data, np.float32)
    out, final = minattn.delta_rule(q, k, v, beta, g, return_state=True)
    out, final = np.asarray(out), np.asarray(final)
    assert out.dtype == final.dtype == np.float32, f"got {out.dtype}, {final.dtype}"


# --- Part III: gradients; the second reading (part 4): blockwise attention ---

def ref_softmax_vjp(y, g, axis):
    # slice by slice along axis, in float64 with an exactly rounded sum: y_j (g_j - sum_i g_i y_i)
    rows, grads = np.moveaxis(y, axis, -1), np.moveaxis(g, axis, -1)
    out = np.empty(rows.shape)
    for index in np.ndindex(rows.shape[:-1]):
        total = math.fsum(float(a) * float(b) for a, b in zip(rows[index], grads[index]))
        out[index] = [float(a) * (float(b) - total) for a, b in zip(rows[index], grads[index])]
    return np.moveaxis(out, -1, axis)


@prop("softmax_vjp_matches_finite_differences", "softmax_vjp", "softmax_vjp(y, g, axis) with y = "
      "softmax(x) is the gradient of sum(g · softmax(x)) with respect to x, as central finite "
      "differences give it, along any axis (axis=0 included, and the middle axis of a 3-D y); "
      "and, in float64, it equals y ⊙ (g - Σ g ⊙ y) computed exactly in float64 (to 1e-12: no "
      "float32 inside), along every axis of a 3-D y", set(),
      "dL/dx = y * (g - sum(g * y, axis, keepdims=True)): the sum runs over the softmax's "
      "axis, whichever it is; compute in the inputs' dtype, and if you move the axis to the end, "
      "move it back with np.moveaxis(r, -1, axis)", part=3)
def _(data):
    shape = (data.draw(sizes, "n0"), data.draw(sizes, "n1"))
    x, g = data.draw(floats(shape), "x"), data.draw(floats(shape), "g")
    drawn = data.draw(st.sampled_from([None, -1, 1]), "axis")
    x3, g3 = data.draw(floats((2, 3, 2)), "x3"), data.draw(floats((2, 3, 2)), "g3")
    # axis=0, the boundary (`axis or -1` loses it), and the middle axis of a 3-D array, in every
    # example
    for x, g, axis in ((x, g, drawn), (x, g, 0), (x3, g3, 1)):
        shape = x.shape
        along = -1 if axis is None else axis
        soft = lambda z: np.apply_along_axis(ref_softmax, along, z)
        h, expected = 1e-6, np.zeros(shape)
        for index in np.ndindex(shape):
            step = np.zeros(shape)
            step[index] = h
            expected[index] = np.sum(g * (soft(x + step) - soft(x - step))) / (2 * h)
        axis, call = (-1, {}) if axis is None else (axis, {"axis": axis})
        got = _CURRENT["softmax_vjp"](soft(x), g, **call)
        close(got, expected, 1e-6, f"softmax_vjp(y, g{f', axis={axis}' if call else ''}) with y "
                                   f"of shape {list(shape)}")
    # float64 against the exact float64 product, at float64's tolerance, along every axis of the
    # 3-D array (finite differences cannot see a float32 step inside)
    y3 = np.apply_along_axis(ref_softmax, -1, x3)
    for axis in (0, 1, 2, -1, -2, -3):
        close(_CURRENT["softmax_vjp"](y3, g3, axis=axis), ref_softmax_vjp(y3, g3, axis), 1e-12,
              f"softmax_vjp(y, g, axis={axis}) with y of shape {list(y3.shape)}, in float64")


@prop("softmax_vjp_keeps_float32", "softmax_vjp", "softmax_vjp of float32 y and g is float32",
      set(), "a float64 scalar or array created inside upcasts float32", part=3)
def _(data):
    y = np.full((2, 3), 1 / 3, np.float32)
    g = data.draw(floats((2, 3), dtype=np.float32), "g")
    got = np.asarray(_CURRENT["softmax_vjp"](y, g))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"


def key_blocks(length, block_size):
    # the blocks of keys a blockwise loop visits: (first, last) key of each, the last maybe partial
    return [(a, min(a + block_size, length) - 1) for a in range(0, length, block_size)]


def blockwise_diagnosis(got, q, k, v, keep, scale, block_size):
    """One batch entry of a wrong blockwise output -> what it shows, in the student's terms:
    which rows are wrong, and which block they lose (or what else their pattern points to)."""
    ref = ref_attention(q, k, v, keep, scale)[0]
    wrong = [i for i in range(len(q)) if not np.allclose(got[i], ref[i], rtol=1e-9, atol=1e-9)]
    blocks = key_blocks(k.shape[0], block_size)
    listed = ", ".join(f"{a}..{b}" for a, b in blocks)
    where = f"with block_size={block_size} the {k.shape[0]} keys form the blocks {listed}"
    for which, (a, b) in (("last", blocks[-1]), ("first", blocks[0])):
        without = keep.copy()
        without[:, a:b + 1] = False
        if np.allclose(got, ref_attention(q, k, v, without, scale)[0], rtol=1e-9, atol=1e-9):
            partial = b - a + 1 < block_size
            return (f"the output is attention without keys {a}..{b}, the {which} block"
                    + (f" (a partial one: {b - a + 1} of {block_size} keys)" if partial else "")
                    + f": {where}, and your loop never reads that one"
                    + ("; range(0, L_k, block_size) reaches it, L_k // block_size blocks do not"
                       if partial else ""))
    empty = [i for i in wrong if not keep[i].any()]
    if empty:
        return (f"queries {empty} see no key (every one is masked): their output must be zeros; "
                "where the running sum l is 0, divide by 1")
    scores = (q @ k.T) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    late = [i for i in wrong
            if np.argmax(np.where(keep[i], scores[i], -np.inf)) // block_size
            > min(j // block_size for j in np.flatnonzero(keep[i]))]
    if late and late == wrong:
        return (f"the wrong queries {wrong} are exactly those whose largest kept score comes in "
                f"a later block than their first kept key ({where}): when the running max grows, "
                "rescale l and acc by exp(m - m_new)")
    return (f"queries {wrong} of {len(q)} are wrong ({where}; "
            f"{'masked keys: ' + str([j for j in range(k.shape[0]) if not keep[:, j].any()]) if (~keep).all(axis=0).any() else 'no key is masked for every query'})")


def check_blockwise(data, q, k, v, causal=False, key_mask=None, scale=None, block_size=2):
    # blockwise_attention against the slow loop, entry by entry of the (broadcast) leading axes,
    # diagnosed on failure
    got = np.asarray(minattn.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask,
                                                 scale=scale, block_size=block_size))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               () if key_mask is None else key_mask.shape[:-1])
    expected = lead + q.shape[-2:-1] + v.shape[-1:]
    assert got.shape == expected, f"the output has shape {got.shape}, expected {expected}"
    qs, ks, vs = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
    for index in np.ndindex(lead):
        keep = np.ones((q.shape[-2], k.shape[-2]), bool)
        if causal:
            keep &= np.tril(keep)
        if key_mask is not None:
            keep &= np.broadcast_to(key_mask, lead + key_mask.shape[-1:])[index][None, :]
        entry = "batch entry " + ", ".join(map(str, index)) if len(index) == 1 else \
            f"batch entry {index[0]}, head {index[1]}"
        try:
            close(got[index], ref_attention(qs[index], ks[index], vs[index], keep, scale)[0], 1e-9,
                  f"the output of {entry}")
        except AssertionError as error:
            raise AssertionError(f"{blockwise_diagnosis(got[index], qs[index], ks[index], vs[index], keep, scale, block_size)}"
                                 f"\n{error}") from None


@st.composite
def blockwise_inputs(draw):
    # q, k, v [B, L, d] with key_mask [B, L_k] or None; or with heads, q [B, H, L_q, d_k] and
    # k, v [B, H or 1, L_k, ...] with key_mask [B, 1, L_k] or [B, H, L_k]: the documented forms
    if draw(st.booleans()):
        q, k, v = draw(qkv())
        return q, k, v, draw(st.one_of(hnp.arrays(bool, k.shape[:-1]), st.none()))
    batch, n_heads = draw(st.integers(1, 2)), draw(st.integers(2, 3))
    l_q, l_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    kv_heads = draw(st.sampled_from([1, n_heads]))
    q = draw(floats((batch, n_heads, l_q, d_k)))
    k, v = draw(floats((batch, kv_heads, l_k, d_k))), draw(floats((batch, kv_heads, l_k, d_v)))
    return q, k, v, draw(hnp.arrays(bool, (batch, draw(st.sampled_from([1, n_heads])), l_k)))


@prop("blockwise_attention_matches_attention", "blockwise_attention", "blockwise_attention(q, k, "
      "v, causal=c, key_mask=m, scale=s, block_size=n) equals attention's output for any block "
      "size and any scale (0 included), for q [B, L_q, d_k] or with heads [B, H, L_q, d_k] (k, v "
      "and key_mask broadcasting over the heads): the online softmax rescales the running sum "
      "whenever the running max grows", {"blockwise_attention"},
      "keep per query a running max m, sum l and output acc; for each block of keys: m_new = "
      "max(m, block max), rescale l and acc by exp(m - m_new), add the block's; divide at the end",
      part=4)
def _(data):
    q, k, v, key_mask = data.draw(blockwise_inputs(), "q, k, v, key_mask")
    causal = data.draw(st.sampled_from([True, False]), "causal")
    drawn = data.draw(st.sampled_from([0.3, None, 2.0]), "scale")
    block_size = data.draw(st.integers(1, 4), "block_size")
    # scale 0, the boundary, and the causal path, in every example
    for scale, causal in ((drawn, causal), (0.0, causal), (drawn, True)):
        check_blockwise(data, q, k, v, causal, key_mask, scale, block_size)


@prop("blockwise_attention_reads_the_last_partial_block", "blockwise_attention", "when L_k is "
      "not a multiple of block_size (L_k = n · block_size + r, 0 < r < block_size, n >= 0), the "
      "last, partial block of r keys counts like the others", {"blockwise_attention"},
      "loop over the block starts range(0, L_k, block_size) and slice k[..., a:a + block_size, "
      ":] (a slice past the end is just shorter); L_k // block_size blocks lose the last r keys",
      part=4)
def _(data):
    block_size = data.draw(st.integers(2, 4), "block_size")
    n_full = data.draw(st.integers(0, 2), "full blocks")
    length = n_full * block_size + data.draw(st.integers(1, block_size - 1), "keys in the last block")
    batch, l_q, d = data.draw(st.integers(1, 2), "B"), data.draw(sizes, "L_q"), data.draw(sizes, "d")
    q = data.draw(floats((batch, l_q, d)), "q")
    k, v = data.draw(floats((batch, length, d)), "k"), data.draw(floats((batch, length, d)), "v")
    key_mask = data.draw(st.one_of(st.none(), hnp.arrays(bool, (batch, length))), "key_mask")
    check_blockwise(data, q, k, v, key_mask=key_mask, block_size=block_size)


@prop("blockwise_attention_ignores_masked_keys_however_large", "blockwise_attention", "keys the "
      "key_mask (or causality) hides change nothing even when their scores are thousands above "
      "the others': the running max is taken over the kept keys only", {"blockwise_attention"},
      "mask a block's scores to -inf BEFORE its max (m_new = max(m, max of the kept scores)); "
      "where a block keeps nothing, shift by 0 instead of -inf", part=4)
def _(data):
    q, k, v = data.draw(qkv(), "q, k, v")
    causal = data.draw(st.sampled_from([False, True]), "causal")
    key_mask = data.draw(hnp.arrays(bool, k.shape[:-1]), "key_mask")
    loud = data.draw(hnp.arrays(bool, k.shape[:-1]), "keys scaled by 1000")
    k = np.where(loud[..., None], 1000.0 * k, k)
    data.show("k", k)
    check_blockwise(data, q, k, v, causal, key_mask, None, data.draw(st.integers(1, 3), "block_size"))


@prop("blockwise_attention_keeps_float32", "blockwise_attention", "blockwise_attention of "
      "float32 q, k, v is float32", {"blockwise_attention"},
      "a float64 scalar (np.sqrt(d_k)) or an accumulator created as float64 upcasts float32",
      part=4)
def _(data):
    q, k, v = data.draw(qkv(dtype=np.float32), "q, k, v")
    got = np.asarray(minattn.blockwise_attention(q, k, v, block_size=2))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"


BY_NAME = {p.name: p for p in PROPERTIES}
