"""A complete, correct student solution in plain NumPy, written for the grader's tests (not
taken from minattn's source): it must pass every property."""
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


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None):
    if scale is None:
        scale = 1 / math.sqrt(q.shape[-1])
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    weights = minattn.softmax(scores, mask=mask)
    return np.matmul(weights, v), weights


def causal_mask(n_q, n_k=None, *, align="top_left", window=None, like=None):
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q if align == "bottom_right" else 0  # the queries are the last n_q positions
    mask = np.arange(n_q)[:, None] >= np.arange(n_k)[None, :] - offset
    if window is not None:
        mask = mask & (np.arange(n_k)[None, :] - offset > np.arange(n_q)[:, None] - window)
    return mask


def padding_mask(lengths, n):
    lengths = np.asarray(lengths)
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, None, :]


def split_heads(x, n_heads):
    *lead, length, d = x.shape
    return np.moveaxis(x.reshape(*lead, length, n_heads, d // n_heads), -2, -3)


def merge_heads(x):
    *lead, n_heads, length, d_k = x.shape
    return np.moveaxis(x, -3, -2).reshape(*lead, length, n_heads * d_k)


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    p, n_kv = params, n_kv_heads or n_heads
    q = minattn.split_heads(query @ p["w_q"] + p["b_q"], n_heads)
    # GQA: each K/V head serves n_heads // n_kv consecutive query heads (repeated here)
    k = np.repeat(minattn.split_heads(key @ p["w_k"] + p["b_k"], n_kv), n_heads // n_kv, axis=-3)
    v = np.repeat(minattn.split_heads(value @ p["w_v"] + p["b_v"], n_kv), n_heads // n_kv, axis=-3)
    heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask)
    out = minattn.merge_heads(heads) @ p["w_o"] + p["b_o"]
    return out, weights.mean(axis=-3) if average_weights else weights


def apply_rope(x, positions, *, base=10000.0):
    half = x.shape[-1] // 2
    angles = np.asarray(positions)[..., None] * base ** (-np.arange(half) * 2.0 / x.shape[-1])
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
    h = x @ params["w_1"] + params["b_1"]
    if activation == "relu":
        h = np.maximum(h, 0)
    elif activation == "gelu":
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
    else:
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    return h @ params["w_2"] + params["b_2"]


def encoder_block(params, x, mask=None, *, n_heads, norm_first=False, activation="relu",
                  eps=1e-5, dropout=0.0, rng=None, return_weights=False):
    def norm(h, which):
        return minattn.layer_norm(h, params[which]["gamma"], params[which]["beta"], eps)

    def attend(h):
        return minattn.multi_head_attention(params["self_attention"], h, h, h, mask, n_heads=n_heads)

    def ff(h):
        return minattn.feed_forward(params["feed_forward"], h, activation=activation)

    if norm_first:
        out, w = attend(norm(x, "self_attention_norm"))
        x = x + out
        x = x + ff(norm(x, "feed_forward_norm"))
    else:
        out, w = attend(x)
        x = norm(x + out, "self_attention_norm")
        x = norm(x + ff(x), "feed_forward_norm")
    return (x, w) if return_weights else x
