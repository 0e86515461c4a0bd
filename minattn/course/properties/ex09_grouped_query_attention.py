"""What exercise 9, grouped-query attention (section 15, the second reading), is held to: the
properties its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/09_grouped_query_attention.py --part 4
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import MULTI_HEAD, close, floats, prop, random_params, seeds, sizes
from ._references import ref_attention
from .ex05_multi_head_attention import draw_mask


def ref_grouped_multi_head(p, query, key, n_heads, n_kv_heads, keep=None):
    # one sequence, grouped-query attention: query head h reads key/value head h // (H / H_kv);
    # keep: None, [L_q, L_k] or one per query head [H, L_q, L_k] -> out [L_q, D], w [H, L_q, L_k]
    d_k = query.shape[-1] // n_heads
    q, k, v = query @ p["w_q"] + p["b_q"], key @ p["w_k"] + p["b_k"], key @ p["w_v"] + p["b_v"]
    heads, weights = [], []
    for h in range(n_heads):
        g = h // (n_heads // n_kv_heads)
        out, w = ref_attention(q[:, h * d_k:(h + 1) * d_k], k[:, g * d_k:(g + 1) * d_k],
                               v[:, g * d_k:(g + 1) * d_k],
                               None if keep is None else keep if keep.ndim == 2 else keep[h])
        heads.append(out)
        weights.append(w)
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], np.array(weights)


@prop("grouped_query_attention_shares_kv_heads", "multi_head_attention", "multi_head_attention "
      "with n_kv_heads < n_heads (GQA; MQA when 1): K and V are projected to n_kv_heads heads, and "
      "query head h reads key/value head h // (n_heads // n_kv_heads); the weights are one per "
      "query head [..., H, L_q, L_k] (averaged over them with average_weights=True), for one "
      "sequence [L, D], a batch [B, L, D] or two leading axes [B, B', L, D], under a mask of "
      "any documented form or one per head [B, H, L_q, L_k]", MULTI_HEAD,
      "project K and V to n_kv_heads * d_k features; give each group of n_heads // n_kv_heads "
      "consecutive query heads the same K/V head (broadcast over a group axis, or repeat along "
      "axis -3, never a fixed axis 1); return the weights [..., H, L_q, L_k] as in exercise 5",
      part=4)
def _(data):
    n_kv_heads = data.draw(st.integers(1, 2), "n_kv_heads")
    n_heads = n_kv_heads * data.draw(st.integers(2, 3), "n_heads / n_kv_heads")
    d_k = data.draw(st.integers(1, 2), "d_k")
    d_model, l_q, l_k = n_heads * d_k, data.draw(sizes, "L_q"), data.draw(sizes, "L_k")
    p = random_params(data.draw(seeds, "params seed"), d_model, d_kv=n_kv_heads * d_k)["self_attention"]
    batch = data.draw(st.sampled_from([(1,), (2,), (), (2, 2)]), "batch shape")
    query = data.draw(floats(batch + (l_q, d_model)), "query")
    key = data.draw(floats(batch + (l_k, d_model)), "key")
    if len(batch) == 1:  # a mask of a documented form, one per query head [B, H, L_q, L_k], and
        # in every example the first sequence alone [L, D] under its heads' masks [H, L_q, L_k]
        mask, keep = draw_mask(data, batch[0], l_q, l_k)
        per_head = data.draw(hnp.arrays(bool, batch + (n_heads, l_q, l_k)), "mask per head")
        cases = [(query, key, mask, lambda at: keep(at[0])),
                 (query, key, per_head, lambda at: per_head[at[0]]),
                 (query[0], key[0], per_head[0], lambda at: per_head[0])]
    else:  # one sequence or [B, B', L, D], under a causal mask [L_q, L_k]
        causal = np.tril(np.ones((l_q, l_k), bool))
        cases = [(query, key, causal, lambda at: causal)]
        data.show("mask", causal)
    for query, key, mask, keep_of in cases:
        lead = query.shape[:-2]
        out, weights = minattn.multi_head_attention(p, query, key, key, mask, n_heads=n_heads,
                                                    n_kv_heads=n_kv_heads)
        _, averaged = minattn.multi_head_attention(p, query, key, key, mask, n_heads=n_heads,
                                                   n_kv_heads=n_kv_heads, average_weights=True)
        out, weights, averaged = np.asarray(out), np.asarray(weights), np.asarray(averaged)
        assert out.shape == query.shape and weights.shape == lead + (n_heads, l_q, l_k), (
            f"for query {list(query.shape)}: output {out.shape} and weights {weights.shape}, "
            f"expected {query.shape} and {lead + (n_heads, l_q, l_k)} (one per query head)")
        shown = f"a mask {list(np.shape(mask))}" if mask is not None else "no mask"
        for at in np.ndindex(lead):
            ref_out, ref_w = ref_grouped_multi_head(p, query[at], key[at], n_heads, n_kv_heads,
                                                    keep_of(at))
            what = (f"of batch entry {at} of query {list(query.shape)} with {n_heads} query "
                    f"heads, {n_kv_heads} key/value heads and {shown}")
            close(out[at], ref_out, 1e-8, f"the output {what}")
            close(weights[at], ref_w, 1e-8, f"the weights {what}")
            close(averaged[at], ref_w.mean(axis=0), 1e-8, f"the weights averaged over the heads {what}")
