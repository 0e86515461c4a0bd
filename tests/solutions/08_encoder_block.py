"""A correct answer to exercise 8 (section 11)."""
import numpy as np

import minattn


def encoder_block(params, x, mask=None, *, n_heads, norm_first=False, activation="relu",
                  eps=1e-5, dropout=0.0, rng=None, return_weights=False):
    def norm(h, which):
        return minattn.layer_norm(h, params[which]["gamma"], params[which]["beta"], eps)

    def attend(h):
        return minattn.multi_head_attention(params["self_attention"], h, h, h, mask, n_heads=n_heads,
                                            dropout=dropout, rng=rng)

    def feed(h):
        return minattn.feed_forward(params["feed_forward"], h, activation=activation,
                                    dropout=dropout, rng=rng)

    if norm_first:
        out, weights = attend(norm(x, "self_attention_norm"))
        x = x + out
        x = x + feed(norm(x, "feed_forward_norm"))
    else:
        out, weights = attend(x)
        x = norm(x + out, "self_attention_norm")
        x = norm(x + feed(x), "feed_forward_norm")
    return (x, weights) if return_weights else x
