"""The hand-written VJPs (softmax, the attention core, layer_norm, rms_norm, swiglu) against
autograd differentiating the plain composition they replace, and against finite differences; second
derivatives still work (the VJPs are written in autograd.numpy, so autograd differentiates them
too). All in float64, masks and fully masked rows included."""
from unittest import mock

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from autograd.extend import defvjp, primitive
from autograd.test_util import check_grads
from autograd.tracer import getval
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from .strategies import bool_masks, float_arrays


# --- the plain compositions: what autograd differentiated before the hand-written VJPs ---

def plain_softmax(x, keep=None):
    shift = anp.max(getval(x) if keep is None else np.where(keep, getval(x), -np.inf), -1, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    e = anp.exp(x - shift)
    if keep is not None:
        e = anp.where(keep, e, 0.0)
    total = anp.sum(e, -1, keepdims=True)
    return e / anp.where(total == 0, 1.0, total)


def plain_attention(q, k, v, scale, mask):
    scores = scale * anp.matmul(q, anp.swapaxes(k, -1, -2))
    if mask is not None and mask.dtype.kind == "f":
        weights = plain_softmax(scores + mask)
    else:
        weights = plain_softmax(scores, mask)
    return anp.matmul(weights, v), weights


def plain_layer_norm(x, gamma, beta, eps):
    mean = anp.sum(x, -1, keepdims=True) / x.shape[-1]
    var = anp.sum((x - mean) ** 2, -1, keepdims=True) / x.shape[-1]
    return (x - mean) / anp.sqrt(var + eps) * gamma + beta


def plain_rms_norm(x, gamma, eps):
    return x / anp.sqrt(anp.sum(x * x, -1, keepdims=True) / x.shape[-1] + eps) * gamma


def _direction(shape, seed):
    return np.random.default_rng(seed).normal(size=shape)


def _same_gradient(f_hand, f_plain, args, argnums, atol=None):
    # atol: {argument: its absolute tolerance} where the plain composition's own rounding is
    # amplified (layer_norm's, below); 1e-12 for the others
    for i in argnums:
        hand, plain = grad(f_hand, i)(*args), grad(f_plain, i)(*args)
        bound = (atol or {}).get(i, 1e-12) + 1e-10 * np.abs(plain)  # (elementwise)
        assert np.all(np.abs(hand - plain) <= bound), (i, hand, plain, bound)


def _layer_norm_rounding(x, gamma, eps, r):
    # -> {argument: tolerance} of the plain layer_norm's gradients with respect to gamma (1)
    # and eps (3): its mean is off by up to ~d float64 ulps of max|x|, and x - mean of a
    # near-constant row is that error alone, which d/dgamma = (x - mean) r / sqrt(var + eps)
    # and d/deps = -(x - mean) gamma r / (2 (var + eps)^1.5) multiply by up to 3e7 (eps = 1e-5).
    # Rows of spread-out values: ~1e-15; a constant row: what the rounding gives.
    d = x.shape[-1]
    off = 2 * d * np.finfo(np.float64).eps * np.max(np.abs(x), -1, keepdims=True)
    var = np.var(x, -1, keepdims=True)
    to_gamma = np.sum(off * np.abs(r) / np.sqrt(var + eps), axis=(0, 1))
    to_eps = np.sum(off * np.abs(gamma * r) / (2 * (var + eps) ** 1.5))
    return {1: 1e-12 + to_gamma, 3: 1e-12 + to_eps}


@st.composite
def rows_with_masks(draw):
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 5)))
    keep = draw(bool_masks(shape))
    keep[0, 0] = False  # always one fully masked row
    return draw(float_arrays(shape)), keep


@given(rows_with_masks())
def test_softmax_vjp_equals_autograd_of_the_composition(data):
    x, keep = data
    r = _direction(x.shape, 0)
    _same_gradient(lambda x: anp.sum(ma.softmax(x, mask=keep) * r),
                   lambda x: anp.sum(plain_softmax(x, keep) * r), (x,), [0])
    _same_gradient(lambda x: anp.sum(ma.softmax(x) * r), lambda x: anp.sum(plain_softmax(x) * r),
                   (x,), [0])


@st.composite
def attention_problems(draw):
    b, l_q, l_k = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    d_k, d_v = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    q = draw(float_arrays((b, 1, l_q, d_k)))
    k = draw(float_arrays((1, 2, l_k, d_k)))  # leading dims broadcast: q's batch, k's heads
    v = draw(float_arrays((b, 2, l_k, d_v)))
    kind = draw(st.sampled_from(["none", "bool", "additive"]))
    keep = draw(bool_masks((b, 1, l_q, l_k)))
    keep[0, 0, 0] = False  # a query with no key
    mask = {"none": None, "bool": keep, "additive": np.where(keep, 0.0, -np.inf) + 0.1 * keep}[kind]
    return q, k, v, draw(st.floats(0.1, 2.0)), mask


@given(attention_problems())
def test_attention_vjp_equals_autograd_of_the_composition(problem):
    q, k, v, scale, mask = problem
    out_shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], v.shape[-1])
    r_out, r_w = _direction(out_shape, 1), _direction(out_shape[:-1] + (k.shape[-2],), 2)

    def loss(attend):
        def f(q, k, v, scale):
            out, weights = attend(q, k, v, scale)
            return anp.sum(out * r_out) + anp.sum(weights * r_w)  # both outputs carry gradient
        return f

    hand = loss(lambda q, k, v, s: ma.scaled_dot_product_attention(q, k, v, mask, scale=s))
    plain = loss(lambda q, k, v, s: plain_attention(q, k, v, s, mask))
    _same_gradient(hand, plain, (q, k, v, np.float64(scale)), [0, 1, 2, 3])


def test_additive_mask_gradient_equals_the_compositions():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    bias = rng.normal(size=(3, 5))  # ALiBi-like: learnable, differentiable
    r = _direction((2, 3, 2), 4)
    hand = grad(lambda b: anp.sum(ma.scaled_dot_product_attention(q, k, v, b)[0] * r))(bias)
    plain = grad(lambda b: anp.sum(plain_attention(q, k, v, 0.5, b)[0] * r))(bias)
    np.testing.assert_allclose(hand, plain, rtol=1e-10, atol=1e-12)


def test_layer_norm_of_constant_rows_equals_the_composition_within_its_rounding():
    # the case hypothesis found: rows of one value, where the composition's x - mean is its
    # mean's rounding error alone (and the hand VJP's exactly 0)
    x = np.full((2, 2, 6), 1.68786532)
    gamma, beta, eps, r = np.ones(6), np.zeros(6), np.float64(1e-5), _direction((2, 2, 6), 5)
    _same_gradient(lambda x, g, b, e: anp.sum(ma.layer_norm(x, g, b, e) * r),
                   lambda x, g, b, e: anp.sum(plain_layer_norm(x, g, b, e) * r),
                   (x, gamma, beta, eps), [0, 1, 2, 3], _layer_norm_rounding(x, gamma, eps, r))


@given(st.data())
def test_norm_vjps_equal_autograd_of_the_composition(data):
    d = data.draw(st.integers(2, 6))
    x = data.draw(float_arrays((2, data.draw(st.integers(1, 3)), d)))
    gamma, beta = data.draw(float_arrays((d,))), data.draw(float_arrays((d,)))
    eps = np.float64(data.draw(st.sampled_from([1e-5, 0.5])))
    r = _direction(x.shape, 5)
    _same_gradient(lambda x, g, b, e: anp.sum(ma.layer_norm(x, g, b, e) * r),
                   lambda x, g, b, e: anp.sum(plain_layer_norm(x, g, b, e) * r),
                   (x, gamma, beta, eps), [0, 1, 2, 3], _layer_norm_rounding(x, gamma, eps, r))
    _same_gradient(lambda x, g, e: anp.sum(ma.rms_norm(x, g, e) * r),
                   lambda x, g, e: anp.sum(plain_rms_norm(x, g, e) * r), (x, gamma, eps), [0, 1, 2])


# --- finite differences, first and second order ---

X = np.random.default_rng(6).normal(size=(2, 3, 4))
KEEP = np.array([[True, False, True, True], [False] * 4, [True] * 4])


@pytest.mark.parametrize("name, f, args", [
    ("softmax", lambda x: ma.softmax(x, mask=KEEP), (X,)),
    ("attention", lambda q, k, v: ma.scaled_dot_product_attention(q, k, v, KEEP[:, :3])[0],
     (X, X + 0.5, X[..., :2])),
    ("attention weights", lambda q, k: ma.scaled_dot_product_attention(q, k, X)[1], (X, X[:, ::-1])),
    ("layer_norm", lambda x, g, b: ma.layer_norm(x, g, b), (X, X[0, 0], X[1, 1])),
    ("rms_norm", lambda x, g: ma.rms_norm(x, g), (X, X[0, 0])),
])
def test_gradients_and_second_derivatives_match_finite_differences(name, f, args):
    check_grads(f, modes=["rev"], order=2)(*args)


def test_hessian_vector_product_through_attention_equals_the_compositions():
    # The second derivative of the hand-written path equals the plain composition's.
    q, k, v = X, X + 0.3, X[..., :3]
    r = _direction((2, 3, 3), 7)
    f_hand = lambda q: anp.sum(ma.scaled_dot_product_attention(q, k, v)[0] * r)
    f_plain = lambda q: anp.sum(plain_attention(q, k, v, 0.5, None)[0] * r)
    direction = _direction(q.shape, 8)
    hvp = lambda f: grad(lambda q: anp.sum(grad(f)(q) * direction))(q)
    np.testing.assert_allclose(hvp(f_hand), hvp(f_plain), rtol=1e-9, atol=1e-11)


def test_linear_relu_and_gelu_vjps_equal_autograd_of_the_composition():
    from autograd.scipy.special import erf

    from minattn.linear import linear
    from minattn.position_wise import gelu, relu

    rng = np.random.default_rng(9)
    x, w, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=5)
    x[0, 0, 0] = 0.0  # relu's kink: gradient 0 there, as in torch
    r = _direction((2, 3, 5), 10)
    _same_gradient(lambda x, w, b: anp.sum(relu(linear(x, w, b)) * r),
                   lambda x, w, b: anp.sum(anp.maximum(anp.matmul(x, w) + b, 0.0) * r),
                   (x, w, b), [0, 1, 2])
    _same_gradient(lambda x: anp.sum(gelu(x) * x), lambda x: anp.sum(0.5 * x * (1 + erf(x / np.sqrt(2))) * x),
                   (x,), [0])
    check_grads(lambda x, w, b: gelu(linear(x, w, b)), modes=["rev"], order=2)(x, w, b)


# The float32 GELU's error has two parts (the comment in position_wise.py states both): the
# Abramowitz & Stegun formula's own, the same on every CPU (measured below in float64), and
# float32 rounding, which depends on the CPU (NumPy's float32 exp differs by SIMD path, within
# a few ulps): allowed as 2^-21 (4 float32 ulps) of max(|x|, 1).
APPROXIMATION = 2.2e-7


def float32_rounding(x):
    return 2.0 ** -21 * np.maximum(np.abs(np.asarray(x, np.float64)), 1.0)


def test_the_gelu_approximation_in_float64_is_within_its_stated_error():
    # The formula itself, evaluated in float64: no float32 rounding, no CPU dependence.
    from scipy.special import erf

    from minattn import position_wise

    x = np.linspace(-12, 12, 400_001)
    z = np.abs(x) / np.sqrt(2.0)
    t = 1 / (1 + position_wise._P * z)
    a1, a2, a3, a4, a5 = position_wise._A
    erfc = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5)))) * np.exp(-z * z)
    approximate = 0.5 * x * (1 + np.sign(x) * (1 - erfc))
    exact = 0.5 * x * (1 + erf(x / np.sqrt(2.0)))
    assert np.abs(approximate - exact).max() < APPROXIMATION


def test_float32_gelu_is_within_its_stated_error_of_the_float64_gelu():
    from scipy.special import erf

    from minattn.position_wise import gelu

    x = np.linspace(-12, 12, 400_001).astype(np.float32)
    exact = 0.5 * x.astype(np.float64) * (1 + erf(x.astype(np.float64) / np.sqrt(2.0)))
    got = gelu(x)
    assert got.dtype == np.float32
    error = np.abs(got.astype(np.float64) - exact)
    assert np.all(error <= APPROXIMATION + float32_rounding(x)), error.max()
    # float64 stays exact (scipy's erf)
    np.testing.assert_allclose(gelu(x.astype(np.float64)), exact, rtol=1e-15, atol=1e-15)


F32_MAX = float(np.finfo(np.float32).max)


@given(st.lists(st.floats(-F32_MAX, F32_MAX, width=32), min_size=1, max_size=64))
def test_float32_gelu_holds_its_bound_over_the_whole_float32_range(values):
    # Huge |x| (z * z would overflow), subnormals, zeros of both signs: no warning (warnings are
    # errors here), float32 out, and within the stated error of the float64 GELU, as in the body
    # of the range.
    from scipy.special import erf

    from minattn.position_wise import gelu

    x = np.array(values, dtype=np.float32)
    exact = 0.5 * x.astype(np.float64) * (1 + erf(x.astype(np.float64) / np.sqrt(2.0)))
    got = gelu(x)
    assert got.dtype == np.float32 and np.all(np.isfinite(got))
    assert np.all(np.abs(got - exact) <= APPROXIMATION + float32_rounding(x))


def test_float32_gelu_of_inf_and_nan_is_what_the_float64_gelu_gives():
    # GELU(inf) = inf (Φ = 1), NaN stays NaN, GELU(±0) = 0; torch 2.13 gives the same.
    from minattn.position_wise import gelu

    x = np.array([np.inf, np.nan, -0.0, 0.0], dtype=np.float32)
    np.testing.assert_array_equal(gelu(x), [np.inf, np.nan, 0.0, 0.0])
    np.testing.assert_array_equal(gelu(x.astype(np.float64)), [np.inf, np.nan, 0.0, 0.0])


@pytest.mark.parametrize("b_dtype", [np.float32, np.float64, None])
def test_linear_adds_the_bias_as_numpy_would_and_leaves_its_inputs_alone(b_dtype):
    # The bias is added in place when that cannot change the result's dtype; a float64 bias
    # with float32 x and w widens the result, as x @ w + b does; a Python 0.0 (no bias) keeps it.
    from minattn.linear import linear

    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    b = 0.0 if b_dtype is None else rng.standard_normal(5).astype(b_dtype)
    copies = [np.copy(a) for a in (x, w, b)]
    y = linear(x, w, b)
    expected = np.einsum("bli,io->blo", x.astype(np.float64), w.astype(np.float64)) + b
    assert y.dtype == (np.float32 if b_dtype in (None, np.float32) else np.float64)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    for a, c in zip((x, w, b), copies):
        np.testing.assert_array_equal(a, c)


def test_torchs_float32_gelu_is_the_exact_gelu_up_to_float32_rounding():
    # What the comment in position_wise.py says of torch, on any CPU: its float32 GELU is the erf
    # GELU, not an approximation (the tanh one is 1e-4 away), up to a rounding that depends on the
    # instruction set (3.8e-7 at most on an AVX2 CPU, 1.1e-6 on an AVX-512 one): bounded here as
    # 2e-6 + 4 float32 ulps of max(|x|, 1), which both satisfy.
    torch = pytest.importorskip("torch")
    from scipy.special import erf

    x = np.linspace(-12, 12, 400_001).astype(np.float32)
    exact = 0.5 * x.astype(np.float64) * (1 + erf(x.astype(np.float64) / np.sqrt(2.0)))
    theirs = torch.nn.functional.gelu(torch.from_numpy(x)).numpy().astype(np.float64)
    assert np.all(np.abs(theirs - exact) <= 2e-6 + float32_rounding(x))


@given(st.lists(st.floats(-30, 30, allow_nan=False), min_size=1, max_size=12))
def test_silu_and_its_gradient_equal_the_formula_and_autograd_of_the_composition(values):
    from minattn.position_wise import silu
    x = np.array(values)
    composition = lambda x: x / (1.0 + anp.exp(-x))  # noqa: E731: autograd differentiates it
    np.testing.assert_allclose(silu(x), composition(x), rtol=1e-14, atol=1e-300)
    g = np.linspace(-1, 1, x.size)
    np.testing.assert_allclose(grad(lambda x: anp.sum(silu(x) * g))(x),
                               grad(lambda x: anp.sum(composition(x) * g))(x),
                               rtol=1e-12, atol=1e-300)
    check_grads(silu, modes=["rev"], order=2)(x)


def test_silu_in_the_tails_keeps_its_relative_precision_and_warns_nowhere():
    from minattn.position_wise import silu
    x = np.array([-1000.0, -80.0, -30.0, 0.0, 30.0, 1000.0, np.inf], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # (underflow is meant)
        got = silu(x)
    want = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64).clip(-700, 700)))
    np.testing.assert_allclose(got[1:6], want[1:6], rtol=1e-6)
    assert got[0] == 0 and got[-1] == np.inf and got.dtype == np.float32
    assert not np.shares_memory(got, x)


@pytest.mark.parametrize("x", [np.array(1.5), 1.5, np.arange(-2, 3), np.array([[-3.0]], np.float32)])
def test_silu_takes_0d_scalar_and_integer_inputs_as_before(x):
    from minattn.position_wise import silu
    x64 = np.asarray(x, np.float64)
    want = x64 / (1 + np.exp(-x64))
    got = silu(x)
    np.testing.assert_allclose(got, want, rtol=1e-6 if np.asarray(x).dtype == np.float32 else 1e-14)
    assert np.shape(got) == np.shape(x)


@pytest.mark.parametrize("x", [5e-324, -5e-324, 1e-310, 0.0, -0.0, 1e-300, -40.0, 40.0])
def test_sigmoid_and_silu_derivatives_hold_at_subnormal_and_tail_inputs(x):
    # autograd's own |x| gradient underflows to 0 at subnormal x: the hand VJPs do not use it
    from minattn.position_wise import sigmoid, silu
    x = np.array([x])
    s, rest = 1 / (1 + np.exp(-x)), 1 / (1 + np.exp(x))  # sigmoid(x), 1 - sigmoid(x) directly
    np.testing.assert_allclose(grad(lambda x: anp.sum(sigmoid(x)))(x), s * rest, rtol=1e-12,
                               atol=1e-300)
    np.testing.assert_allclose(grad(lambda x: anp.sum(silu(x)))(x), s + x * s * rest,
                               rtol=1e-12, atol=1e-300)
    second = s * rest * (2 + x * (rest - s))  # silu'' = s'(2 + x (1 - 2s))
    np.testing.assert_allclose(grad(lambda x: anp.sum(grad(lambda y: anp.sum(silu(y)))(x)))(x),
                               second, rtol=1e-9, atol=1e-300)
    check_grads(silu, modes=["rev"], order=2)(x)
    check_grads(sigmoid, modes=["rev"], order=2)(x)


def test_gelu_tanh_vjp_equals_autograd_of_the_formula_and_stays_finite_in_the_tails():
    # The hand VJP against autograd through the written tanh formula, where autograd's own tanh
    # gradient (1 / cosh²) is finite; then far out, where cosh overflows (a RuntimeWarning, an
    # error here): the derivative is 1 for large x and 0 for very negative x, with no warning.
    from minattn.position_wise import gelu_tanh
    x = 3.0 * np.random.default_rng(3).normal(size=(4, 5))
    r = _direction(x.shape, 4)
    c = np.sqrt(2.0 / np.pi)
    written = lambda x: anp.sum(0.5 * x * (1.0 + anp.tanh(c * (x + 0.044715 * x ** 3))) * r)  # noqa: E731,E501
    _same_gradient(lambda x: anp.sum(gelu_tanh(x) * r), written, (x,), [0])
    check_grads(gelu_tanh, modes=["rev"], order=2)(x)
    for dtype in (np.float32, np.float64):
        far = np.array([30.0, 1e3, 1e12, -30.0, -1e3, -1e12], dtype)
        d = grad(lambda x: anp.sum(gelu_tanh(x)))(far)
        assert d.dtype == dtype
        np.testing.assert_array_equal(d, np.array([1, 1, 1, 0, 0, 0], dtype))


def test_swiglu_vjp_equals_autograd_of_silu_gate_times_up():
    # The gated feed-forward's one primitive against autograd through the formula it replaces,
    # silu(gate) * up with silu written out; up broadcast along gate's leading dims too.
    from minattn.position_wise import swiglu
    rng = np.random.default_rng(11)
    gate, up = 4.0 * rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    gate[0, 0, :4] = [40.0, -40.0, 0.0, -0.0]  # the tails, where sigmoid is 1 or 0, and zero
    r = _direction(gate.shape, 12)
    written = lambda g, u: anp.sum(g / (1.0 + anp.exp(-g)) * u * r)  # noqa: E731
    _same_gradient(lambda g, u: anp.sum(swiglu(g, u) * r), written, (gate, up), [0, 1])
    _same_gradient(lambda g, u: anp.sum(swiglu(g, u) * r), written, (gate, up[0, 0]), [0, 1])
    check_grads(swiglu, modes=["rev"], order=2)(gate, up)


def test_float32_swiglu_in_chunks_holds_the_float64_formula_and_its_second_derivative():
    # float32 gate and up of one shape take _swiglu_float32 (the value and both derivatives in
    # one pass over each chunk): its value is the general primitive's to the last bit (the same
    # operations in the same order); value and gradients within float32 rounding of float64
    # autograd through the formula written out; other shapes, dtypes and small sizes the general
    # primitive.
    from minattn import position_wise
    rng = np.random.default_rng(13)
    gate = (6.0 * rng.normal(size=(3, 4, 70))).astype(np.float32)
    up = rng.normal(size=(3, 4, 70)).astype(np.float32)
    gate[0, 0, :6] = [40.0, -40.0, 0.0, -0.0, 100.0, -100.0]  # the tails, and zero
    r = rng.normal(size=gate.shape).astype(np.float32)
    calls = []
    with mock.patch.object(position_wise, "_CHUNK", 64), mock.patch.object(
            position_wise, "_swiglu_chunk", _spied(position_wise._swiglu_chunk, calls)):
        value = position_wise.swiglu(gate, up)
        grads = grad(lambda g, u: anp.sum(position_wise.swiglu(g, u) * r), (0, 1))(gate, up)
        # differentiated again: the general primitive runs instead (gradient_with_the_value's
        # otherwise=), its second derivative within float32 rounding of float64's
        second = grad(lambda g: anp.sum(grad(lambda h: anp.sum(position_wise.swiglu(h, up)))(
            g)))(gate)
    second_64 = grad(lambda g: anp.sum(grad(lambda h: anp.sum(h / (1.0 + anp.exp(-h)) * up))(
        g)))(gate.astype(np.float64))
    assert second.dtype == np.float32
    np.testing.assert_allclose(second, second_64, rtol=1e-5, atol=1e-6)
    # one chunk or less (a decode step's token): the general primitive, second derivative and all
    small_gate, small_up = gate[0, :1], up[0, :1]
    assert not position_wise._in_float32_chunks(small_gate, small_up)
    second = grad(lambda g: anp.sum(grad(lambda h: anp.sum(position_wise.swiglu(h, small_up)))(
        g)))(small_gate)
    assert second.dtype == np.float32 and np.all(np.isfinite(second))
    assert calls and value.dtype == np.float32  # the chunked path was taken
    # the chunks' value is gate / (1 + exp(-gate)) * up, torch's form: not _swiglu's bits, but
    # within float32 rounding of the float64 formula (below), as _swiglu's is
    assert not np.array_equal(value, position_wise._swiglu(gate, up))  # (the form is not its)
    g64, u64, r64 = (a.astype(np.float64) for a in (gate, up, r))
    written = lambda g, u: anp.sum(g / (1.0 + anp.exp(-g)) * u * r64)  # noqa: E731
    want = g64 / (1.0 + np.exp(-g64)) * u64
    np.testing.assert_allclose(value, want, rtol=2e-6, atol=1e-30)
    np.testing.assert_allclose(position_wise._swiglu(gate, up), want, rtol=2e-6, atol=1e-30)
    for got, expected in zip(grads, grad(written, (0, 1))(g64, u64)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
    broadcast = position_wise.swiglu(gate, up[0, 0])  # up broadcast: the general primitive
    np.testing.assert_array_equal(broadcast, position_wise._swiglu(gate, up[0, 0]))


def _spied(f, calls):
    def spy(*args):
        calls.append(len(args[0]))
        return f(*args)
    return spy


def plain_unembedded_nll_sum(h, w, b, targets, counted):
    # The composition it fuses: the logits of every position, then cross-entropy's sum over the
    # counted ones (minattn.cross_entropy, differentiated by autograd).
    logits = anp.matmul(h, w) + b  # [B, n, V]
    return ma.cross_entropy(logits[counted], targets[counted]) * int(counted.sum())


@pytest.mark.parametrize("chunk_rows", [1, 2, 100])  # a chunk per row, several, one for all
def test_fused_unembedding_and_loss_equal_autograd_of_the_composition(chunk_rows, monkeypatch):
    from minattn.training import losses

    rng = np.random.default_rng(5)
    v = 13
    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", chunk_rows * v)
    h, w, b = rng.normal(size=(3, 4, 6)), rng.normal(size=(6, v)), rng.normal(size=v)
    targets, counted = rng.integers(0, v, size=(3, 4)), rng.random((3, 4)) < 0.6
    args = (h, w, b, targets, counted)
    assert losses.unembedded_nll_sum(*args) == pytest.approx(plain_unembedded_nll_sum(*args),
                                                           rel=1e-13)
    _same_gradient(losses.unembedded_nll_sum, plain_unembedded_nll_sum, args, argnums=(0, 1, 2))
    check_grads(lambda h: losses.unembedded_nll_sum(h, w, b, targets, counted), modes=["rev"],
                order=1)(h)
    assert not grad(losses.unembedded_nll_sum)(*args)[~counted].any()  # no gradient: not counted


def test_fused_loss_keeps_float32_and_refuses_a_second_derivative():
    from minattn.training import losses

    rng = np.random.default_rng(6)
    h, w = rng.normal(size=(1, 3, 4)).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)
    targets, counted = np.array([[1, 2, 3]]), np.array([[True, False, True]])
    value = losses.unembedded_nll_sum(h, w, None, targets, counted)
    assert value.dtype == np.float32 and grad(losses.unembedded_nll_sum)(
        h, w, None, targets, counted).dtype == np.float32
    with pytest.raises(NotImplementedError, match="no second derivative"):
        grad(lambda x: anp.sum(grad(losses.unembedded_nll_sum)(x, w, None, targets, counted)))(h)


def _tape_bytes(f, x):
    # The memory autograd's recorded forward pass of f at x still holds (its tape), by tracemalloc.
    import gc
    import tracemalloc

    from autograd import make_vjp

    gc.collect()
    tracing = tracemalloc.is_tracing()  # already on (another test, a plugin): leave it on
    if not tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]  # x and anything made before it
        vjp, _ = make_vjp(f)(x)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        if not tracing:
            tracemalloc.stop()


def test_the_attention_cores_tape_keeps_its_inputs_not_its_weights():
    # q, k, v [2, 512, 2] float64 are 16 KiB each, the weights [2, 512, 512] 4 MiB: the tape
    # holds the inputs (and the small arrays autograd itself records), not the weights.
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(2, 512, 2)) for _ in range(3))
    held = _tape_bytes(lambda q: anp.sum(ma.scaled_dot_product_attention(q, k, v)[0]), q)
    assert held < 1 * 2 ** 20


@pytest.mark.parametrize("l, d", [(3, 8), (24, 1)])  # weights kept; recomputed
def test_the_attention_vjp_equals_the_composition_whether_its_weights_are_kept_or_recomputed(
        l, d):
    # The tape keeps P where it is no larger than q, k and v together (l <= 3 d here), and the
    # VJP recomputes it where not: both equal autograd's gradient of the plain formula, and
    # the tape holds P exactly where the rule says.
    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=(2, l, d)) for _ in range(3))
    keep = np.tril(np.ones((l, l), dtype=bool))
    r_out, r_w = _direction((2, l, d), 12), _direction((2, l, l), 13)

    def loss(attend):
        return lambda q, k, v: anp.sum(attend(q, k, v)[0] * r_out) + anp.sum(
            attend(q, k, v)[1] * r_w)

    _same_gradient(loss(lambda q, k, v: ma.scaled_dot_product_attention(q, k, v, keep)),
                   loss(lambda q, k, v: plain_attention(q, k, v, 1 / np.sqrt(d), keep)),
                   (q, k, v), [0, 1, 2])
    held = _tape_bytes(lambda q: anp.sum(ma.scaled_dot_product_attention(q, k, v, keep)[0]), q)
    weights = 2 * l * l * 8
    assert (held >= weights) == (l * l <= 3 * l * d), (held, weights)


def test_the_fused_losss_tape_keeps_its_gradient_not_the_logits():
    from minattn.training import losses

    rng = np.random.default_rng(8)
    h, w = rng.normal(size=(4, 16, 3)), rng.normal(size=(3, 4096))  # logits: 2 MiB
    targets, counted = rng.integers(0, 4096, size=(4, 16)), np.ones((4, 16), bool)
    held = _tape_bytes(lambda h: losses.unembedded_nll_sum(h, w, None, targets, counted), h)
    assert held < 2 ** 18


def plain_rope(x, positions, base, scaling):
    # Hugging Face's form, x * cos + rotate_half(x) * sin, with the schedule's frequencies and
    # attention factor (minattn.rope_scaling), differentiated by autograd.
    from minattn.rope_scaling import rope_frequencies

    half = x.shape[-1] // 2
    inv_freq, factor = rope_frequencies(x.shape[-1], positions, base=base, scaling=scaling)
    angles = np.concatenate([positions[..., None] * inv_freq] * 2, axis=-1)  # [..., L, d]
    rotated_half = anp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * (np.cos(angles) * factor) + rotated_half * (np.sin(angles) * factor)


@pytest.mark.parametrize("scaling", [None, {"rope_type": "yarn", "factor": 4.0,
                                            "original_max_position_embeddings": 16}])
def test_rope_vjp_equals_autograd_of_the_rotate_half_formula(scaling):
    from minattn.rope import apply_rope

    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, 3, 5, 8))  # [B, H, L, d]
    positions = rng.integers(0, 40, size=(2, 1, 5))  # per row, broadcast over the heads
    r = _direction(x.shape, 10)
    _same_gradient(lambda x: anp.sum(apply_rope(x, positions, base=100.0, scaling=scaling) * r),
                   lambda x: anp.sum(plain_rope(x, positions, 100.0, scaling) * r), (x,), [0])
    check_grads(lambda x: apply_rope(x, positions, scaling=scaling), modes=["rev"], order=2)(x)


def test_ropes_tape_keeps_the_positions_not_its_input():
    from minattn.rope import apply_rope

    x = np.random.default_rng(10).normal(size=(256, 16, 64))  # 2 MiB; its tables, 12 KiB
    positions = np.arange(16)
    assert _tape_bytes(lambda x: anp.sum(apply_rope(x, positions)), x) < 2 ** 18


def test_geglu_vjp_equals_autograd_of_gelu_tanh_gate_times_up_and_stays_finite_in_the_tails():
    # Gemma's gated feed-forward's one primitive against autograd through the formula it
    # replaces, the tanh GELU written out times up (up broadcast too); then far out, where
    # autograd's tanh gradient (1 / cosh²) overflows: the gradient is up times 1 or 0.
    from minattn.position_wise import geglu
    rng = np.random.default_rng(13)
    gate, up = 3.0 * rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    r = _direction(gate.shape, 14)
    c = np.sqrt(2.0 / np.pi)
    written = lambda g, u: anp.sum(0.5 * g * (1.0 + anp.tanh(c * (g + 0.044715 * g ** 3))) * u * r)  # noqa: E731,E501
    _same_gradient(lambda g, u: anp.sum(geglu(g, u) * r), written, (gate, up), [0, 1])
    _same_gradient(lambda g, u: anp.sum(geglu(g, u) * r), written, (gate, up[0, 0]), [0, 1])
    check_grads(geglu, modes=["rev"], order=2)(gate, up)
    for dtype in (np.float32, np.float64):
        far, up = np.array([30.0, 1e3, -30.0, -1e3], dtype), np.array([2.0, -3.0, 5.0, 7.0], dtype)
        d_gate, d_up = grad(lambda g, u: anp.sum(geglu(g, u)), (0, 1))(far, up)
        assert d_gate.dtype == d_up.dtype == dtype
        np.testing.assert_array_equal(d_gate, np.array([2.0, -3.0, 0.0, 0.0], dtype))
        np.testing.assert_array_equal(d_up, np.array([30.0, 1e3, 0.0, 0.0], dtype))


def test_float32_gelu_vjp_is_within_the_stated_error_of_the_float64_derivative():
    # The float32 derivative goes through the forward's erfc (A & S 7.1.26), not scipy's erf:
    # the same two parts of its error as the GELU's, against d/dx x Φ(x) = Φ(x) + x φ(x) in
    # float64; at ±0 it is Φ(0) = 1/2, far out 1 and 0, huge |x| without a warning. Taken as
    # autograd takes it (the derivative is computed with the value, then multiplied by g).
    from autograd import elementwise_grad
    from scipy.special import erf

    from minattn.position_wise import gelu

    def gelu_vjp(wrt, g, y, x):
        return {"x": elementwise_grad(lambda x: gelu(x) * g)(x)}

    x = np.linspace(-12, 12, 400_001).astype(np.float32)
    wide = x.astype(np.float64)
    exact = 0.5 * (1 + erf(wide / np.sqrt(2.0))) + wide * np.exp(-0.5 * wide * wide) / np.sqrt(
        2 * np.pi)
    got = gelu_vjp(("x",), np.ones_like(x), None, x)["x"]
    assert got.dtype == np.float32
    assert np.all(np.abs(got - exact) <= APPROXIMATION + float32_rounding(x))
    edges = np.array([-0.0, 0.0, 20.0, -20.0, F32_MAX, -F32_MAX], dtype=np.float32)
    np.testing.assert_array_equal(gelu_vjp(("x",), np.ones_like(edges), None, edges)["x"],
                                  [0.5, 0.5, 1.0, 0.0, 1.0, 0.0])


def test_value_and_grad_by_leaf_equals_autograds_value_and_grad_over_the_tree():
    # Each leaf a start of its own (engine/autograd_rules.py) against autograd's boxed tree:
    # the same value and gradients, leaves reused, taken twice, indexed (an embedding's rows),
    # nested in dicts, lists and tuples, and one leaf unused (zeros, its dtype).
    from autograd import value_and_grad

    from minattn.engine.autograd_rules import value_and_grad_by_leaf

    rng = np.random.default_rng(14)
    tree = {"emb": rng.normal(size=(5, 3)), "layers": [
        {"w": rng.normal(size=(3, 3)), "b": rng.normal(size=3)} for _ in range(2)],
        "pair": (rng.normal(size=3), rng.normal(size=2).astype(np.float32))}
    ids = np.array([0, 3, 3, 1])

    def f(t, scale):
        h = t["emb"][ids]
        for layer in t["layers"]:
            h = anp.tanh(h @ layer["w"] + layer["b"]) + h @ layer["w"]
        return scale * anp.sum(h * t["pair"][0])

    value, grads = value_and_grad_by_leaf(f)(tree, 0.5)
    expected_value, expected = value_and_grad(f)(tree, 0.5)
    assert value == expected_value
    np.testing.assert_array_equal(grads["emb"], expected["emb"])
    for got, want in zip(grads["layers"], expected["layers"]):
        assert got.keys() == want.keys()
        for name in got:
            np.testing.assert_array_equal(got[name], want[name])
    assert isinstance(grads["pair"], tuple)
    np.testing.assert_array_equal(grads["pair"][0], expected["pair"][0])
    assert grads["pair"][1].dtype == np.float32 and not grads["pair"][1].any()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_gradient_adds_each_row_where_it_was_taken_as_autograds_indexing(dtype):
    # minattn.linear.rows (an embedding's lookup) against autograd's gradient of plain
    # indexing: ids repeated, negative, a row never taken, ids of two dimensions; and its
    # second derivative through added_rows, the adjoint.
    from minattn.linear import added_rows, rows

    rng = np.random.default_rng(15)
    table = rng.normal(size=(7, 3)).astype(dtype)
    ids = np.array([[0, 3, 3, -1], [6, 0, 2, 3]])
    r = _direction((2, 4, 3), 16).astype(dtype)
    got = grad(lambda t: anp.sum(rows(t, ids) * r))(table)
    want = grad(lambda t: anp.sum(t[ids] * r))(table)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-15)
    assert not got[[1, 4, 5]].any()  # rows never taken get nothing
    np.testing.assert_array_equal(rows(table, ids), table[ids])
    check_grads(lambda v: added_rows(v, ids, 7), modes=["rev"], order=2)(
        r.astype(np.float64))


@primitive
def _total(x):
    return np.sum(x)


defvjp(_total, lambda ans, x: lambda g: anp.broadcast_to(g, np.shape(x)))  # zero strides


@pytest.mark.parametrize("uses", ["output", "weights", "sum of the weights", "both"])
def test_attention_gradient_of_one_output_or_both_equals_the_composition(uses):
    # A primitive's unread output gets a stand-in of zeros as its gradient (autograd_rules:
    # _output_vjp), which the attention VJP skips adding (no_gradient). A read output's gradient
    # is added, a zero-strided one too (_total's: broadcast g), and the second derivative (a
    # Hessian-vector product) goes through each case; against autograd of the composition, an
    # independent computation.
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    keep = np.tril(np.ones((3, 5), dtype=bool), k=2)
    r_out, r_w = rng.normal(size=(2, 3, 3)), rng.normal(size=(2, 3, 5))

    def loss(attend):
        def f(q, k, v):
            out, weights = attend(q, k, v)
            return {"output": lambda: anp.sum(anp.tanh(out) * r_out),
                    "weights": lambda: anp.sum(anp.tanh(weights) * r_w),
                    "sum of the weights": lambda: _total(weights) + anp.sum(out[..., 0] ** 2),
                    "both": lambda: anp.sum(out * r_out) + anp.sum(weights * r_w)}[uses]()
        return f

    hand = loss(lambda q, k, v: ma.scaled_dot_product_attention(q, k, v, keep, scale=0.7))
    plain = loss(lambda q, k, v: plain_attention(q, k, v, 0.7, keep))
    _same_gradient(hand, plain, (q, k, v), [0, 1] if uses == "weights" else [0, 1, 2])  # (no v)
    d = rng.normal(size=q.shape)
    hvp = lambda f: grad(lambda q: anp.sum(grad(f, 0)(q, k, v) * d))(q)  # noqa: E731
    np.testing.assert_allclose(hvp(hand), hvp(plain), rtol=1e-9, atol=1e-11)


def test_no_gradient_is_the_stand_in_itself_not_any_zero_strided_array():
    from minattn.engine.autograd_rules import _output_vjp, no_gradient

    outputs = (np.ones((2, 3)), np.ones((2, 4), dtype=np.float32))
    g = np.full((2, 3), 2.0)
    whole = _output_vjp(None, outputs, 0)(g)
    assert whole[0] is g and no_gradient(whole[1]) and not no_gradient(whole[0])
    assert whole[1].shape == (2, 4) and whole[1].dtype == np.float32 and not whole[1].any()
    assert not no_gradient(np.broadcast_to(np.float32(0), (2, 4)))  # a sum's gradient, say
    assert not no_gradient(np.zeros((2, 4), dtype=np.float32))


@pytest.mark.parametrize("value_shape, grad_shape, value_dtype, grad_dtype", [
    ((3, 4), (3, 4), np.float32, np.float32),  # the fast path: the grad itself
    ((4,), (2, 3, 4), np.float64, np.float64),  # broadcast along leading dims: summed
    ((3, 1), (3, 4), np.float32, np.float32),  # along a dim of 1: summed, kept
    ((3, 4), (3, 4), np.float64, np.complex128),  # a complex grad of a real value: its real part
    ((3, 4), (3, 4), np.complex128, np.complex128),
])
def test_gradient_by_hand_unbroadcasts_as_autograd_does(value_shape, grad_shape, value_dtype,
                                                        grad_dtype):
    # gradient_by_hand hands back a same-shape NumPy gradient as it is (_unbroadcast's fast
    # path), anything else through autograd's unbroadcast: the same arrays either way.
    from autograd.numpy.numpy_vjps import unbroadcast_f

    from minattn.engine.autograd_rules import _unbroadcast

    rng = np.random.default_rng(0)
    value = rng.normal(size=value_shape).astype(value_dtype)
    grad = (rng.normal(size=grad_shape) + (1j if grad_dtype == np.complex128 else 0) *
            rng.normal(size=grad_shape)).astype(grad_dtype)
    got, want = _unbroadcast(value, grad), unbroadcast_f(value, lambda _: grad)(None)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)
    if value_shape == grad_shape and value_dtype == grad_dtype:
        assert got is grad


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunk_elements", [2 ** 23, 7 * 11])  # one chunk; several of 7 rows
def test_the_fused_loss_with_every_position_counted_reads_rows_in_place_with_the_same_bits(
        dtype, chunk_elements, monkeypatch):
    # With every position counted the chunks are slices of h's rows, not copies taken by index:
    # the same products of the same numbers. Against the same batch with one more position that
    # is not counted (so the counted rows are taken by index): loss and gradients equal to the
    # last bit, the extra position's gradient zero.
    from minattn.training import losses

    monkeypatch.setattr(losses, "CHUNK_ELEMENTS", chunk_elements)
    rng = np.random.default_rng(3)
    h = rng.normal(size=(3, 9, 8)).astype(dtype)
    w, b = rng.normal(size=(8, 11)).astype(dtype), rng.normal(size=11).astype(dtype)
    targets = rng.integers(11, size=(3, 9))
    every = np.ones((3, 9), dtype=bool)
    wrt = ("h", "w", "b")
    value, grads = losses.unembedded_nll_and_gradient(wrt, h, w, b, targets, every)
    h_more = np.concatenate([h, rng.normal(size=(3, 1, 8)).astype(dtype)], axis=1)
    targets_more = np.concatenate([targets, np.zeros((3, 1), dtype=targets.dtype)], axis=1)
    counted_more = np.concatenate([every, np.zeros((3, 1), dtype=bool)], axis=1)
    value_more, grads_more = losses.unembedded_nll_and_gradient(
        wrt, h_more, w, b, targets_more, counted_more)
    # the rows of h_more are the same rows, in the same order, where counted
    assert value.dtype == value_more.dtype == dtype and value == value_more
    np.testing.assert_array_equal(grads["h"], grads_more["h"][:, :9])
    assert not grads_more["h"][:, 9].any()
    np.testing.assert_array_equal(grads["w"], grads_more["w"])
    np.testing.assert_array_equal(grads["b"], grads_more["b"])


def test_float32_gelu_in_chunks_differentiated_twice_runs_the_exact_form():
    # The float32 GELU's derivative comes with its value (plain arrays, not differentiated
    # again); inside another differentiation the exact form (scipy's erf, its VJP written with
    # autograd) runs instead: a Hessian-vector product within float32 rounding of float64's
    # exact one, past one chunk as below it.
    from minattn import position_wise
    rng = np.random.default_rng(14)
    for n in (40, 3 * position_wise._CHUNK + 5):
        x = (4.0 * rng.normal(size=n)).astype(np.float32)
        r = rng.normal(size=n).astype(np.float32)
        loss = lambda a: anp.sum(position_wise.gelu(a) * r)  # noqa: E731
        hvp = grad(lambda a: anp.sum(grad(loss)(a) * r))(x)
        phi = lambda t: np.exp(-0.5 * t * t) / np.sqrt(2.0 * np.pi)  # noqa: E731
        x64, r64 = x.astype(np.float64), r.astype(np.float64)
        expected = r64 * r64 * (2.0 * phi(x64) - x64 * x64 * phi(x64))  # (x Φ)'' = 2φ - x²φ
        assert hvp.dtype == np.float32
        np.testing.assert_allclose(hvp, expected, rtol=1e-5, atol=1e-6)
