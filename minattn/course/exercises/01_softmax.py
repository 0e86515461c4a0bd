"""Exercise 1: softmax (walkthrough.md, section 2). Grade it (from the folder above):
python -m minattn check my_attention/01_softmax.py

What every exercise's function promises, whatever it is called with (the grader calls each
function again with copies of its arguments, and cast to float32): it leaves its arguments as
they were, returns new arrays in its inputs' float dtype, and keeps nothing between calls."""
import numpy as np

# Section 4's plain form, for "Exercises 1 and 2, finished": masked_softmax(x, mask, axis).
from minattn.course.teaching import masked_softmax


def softmax(x, axis=-1):  # section 4 adds mask=None here
    """Softmax of x along `axis`: exp(x) / sum(exp(x)), each slice along `axis` summing to one.

    x:    float array [..., n] (any number of leading axes).
    mask (section 4 adds it, "Exercises 1 and 2, finished"): None, or a boolean array broadcasting to
          x; True = keep the entry, False = drop it. Until you add it, the mask properties wait.
    Returns an array of x's shape and dtype (float32 in -> float32 out).

    Conventions the grader checks:
    - with the mask: a dropped entry gets weight exactly 0, and the kept ones are the softmax of
      the kept x; a slice with every entry dropped is all zeros (not NaN);
    - huge values (1e4) must not overflow, and rows all far from zero (x + 1000, x - 1000) must
      not underflow: subtract each row's own max.

    Hints: softmax(x) == softmax(x - c) for any constant c per slice: subtract the max.
    For the mask: np.where(mask, x, -np.inf) drops entries, since exp(-inf) == 0. Where nothing
    is kept, the sum is 0: divide by 1 there instead.

    For later parts (the second reading, --part 4; Part I needs none of this): with no mask,
    entries of -inf get weight 0 and a slice of nothing but -inf is all zeros, not NaN (an
    additive mask, already added to x).
    """
    raise NotImplementedError
