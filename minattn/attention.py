"""Softmax and scaled dot-product attention: the engine every other function is built on.

Mask convention (as torch.nn.functional.scaled_dot_product_attention and JAX/Flax):
a boolean mask is True where a query MAY attend to a key. torch.nn.MultiheadAttention uses the
opposite polarity (True = ignore); minattn.interop.mask_from_torch converts.
"""
import autograd.numpy as np
from autograd.extend import defvjp, defvjp_argnums, primitive
from autograd.numpy.numpy_vjps import unbroadcast_f

from .engine import checks
from .engine.threads import one_blas_thread
from .dropout import dropout as _dropout


def softmax(x, axis=-1, mask=None):
    """Softmax of `x` along `axis`, optionally over the entries where `mask` is True only.

    x: floating array [..., n]; mask: boolean, broadcasting to x (True = keep). Returns x's shape
    and dtype (float16 is computed in float32, as torch does). Masked entries get exactly 0; a row
    with every entry masked (or of length 0) gets all zeros, not NaN; a row holding a NaN or +inf
    comes back all NaN, as in torch. Raises TypeError/ValueError for a non-float x, a bad axis,
    or a mask that is not boolean or does not broadcast.
    """
    # [..., n] -> [..., n]
    x, axis, mask = checks.check_softmax(x, axis, mask)
    if x.dtype == np.float16:  # accumulate in float32, return float16
        return softmax(x.astype(np.float32), axis, mask).astype(np.float16)
    if x.shape[axis] == 0:
        return x  # nothing to normalise (and the max of an empty axis is undefined)
    return _softmax(x, axis, mask)


@primitive
def _softmax(x, axis, mask):
    # The forward pass on plain arrays; its gradient is written by hand just below.
    if mask is not None:
        # -inf through `where` (not adding -1e9): exp(-inf) is exactly 0 in every dtype, and
        # -1e9 overflows float16 to -inf anyway, then poisons the row with inf - inf = NaN.
        x = np.where(mask, x, -np.inf)
    # Subtracting the row max keeps exp() from overflowing and leaves softmax unchanged. A fully
    # masked row has max -inf: shift it by 0 instead, so no inf - inf appears. A row holding NaN
    # or +inf is shifted by NaN, so it comes back all NaN (as torch's), quietly.
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(x_max == -np.inf, 0.0, np.where(x_max == np.inf, np.nan, x_max))
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)  # total == 0 only where every entry is masked


def _softmax_vjp(p, x, axis, mask):
    # dS = P ⊙ (dP − Σ_j dP_j P_j): the Jacobian of softmax is diag(P) − P Pᵀ, row by row.
    # A masked entry has P = 0, so it gets no gradient; a fully masked row gets zeros.
    return lambda g: p * (g - np.sum(g * p, axis=axis, keepdims=True))


defvjp(_softmax, _softmax_vjp)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    """softmax(q kᵀ · scale) v, and the weights.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v] (leading dims broadcast) ->
    (output [..., L_q, d_v], weights [..., L_q, L_k]).
    mask: boolean (True = may attend) or floating (added to the scores, e.g. 0 / -inf, ALiBi),
    broadcasting to [..., L_q, L_k]; a floating mask of only 0s and 1s is refused (pass it as
    bool). A query with no key left gets zero weights and a zero output. scale defaults to
    1/sqrt(d_k). dropout (in [0, 1)) on the weights needs `rng`, a Generator. float16 inputs are
    computed in float32 and returned as float16. sinks (attention sinks, gpt-oss): one more logit
    per query row, broadcasting to [..., L_q] (one per head: [H, 1]), that joins the softmax's
    denominator and holds no value, so the weights of a row may sum to less than 1. Raises
    TypeError/ValueError, naming the argument and the shapes, before computing.
    """
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v] -> [..., L_q, d_v], [..., L_q, L_k]
    q, k, v, mask, scale, sinks = checks.check_attention(q, k, v, mask, scale, dropout, rng, sinks)
    if np.result_type(q.dtype, k.dtype, v.dtype) == np.float16:
        # As torch on the CPU: scores and softmax in float32 (q kᵀ overflows float16 at ~256²).
        f32 = lambda a: None if a is None else a.astype(np.float32) if a.dtype != bool else a
        out, weights = scaled_dot_product_attention(f32(q), f32(k), f32(v), f32(mask), scale=scale,
                                                    dropout=dropout, rng=rng, sinks=f32(sinks))
        return out.astype(np.float16), weights.astype(np.float16)
    if dropout:  # dropout sits between the softmax and V: autograd differentiates this path
        weights = _dropout(_weights(q, k, scale, mask, sinks), dropout, rng)
        return weights @ v, weights
    out, weights = _attention(q, k, v, scale, mask, sinks)
    return out, weights  # [..., L_q, d_v], [..., L_q, L_k]


def _weights(q, k, scale, mask, sinks=None):
    # [..., L_q, d_k], [..., L_k, d_k] -> [..., L_q, L_k]: softmax(q kᵀ · scale), masked.
    scores = (q * scale) @ np.swapaxes(k, -1, -2)  # scaling q is the cheaper side
    if sinks is not None:
        return _softmax_with_sinks(scores, mask, sinks)
    if mask is not None and np.dtype(mask.dtype).kind == "f":
        # An additive mask (-inf, or biases such as ALiBi) in the scores' dtype: no upcast.
        return softmax(scores + mask.astype(scores.dtype))
    # The public softmax: under minattn.swap, a student's softmax runs here too.
    return softmax(scores, mask=mask)


def _softmax_with_sinks(scores, mask, sinks):
    # [..., L_q, L_k], [..., L_q] -> [..., L_q, L_k]: the sink is one more column of logits, a
    # key with no value; it takes its share of the softmax, then is dropped (as gpt-oss does).
    if mask is not None and np.dtype(mask.dtype).kind == "f":  # an additive mask
        scores, mask = scores + mask.astype(scores.dtype), None
    rows = scores.shape[:-1] + (1,)  # [..., L_q, 1]
    scores = np.concatenate([scores, np.broadcast_to(sinks[..., None], rows).astype(scores.dtype)],
                            axis=-1)  # [..., L_q, L_k + 1]
    if mask is not None:  # the sink's column is never masked
        mask = np.concatenate([np.broadcast_to(mask, scores.shape[:-1] + (scores.shape[-1] - 1,)),
                               np.ones_like(mask, shape=rows)], axis=-1)
    return softmax(scores, mask=mask)[..., :-1]


@primitive
def _attention(q, k, v, scale, mask, sinks=None):
    # The attention core, forward; its gradient is written by hand just below. Its many small
    # products run on one BLAS thread (minattn/engine/threads.py says why).
    with one_blas_thread():
        weights = _weights(q, k, scale, mask, sinks)
        return weights @ v, weights  # [..., L_q, d_v], [..., L_q, L_k]


def _attention_vjp(argnums, outputs, args, kwargs):
    # Backpropagation through O = P V, P = softmax(S), S = scale · Q Kᵀ (+ an additive mask),
    # given dO and dP (the gradient reaching the returned weights, often zero). See
    # walkthrough.md, "Backpropagation by hand". With sinks, P is the weights without the sink's
    # column, whose dP is 0 (it holds no value): dS keeps its form, and d sink = -p_sink Σ dP ⊙ P.
    (_, p), (q, k, v, scale, *_) = outputs, args

    @one_blas_thread()
    def vjp(g):
        d_out, d_weights = g
        d_p = d_out @ np.swapaxes(v, -1, -2) + d_weights  # [..., L_q, L_k]
        d_s = p * (d_p - np.sum(d_p * p, axis=-1, keepdims=True))  # softmax's VJP
        grads = {
            0: lambda: (d_s @ k) * scale,  # dQ = scale · dS K
            1: lambda: (np.swapaxes(d_s, -1, -2) @ q) * scale,  # dK = scale · dSᵀ Q
            2: lambda: np.swapaxes(p, -1, -2) @ d_out,  # dV = Pᵀ dO
            3: lambda: np.sum(d_s * (q @ np.swapaxes(k, -1, -2))),  # d scale = Σ dS ⊙ Q Kᵀ
            4: lambda: d_s,  # an additive mask's gradient is dS itself
            5: lambda: -(1 - np.sum(p, axis=-1)) * np.sum(d_p * p, axis=-1),  # d sinks
        }
        # Leading (batch, head) dims broadcast in the forward pass: sum them back out.
        return tuple(unbroadcast_f(args[i], lambda _, i=i: grads[i]())(None) for i in argnums)

    return vjp


defvjp_argnums(_attention, _attention_vjp)
