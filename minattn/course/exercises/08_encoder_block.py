"""Exercise 8: the encoder block (walkthrough.md, section 6).
Grade it: python -m minattn check my_attention/08_encoder_block.py"""
import numpy as np

import minattn
# What the walkthrough's plain form uses; or use your own from exercises 5, 6 and 7.
from minattn.course.teaching import feed_forward, layer_norm, multi_head_attention


def encoder_block(params, x, mask=None, *, n_heads, norm_first=False, activation="relu",
                  eps=1e-5, dropout=0.0, rng=None, return_weights=False):
    """Self-attention, then the feed-forward network, each with a residual and a LayerNorm.

    params: {"self_attention": {...}, "self_attention_norm": {"gamma", "beta"},
    "feed_forward": {...}, "feed_forward_norm": {"gamma", "beta"}}, each norm named for its
    sublayer. x [..., L, D] -> [..., L, D].
    Post-norm (norm_first=False, the 2017 paper): x = self_attention_norm(x + self_attention(x));
    x = feed_forward_norm(x + feed_forward(x)). Pre-norm (norm_first=True):
    x = x + self_attention(self_attention_norm(x)); x = x + feed_forward(feed_forward_norm(x)).
    eps goes to both norms. float32 inputs give float32 results.

    For later parts (the second reading): activation (passed on to the feed-forward network),
    dropout and rng (passed on to multi_head_attention and feed_forward; minattn's block, as the
    2017 paper, also drops each sublayer's output before it is added to the residual stream,
    which the grader allows but does not ask), return_weights (True: the weights of the attention whose
    output the block used, beside the output). Leave them out: the grader asks for them only with
    --part 4.

    Hints: minattn.multi_head_attention(params["self_attention"], h, h, h, mask, n_heads=n_heads),
    minattn.layer_norm and minattn.feed_forward are the parts (yours while graded if you pass
    their files too).
    """
    raise NotImplementedError
