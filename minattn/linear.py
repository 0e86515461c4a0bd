"""The affine map y = x @ w + b (b optional), done as one 2-D matrix product, with its gradient
by hand; linears, one input through several weights; project, a sublayer's projections by
name, the one seam through which attention's and the gated feed-forwards' projections go; and
rows, an embedding's lookup (a one-hot times the table), with its gradient by hand."""
import math

import autograd.numpy as np
import numpy

from .engine import variants
from .engine.autograd_rules import gradient_by_hand, plain_form, reads
from .engine.fused_products import bias_in_place, in_one_product
from .engine.plain_vjps import linear_vjp_plain


@plain_form(linear_vjp_plain)
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


# Where nothing is recorded, the bias is added into the product's own array: the same numbers,
# one fresh array fewer (engine/fused_products.py).
linear = bias_in_place(linear)


@in_one_product()
def linears(x, ws, bs=None):
    # [..., d_in], ws [d_in, d_out_i], bs [d_out_i] or None -> ([..., d_out_i], ...): one input
    # through several weights (attention's q, k, v; SwiGLU's gate and up). Where the weights lie
    # side by side in one buffer, as a loaded model's do, one product does them all
    # (engine/fused_products.py).
    bs = (None,) * len(ws) if bs is None else bs
    return tuple(linear(x, w, b) for w, b in zip(ws, bs))


def project(params, x, names):
    """A sublayer's projections of x [..., d_in] by name -> one [..., d_out] for each name:
    x @ params[f"w_{name}"] + params[f"b_{name}"] (the bias where params has one). names: "qkv"
    (attention's q, k and v of one input), ("o",), ("gate", "up"), ("down",), ...: the weights of
    one call lie side by side in a loaded model, one product computes them (linears). Every
    projection of self_attention, multi_head_attention and the gated feed-forwards goes through
    here, where a variant adds its own path (LoRA: minattn.lora)."""
    # [..., d_in] -> ([..., d_out], ...)
    return linears(x, [params[f"w_{p}"] for p in names], [params.get(f"b_{p}") for p in names])


# Its variant (params["lora"]: minattn.lora) answers the calls that select it (engine/variants.py).
project = variants.dispatch(project)


@reads(table=("ids",))  # the tape keeps the ids alone
def rows_vjp(wrt, g, y, table, ids):
    # d table: each row of g added into the row of the table it was taken from
    return {"table": added_rows(g, ids, np.shape(table)[0])}


@gradient_by_hand(rows_vjp)
def rows(table, ids):
    # [V, D], int [...] -> [..., D]: the table's rows at ids (an embedding's lookup)
    return table[ids]


def added_rows_vjp(wrt, g, out, values, ids, n):
    return {"values": rows(g, ids)}  # the adjoint of adding rows is taking them


@gradient_by_hand(added_rows_vjp)
def added_rows(values, ids, n):
    # [..., D], int [...] -> [n, D]: row i the sum of the values whose id is i. The ids sorted,
    # then each run of equal ids summed at once (np.add.reduceat): autograd's gradient of
    # indexing adds one row at a time (np.add.at), about 6 times slower for a batch of tokens.
    d = np.shape(values)[-1]
    flat = np.reshape(ids, -1) % max(n, 1)  # a negative id counts from the end, as indexing
    out = np.zeros_like(values, shape=(n, d))
    if not isinstance(values, numpy.ndarray):  # a GPU array: its own scatter-add
        numpy.add.at(out, flat, np.reshape(values, (-1, d)))
    elif flat.size:
        order = np.argsort(flat, kind="stable")
        ids_sorted = flat[order]
        starts = np.flatnonzero(np.concatenate([[True], ids_sorted[1:] != ids_sorted[:-1]]))
        out[ids_sorted[starts]] = numpy.add.reduceat(np.reshape(values, (-1, d))[order],
                                                     starts, axis=0)
    return out
