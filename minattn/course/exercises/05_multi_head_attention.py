"""Exercise 5: multi-head attention (walkthrough.md, section 8).
Grade it: python -m minattn check 05_multi_head_attention.py"""
import numpy as np

import minattn


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    """Project, split into heads, attend in each head, merge, project back.

    params: {"w_q", "w_k", "w_v", "w_o": [D, D], "b_q", "b_k", "b_v", "b_o": [D]}; weights are
    stored [d_in, d_out], so a projection reads x @ w + b (torch stores the transpose).
    query [..., L_q, D], key and value [..., L_k, D].
    Returns (output [..., L_q, D], weights [..., H, L_q, L_k]); with average_weights=True the
    weights are averaged over the heads, [..., L_q, L_k].
    mask: as in scaled_dot_product_attention, broadcasting to [..., H, L_q, L_k].
    dropout: you may ignore it (the grader uses 0).
    n_kv_heads: grouped-query attention (walkthrough.md, Part II): None means n_heads. Otherwise
    w_k, w_v are [D, n_kv_heads * d_k] and query head h reads key/value head
    h // (n_heads // n_kv_heads). Leave it for Part II: until then the grader's GQA property fails.

    Hints: minattn.split_heads, minattn.scaled_dot_product_attention and minattn.merge_heads do
    the middle (they are yours while graded, if you wrote them).
    """
    raise NotImplementedError
