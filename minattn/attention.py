"""Softmax and scaled dot-product attention: the engine every other function is built on.

Mask convention (as torch.nn.functional.scaled_dot_product_attention and JAX/Flax):
a boolean mask is True where a query MAY attend to a key. torch.nn.MultiheadAttention uses the
opposite polarity (True = ignore); minattn.interop.mask_from_torch converts.

The decorators are minattn's policies, each defined once in minattn/engine/ and explained in
walkthrough.md's appendix: float16 computed in float32; a gradient written by hand (the VJPs at
the end of this file, walkthrough.md section "Backpropagation by hand"); one BLAS thread for the
many small products of the attention core.
"""
import autograd.numpy as np

from .dropout import dropout as _dropout
from .engine import checks, variants
from .engine.autograd_rules import gradient_by_hand, kept, plain_form, plus_gradient, reads
from .engine.dtypes import float16_in_float32
from .engine.plain_vjps import attention_core_plain
from .engine.query_blocks import in_query_blocks
from .engine.reductions import row_dot, row_max
from .engine.threads import decoding_or_timed, one_blas_thread


def softmax_vjp(wrt, g, p, x, axis, mask):
    # dS = P ⊙ (dP − Σ_j dP_j P_j): the Jacobian of softmax is diag(P) − P Pᵀ, row by row.
    # A masked entry has P = 0, so it gets no gradient; a fully masked row gets zeros.
    return {"x": p * (g - np.sum(g * p, axis=axis, keepdims=True))}


@float16_in_float32("x")
@gradient_by_hand(softmax_vjp)
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
    if x.shape[axis] == 0:
        return x  # nothing to normalise (and the max of an empty axis is undefined)
    if mask is not None:
        # -inf through `where` (not adding -1e9): exp(-inf) is exactly 0 in every dtype, while
        # -1e9 is only "very negative" (and -inf in half precision, where inf - inf = NaN).
        x = np.where(mask, x, -np.inf)
    # Subtracting the row max keeps exp() from overflowing and leaves softmax unchanged. A fully
    # masked row has max -inf: shift it by 0 instead, so no inf - inf appears. A row holding NaN
    # or +inf is shifted by NaN, so it comes back all NaN (as torch's), quietly.
    # (x_max, e and total are arrays made here, changed in place: no more copies of the scores.)
    x_max = row_max(x, axis)  # x.max(axis, keepdims=True), faster on short rows
    x_max[x_max == -np.inf] = 0.0
    x_max[x_max == np.inf] = np.nan
    e = x - x_max if mask is None else np.subtract(x, x_max, out=x)  # x: where's new array
    np.exp(e, out=e)
    total = e.sum(axis=axis, keepdims=True)
    total[total == 0] = 1.0  # only where every entry is masked: its zeros stay zeros
    e /= total
    return e


_INPUTS = ("q", "k", "v", "mask")  # what each gradient of the attention core reads


def _weights(q, k, keep, bias, scale):
    # P [..., L_q, L_k], recomputed as the forward computes it
    scores = (q * scale) @ np.swapaxes(k, -1, -2)
    return softmax(scores if bias is None else scores + bias, mask=keep)


def _weights_are_small(outputs, q, k, v, **_):
    # The tape keeps P where it takes no more memory than q, k and v, which it keeps anyway.
    return np.size(outputs[1]) <= np.size(q) + np.size(k) + np.size(v)


@reads(q=_INPUTS, k=_INPUTS, v=_INPUTS, mask=_INPUTS, scale=_INPUTS, out_if=_weights_are_small)
def attention_vjp(wrt, g, outputs, q, k, v, mask, scale, dropout, rng):
    # Backpropagation through O = P V, P = softmax(S), S = scale · Q Kᵀ + bias, given dO and dP
    # (the gradient reaching the returned weights: where nothing read them, a stand-in of zeros
    # that plus_gradient does not add). See walkthrough.md,
    # "Backpropagation by hand". Where P is larger than Q, K and V together, it is recomputed
    # from Q and K, as FlashAttention's backward does: the tape then keeps no [..., L_q, L_k]
    # array. The small products run on one BLAS thread.
    d_out, d_weights = g
    q, k, v, keep, bias, scale, _ = checks.check_attention(q, k, v, mask, scale, dropout, rng)
    with one_blas_thread():
        p = outputs[1] if kept(outputs[1]) else _weights(q, k, keep, bias, scale)
        d_p = plus_gradient(d_out @ np.swapaxes(v, -1, -2), d_weights)  # [..., L_q, L_k]
        d_s = p * (d_p - row_dot(d_p, p))  # softmax's VJP; row_dot: Σ_j dP_j P_j
        grads = {
            "q": lambda: (d_s @ k) * scale,  # dQ = scale · dS K
            "k": lambda: (np.swapaxes(d_s, -1, -2) @ q) * scale,  # dK = scale · dSᵀ Q
            "v": lambda: np.swapaxes(p, -1, -2) @ d_out,  # dV = Pᵀ dO
            "mask": lambda: d_s,  # an additive mask's gradient is dS itself
            "scale": lambda: np.sum(d_s * (q @ np.swapaxes(k, -1, -2))),  # Σ dS ⊙ Q Kᵀ
        }
        return {name: grads[name]() for name in wrt}


# Where the backward pass is not differentiated again, attention_vjp's operations on NumPy itself
# (engine/plain_vjps.py: the same bits, without autograd.numpy's wrappers).
plain_form(attention_core_plain(attention_vjp))(attention_vjp)


@variants.dispatch
@float16_in_float32("q", "k", "v")
@gradient_by_hand(attention_vjp, unless="dropout")
@in_query_blocks()
@one_blas_thread(unless=decoding_or_timed)
def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None):
    """softmax(q kᵀ · scale) v, and the weights.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v] (leading dims broadcast) ->
    (output [..., L_q, d_v], weights [..., L_q, L_k]).
    mask: boolean (True = may attend) or floating (added to the scores, e.g. 0 / -inf, ALiBi),
    broadcasting to [..., L_q, L_k]; a floating mask of only 0s and 1s is refused (pass it as
    bool), and a floating mask is taken in the dtype of the inputs (a float64 -1e9 is -inf for
    float16 inputs). A query with no key left gets zero weights and a zero output. scale defaults
    to 1/sqrt(d_k); 0 gives uniform weights (the mean of the values), as torch. dropout (in
    [0, 1]; 1 drops every weight, as torch) on the weights needs `rng`, a Generator. float16
    inputs are computed in float32 and returned as float16. sinks= (attention sinks) is
    minattn.sinks.attention_with_sinks. Raises TypeError/ValueError, naming the argument and the
    shapes, before computing.
    """
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v] -> [..., L_q, d_v], [..., L_q, L_k]
    q, k, v, keep, bias, scale, _ = checks.check_attention(q, k, v, mask, scale, dropout, rng)
    scores = (q * scale) @ k.swapaxes(-1, -2)  # [..., L_q, L_k]; scaling q is cheaper
    if bias is not None:  # a floating mask is added (-inf, ALiBi); a boolean one selects
        scores = scores + bias
    weights = _dropout(softmax(scores, mask=keep), dropout, rng)  # [..., L_q, L_k]
    return weights @ v, weights  # [..., L_q, d_v], [..., L_q, L_k]
