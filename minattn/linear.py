"""The affine map y = x @ w + b (b optional), done as one 2-D matrix product, with its gradient
by hand; and linears, one input through several weights."""
import math

import autograd.numpy as np

from .engine.autograd_rules import gradient_by_hand, reads
from .engine.fused_products import in_one_product


@reads(x=("w",), w=("x",), b=())  # the tape keeps no frozen weight's input, and no output
def linear_vjp(wrt, g, y, x, w, b):
    # dx = g wᵀ, dw = xᵀ g, db = Σ g over all tokens: three products on the flattened tokens.
    n = math.prod(np.shape(x)[:-1])  # the tokens, counted (-1 is ambiguous for an empty x)
    g_tokens = np.reshape(g, (n, w.shape[1]))
    grads = {"x": lambda: np.reshape(g_tokens @ np.swapaxes(w, 0, 1), np.shape(x)),
             "w": lambda: np.swapaxes(np.reshape(x, (n, w.shape[0])), 0, 1) @ g_tokens,
             "b": lambda: np.sum(g_tokens, axis=0)}
    return {name: grads[name]() for name in wrt}


@gradient_by_hand(linear_vjp)
def linear(x, w, b=None):
    # [..., d_in], [d_in, d_out], [d_out] or None (no bias) -> [..., d_out]. Flattening the
    # leading dims first makes one big matrix product instead of a batch of small ones.
    *lead, d_in = x.shape
    y = x.reshape((math.prod(lead), d_in)) @ w  # [N, d_out] (N counted: x may hold no token)
    if b is not None:
        y = y + b
    return y.reshape((*lead, w.shape[1]))


@in_one_product()
def linears(x, ws, bs=None):
    # [..., d_in], ws [d_in, d_out_i], bs [d_out_i] or None -> ([..., d_out_i], ...): one input
    # through several weights (attention's q, k, v; SwiGLU's gate and up). Where the weights lie
    # side by side in one buffer, as a loaded model's do, one product does them all
    # (engine/fused_products.py).
    bs = (None,) * len(ws) if bs is None else bs
    return tuple(linear(x, w, b) for w, b in zip(ws, bs))
