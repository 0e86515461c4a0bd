"""The references the properties compare with: slow, obvious loops in plain NumPy, in float64,
that share no code with minattn."""
import math

import numpy as np


def ref_softmax(row, keep=None):
    # one row -> weights; masked entries 0; nothing kept -> zeros
    row = np.asarray(row, np.float64)
    keep = np.ones(row.shape, bool) if keep is None else keep
    if not keep.any():
        return np.zeros_like(row)
    top = max(r for r, k in zip(row, keep) if k)
    e = np.array([math.exp(r - top) if k else 0.0 for r, k in zip(row, keep)])
    return e / e.sum()


def ref_attention(q, k, v, keep=None, scale=None):
    # q [L_q, d], k [L_k, d], v [L_k, d_v], keep bool [L_q, L_k] -> out [L_q, d_v], w [L_q, L_k]
    d_k = q.shape[-1]
    scale = 1 / math.sqrt(d_k) if scale is None else scale
    weights = np.zeros((q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):
        scores = [sum(q[i, c] * k[j, c] for c in range(d_k)) * scale for j in range(k.shape[0])]
        weights[i] = ref_softmax(scores, None if keep is None else keep[i])
    return weights @ v, weights


def ref_layer_norm(x, gamma, beta, eps):
    out = np.empty_like(x, dtype=np.float64)
    for index in np.ndindex(x.shape[:-1]):
        row = x[index].astype(np.float64)
        mean = sum(row) / len(row)
        variance = sum((r - mean) ** 2 for r in row) / len(row)
        out[index] = (row - mean) / math.sqrt(variance + eps) * gamma + beta
    return out


def ref_multi_head(p, query, key, value, n_heads, keep=None):
    # one sequence: query [L_q, D], key/value [L_k, D] -> [L_q, D], weights [H, L_q, L_k]
    d_k = query.shape[-1] // n_heads
    q, k, v = (x @ p[f"w_{c}"] + p[f"b_{c}"] for x, c in ((query, "q"), (key, "k"), (value, "v")))
    heads, weights = [], []
    for h in range(n_heads):
        part = slice(h * d_k, (h + 1) * d_k)
        out, w = ref_attention(q[:, part], k[:, part], v[:, part], keep)
        heads.append(out)
        weights.append(w)
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], np.array(weights)


def ref_feed_forward(p, x, activation="relu"):
    act = {"relu": lambda h: np.maximum(h, 0.0),
           "gelu": lambda h: 0.5 * h * (1 + np.vectorize(math.erf, otypes=[float])(h / math.sqrt(2))),
           "gelu_tanh": lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))}
    return act[activation](x @ p["w_1"] + p["b_1"]) @ p["w_2"] + p["b_2"]


def ref_encoder_block(p, x, n_heads, keep=None, norm_first=False, eps=1e-5, activation="relu"):
    # one sequence x [L, D] -> (out [L, D], the attention weights [H, L, L])
    ln = lambda h, n: ref_layer_norm(h, p[n]["gamma"], p[n]["beta"], eps)
    attend = lambda h: ref_multi_head(p["self_attention"], h, h, h, n_heads, keep)
    feed = lambda h: ref_feed_forward(p["feed_forward"], h, activation)
    if norm_first:
        out, weights = attend(ln(x, "self_attention_norm"))
        x = x + out
        return x + feed(ln(x, "feed_forward_norm")), weights
    out, weights = attend(x)
    x = ln(x + out, "self_attention_norm")
    return ln(x + feed(x), "feed_forward_norm"), weights


def ref_rope(x, positions, base=10000.0):
    # slow rotate-half RoPE: feature i pairs with i + d/2, rotated by positions * base^(-2i/d)
    out = np.array(x, dtype=np.float64)
    d = x.shape[-1]
    positions = np.broadcast_to(positions, x.shape[:-1])
    for index in np.ndindex(x.shape[:-1]):
        m = positions[index]
        for i in range(d // 2):
            angle = m * base ** (-2.0 * i / d)
            a, b = x[index][i], x[index][i + d // 2]
            out[index][i] = a * math.cos(angle) - b * math.sin(angle)
            out[index][i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def ref_self_attention(p, x, n_heads, n_kv_heads, keep=None, positions=None, base=10000.0):
    # one sequence x [L, D]: grouped-query attention, RoPE on q and k when positions are given
    d_k = x.shape[-1] // n_heads
    q, k, v = x @ p["w_q"] + p["b_q"], x @ p["w_k"] + p["b_k"], x @ p["w_v"] + p["b_v"]
    heads = []
    for h in range(n_heads):
        g = h // (n_heads // n_kv_heads)
        qh, kh = q[:, h * d_k:(h + 1) * d_k], k[:, g * d_k:(g + 1) * d_k]
        if positions is not None:
            qh, kh = ref_rope(qh, positions, base), ref_rope(kh, positions, base)
        heads.append(ref_attention(qh, kh, v[:, g * d_k:(g + 1) * d_k], keep)[0])
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"]
