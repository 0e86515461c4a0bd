"""Slow, obvious reference implementations, written independently of minattn with Python loops
and the math module. Tests compare minattn against these ("same expression, two engines")."""
import math

import numpy as np


def softmax_row(row, keep=None):
    keep = [True] * len(row) if keep is None else list(keep)
    kept = [x for x, k in zip(row, keep) if k]
    if not kept:
        return [0.0] * len(row)
    m = max(kept)
    exps = [math.exp(x - m) if k else 0.0 for x, k in zip(row, keep)]
    total = sum(exps)
    return [e / total for e in exps]


def attention(q, k, v, keep=None, scale=None):
    """q [L_q, d_k], k [L_k, d_k], v [L_k, d_v], keep bool [L_q, L_k] -> (out, weights), float64."""
    q, k, v = (np.asarray(a, dtype=np.float64).tolist() for a in (q, k, v))
    scale = 1.0 / math.sqrt(len(q[0])) if scale is None else scale
    out, weights = [], []
    for i, qi in enumerate(q):
        scores = [scale * sum(a * b for a, b in zip(qi, kj)) for kj in k]
        w = softmax_row(scores, None if keep is None else keep[i])
        weights.append(w)
        out.append([sum(w[j] * v[j][c] for j in range(len(k))) for c in range(len(v[0]))])
    return np.array(out).reshape(len(q), len(v[0])), np.array(weights).reshape(len(q), len(k))


def layer_norm_row(row, gamma, beta, eps):
    n = len(row)
    mean = sum(row) / n
    var = sum((x - mean) ** 2 for x in row) / n
    return [(x - mean) / math.sqrt(var + eps) * g + b for x, g, b in zip(row, gamma, beta)]


def multi_head_attention_loop(params, query, key, value, keep, n_heads):
    """The 'list of heads, concatenated' formulation: each head uses its own column slice of the
    projections, attention runs per head with the loop reference, heads are concatenated."""
    p = {name: np.asarray(a, dtype=np.float64) for name, a in params.items()}
    d_model = p["w_q"].shape[0]
    d_k = d_model // n_heads
    heads = []
    for h in range(n_heads):
        cols = slice(h * d_k, (h + 1) * d_k)
        q = query @ p["w_q"][:, cols] + p["b_q"][cols]
        k = key @ p["w_k"][:, cols] + p["b_k"][cols]
        v = value @ p["w_v"][:, cols] + p["b_v"][cols]
        heads.append(attention(q, k, v, keep)[0])
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"]


ACTIVATIONS = {
    "relu": lambda t: np.maximum(t, 0.0),
    "gelu": np.vectorize(lambda t: 0.5 * t * (1 + math.erf(t / math.sqrt(2)))),
}


def encoder_block_loop(p, x, n_heads, *, keep=None, norm_first=False, eps=1e-5, activation="relu",
                       kept=1.0):
    """One encoder block on one unbatched sequence [L, D], written with the loop references above.
    `keep` is a bool [L, L] mask (None: attend everywhere). `kept` is the factor
    dropout applies to every kept entry (1 / (1 - rate)); with a generator that keeps everything
    it scales the attention weights, the attention output, the hidden layer and the FF output."""
    keep = [[True] * len(x)] * len(x) if keep is None else keep

    def norm(h, q):
        return np.array([layer_norm_row(r, q["gamma"], q["beta"], eps) for r in h])

    def attend(h):  # weights * kept, so heads * kept: fold it into w_o, then the output dropout
        a = {**p["self_attention"], "w_o": p["self_attention"]["w_o"] * kept}
        return kept * multi_head_attention_loop(a, h, h, h, keep, n_heads)

    def ff(h):
        f = p["feed_forward"]
        hidden = kept * ACTIVATIONS[activation](h @ f["w_1"] + f["b_1"])
        return kept * (hidden @ f["w_2"] + f["b_2"])

    if norm_first:
        x = x + attend(norm(x, p["self_attention_norm"]))
        return x + ff(norm(x, p["feed_forward_norm"]))
    x = norm(x + attend(x), p["self_attention_norm"])
    return norm(x + ff(x), p["feed_forward_norm"])


def sampling_probabilities(logits, temperature, top_k, top_p):
    """One row of logits -> the sampling distribution, by the rules of transformers'
    TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, one token at a time."""
    scaled = [x / temperature for x in logits]
    keep = [True] * len(scaled)
    if top_k is not None:  # the top_k largest (ties with the k-th kept too)
        kth = sorted(scaled, reverse=True)[top_k - 1]
        keep = [x >= kth for x in scaled]
    if top_p is not None:  # drop, least likely first, while the mass dropped stays <= 1 - top_p
        top = max(x for x, k in zip(scaled, keep) if k)
        weights = [math.exp(x - top) if k else 0.0 for x, k in zip(scaled, keep)]
        total = sum(weights)
        ascending = sorted(range(len(scaled)), key=lambda i: (weights[i], scaled[i], i))
        dropped = 0.0
        for i in ascending[:-1]:  # the most likely token always stays
            dropped += weights[i] / total
            if dropped <= 1 - top_p:
                keep[i] = False
    top = max(x for x, k in zip(scaled, keep) if k)
    weights = [math.exp(x - top) if k else 0.0 for x, k in zip(scaled, keep)]
    return np.array(weights) / sum(weights)
