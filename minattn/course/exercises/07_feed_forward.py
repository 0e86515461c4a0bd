"""Exercise 7: the position-wise feed-forward network (walkthrough.md, section 6).
Grade it: python -m minattn check my_attention/07_feed_forward.py"""
import math

import numpy as np


def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
    """act(x @ w_1 + b_1) @ w_2 + b_2, the same two-layer MLP on every token.

    params: {"w_1": [D, F], "b_1": [F], "w_2": [F, D], "b_2": [D]}; x [..., D] -> [..., D].
    activation: "relu"; "gelu", exact: 0.5 h (1 + erf(h / sqrt 2)) (scipy.special.erf, or
    math.erf through np.vectorize, then cast back to x.dtype); "gelu_tanh": 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h³))).
    dropout: a rate p applied with the Generator `rng` to the hidden units, after the
    activation (inverted dropout: zero with probability p, divide the rest by 1 - p), so the
    expected output does not change; the grader checks that mean over many tokens, and that
    each unit of each token is dropped on its own with probability p.
    """
    raise NotImplementedError
