"""The language-modelling loss: cross-entropy of the target tokens under the model's logits.

cross_entropy(logits, targets) = -mean over positions of log softmax(logits)[target]: the number
a language model is trained to lower; its exponential is the perplexity (walkthrough.md, "Predicting
the next token"). The target's log-probability is picked with a one-hot mask and
`where`, not with np.take_along_axis, whose gradient autograd does not define (walkthrough.md,
"Gradients").
"""
import autograd.numpy as np
import numpy

from .engine import checks
from .engine.autograd_rules import constant, where
from .engine.devices import arange


def cross_entropy(logits, targets):
    # [..., V], int [...] -> a scalar: the mean negative log-likelihood of the targets.
    logits, targets = _check_cross_entropy(logits, targets)
    shifted = logits - constant(np.max(logits, axis=-1, keepdims=True))  # as in softmax
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))  # [..., V]
    one_hot = targets[..., None] == arange(logits.shape[-1], targets)  # [..., V]
    return -np.sum(where(one_hot, log_probs, 0.0)) / targets.size


def _check_cross_entropy(logits, targets):
    # Before computing: an out-of-range target would pick no log-probability at all and count,
    # silently, as a perfect prediction.
    logits, targets = checks.as_float_array("logits", logits), checks.as_array("targets", targets)
    if numpy.dtype(targets.dtype).kind not in "iu":
        raise TypeError(f"targets must be an integer array (token ids), got dtype {targets.dtype}")
    if logits.ndim < 1 or tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"targets must have the shape of logits without its last axis: logits "
                         f"{tuple(logits.shape)}, targets {tuple(targets.shape)}")
    if logits.shape[-1] == 0 or targets.size == 0:
        raise ValueError(f"cross_entropy needs at least one target and one class: logits "
                         f"{tuple(logits.shape)}, targets {tuple(targets.shape)}")
    low, high = int(targets.min()), int(targets.max())
    if low < 0 or high >= logits.shape[-1]:
        raise ValueError(f"targets must lie in [0, {logits.shape[-1]}) (the last axis of logits "
                         f"{tuple(logits.shape)}), got values from {low} to {high}")
    return logits, targets
