"""Exercise 3: masks (walkthrough.md: causal_mask in section 4, padding_mask in section 5).
Grade it: python -m minattn check my_attention/03_masks.py"""
import numpy as np


def causal_mask(n_q, n_k=None, *, align="top_left", window=None):
    """bool [n_q, n_k] (n_k defaults to n_q): True where query i may attend to key j, i.e. j <= i.

    No position sees the future. When n_q != n_k the mask is top-left aligned (query 0 sees key
    0 only).
    Hint: compare a column of row indices with a row of column indices (broadcasting).

    For later parts: Part II (section 9) adds align and window; leave them out until then, and
    the grader's properties for them wait: align="bottom_right" puts the n_q queries at the LAST
    n_q positions (query i at position i + n_k - n_q, as after a KV cache), and window=w keeps
    only the w most recent keys, the query's own included. Check them with --part 2.
    """
    raise NotImplementedError


def padding_mask(lengths, n):
    """int lengths [B] -> bool [B, 1, 1, n], True at the first lengths[b] positions of sequence b.

    The two singleton axes broadcast over heads and queries: every query may look at every real
    (non-padding) key.

    Hint: np.arange(n) < lengths[:, None], then add the axes.
    """
    raise NotImplementedError
