"""Exercise 2: scaled dot-product attention (walkthrough.md, section 3).
Grade it: python -m minattn check 02_attention.py"""
import numpy as np

import minattn  # softmax comes from minattn here (or from your exercise 1: import it)


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None):
    """softmax(q kᵀ · scale) v, and the weights.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v]; leading axes broadcast.
    Returns (output [..., L_q, d_v], weights [..., L_q, L_k]).
    mask: None, or boolean broadcasting to [..., L_q, L_k]; True = the query MAY attend to the key.
    scale: None means 1 / sqrt(d_k). dropout: you may ignore it (the grader uses 0).

    Conventions the grader checks: every weight row sums to one over the keys; a masked key gets
    weight 0 and its value cannot change the output; a query with no key left gets zero weights
    and a zero output (no NaN); float32 stays float32.

    Hints: the scores are q @ np.swapaxes(k, -1, -2), one row per query. Use a Python float for
    the scale (d_k ** -0.5): np.sqrt(d_k) is a float64 scalar, which upcasts float32.
    minattn.softmax(scores, mask=mask) handles masks and empty rows (and is your softmax while
    you are graded, if you wrote one).
    """
    raise NotImplementedError
