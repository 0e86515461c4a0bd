"""Hand VJPs on NumPy itself, for the backward passes that are not differentiated again.

A concept's VJP is written with autograd.numpy, so that a second derivative can go through it;
each of its calls then passes through autograd.numpy's wrapper, which looks for boxes among the
call's arguments first (some µs a call: a 6-row half of the baby GPT's training step made ~1,340
such calls, docs/benchmarks.md). Where g and the arguments hold no box, gradient_by_hand calls
the VJP's plain form instead (autograd_rules.plain_form, in_place=):

    linear_vjp_plain              linear's VJP on NumPy: the same calls (the same bits) for x
                                  and w; b's sum over the tokens a product with a row of ones
                                  (column_sums: within float32 rounding of the sum)
    attention_core_plain(vjp)     the attention core's VJP, the same calls on NumPy, softmax's VJP
                                  and the scale written into the arrays made here: the same bits
                                  (vjp itself where the tape did not keep the weights)
    layer_norm_vjp_in_place       LayerNorm's VJP in fewer passes over [..., D]: within float32
                                  rounding of the float64 formula, not its bits

Each call over a whole array also lets the GIL go and take it back: on two worker threads, each
such call can hand the GIL to the other worker (docs/benchmarks.md, "The baby GPT's two workers
and the GIL"), so fewer of them is the point of layer_norm_vjp_in_place's form.
"""
import functools
import math

import numpy

from . import checks, plain_core
from .autograd_rules import kept, plus_gradient
from .query_blocks import calls_as_written
from .reductions import ones_column
from .threads import one_blas_thread


def linear_vjp_plain(wrt, g, y, x, w, b):
    """linear_vjp's operations in its order (dx = g wᵀ, dw = xᵀ g on the flattened tokens), on
    NumPy itself: the same bits; db = Σ g over the tokens by column_sums."""
    n = math.prod(numpy.shape(x)[:-1])  # the tokens, counted (-1 is ambiguous for an empty x)
    g_tokens = numpy.reshape(g, (n, w.shape[1]))
    grads = {}
    for name in wrt:
        if name == "x":
            grads["x"] = numpy.reshape(g_tokens @ numpy.swapaxes(w, 0, 1), numpy.shape(x))
        elif name == "w":
            grads["w"] = numpy.swapaxes(numpy.reshape(x, (n, w.shape[0])), 0, 1) @ g_tokens
        else:
            grads["b"] = column_sums(g_tokens)
    return grads


def column_sums(a):
    """a [n, d] -> Σ over the n rows [d]: for a NumPy array, a product with a row of ones (one
    BLAS call, 3-4 times faster than NumPy's sum along the rows at the baby GPT's [384, 128],
    and made without letting the GIL go: a product this small keeps it); else NumPy's sum.
    Not the sum's bits: another order of the same additions, within float32 rounding."""
    if type(a) is not numpy.ndarray:
        return numpy.sum(a, axis=0)
    return numpy.reshape(ones_column(a.shape[0], a.dtype).T @ a, a.shape[1:])


def attention_core_plain(vjp):
    """-> the attention core's VJP (vjp: attention.attention_vjp) on NumPy itself, where the
    tape kept the weights P: its operations in its order, dS = P ⊙ (dP - Σ_j dP_j P_j) written
    into the dP made here and dQ, dK scaled in the products made here (the same bits). Where P
    was not kept, it is recomputed from Q and K as vjp recomputes it (attention._weights: the
    scaled product, softmax's operations in their order), in the one array of scores made here
    (plain_core.weights: the same bits) for float32 and float64 NumPy arrays; vjp itself for
    any other (float16, GPU arrays), and where a function P's recomputation calls has been
    swapped (minattn.swap: query_blocks.calls_as_written)."""
    as_written = calls_as_written(vjp)  # (a swapped softmax: vjp recomputes P with it)

    @functools.wraps(vjp)
    def attention_vjp_plain(wrt, g, outputs, q, k, v, mask, scale, dropout, rng):
        if not kept(outputs[1]) and not (_recomputable(q, k, mask) and as_written()):
            return vjp(wrt, g, outputs, q, k, v, mask, scale, dropout, rng)
        d_out, d_weights = g
        q, k, v, keep, bias, scale, _ = checks.check_attention(q, k, v, mask, scale, dropout, rng)
        with one_blas_thread():
            p = outputs[1] if kept(outputs[1]) else \
                plain_core.weights(q, k, keep, bias, scale)  # [..., L_q, L_k]
            if p is None:  # scores of another dtype (a bias's): vjp, as it takes them
                return vjp(wrt, g, outputs, q, k, v, mask, scale, dropout, rng)
            d_p = plus_gradient(d_out @ numpy.swapaxes(v, -1, -2), d_weights)  # [..., L_q, L_k]
            dot = numpy.einsum("...i,...i->...", d_p, p)[..., None]  # row_dot(d_p, p)
            if type(d_p) is numpy.ndarray and numpy.shape(p) == d_p.shape and \
                    numpy.result_type(p, d_p, dot) == d_p.dtype:  # d_p: an array made here
                d_s = numpy.multiply(p, numpy.subtract(d_p, dot, out=d_p), out=d_p)
            else:
                d_s = p * (d_p - dot)
            grads = {}
            for name in wrt:
                if name == "q":
                    grads["q"] = _times(d_s @ k, scale)
                elif name == "k":
                    grads["k"] = _times(numpy.swapaxes(d_s, -1, -2) @ q, scale)
                elif name == "v":
                    grads["v"] = numpy.swapaxes(p, -1, -2) @ d_out
                elif name == "mask":
                    grads["mask"] = d_s
                else:
                    grads["scale"] = numpy.sum(d_s * (q @ numpy.swapaxes(k, -1, -2)))
            return grads

    return attention_vjp_plain


def _recomputable(q, k, mask):
    # plain_core.weights' inputs: float32 or float64 NumPy arrays of one dtype, no mask or a
    # NumPy one
    return type(q) is numpy.ndarray and type(k) is numpy.ndarray and q.dtype == k.dtype and \
        q.dtype in plain_core.FLOATS and (mask is None or type(mask) is numpy.ndarray)


def _times(a, scale):
    # a * scale, written into a where a is a NumPy array of the product's dtype: the same bits
    if type(a) is numpy.ndarray and numpy.result_type(a, scale) == a.dtype:
        return numpy.multiply(a, scale, out=a)
    return a * scale


def layer_norm_vjp_in_place(wrt, g, y, x, gamma, beta, eps):
    """layer_norm's VJP on plain arrays of one dtype, on NumPy itself, in fewer passes over
    [..., D] than the formula's order (normalization.layer_norm_vjp): with c = x - μ and
    r = 1 / σ (a number per row), x̂ = c r is never made, and with t = r dx̂ = r g γ,
        dx = r (dx̂ - mean(dx̂) - x̂ mean(dx̂ x̂)) = t - mean(t) - c r² mean(t c),
        dγ = Σ (g r) ⊙ c (one einsum over the tokens),  dβ = Σ g (column_sums),
        d eps = -1/2 Σ dx̂ x̂ / σ² = -D/2 Σ_rows r² mean(t c).
    12 NumPy calls over [..., D] (with x, gamma and beta wanted) where the formula's order takes
    14, and 2 more sums each for γ and β over the leading dims: a result within its dtype's
    rounding of the float64 formula, not the formula's bits (tests/test_layer_norm.py)."""
    x, gamma, beta, eps = checks.check_layer_norm(x, gamma, beta, eps)
    d = x.shape[-1]
    n = math.prod(x.shape[:-1])  # the tokens, counted (-1 is ambiguous where x holds none)
    if d == 0:  # no features: empty gradients, and eps's the formula's sum of nothing (1 / σ,
        # 1 / sqrt(eps), would be infinite for eps = 0, and times the empty sums NaN)
        grads = {"x": numpy.zeros_like(x), "gamma": numpy.zeros_like(gamma),
                 "beta": numpy.zeros_like(beta), "eps": numpy.sum(numpy.zeros_like(x)) * -0.5}
        return {name: grads[name] for name in wrt}
    c = x - _feature_mean(x)  # [..., D], centered
    r = 1 / numpy.sqrt(_feature_mean_of_product(c, c) + eps)  # [..., 1]: 1 / σ
    g_r = g * r  # [..., D]
    grads = {}
    if "gamma" in wrt:
        grads["gamma"] = numpy.einsum("nd,nd->d", numpy.reshape(g_r, (n, d)),
                                      numpy.reshape(c, (n, d)))
    if "beta" in wrt:
        grads["beta"] = column_sums(numpy.reshape(g, (n, d)))
    if "x" in wrt or "eps" in wrt:  # last: they overwrite g_r and c
        t = numpy.multiply(g_r, gamma, out=g_r)  # r dx̂
        s = _feature_mean_of_product(t, c) * (r * r)  # [..., 1]: r² mean(t c)
        if "eps" in wrt:
            grads["eps"] = numpy.sum(s) * (-0.5 * d)
        if "x" in wrt:
            t = numpy.subtract(t, _feature_mean(t), out=t)
            grads["x"] = numpy.subtract(t, numpy.multiply(c, s, out=c), out=t)
    return {name: grads[name] for name in wrt}


def _feature_mean(a):
    # normalization.feature_mean on NumPy itself (a sum as a product with a column of ones),
    # a NumPy array's column made once per width and dtype
    ones = ones_column(a.shape[-1], a.dtype) if type(a) is numpy.ndarray else \
        numpy.ones_like(a, shape=(a.shape[-1], 1))
    return a @ ones / max(a.shape[-1], 1)


def _feature_mean_of_product(a, b):
    # normalization.feature_mean_of_product on NumPy itself: each row's dot product (einsum)
    return numpy.einsum("...i,...i->...", a, b)[..., None] / max(a.shape[-1], 1)
