"""A complete, correct student solution in plain NumPy, written for the grader's tests (not
taken from minattn's source) in other styles than the answers beside it (einsum for matmul,
moveaxis for swapaxes, expand_dims, np.var, other ways of drawing a dropout mask, GQA by a
group axis instead of np.repeat, a cache by np.append): every property of parts I to IV must
pass with it (tests/test_grader.py), so that no correct style is failed."""
import math

import numpy as np
from scipy.special import erf

import minattn


def softmax(x, axis=-1, mask=None):
    x = np.asarray(x)
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isneginf(top), 0, top)
    e = np.exp(x - top)
    s = e.sum(axis=axis, keepdims=True)
    return e / np.where(s == 0, 1, s)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    if scale is None:
        scale = 1 / math.sqrt(q.shape[-1])
    scores = np.einsum("...id,...jd->...ij", q, k) * scale
    if sinks is None:
        weights = minattn.softmax(scores, mask=mask)
    else:  # the sink's logit joins each row's normaliser through a log-sum-exp
        sink = np.asarray(sinks, scores.dtype)[..., None]  # [..., L_q, 1]
        kept = scores if mask is None else np.where(mask, scores, -np.inf)
        top = np.maximum(np.max(kept, axis=-1, keepdims=True), sink)
        top = np.where(np.isneginf(top), 0, top)
        e = np.exp(kept - top)
        total = e.sum(axis=-1, keepdims=True) + np.exp(sink - top)
        weights = e / np.where(total == 0, 1, total)
    if dropout:
        keep = rng.binomial(1, 1 - dropout, size=weights.shape).astype(bool)
        weights = weights * keep / weights.dtype.type(1 - dropout)
    return np.einsum("...ij,...jd->...id", weights, v), weights


def causal_mask(n_q, n_k=None, *, align="top_left", window=None, like=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q if align == "bottom_right" else 0  # the queries are the last n_q positions
    mask = np.arange(n_q)[:, None] >= np.arange(n_k)[None, :] - offset
    if window is not None:
        mask = mask & (np.arange(n_k)[None, :] - offset > np.arange(n_q)[:, None] - window)
    return mask


def padding_mask(lengths, n):
    lengths = np.asarray(lengths)
    return np.expand_dims(np.arange(n) < np.expand_dims(lengths, -1), (1, 2))


def split_heads(x, n_heads):
    *lead, length, d = x.shape
    return np.moveaxis(x.reshape(*lead, length, n_heads, d // n_heads), -2, -3)


def merge_heads(x):
    *lead, n_heads, length, d_k = x.shape
    return np.moveaxis(x, -3, -2).reshape(*lead, length, n_heads * d_k)


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    p, n_kv = params, n_kv_heads or n_heads
    group = n_heads // n_kv
    project = lambda x, name: np.einsum("...ld,de->...le", x, p[f"w_{name}"]) + p[f"b_{name}"]
    q = minattn.split_heads(project(query, "q"), n_heads)  # [..., H, L_q, d_k]
    # GQA by a group axis: [..., H_kv, 1, L, d_k] against queries [..., H_kv, group, L_q, d_k]
    k = np.expand_dims(minattn.split_heads(project(key, "k"), n_kv), -3)
    v = np.expand_dims(minattn.split_heads(project(value, "v"), n_kv), -3)
    q = q.reshape(q.shape[:-3] + (n_kv, group) + q.shape[-2:])
    if mask is not None and np.ndim(mask) >= 3:  # a mask over the heads: [..., H_kv, group, ...]
        mask = np.asarray(mask)
        heads = (n_kv, group) if mask.shape[-3] == n_heads else (1, 1)
        mask = mask.reshape(mask.shape[:-3] + heads + mask.shape[-2:])
    heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)
    heads = heads.reshape(heads.shape[:-4] + (n_heads,) + heads.shape[-2:])
    weights = weights.reshape(weights.shape[:-4] + (n_heads,) + weights.shape[-2:])
    out = minattn.merge_heads(heads) @ p["w_o"] + p["b_o"]
    return out, weights.mean(axis=-3) if average_weights else weights


def apply_rope(x, positions, *, base=10000.0):
    half = x.shape[-1] // 2
    inv_freq = 1.0 / base ** (np.arange(half) * 2.0 / x.shape[-1])
    angles = np.expand_dims(np.asarray(positions), -1) * inv_freq  # [..., L, d/2]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1).astype(x.dtype)
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1).astype(x.dtype)
    rotated_half = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated_half * sin


def layer_norm(x, gamma, beta, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
    h = np.einsum("...d,df->...f", x, params["w_1"]) + params["b_1"]
    if activation == "relu":
        h = np.where(h > 0, h, 0)
    elif activation == "gelu":
        h = (0.5 * h * (1 + erf(h / math.sqrt(2)))).astype(h.dtype)
    else:
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    if dropout:
        keep = rng.uniform(size=h.shape) < 1 - dropout
        h = (h * keep * (1 / (1 - dropout) if dropout < 1 else 0.0)).astype(h.dtype)  # p=1: 0
    return h @ params["w_2"] + params["b_2"]


def encoder_block(params, x, mask=None, *, n_heads, norm_first=False, activation="relu",
                  eps=1e-5, dropout=0.0, rng=None, return_weights=False):
    def norm(h, which):
        return minattn.layer_norm(h, params[which]["gamma"], params[which]["beta"], eps)

    def attend(h):
        return minattn.multi_head_attention(params["self_attention"], h, h, h, mask,
                                            n_heads=n_heads, dropout=dropout, rng=rng)

    def ff(h):  # torch's way: the sublayer's output dropped too before the residual add
        out = minattn.feed_forward(params["feed_forward"], h, activation=activation,
                                   dropout=dropout, rng=rng)
        return out if not dropout else np.where(rng.random(out.shape) >= dropout,
                                                out / (1 - dropout), 0).astype(out.dtype)

    if norm_first:
        out, w = attend(norm(x, "self_attention_norm"))
        x = x + out
        x = x + ff(norm(x, "feed_forward_norm"))
    else:
        out, w = attend(x)
        x = norm(x + out, "self_attention_norm")
        x = norm(x + ff(x), "feed_forward_norm")
    return (x, w) if return_weights else x


def self_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, positions=None,
                   rope_base=10000.0, cache=None):
    p, n_kv = params, n_kv_heads or n_heads
    q = minattn.split_heads(np.einsum("...ld,de->...le", x, p["w_q"]) + p["b_q"], n_heads)
    k = minattn.split_heads(x @ p["w_k"] + p["b_k"], n_kv)
    v = minattn.split_heads(x @ p["w_v"] + p["b_v"], n_kv)
    if positions is not None:
        at = np.expand_dims(np.asarray(positions), -2)  # [..., 1, L]: over the heads
        q, k = minattn.apply_rope(q, at, base=rope_base), minattn.apply_rope(k, at, base=rope_base)
    if cache is not None:
        k, v = np.append(cache["k"], k, axis=-2), np.append(cache["v"], v, axis=-2)
    group = n_heads // n_kv
    heads, _ = minattn.scaled_dot_product_attention(q, np.repeat(k, group, axis=-3),
                                                    np.repeat(v, group, axis=-3), mask)
    return minattn.merge_heads(heads) @ p["w_o"] + p["b_o"], {"k": k, "v": v}


def softmax_vjp(y, g, axis=-1):
    return y * g - y * np.sum(y * g, axis=axis, keepdims=True)


def blockwise_attention(q, k, v, *, causal=False, key_mask=None, scale=None, block_size=128):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    l_q, l_k = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    m = np.full(lead + (l_q, 1), -np.inf, q.dtype)
    total = np.zeros(lead + (l_q, 1), q.dtype)
    acc = np.zeros(lead + (l_q, v.shape[-1]), q.dtype)
    start = 0
    while start < l_k:
        stop = min(start + block_size, l_k)
        s = np.einsum("...id,...jd->...ij", q, k[..., start:stop, :]) * scale
        keep = np.ones(s.shape, bool)
        if causal:
            keep = keep & (np.arange(start, stop)[None, :] <= np.arange(l_q)[:, None])
        if key_mask is not None:
            keep = keep & np.expand_dims(key_mask[..., start:stop], -2)
        s = np.where(keep, s, -np.inf)
        m_new = np.maximum(m, np.max(s, axis=-1, keepdims=True))
        safe = np.where(np.isneginf(m_new), 0, m_new)
        rescale = np.where(np.isneginf(m), 0, np.exp(m - safe))
        e = np.exp(s - safe)
        total = rescale * total + np.sum(e, axis=-1, keepdims=True)
        acc = rescale * acc + e @ v[..., start:stop, :]
        m, start = m_new, stop
    return acc / np.where(total > 0, total, 1)


def delta_rule(q, k, v, beta, g=None, *, scale=None, initial_state=None, return_state=False):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    state = np.zeros(q.shape[:-2] + (k.shape[-1], v.shape[-1]), q.dtype) \
        if initial_state is None else np.asarray(initial_state, q.dtype)
    outputs = []
    for t in range(q.shape[-2]):
        if g is not None:
            state = state * np.exp(g[..., t, None, None]).astype(q.dtype)
        k_t = k[..., t:t + 1, :]  # [..., 1, d_k]
        error = v[..., t:t + 1, :] - k_t @ state  # [..., 1, d_v]
        state = state + beta[..., t, None, None].astype(q.dtype) * (np.swapaxes(k_t, -1, -2) @ error)
        outputs.append((q[..., t:t + 1, :] * q.dtype.type(scale)) @ state)
    out = np.concatenate(outputs, axis=-2)
    return (out, state) if return_state else out
