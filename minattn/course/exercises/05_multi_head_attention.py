"""Exercise 5: multi-head attention (walkthrough.md, section 5).
Grade it: python -m minattn check my_attention/05_multi_head_attention.py
With your parts inside: python -m minattn check my_attention/01_softmax.py my_attention/02_attention.py \
    my_attention/04_heads.py my_attention/05_multi_head_attention.py"""
import numpy as np

import minattn
# What the walkthrough's plain form uses; or use your own from exercises 2 and 4.
from minattn.course.teaching import merge_heads, project, scaled_dot_product_attention, split_heads


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    """Project, split into heads, attend in each head, merge, project back.

    params: {"w_q", "w_k", "w_v", "w_o": [D, D], "b_q", "b_k", "b_v", "b_o": [D]}; weights are
    stored [d_in, d_out], so a projection reads x @ w + b.
    query [..., L_q, D], key and value [..., L_k, D]. n_heads: the number of heads H; each head
    attends over d_k = D / H features.
    Returns (output [..., L_q, D], weights [..., H, L_q, L_k]).
    mask: as in scaled_dot_product_attention, broadcasting to [..., H, L_q, L_k].

    Hints: minattn.split_heads, minattn.scaled_dot_product_attention and minattn.merge_heads do
    the middle (yours while graded if you pass their files too).

    For later parts (the second reading): dropout and rng (passed on to the attention of the
    heads), average_weights (True: the weights averaged over the heads, [..., L_q, L_k]) and
    n_kv_heads (exercise 9). Leave them out: the grader asks for them only with --part 4.
    """
    raise NotImplementedError
