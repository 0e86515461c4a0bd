"""Inverted dropout: zero each entry with probability `rate`, scale the rest by 1/(1 - rate)."""
from .engine.autograd_rules import where


def dropout(x, rate, rng):
    # [...] -> [...]. The keep mask comes from the caller's Generator: nothing is seeded globally,
    # and with rate == 0 the input is returned untouched (no random numbers are drawn).
    if rate == 0.0:
        return x
    keep = rng.random(x.shape) >= rate
    return where(keep, x / (1.0 - float(rate)), 0.0)
