import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minattn as ma

from . import reference
from .strategies import float_arrays, tolerance


@st.composite
def rows(draw, min_d=2):
    d = draw(st.integers(min_d, 8))
    x = draw(float_arrays((draw(st.integers(1, 4)), d), bound=10.0))
    assume((x.std(-1) > 1e-2).all())  # LayerNorm of a near-constant row is dominated by eps
    return x


@given(rows(), st.data())
def test_matches_loop_reference(x, data):
    d = x.shape[-1]
    gamma = data.draw(float_arrays((d,)))
    beta = data.draw(float_arrays((d,)))
    expected = [reference.layer_norm_row(r, gamma, beta, 1e-5) for r in x.tolist()]
    np.testing.assert_allclose(ma.layer_norm(x, gamma, beta), expected, **tolerance(np.float64))


@given(rows())
def test_rows_have_mean_zero_and_variance_one(x):
    d = x.shape[-1]
    y = ma.layer_norm(x, np.ones(d), np.zeros(d), eps=0.0)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-10)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-10)


@given(rows(), st.floats(0.1, 10.0), st.floats(-10.0, 10.0))
def test_invariant_to_positive_affine_maps(x, a, b):
    d = x.shape[-1]
    g, beta = np.ones(d), np.zeros(d)
    np.testing.assert_allclose(ma.layer_norm(a * x + b, g, beta, eps=0.0),
                               ma.layer_norm(x, g, beta, eps=0.0), rtol=1e-8, atol=1e-8)


def test_eps_sits_inside_the_square_root():
    x = np.array([[0.0, 2.0]])  # mean 1, biased variance 1
    y = ma.layer_norm(x, np.ones(2), np.zeros(2), eps=3.0)
    np.testing.assert_allclose(y, [[-0.5, 0.5]], rtol=1e-15)  # 1 / sqrt(1 + 3); std+eps gives 1/4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved(dtype):
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(dtype)
    assert ma.layer_norm(x, np.ones(4, dtype), np.zeros(4, dtype)).dtype == dtype
    # eps read from a config as a NumPy float64 scalar must not upcast float32 either.
    assert ma.layer_norm(x, np.ones(4, dtype), np.zeros(4, dtype), eps=np.float64(1e-5)).dtype == dtype


@st.composite
def float32_rows(draw):
    # [n, D] float32 rows, D wide enough that the mean of squares is a real sum
    shape = (draw(st.integers(1, 6)), draw(st.integers(2, 96)))
    x = draw(float_arrays(shape, np.float32, bound=100.0))
    assume((x.std(-1) > 1e-2).all())
    return x


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@given(float32_rows(), st.data())
def test_float32_norms_stay_within_float32_rounding_of_the_float64_formula(norm, x, data):
    # The mean square is a row's dot product with itself (normalization.feature_mean_of_product)
    # and the forward divides and scales in place: float32 throughout, as close to the float64
    # formula as float32 arithmetic can be.
    d = x.shape[-1]
    gamma, beta = (data.draw(float_arrays((d,), np.float32)) for _ in range(2))
    x64, gamma64, beta64 = (a.astype(np.float64) for a in (x, gamma, beta))
    if norm == "layer_norm":
        centered = x64 - x64.mean(-1, keepdims=True)
        expected = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5) * gamma64 \
            + beta64
        y = ma.layer_norm(x, gamma, beta, eps=1e-5)
    else:
        expected = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6) * gamma64
        y = ma.rms_norm(x, gamma, eps=1e-6)
    assert y.dtype == np.float32
    assert np.all(np.abs(y - expected) <= _float32_bound(norm, x64, gamma64, beta64))


def _float32_bound(norm, x64, gamma64, beta64):
    # a few float32 ulps of each term's size: the normalized row is at most sqrt(D) in size,
    # and layer_norm's x - mean carries the float32 mean's rounding, a few ulps of max|x|,
    # divided by the row's spread (a row of one value and one outlier, [16, 17, ..., 17]:
    # max|x| / std ~ 127, beyond sqrt(D))
    d = x64.shape[-1]
    size = np.sqrt(d)
    if norm == "layer_norm":
        spread = np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
        size = size + np.abs(x64).max(-1, keepdims=True) / spread
    scale = size * np.abs(gamma64) + np.abs(beta64 if norm == "layer_norm" else 0)
    return 8 * np.finfo(np.float32).eps * scale


def test_float32_layer_norm_of_a_row_with_one_outlier_within_its_rounding():
    # hypothesis's example: rows of one value but one, where the float32 mean's rounding, not
    # the row's size, bounds the error (the bound of sqrt(D) ulps alone failed on the third)
    x = np.full((3, 55), 17.0, dtype=np.float32)
    x[0, 0] = x[1, 0] = 0.0
    x[2, 0] = 16.0
    gamma, beta = np.ones(55, np.float32), np.zeros(55, np.float32)
    x64 = x.astype(np.float64)
    centered = x64 - x64.mean(-1, keepdims=True)
    expected = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-5)
    y = ma.layer_norm(x, gamma, beta, eps=1e-5)
    assert np.all(np.abs(y - expected) <= _float32_bound("layer_norm", x64, 1.0, 0.0))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_norms_leave_their_arguments_unchanged(norm, dtype):
    # The forward works in place on arrays it makes itself, never on the caller's.
    rng = np.random.default_rng(0)
    x, gamma, beta = (rng.normal(size=s).astype(dtype) for s in ((3, 5, 8), (8,), (8,)))
    before = [a.copy() for a in (x, gamma, beta)]
    ma.layer_norm(x, gamma, beta) if norm == "layer_norm" else ma.rms_norm(x, gamma)
    for a, b in zip((x, gamma, beta), before):
        np.testing.assert_array_equal(a, b)


@given(st.integers(0, 40), st.integers(1, 5), st.data())
def test_feature_mean_of_product_is_the_mean_of_the_product(d, n, data):
    from minattn.normalization import feature_mean_of_product

    a, b = (data.draw(float_arrays((n, d), np.float32)) for _ in range(2))
    got = feature_mean_of_product(a, b)
    expected = (a.astype(np.float64) * b).sum(-1, keepdims=True) / max(d, 1)  # D = 0: zeros
    assert got.shape == (n, 1) and got.dtype == np.float32
    bound = np.abs(a.astype(np.float64) * b).sum(-1, keepdims=True) / max(d, 1)
    assert np.all(np.abs(got - expected) <= 2 * d * np.finfo(np.float32).eps * bound + 1e-30)


WANTED = [("x",), ("gamma",), ("beta",), ("eps",), ("x", "gamma", "beta"), ("x", "gamma", "beta", "eps")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wrt", WANTED)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 70))
def test_rms_norms_in_place_vjp_equals_the_differentiable_one_to_the_last_bit(wrt, dtype, seed, d):
    # The same operations in the same order, only written into arrays of their own (the
    # differentiable VJP is the one second derivatives go through, tests/test_vjps.py).
    from minattn import normalization

    rng = np.random.default_rng(seed)
    x, g = (rng.normal(size=(2, 3, d)).astype(dtype) for _ in range(2))
    gamma = rng.normal(size=d).astype(dtype)
    wrt = tuple(n for n in wrt if n != "beta")
    args = dict(y=None, x=x, gamma=gamma, eps=1e-6)
    expected = normalization.rms_norm_vjp(wrt, g, **args)
    got = normalization.rms_norm_vjp_in_place(wrt, g, **args)
    assert sorted(got) == sorted(wrt)
    for name in wrt:
        assert got[name].dtype == expected[name].dtype
        np.testing.assert_array_equal(got[name], expected[name])


def _layer_norm_gradients_and_bounds(g, x, gamma, eps):
    # The float64 formula's gradients (x̂ = (x - μ) / σ, dx̂ = g γ; summed over the tokens for
    # gamma, beta and eps) and, for each, a bound on a computation's rounding in x's dtype: the
    # unit roundoff times a count of the roundings that can add up in it (the row sums of D
    # terms, the sums over the n tokens, a few elementwise steps) times the same formula's
    # terms in absolute value (|x - μ| bounded by |x| + mean |x|): no summation order assumed.
    d, n = x.shape[-1], x.size // x.shape[-1]
    unit = np.finfo(x.dtype).eps
    x64, g64, gamma64 = (a.astype(np.float64) for a in (x, g, gamma))
    mean = lambda a: a.mean(-1, keepdims=True)  # noqa: E731
    centered = x64 - mean(x64)
    r = 1 / np.sqrt(mean(centered * centered) + eps)
    x_hat, d_x_hat = centered * r, g64 * gamma64
    span = (np.abs(x64) + mean(np.abs(x64))) * r  # bounds |x̂| and the scale of its rounding
    grads = {"x": r * (d_x_hat - mean(d_x_hat) - x_hat * mean(d_x_hat * x_hat)),
             "gamma": (g64 * x_hat).reshape(n, d).sum(0), "beta": g64.reshape(n, d).sum(0),
             "eps": -0.5 * np.sum(d_x_hat * x_hat * r * r)}
    rows = (2 * d + 20) * unit
    bounds = {"x": rows * r * (np.abs(d_x_hat) + mean(np.abs(d_x_hat))
                               + span * mean(np.abs(d_x_hat) * span)),
              "gamma": (n + rows / unit) * unit * (np.abs(g64) * span).reshape(n, d).sum(0),
              "beta": (n + 2) * unit * np.abs(g64).reshape(n, d).sum(0),
              "eps": (n + rows / unit) * unit * np.sum(np.abs(d_x_hat) * span * r * r)}
    return grads, bounds


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wrt", WANTED)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 70), st.floats(-4, 4), st.floats(-3, 3))
def test_layer_norms_in_place_vjp_is_the_formula_within_rounding(wrt, dtype, seed, d, shift,
                                                                 log_scale):
    # layer_norm's in-place VJP computes the formula in fewer passes (not in its order): each
    # gradient within its dtype's rounding of the float64 formula, as the differentiable VJP's
    # (the bound checked on it too), in the differentiable VJP's shapes and dtypes once
    # gradient_by_hand has summed it over the dims gamma and beta were broadcast along.
    from minattn import normalization
    from minattn.engine.autograd_rules import _unbroadcast

    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(2, 3, d)) * 10.0 ** log_scale + shift).astype(dtype)
    g = rng.normal(size=(2, 3, d)).astype(dtype)
    gamma, beta = (rng.normal(size=d).astype(dtype) for _ in range(2))
    args = dict(y=None, x=x, gamma=gamma, beta=beta, eps=1e-5)
    got = normalization.layer_norm_vjp_in_place(wrt, g, **args)
    differentiable = normalization.layer_norm_vjp(wrt, g, **args)
    assert sorted(got) == sorted(wrt)
    expected, bounds = _layer_norm_gradients_and_bounds(g, x, gamma, 1e-5)
    for name in wrt:
        value = {"x": x, "gamma": gamma, "beta": beta, "eps": np.float64(0)}[name]
        mine, theirs = _unbroadcast(value, got[name]), _unbroadcast(value, differentiable[name])
        assert np.shape(mine) == np.shape(theirs) and mine.dtype == theirs.dtype == dtype
        for computed in (mine, theirs):
            assert np.all(np.abs(computed - expected[name]) <= bounds[name]), name


@pytest.mark.parametrize("eps", [1e-5, 0.0])
@pytest.mark.parametrize("shape", [(2, 0), (0, 3), (0, 0)])
def test_layer_norms_in_place_vjp_of_no_features_or_no_tokens_is_the_formulas(shape, eps):
    # Empty gradients (eps's the sum of nothing, -0.0 as the formula's), without a warning
    # (warnings are errors in this suite) where eps = 0 leaves 1 / σ infinite.
    from minattn import normalization

    x, g = np.ones(shape, np.float32), np.ones(shape, np.float32)
    gamma, beta = np.ones(shape[-1:], np.float32), np.zeros(shape[-1:], np.float32)
    wrt = ("x", "gamma", "beta", "eps")
    got = normalization.layer_norm_vjp_in_place(wrt, g, None, x, gamma, beta, eps)
    want = normalization.layer_norm_vjp(wrt, g, None, x, gamma, beta, eps)
    for name in ("x", "eps"):
        assert got[name].shape == want[name].shape and got[name].dtype == want[name].dtype
        np.testing.assert_array_equal(got[name], want[name])
        assert np.signbit(got[name]).tolist() == np.signbit(want[name]).tolist()
    for name, value in (("gamma", gamma), ("beta", beta)):  # summed over the tokens: zeros
        assert got[name].shape == value.shape and not got[name].any()


def test_layer_norms_in_place_vjp_makes_fewer_passes():
    # The point of its form: fewer NumPy calls that read or write a whole [..., D] array than
    # the formula's order (its gradients of gamma and beta summed over the leading dims as
    # gradient_by_hand sums them), counted on a recording subclass that every result made from
    # it stays in. (Each such call releases the GIL: docs/benchmarks.md.)
    from minattn import normalization
    from minattn.engine.autograd_rules import _numpy_unbroadcast

    calls = []
    plain = lambda a: a.view(np.ndarray) if isinstance(a, Counted) else a  # noqa: E731
    counted = lambda a: a.view(Counted) if type(a) is np.ndarray else a  # noqa: E731

    def record(name, arrays):
        sizes = [a.size for a in arrays if isinstance(a, np.ndarray)]
        if name not in ("reshape", "ones_like") and max(sizes) >= 4 * 16 * 32:
            calls.append(name)

    class Counted(np.ndarray):
        def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
            record(ufunc.__name__, inputs + (out or ()))
            if out is not None:
                kwargs["out"] = tuple(map(plain, out))
            result = getattr(ufunc, method)(*map(plain, inputs), **kwargs)
            return (out[0] if len(out) == 1 else out) if out is not None else counted(result)

        def __array_function__(self, func, types, args, kwargs):
            record(func.__name__, args)
            return counted(func(*map(plain, args), **kwargs))

    rng = np.random.default_rng(0)
    x, g = (rng.normal(size=(4, 16, 32)).astype(np.float32) for _ in range(2))
    gamma, beta = (rng.normal(size=32).astype(np.float32) for _ in range(2))
    wrt = ("x", "gamma", "beta")
    counts = []
    for vjp in (normalization.layer_norm_vjp, normalization.layer_norm_vjp_in_place):
        calls.clear()
        got = vjp(wrt, counted(g), None, counted(x), gamma, beta, 1e-5)
        for name in ("gamma", "beta"):  # summed as gradient_by_hand sums them
            assert _numpy_unbroadcast(got[name], (32,)).shape == (32,)
        counts.append(list(calls))
    formula, fused = counts
    assert (len(formula), len(fused)) == (14, 12), (formula, fused)
