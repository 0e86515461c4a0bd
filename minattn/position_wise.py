"""The position-wise feed-forward network: the same two-layer MLP applied to every token."""
import math

import autograd.numpy as np
import numpy
from autograd.tracer import getval

from .engine import checks, threads
from .engine.autograd_rules import gradient_by_hand, gradient_with_the_value, reads
from .engine.dtypes import float16_in_float32
from .engine.param_checks import ACTIVATIONS, check_feed_forward_params, \
    check_gated_feed_forward_params
from .dropout import dropout as _dropout
from .linear import linear, project



def relu_vjp(wrt, g, y, x):
    return {"x": g * (x > 0)}  # the gradient at 0 is 0, as in torch


@gradient_by_hand(relu_vjp)
def relu(x):
    # max(x, 0), in x's dtype; NaN stays NaN, as in torch.
    return np.maximum(x, 0)


@float16_in_float32("x")  # scipy's erf has no float16 loop
def gelu(x):
    # Exact GELU, x Φ(x) with Φ the Gaussian CDF, written through erf (torch's default):
    # Φ(x) = (1 + erf(x / √2)) / 2. How _gelu computes it fast: walkthrough.md's appendix.
    return _gelu(x)


def gelu_vjp(wrt, g, y, x):
    # d/dx x Φ(x) = Φ(x) + x φ(x), with φ the Gaussian density (float32 comes with its value:
    # _gelu_float32_and_derivative)
    from autograd.scipy.special import erf

    return {"x": g * (0.5 * (1.0 + erf(x / math.sqrt(2.0)))
                      + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi))}


def _gelu(x):
    return (_gelu_float32 if x.dtype == np.float32 else _gelu_exact)(x)


@gradient_by_hand(gelu_vjp)
def _gelu_exact(x):
    from scipy.special import erf  # exact; scipy is imported only when GELU is used
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _gelu_float32_and_derivative(wrt, x):
    # -> (x Φ(x), {"x": Φ(x) + x φ(x)} where x is differentiated): the derivative from the
    # value's own erfc and exp, in the same pass, so the backward pass is one product g · Φ'
    # and the tape keeps Φ' alone (scipy's float32 erf took more than half of a GELU MLP's
    # backward pass: benchmarks/bench_char_gpt.py --profile)
    if not wrt:
        return _in_chunks(_gelu_chunk, x), {}
    y, d = _in_chunks(_gelu_and_derivative_chunk, x, outputs=2)
    return y, {"x": d}


@gradient_with_the_value(_gelu_float32_and_derivative, otherwise=_gelu_exact)
def _gelu_float32(x):
    return _in_chunks(_gelu_chunk, x)  # ~0.4x the time of scipy's erf (bench_gelu.py)


# Abramowitz & Stegun 7.1.26: erfc(z) = t (a1 + a2 t + ... + a5 t⁴) exp(-z²), t = 1 / (1 + p z),
# for z >= 0, with an absolute error below 1.5e-7. GELU through it, in float64 arithmetic, is
# within 2.2e-7 of the exact GELU on [-12, 12]; float32 arithmetic adds a rounding error of a few
# float32 ulps of max(|x|, 1) that depends on the CPU (NumPy's float32 exp differs by SIMD path):
# 4.2e-7 in all on an AMD EPYC with AVX-512. torch's float32 GELU is the exact one up to its own
# CPU-dependent rounding (1.1e-6 on that CPU). Measured by tests/test_vjps.py;
# benchmarks/bench_gelu.py times it.
_P, _A = 0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# In x = √2 z: t = k / (|x| + k) with k = √2 / p (one add, one division: t = 1 exactly at x = 0),
# exp(-z²) = exp(x² · -1/2), and the 1/2 of Φ's h folded into the a's.
_K = numpy.float32(math.sqrt(2.0) / _P)
_HALF_A = tuple(numpy.float32(a / 2) for a in _A)
# Horner's rule without its first product: with s = c t, c = (a5 / 2)^(1/5), the polynomial
# t Σ_i (a_i / 2) t^(i-1) is s (b1 + s (b2 + s (b3 + s (b4 + s)))), b_i = (a_i / 2) / c^i, whose
# leading coefficient is 1; s = c k / (|x| + k) costs what t did (one constant for another).
_C = (_A[-1] / 2) ** (1 / 5)
_CK = numpy.float32(_C * math.sqrt(2.0) / _P)
_B = tuple(numpy.float32(a / 2 / _C ** (i + 1)) for i, a in enumerate(_A[:-1]))


def _gelu_chunk(x, out, a, t):
    # float32 x -> out = x Φ(x); a, t: scratch of x's size. In-place passes over arrays made here
    # (no autograd inside a primitive, so `out=` is fine): 19 in all, 22 with the derivative.
    # Plain NumPy calls, here and in the helpers below: autograd.numpy's wrapper looks for boxes
    # among the arguments of each call, about a microsecond a call, and a small GPT's step makes
    # more than a thousand of these calls (benchmarks/ab_step_versions.py).
    h = _half_erfc(x, out, a, t)[0]
    return numpy.multiply(_cdf_from_half_erfc(h, x, a), x, out=out)


def _gelu_and_derivative_chunk(x, y, d, a, t):
    # float32 x -> y = x Φ(x), d = Φ(x) + x φ(x), φ(x) = exp(-x² / 2) / √(2π) from the erfc's
    # own exp (0 where x² overflows, as the float32 density is there).
    h, e = _half_erfc(x, y, a, t)
    cdf = _cdf_from_half_erfc(h, x, a)
    numpy.multiply(numpy.multiply(x, numpy.float32(1 / math.sqrt(2 * math.pi)), out=d), e, out=d)
    numpy.add(d, cdf, out=d)
    return numpy.multiply(cdf, x, out=y), d


def _half_erfc(x, h, a, t):
    # float32 x -> (h = erfc(|x| / √2) / 2, t = exp(-x² / 2)), in h and t (a: scratch). Where
    # x² overflows (|x| > 1.8e19; the caller ignores the overflow), exp gives 0 and h is 0, as
    # it is in float32 already (from |x| = 14.4 on); at x = ±inf, t's k / (|x| + k) is 0 too.
    numpy.abs(x, out=a)
    numpy.divide(_CK, numpy.add(a, _K, out=t), out=t)  # s = c t, t = 1 / (1 + p |x| / √2)
    numpy.add(t, _B[-1], out=h)
    for b in reversed(_B[:-1]):  # Horner's rule in s (leading coefficient 1)
        numpy.multiply(h, t, out=h)
        numpy.add(h, b, out=h)
    numpy.multiply(h, t, out=h)
    numpy.exp(numpy.multiply(numpy.square(x, out=t), numpy.float32(-0.5), out=t), out=t)
    return numpy.multiply(h, t, out=h), t


def _cdf_from_half_erfc(h, x, out):
    # Φ(x) is h for x < 0 (h itself, so the small values of the left tail keep their relative
    # precision) and 1 - h for x >= 0 (x = -0 included: Φ(-0) = 1/2): max(h, [x >= 0] - h), as
    # h <= 1/2, without a per-element branch (a `where=x >= 0` mask cost half the GELU's time
    # on random signs; copysign, a quarter) and NaN kept.
    step = numpy.greater_equal(x, numpy.float32(0.0), out=out, casting="unsafe")  # 1.0 or 0.0
    return numpy.maximum(h, numpy.subtract(step, h, out=out), out=out)


# Elements per chunk: a chunk's five float32 arrays (128 KiB each, 640 KiB in all) stay in the
# CPU's cache (L2 on the development machine) rather than main memory. Of 2**13 .. 2**17, 2**15
# and 2**16 were the fastest there, within each other's noise; below, the ~20 calls' own cost
# shows (docs/benchmarks.md, "GELU in fewer passes"). On a worker that runs a model's step
# beside other workers, an array of up to 2**18 in one pass (threads.elements_per_pass: each
# call hands the GIL over).
_CHUNK = 2 ** 15
_PER_THREAD = 2 ** 19


def _in_chunks(f, x, *more, outputs=1):
    # out = f(x, out, a, t) for an elementwise f of many passes (f(x, out_1, out_2, a, t) for two
    # outputs; f(x, y, out, a, t) for a second input y of x's shape in `more`; a, t: two
    # scratch arrays of a chunk's size, made once per piece), run chunk by chunk over the
    # flattened x: each of its ~20 passes then reads the cache, not main memory.
    # The chunks go in contiguous pieces to as many worker threads as BLAS may use now
    # (n_workers: NumPy releases the GIL in its passes; one where one BLAS thread is in force),
    # at least _PER_THREAD elements each: a smaller split waits for a busy core's time slice
    # longer than it saves (docs/benchmarks.md, "GELU in fewer passes").
    # A GPU array (CuPy) goes in one piece: there, fewer launches matter more. An x of one
    # chunk (a decode step's token) is computed here, with NumPy's own functions: the split's
    # machinery and autograd's wrappers cost it more than its passes. Views whose rows are
    # contiguous (_rows_of_views: a fused product's slices) go in chunks of whole rows, read
    # where they lie, not copied flat first.
    n = threads.n_workers(x, numpy.size(x), _PER_THREAD)
    per_pass = threads.elements_per_pass(_CHUNK, numpy.size(x))  # a worker's: one pass
    if n == 1 and type(x) is numpy.ndarray and x.size <= per_pass and \
            (x.flags.c_contiguous or not _rows_of_views(x, *more)):
        flat = x.reshape(-1)
        outs = [numpy.empty_like(flat) for _ in range(outputs + 2)]  # (+ the two scratch)
        with numpy.errstate(over="ignore"):
            f(flat, *(numpy.reshape(y, -1) for y in more), *outs)
        return outs[0].reshape(x.shape) if outputs == 1 else \
            tuple(out.reshape(x.shape) for out in outs[:outputs])
    on_host = isinstance(x, numpy.ndarray)
    if on_host and _rows_of_views(x, *more):  # [rows, C] views: chunks of whole rows
        flat, more = x.reshape(-1, x.shape[-1]), [y.reshape(-1, x.shape[-1]) for y in more]
        chunk = max(1, per_pass // x.shape[-1])  # rows
    else:
        flat, more = numpy.reshape(x, -1), [numpy.reshape(y, -1) for y in more]
        chunk = per_pass if on_host else max(flat.size, 1)
    outs = [numpy.empty(flat.shape, flat.dtype) if on_host else numpy.empty_like(flat)
            for _ in range(outputs)]
    units = len(flat)  # elements, or rows
    bounds = [units * i // n // chunk * chunk for i in range(n)] + [units]

    def piece(span):
        begin, end = span
        scratch = [numpy.empty_like(outs[0][:min(chunk, end - begin)]) for _ in range(2)]
        with numpy.errstate(over="ignore"):  # x² = inf for |x| > 1.8e19: h = 0 there
            for start in range(begin, end, chunk):
                stop = min(start + chunk, end)
                f(flat[start:stop], *(y[start:stop] for y in more),
                  *(out[start:stop] for out in outs), *(s[:stop - start] for s in scratch))

    threads.in_threads(piece, zip(bounds, bounds[1:]), n)
    outs = [numpy.reshape(out, numpy.shape(x)) for out in outs]
    return outs[0] if outputs == 1 else tuple(outs)


def _rows_of_views(x, *more):
    # True for NumPy arrays x (and more, of x's shape) of at least two axes, each row of the
    # last axis contiguous, not all of them C-contiguous: the views a fused product's output
    # gives (SwiGLU's gate and up: [..., F] slices of one [..., 2F] product), which
    # numpy.reshape(x, -1) would copy, a pass more over each, before the chunks' own. Their
    # chunks go in whole rows instead, the same operations on the same elements: the same bits.
    arrays = (x, *more)
    return x.ndim >= 2 and x.shape[-1] > 0 and \
        all(type(a) is numpy.ndarray and a.shape == x.shape and a.strides[-1] == a.itemsize
            for a in arrays) and not all(a.flags.c_contiguous for a in arrays)


_C = math.sqrt(2.0 / math.pi)


def gelu_tanh_vjp(wrt, g, y, x):
    # With u = c (x + 0.044715 x³) and t = tanh(u): d/dx ½ x (1 + t) = ½ (1 + t) + ½ x (1 − t²) u'.
    # Written with t, not autograd's 1 / cosh(u)², which overflows (a warning) once |u| > ~89 in
    # float32 and ~710 in float64; 1 − t² goes to 0 there, as the derivative does.
    t = np.tanh(_C * (x + 0.044715 * x * x * x))
    return {"x": g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _C * (1.0 + 0.134145 * x * x))}


@gradient_by_hand(gelu_tanh_vjp)
def gelu_tanh(x):
    # The tanh approximation of GELU (GPT-2, torch's approximate="tanh").
    return 0.5 * x * (1.0 + np.tanh(_C * (x + 0.044715 * x * x * x)))


def init_feed_forward(rng, d_model, d_ff, *, dtype=np.float64):
    """-> {"w_1": [D, F], "b_1": [F], "w_2": [F, D], "b_2": [D]}: torch's nn.Linear default
    init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases, drawn from the Generator
    `rng` in float64 and cast to `dtype`."""
    d_model, d_ff = checks.check_size("d_model", d_model), checks.check_size("d_ff", d_ff)
    dtype = checks.check_init(rng, dtype)
    b1, b2 = 1.0 / math.sqrt(d_model), 1.0 / math.sqrt(d_ff)
    params = {
        "w_1": rng.uniform(-b1, b1, size=(d_model, d_ff)), "b_1": rng.uniform(-b1, b1, size=d_ff),
        "w_2": rng.uniform(-b2, b2, size=(d_ff, d_model)), "b_2": rng.uniform(-b2, b2, size=d_model),
    }
    return {name: w.astype(dtype) for name, w in params.items()}


def _check_feed_forward(params, x, activation, dropout, rng):
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 1, "(..., D)")
    checks.check_choice("activation", activation, ACTIVATIONS)
    checks.check_dropout(dropout, rng)
    return check_feed_forward_params(params, x.shape[-1], dtype=x.dtype), x


def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
    """The position-wise MLP, applied to every token alike: x [..., D] -> [..., D] through a
    hidden width F = params["w_1"].shape[1], with activation "relu", "gelu" (exact, erf) or
    "gelu_tanh", and dropout (with an rng) after the activation, as torch's encoder layer."""
    # [..., D] -> [..., D] through [..., F]; dropout (if any) after the activation, as torch.
    params, x = _check_feed_forward(params, x, activation, dropout, rng)
    act = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}[activation]
    hidden = act(linear(x, params["w_1"], params["b_1"]))  # [..., F]
    hidden = _dropout(hidden, dropout, rng)
    return linear(hidden, params["w_2"], params["b_2"])  # [..., D]


def sigmoid_vjp(wrt, g, s, x):
    # sigmoid' = s (1 - s) = sigmoid(x) sigmoid(-x): no cancellation where s is close to 1. By
    # hand, not through autograd's |x|, whose gradient g x / |x| underflows to 0 where x is
    # subnormal (5e-324 gave sigmoid' = 0, not 0.25).
    return {"x": g * sigmoid(x) * sigmoid(-x)}


@gradient_by_hand(sigmoid_vjp)
def sigmoid(x):
    # 1 / (1 + e^-x) through e = exp(-|x|) <= 1: e / (1 + e) where x < 0, 1 / (1 + e) elsewhere,
    # so no overflow for any x and full relative precision in the tails. The numerator, e where
    # x < 0 and 1 elsewhere, is exp(min(x, 0)): the same numbers, without np.where, which
    # branches on each element and took about ten times the second exp (docs/benchmarks.md,
    # "sigmoid without np.where").
    return np.exp(np.minimum(x, 0)) / (1.0 + np.exp(-np.abs(x)))


def silu(x):
    # x * sigmoid(x) (also "swish"); its gradient goes through sigmoid's
    return x * sigmoid(x)


@reads(gate=("gate", "up"), up=("gate",))  # the tape keeps no output
def swiglu_vjp(wrt, g, y, gate, up):
    # With s = sigmoid(gate): d silu(gate) / d gate = s (1 + gate (1 - s)); d y / d up = silu(gate)
    s = sigmoid(gate)
    grads = {"gate": lambda: g * up * s * (1 + gate * (1 - s)), "up": lambda: g * gate * s}
    return {name: grads[name]() for name in wrt}


def swiglu(gate, up):
    # [..., F], [..., F] -> [..., F]: silu(gate) * up, SwiGLU's gating, one primitive so that
    # autograd's tape keeps gate and up alone, not sigmoid(gate), silu(gate) and their products
    # (float32 gate and up of one shape, more than a chunk: in chunks, in fewer passes,
    # _swiglu_float32)
    return (_swiglu_float32 if _in_float32_chunks(gate, up) else _swiglu)(gate, up)


@gradient_by_hand(swiglu_vjp)
def _swiglu(gate, up):
    return silu(gate) * up


def _in_float32_chunks(gate, up):
    # NumPy float32 arrays (or autograd boxes of them) of one shape, of more than one chunk:
    # _swiglu_float32's. A decode step's token takes _swiglu, whose passes over 1,536 elements
    # cost less than the chunks' machinery; the values agree within float32 rounding (the
    # chunks' value is torch's form of silu; their derivatives' pass keeps _swiglu's bits).
    if type(gate) is not numpy.ndarray or type(up) is not numpy.ndarray:
        gate, up = getval(gate), getval(up)
    return type(gate) is numpy.ndarray and type(up) is numpy.ndarray and \
        gate.dtype == up.dtype == numpy.float32 and gate.shape == up.shape and \
        gate.size > _CHUNK


def _swiglu_float32_and_derivatives(wrt, gate, up):
    # -> (silu(gate) * up, {"gate": up s (1 + gate (1 - s)), "up": silu(gate)} for the names in
    # wrt), s = sigmoid(gate): the derivatives from the value's own sigmoid, in the same pass
    # over each chunk (_in_chunks), so the backward pass is one product g · derivative per input
    # and the tape keeps the two derivatives, as many arrays as it kept before (gate and up)
    # (benchmarks/bench_finetune.py --profile: sigmoid's passes, twice, a tenth of the step)
    if not wrt:
        return _in_chunks(_swiglu_chunk, gate, up), {}
    y, d_gate, d_up = _in_chunks(_swiglu_and_derivatives_chunk, gate, up, outputs=3)
    return y, {name: {"gate": d_gate, "up": d_up}[name] for name in wrt}


@gradient_with_the_value(_swiglu_float32_and_derivatives, otherwise=_swiglu)
def _swiglu_float32(gate, up):
    return _in_chunks(_swiglu_chunk, gate, up)


def _swiglu_chunk(gate, up, out, s, t):
    # float32 gate, up -> out = silu(gate) * up as gate / (1 + exp(-gate)) * up, torch's form
    # of silu: five passes over the chunk where sigmoid's operations and the products take nine
    # (docs/benchmarks.md, "The attention core's forward in fewer passes"). Within float32
    # rounding of the float64 formula (a few ulps: tests/test_vjps.py), not _swiglu's bits;
    # where gate < -88.7, exp(-gate) overflows to inf and silu(gate) comes out -0 where it is
    # under 6e-37 in magnitude. s and t unused (the chunks' scratch). NumPy's own ufuncs (plain
    # arrays): autograd's wrappers cost more than the passes at a decode step's size.
    numpy.exp(numpy.negative(gate, out=out), out=out)
    numpy.divide(gate, numpy.add(out, 1.0, out=out), out=out)
    return numpy.multiply(out, up, out=out)


def _swiglu_and_derivatives_chunk(gate, up, y, d_gate, d_up, s, t):
    # float32 gate, up -> y = silu(gate) up, d_up = silu(gate), d_gate = up s (1 + gate (1 - s))
    numpy.multiply(gate, _sigmoid_into(gate, s, t), out=d_up)
    numpy.multiply(d_up, up, out=y)
    numpy.multiply(gate, numpy.subtract(1.0, s, out=t), out=t)
    numpy.multiply(numpy.add(t, 1.0, out=t), s, out=t)
    return y, numpy.multiply(up, t, out=d_gate), d_up


def _sigmoid_into(x, s, t):
    # s = sigmoid(x), as sigmoid computes it (exp(min(x, 0)) / (1 + exp(-|x|))), in s; t: scratch
    numpy.exp(numpy.negative(numpy.abs(x, out=t), out=t), out=t)
    numpy.exp(numpy.minimum(x, 0, out=s), out=s)
    return numpy.divide(s, numpy.add(t, 1.0, out=t), out=s)


@reads(gate=("gate", "up"), up=("gate",))  # the tape keeps no output
def geglu_vjp(wrt, g, y, gate, up):
    # d y / d gate = up · gelu_tanh'(gate), through tanh as gelu_tanh_vjp (finite in the tails);
    # d y / d up = gelu_tanh(gate)
    grads = {"gate": lambda: gelu_tanh_vjp(("x",), g * up, None, gate)["x"],
             "up": lambda: g * gelu_tanh(gate)}
    return {name: grads[name]() for name in wrt}


@gradient_by_hand(geglu_vjp)
def geglu(gate, up):
    # [..., F], [..., F] -> [..., F]: gelu_tanh(gate) * up, GEGLU's gating (Gemma), one primitive
    # as swiglu is
    return gelu_tanh(gate) * up


def init_gated_feed_forward(rng, d_model, d_ff, *, dtype=np.float64):
    """-> {"w_gate": [D, F], "w_up": [D, F], "w_down": [F, D]}, no biases (Llama), nn.Linear's
    default U(+-1/sqrt(fan_in)), drawn from the Generator `rng` in float64, cast to `dtype`."""
    d_model, d_ff = checks.check_size("d_model", d_model), checks.check_size("d_ff", d_ff)
    dtype = checks.check_init(rng, dtype)
    b1, b2 = 1.0 / math.sqrt(d_model), 1.0 / math.sqrt(d_ff)
    params = {"w_gate": rng.uniform(-b1, b1, size=(d_model, d_ff)),
              "w_up": rng.uniform(-b1, b1, size=(d_model, d_ff)),
              "w_down": rng.uniform(-b2, b2, size=(d_ff, d_model))}
    return {name: w.astype(dtype) for name, w in params.items()}


def gated_feed_forward(params, x):
    """SwiGLU (Shazeer 2020; Llama's MLP): down(silu(gate(x)) * up(x)), x [..., D] -> [..., D]
    through a hidden width F. The gate decides, per token and hidden unit, how much of up(x)
    passes."""
    # [..., D] -> [..., F] -> [..., D]
    params, x = _check_gated_feed_forward(params, x)
    gate, up = project(params, x, ("gate", "up"))  # [..., F] each
    hidden = swiglu(gate, up)  # silu(gate) * up, [..., F]
    return project(params, hidden, ("down",))[0]  # [..., D]


def _check_gated_feed_forward(params, x):
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 1, "(..., D)")
    return check_gated_feed_forward_params(params, x.shape[-1], dtype=x.dtype), x
