"""Exercise 2: scaled dot-product attention (walkthrough.md, section 3).
Grade it: python -m minattn check my_attention/02_attention.py
With your softmax inside: python -m minattn check my_attention/01_softmax.py my_attention/02_attention.py"""
import math

import numpy as np

import minattn  # minattn.softmax is yours while graded if you pass 01_softmax.py too
# What the walkthrough's plain form uses; or use your own from exercises 1 and 3.
from minattn.course.teaching import masked_softmax, softmax


def scaled_dot_product_attention(q, k, v, *, scale=None):  # section 4 adds mask=None after v
    """softmax(q kᵀ · scale) v, and the weights.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v]; leading axes broadcast.
    Returns (output [..., L_q, d_v], weights [..., L_q, L_k]).
    mask (section 4 adds it, as the 4th parameter, mask=None): None, or boolean broadcasting to
    [..., L_q, L_k]; True = the query MAY attend to the key. Until then its properties wait.
    With a mask, the weights are masked_softmax(scores, mask): the softmax imported above takes
    no mask ("Exercises 1 and 2, finished").
    scale: None means 1 / sqrt(d_k); a number s multiplies the scores instead (q kᵀ · s).

    Conventions the grader checks: every weight row sums to one over the keys; a masked key gets
    weight 0 and its value cannot change the output; a query with no key left gets zero weights
    and a zero output (no NaN); leading axes (batch, heads) and masks broadcast; float32 inputs
    give float32 results.

    Hints: the scores are q @ np.swapaxes(k, -1, -2), one row per query. The scale is
    q.shape[-1] ** -0.5 (a Python float). minattn.softmax(scores, mask=mask) handles masks and
    empty rows.

    For later parts (the second reading; Part I needs none of this): minattn's function also takes
    dropout=0.0 and rng=None (a rate p in [0, 1) applied to the weights with the Generator rng,
    each weight zeroed with probability p and the others divided by 1 - p) and sinks=None
    (exercise 14). Leave them out: the grader asks for them only with --part 4.
    """
    raise NotImplementedError
