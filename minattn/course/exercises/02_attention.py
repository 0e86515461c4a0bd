"""Exercise 2: scaled dot-product attention (walkthrough.md, section 3).
Grade it: python -m minattn check my_attention/02_attention.py
With your softmax inside: python -m minattn check my_attention/01_softmax.py my_attention/02_attention.py"""
import numpy as np

import minattn  # minattn.softmax is yours while graded if you pass 01_softmax.py too


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    """softmax(q kᵀ · scale) v, and the weights.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v]; leading axes broadcast.
    Returns (output [..., L_q, d_v], weights [..., L_q, L_k]).
    mask: None, or boolean broadcasting to [..., L_q, L_k]; True = the query MAY attend to the key.
    scale: None means 1 / sqrt(d_k); a number s multiplies the scores instead (q kᵀ · s).
    dropout: a rate p in [0, 1) applied to the weights with the Generator `rng` (inverted
    dropout: each weight is zeroed with probability p, the others divided by 1 - p); the weights
    returned are the dropped ones, and the output is those weights @ v. dropout=0 draws nothing.
    sinks: attention sinks, exercise 14 of the second reading; leave it out (or ignore it)
    until then: the grader's properties for it wait for --part 4.

    Conventions the grader checks: every weight row sums to one over the keys; a masked key gets
    weight 0 and its value cannot change the output; a query with no key left gets zero weights
    and a zero output (no NaN); leading axes (batch, heads) and masks broadcast; dropout zeroes a
    fraction p of the weights, each weight drawn on its own (no mask shared by two heads or batch
    entries), and the same rng seed gives the same dropout; float32 stays float32.

    Hints: the scores are q @ np.swapaxes(k, -1, -2), one row per query. Use a Python float for
    the scale (d_k ** -0.5): np.sqrt(d_k) is a float64 scalar, which upcasts float32.
    minattn.softmax(scores, mask=mask) handles masks and empty rows. Dropout:
    keep = rng.random(weights.shape) >= dropout; np.where(keep, weights / (1 - dropout), 0).
    """
    raise NotImplementedError
