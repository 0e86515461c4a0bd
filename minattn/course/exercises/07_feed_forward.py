"""Exercise 7: the position-wise feed-forward network (walkthrough.md, section 6).
Grade it: python -m minattn check my_attention/07_feed_forward.py"""
import math

import numpy as np


def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
    """relu(x @ w_1 + b_1) @ w_2 + b_2, the same two-layer network on every token.

    params: {"w_1": [D, F], "b_1": [F], "w_2": [F, D], "b_2": [D]}; x [..., D] -> [..., D].

    For later parts (the second reading): activation ("relu" the default; "gelu" and
    "gelu_tanh"), dropout and rng (hidden units zeroed with probability p after the
    activation, the rest divided by 1 - p). Leave them out: the grader asks for them only with
    --part 4.
    """
    raise NotImplementedError
