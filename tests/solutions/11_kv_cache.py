"""A correct answer to exercise 11 (Part II, the KV cache)."""
import numpy as np

import minattn


def self_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, positions=None,
                   rope_base=10000.0, cache=None):
    p, n_kv = params, n_kv_heads or n_heads
    q = minattn.split_heads(x @ p["w_q"] + p["b_q"], n_heads)
    k = minattn.split_heads(x @ p["w_k"] + p["b_k"], n_kv)
    v = minattn.split_heads(x @ p["w_v"] + p["b_v"], n_kv)
    if positions is not None:  # [..., L] -> [..., 1, L]: the same positions for every head
        positions = np.asarray(positions)[..., None, :]
        q = minattn.apply_rope(q, positions, base=rope_base)
        k = minattn.apply_rope(k, positions, base=rope_base)
    if cache is not None:
        k = np.concatenate([cache["k"], k], axis=-2)
        v = np.concatenate([cache["v"], v], axis=-2)
    group = n_heads // n_kv
    heads, _ = minattn.scaled_dot_product_attention(q, np.repeat(k, group, axis=-3),
                                                    np.repeat(v, group, axis=-3), mask)
    return minattn.merge_heads(heads) @ p["w_o"] + p["b_o"], {"k": k, "v": v}
