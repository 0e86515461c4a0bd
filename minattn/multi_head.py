"""Multi-head attention: project, split into heads, attend in each head, merge, project back."""
import math

import autograd.numpy as np

from .engine import checks, variants
from .engine.param_checks import PROJECTIONS, check_multi_head_params, n_kv_heads_hint
from .attention import scaled_dot_product_attention
from .heads import merge_heads, split_heads
from .linear import project


def init_multi_head_attention(rng, d_model, n_heads, *, dtype=np.float64, n_kv_heads=None,
                              bias=True):
    """-> {"w_q", "w_k", "w_v", "w_o": [D, D], "b_q", "b_k", "b_v", "b_o": [D]}, as torch's
    nn.MultiheadAttention initialises itself: Xavier-uniform on the packed [3D, D] input
    projection (bound sqrt(6 / 4D) for w_q, w_k, w_v), nn.Linear's default U(±1/sqrt(D)) for
    w_o, and zero biases. Drawn from the Generator `rng` in float64, cast to `dtype`.
    n_kv_heads (grouped-query attention): w_k, w_v are [D, n_kv_heads * d_k], b_k, b_v
    [n_kv_heads * d_k]. bias=False leaves out every b_* (Llama)."""
    # Weights are stored [d_in, d_out] so a projection reads x @ w (torch stores the transpose).
    d_model = checks.check_size("d_model", d_model)
    checks.check_n_heads(n_heads, d_model)
    dtype = checks.check_init(rng, dtype)
    checks.check_n_kv_heads(n_kv_heads, n_heads)
    d_kv = (n_kv_heads or n_heads) * (d_model // n_heads)
    bound = math.sqrt(6.0 / (d_model + 3 * d_model))  # fan_in D, fan_out 3D: the packed q, k, v
    d_out = {"q": d_model, "k": d_kv, "v": d_kv, "o": d_model}
    params = {f"w_{p}": rng.uniform(-bound, bound, size=(d_model, d_out[p])) for p in "qkv"}
    params["w_o"] = rng.uniform(-1.0, 1.0, size=(d_model, d_model)) / math.sqrt(d_model)
    if bias:
        params.update({f"b_{p}": np.zeros(d_out[p]) for p in PROJECTIONS})
    return {name: w.astype(dtype) for name, w in params.items()}


def _project(params, x, p):
    # [..., d_in] -> [..., d_out]: the one projection named p (linear.project); the bias only
    # where params has one.
    return project(params, x, (p,))[0]


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None, core=None):
    """Multi-head attention, as torch.nn.MultiheadAttention (batch-first, weights [d_in, d_out]).

    query [..., L_q, D], key and value [..., L_k, D] (self-attention: all three the same) ->
    (output [..., L_q, D], weights [..., H, L_q, L_k], or [..., L_q, L_k] averaged over heads
    with average_weights=True). mask as in scaled_dot_product_attention (True = may attend),
    broadcasting to [..., H, L_q, L_k]: give (L_q, L_k), or (B, 1, L_q, L_k) per batch; a 3-D
    (B, L_q, L_k) mask is refused because B would broadcast against the heads. Raises
    TypeError/ValueError naming the argument and the shapes, before computing.
    n_kv_heads < n_heads: grouped-query attention (1: multi-query), K and V projected to
    n_kv_heads * d_k; query head h reads kv head h // (n_heads // n_kv_heads) (torch's enable_gqa).
    core(q, k, v, mask, dropout=, rng=) -> (heads, weights): the attention of the heads, where
    a variant plugs in its own (None: grouped_attention; params["sinks"]: minattn.sinks).
    """
    # [..., L_q, D], [..., L_k, D], [..., L_k, D] -> [..., L_q, D], weights [..., H, L_q, L_k]
    params, query, key, value, mask = _check_multi_head_attention(
        params, query, key, value, mask, n_heads, dropout, rng, n_kv_heads)
    q = split_heads(_project(params, query, "q"), n_heads)  # [..., H, L_q, d_k]
    k = split_heads(_project(params, key, "k"), n_kv_heads or n_heads)  # [..., H_kv, L_k, d_k]
    v = split_heads(_project(params, value, "v"), n_kv_heads or n_heads)  # [..., H_kv, L_k, d_k]
    heads, weights = (core or grouped_attention)(q, k, v, mask, dropout=dropout, rng=rng)
    output = _project(params, merge_heads(heads), "o")  # [..., L_q, D]
    if average_weights:
        weights = np.sum(weights, axis=-3) / n_heads  # [..., L_q, L_k]
    return output, weights


# Its variants, each in its own file, answer the calls that select them (engine/variants.py).
multi_head_attention = variants.dispatch(multi_head_attention, hooks=("core",))


def _check_multi_head_attention(params, query, key, value, mask, n_heads, dropout, rng,
                                n_kv_heads=None):
    query = checks.as_float_array("query", query)
    key = checks.as_float_array("key", key)
    value = checks.as_float_array("value", value)
    checks.check_min_ndim("query", query, 2, "(..., L_q, d_model)")
    checks.check_min_ndim("key", key, 2, "(..., L_k, d_model)")
    checks.check_min_ndim("value", value, 2, "(..., L_k, d_model)")
    d_model = query.shape[-1]
    if key.shape[-1] != d_model or value.shape[-1] != d_model:
        raise ValueError(
            f"query, key and value must share d_model: query {tuple(query.shape)}, "
            f"key {tuple(key.shape)}, value {tuple(value.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"key and value must have the same length L_k: key {tuple(key.shape)}, "
                         f"value {tuple(value.shape)}")
    checks.check_n_heads(n_heads, d_model)
    checks.check_n_kv_heads(n_kv_heads, n_heads)
    with n_kv_heads_hint(params, d_model // n_heads, n_heads, n_kv_heads):
        params = check_multi_head_params(params, d_model,
                                         d_kv=(n_kv_heads or n_heads) * (d_model // n_heads),
                                         n_heads=n_heads,
                                         dtype=np.result_type(query.dtype, key.dtype, value.dtype))
    batch = checks.broadcast_or_raise(
        [("query", query.shape[:-2]), ("key", key.shape[:-2]), ("value", value.shape[:-2])],
        "the batch dims of query, key, value",
    )
    scores_shape = batch + (n_heads, query.shape[-2], key.shape[-2])
    mask = checks.check_mask(mask, scores_shape, "the per-head scores (..., H, L_q, L_k)")
    checks.check_mask_has_head_axis(mask, scores_shape)
    checks.check_dropout(dropout, rng)
    return params, query, key, value, mask


def grouped_attention(q, k, v, mask=None, *, dropout=0.0, rng=None):
    """Attention of heads already projected (and rotated), grouped-query: q [..., H, L_q, d_k],
    k [..., H_kv, L_k, d_k], v [..., H_kv, L_k, d_v] -> (heads [..., H, L_q, d_v], weights
    [..., H, L_q, L_k]). Query head h reads kv head h // (H / H_kv), as torch's
    scaled_dot_product_attention(enable_gqa=True) and transformers' repeat_kv; H_kv = H is
    multi-head attention, H_kv = 1 multi-query. H_kv must divide H (ValueError naming both).
    mask as in scaled_dot_product_attention (True = may attend; floating: added), broadcasting
    to [..., H, L_q, L_k]: a per-head mask or bias is (H, L_q, L_k) or (B, H, L_q, L_k)."""
    # Query heads grouped, [..., H_kv, G, L_q, d_k]; K, V broadcast over the group axis G: no
    # copies, unlike HF's repeat_kv.
    q, k, v, mask = checks.check_grouped_attention(q, k, v, mask, dropout, rng)
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    q = _group_heads(q, n_kv_heads)
    # [..., H_kv, 1, L_k, d_k]: a reshape, whose gradient is one too (indexing's with None
    # scatters into a new array of zeros)
    k, v = (t.reshape((*t.shape[:-2], 1, *t.shape[-2:])) for t in (k, v))
    heads, weights = scaled_dot_product_attention(q, k, v, _group_mask(mask, n_heads, n_kv_heads),
                                                  dropout=dropout, rng=rng)
    return _ungroup_heads(heads), _ungroup_heads(weights)  # [..., H, L_q, d_k], [..., H, L_q, L_k]


# Its variants, each in its own file, answer the calls that select them (engine/variants.py).
grouped_attention = variants.dispatch(grouped_attention)


def _group_heads(x, n_kv_heads):
    # [..., H, L, d] -> [..., H_kv, H / H_kv, L, d]: query head h lands in group h // G.
    *lead, n_heads, length, d = x.shape
    return x.reshape((*lead, n_kv_heads, n_heads // n_kv_heads, length, d))


def _ungroup_heads(x):
    # [..., H_kv, G, L, d] -> [..., H_kv * G, L, d], the inverse of _group_heads.
    *lead, n_kv_heads, group, length, d = x.shape
    return x.reshape((*lead, n_kv_heads * group, length, d))


def _group_mask(mask, n_heads, n_kv_heads):
    # A mask for the scores [..., H, L_q, L_k] -> one for the grouped scores [..., H_kv, G, ...].
    if mask is None or mask.ndim < 2:  # none, or [L_k] (or 0-d): broadcasts as it is
        return mask
    if mask.ndim >= 3 and mask.shape[-3] == n_heads:  # a mask per head: split its head axis
        return _group_heads(mask, n_kv_heads)
    return mask[..., None, :, :]  # a head axis of 1 (or none): the same for every group
