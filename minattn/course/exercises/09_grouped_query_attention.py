"""Exercise 9: grouped-query attention (walkthrough.md, section 15, Part IV, the second reading).
Grade it: python -m minattn check my_attention/09_grouped_query_attention.py --part 4"""
import numpy as np

import minattn
# What the walkthrough's solution uses; or use your own from exercises 4 and 5.
from minattn.course.teaching import merge_heads, project, split_heads


def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    """Exercise 5's multi-head attention, extended with n_kv_heads (copy your answer to 5 here):
    params, query, key, value, mask, n_heads, dropout, rng and average_weights as there.

    n_kv_heads: None means n_heads (ordinary multi-head attention). Otherwise w_k, w_v are
    [D, n_kv_heads * d_k] (b_k, b_v [n_kv_heads * d_k]), K and V are split into n_kv_heads
    heads, and query head h reads key/value head h // (n_heads // n_kv_heads): each group of
    n_heads // n_kv_heads consecutive query heads shares one K/V head (n_kv_heads=1 is
    multi-query attention). The weights stay [..., H, L_q, L_k].

    Hint: np.repeat(k_heads, n_heads // n_kv_heads, axis=-3) gives each query head its K/V head.
    """
    raise NotImplementedError
