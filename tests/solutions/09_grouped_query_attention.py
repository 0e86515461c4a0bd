"""A correct answer to exercise 9 (the second reading, grouped-query attention)."""
import numpy as np

import minattn


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    p, n_kv = params, n_kv_heads or n_heads
    q = minattn.split_heads(query @ p["w_q"] + p["b_q"], n_heads)
    k = np.repeat(minattn.split_heads(key @ p["w_k"] + p["b_k"], n_kv), n_heads // n_kv, axis=-3)
    v = np.repeat(minattn.split_heads(value @ p["w_v"] + p["b_v"], n_kv), n_heads // n_kv, axis=-3)
    heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)
    out = minattn.merge_heads(heads) @ p["w_o"] + p["b_o"]
    return out, weights.mean(axis=-3) if average_weights else weights
