"""A correct answer to exercise 14 (the second reading, attention sinks): exercise 2's answer, with sinks."""
import numpy as np

import minattn


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    if scale is None:
        scale = q.shape[-1] ** -0.5
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if sinks is None:
        weights = minattn.softmax(scores, mask=mask)
    else:  # the sink: one more column of scores, never masked, dropped after the softmax
        rows = scores.shape[:-1] + (1,)
        sink = np.broadcast_to(np.asarray(sinks, scores.dtype)[..., None], rows)
        keep = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
        keep = np.concatenate([keep, np.ones(rows, bool)], axis=-1)
        weights = minattn.softmax(np.concatenate([scores, sink], axis=-1), mask=keep)[..., :-1]
    if dropout:
        keep = rng.random(weights.shape) >= dropout
        weights = np.where(keep, weights / (1 - dropout), 0).astype(weights.dtype)
    return weights @ v, weights
