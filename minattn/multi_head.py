"""Multi-head attention: project, split into heads, attend in each head, merge, project back."""
import math

import autograd.numpy as np

from . import _validate
from .attention import scaled_dot_product_attention
from .heads import merge_heads, split_heads
from .linear import linear

PROJECTIONS = ("q", "k", "v", "o")


def init_multi_head_attention(rng, d_model, n_heads, *, dtype=np.float64):
    """-> {"w_q", "w_k", "w_v", "w_o": [D, D], "b_q", "b_k", "b_v", "b_o": [D]}, as torch's
    nn.MultiheadAttention initialises itself: Xavier-uniform on the packed [3D, D] input
    projection (bound sqrt(6 / 4D) for w_q, w_k, w_v), nn.Linear's default U(±1/sqrt(D)) for
    w_o, and zero biases. Drawn from the Generator `rng` in float64, cast to `dtype`."""
    # Weights are stored [d_in, d_out] so a projection reads x @ w (torch stores the transpose).
    d_model = _validate.check_size("d_model", d_model)
    _validate.check_n_heads(n_heads, d_model)
    dtype = _validate.check_init(rng, dtype)
    bound = math.sqrt(6.0 / (d_model + 3 * d_model))  # fan_in D, fan_out 3D: the packed q, k, v
    params = {f"w_{p}": rng.uniform(-bound, bound, size=(d_model, d_model)) for p in "qkv"}
    params["w_o"] = rng.uniform(-1.0, 1.0, size=(d_model, d_model)) / math.sqrt(d_model)
    params.update({f"b_{p}": np.zeros(d_model) for p in PROJECTIONS})
    return {name: w.astype(dtype) for name, w in params.items()}


def check_multi_head_params(params, d_model, where="params"):
    return _validate.check_params(
        params,
        {**{f"w_{p}": (d_model, d_model) for p in PROJECTIONS},
         **{f"b_{p}": (d_model,) for p in PROJECTIONS}},
        where,
    )


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False):
    """Multi-head attention, as torch.nn.MultiheadAttention (batch-first, weights [d_in, d_out]).

    query [..., L_q, D], key and value [..., L_k, D] (self-attention: all three the same) ->
    (output [..., L_q, D], weights [..., H, L_q, L_k], or [..., L_q, L_k] averaged over heads
    with average_weights=True). mask as in scaled_dot_product_attention (True = may attend),
    broadcasting to [..., H, L_q, L_k]: give (L_q, L_k), or (B, 1, L_q, L_k) per batch; a 3-D
    (B, L_q, L_k) mask is refused because B would broadcast against the heads. Raises
    TypeError/ValueError naming the argument and the shapes, before computing.
    """
    # [..., L_q, D], [..., L_k, D], [..., L_k, D] -> [..., L_q, D], weights [..., H, L_q, L_k]
    params, query, key, value, mask = _check_multi_head_attention(
        params, query, key, value, mask, n_heads, dropout, rng)
    q = split_heads(linear(query, params["w_q"], params["b_q"]), n_heads)  # [..., H, L_q, d_k]
    k = split_heads(linear(key, params["w_k"], params["b_k"]), n_heads)  # [..., H, L_k, d_k]
    v = split_heads(linear(value, params["w_v"], params["b_v"]), n_heads)  # [..., H, L_k, d_k]
    heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)
    output = linear(merge_heads(heads), params["w_o"], params["b_o"])  # [..., L_q, D]
    if average_weights:
        weights = np.sum(weights, axis=-3) / n_heads  # [..., L_q, L_k]
    return output, weights


def _check_multi_head_attention(params, query, key, value, mask, n_heads, dropout, rng):
    query = _validate.as_float_array("query", query)
    key = _validate.as_float_array("key", key)
    value = _validate.as_float_array("value", value)
    _validate.check_min_ndim("query", query, 2, "(..., L_q, d_model)")
    _validate.check_min_ndim("key", key, 2, "(..., L_k, d_model)")
    _validate.check_min_ndim("value", value, 2, "(..., L_k, d_model)")
    d_model = query.shape[-1]
    if key.shape[-1] != d_model or value.shape[-1] != d_model:
        raise ValueError(
            f"query, key and value must share d_model: query {tuple(query.shape)}, "
            f"key {tuple(key.shape)}, value {tuple(value.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same length L_k: key {tuple(key.shape)}, "
                         f"value {tuple(value.shape)}")
    _validate.check_n_heads(n_heads, d_model)
    params = check_multi_head_params(params, d_model)
    batch = _validate.broadcast_or_raise(
        [("query", query.shape[:-2]), ("key", key.shape[:-2]), ("value", value.shape[:-2])],
        "the batch dims of query, key, value",
    )
    scores_shape = batch + (n_heads, query.shape[-2], key.shape[-2])
    mask = _validate.check_mask(mask, scores_shape, "the per-head scores (..., H, L_q, L_k)")
    _validate.check_mask_has_head_axis(mask, scores_shape)
    _validate.check_dropout(dropout, rng)
    return params, query, key, value, mask
