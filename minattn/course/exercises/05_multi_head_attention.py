"""Exercise 5: multi-head attention (walkthrough.md, section 5).
Grade it: python -m minattn check my_attention/05_multi_head_attention.py
With your parts inside: python -m minattn check my_attention/01_softmax.py my_attention/02_attention.py \
    my_attention/04_heads.py my_attention/05_multi_head_attention.py"""
import numpy as np

import minattn


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    """Project, split into heads, attend in each head, merge, project back.

    params: {"w_q", "w_k", "w_v", "w_o": [D, D], "b_q", "b_k", "b_v", "b_o": [D]}; weights are
    stored [d_in, d_out], so a projection reads x @ w + b (torch stores the transpose).
    query [..., L_q, D], key and value [..., L_k, D]. n_heads: the number of heads H; each head
    attends over d_k = D / H features.
    Returns (output [..., L_q, D], weights [..., H, L_q, L_k]); with average_weights=True the
    weights are averaged over the heads, [..., L_q, L_k].
    mask: as in scaled_dot_product_attention, broadcasting to [..., H, L_q, L_k].
    dropout, rng: passed on to the attention of the heads (the weights returned are dropped).
    average_weights: the weights averaged over the head axis. float32 stays float32.
    n_kv_heads: grouped-query attention, exercise 9 of the second reading; leave it out (or
    ignore it) until then: the grader's property for it waits for --part 4.

    Hints: minattn.split_heads, minattn.scaled_dot_product_attention and minattn.merge_heads do
    the middle (yours while graded if you pass their files too).
    """
    raise NotImplementedError
