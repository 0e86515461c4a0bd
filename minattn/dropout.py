"""Inverted dropout: zero each entry with probability `rate`, scale the rest by 1/(1 - rate)."""
from .engine.autograd_rules import where


def dropout(x, rate, rng):
    # [...] -> [...]. The keep mask comes from the caller's Generator: nothing is seeded globally,
    # and with rate == 0 the input is returned untouched (no random numbers are drawn).
    if rate == 0.0:
        return x
    if rate == 1.0:  # every entry dropped (torch's p=1: x * 0, so NaN stays NaN)
        return x * 0.0
    keep = rng.random(x.shape) >= rate
    return where(keep, x / (1.0 - float(rate)), 0.0)
