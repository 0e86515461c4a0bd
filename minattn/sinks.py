"""Attention sinks: StreamingLLM's cache policy (Xiao et al. 2023, "Efficient Streaming Language
Models with Attention Sinks").

Trained language models put much of their attention on the first few tokens, whatever they say:
a softmax row must sum to 1, and a head with nothing to look at parks its weight there. A cache
that keeps only a window of recent tokens evicts those "sinks", and the model's output degrades
once the text outgrows the window. StreamingLLM keeps the first n_sink tokens and a window of
recent ones. gpt-oss builds the sink in instead: scaled_dot_product_attention(..., sinks=) adds a
learned logit to each softmax row that holds no value (walkthrough.md, "Attention sinks").
"""
import numbers

import autograd.numpy as np

from .rope import apply_rope
from .engine import checks


def streaming_cache(cache, *, n_sink, window, rope_base=None):
    """Keep the first n_sink and the last `window` positions of a model's KV cache (a tuple of
    {"k", "v": [..., H_kv, L_past, d_k]}, one per layer) and drop those between. rope_base (a RoPE
    model): StreamingLLM numbers the kept tokens by their place in the cache, so the kept recent
    keys, rotated at their old positions, are rotated back by the number of dropped tokens
    (RoPE's rotations compose: rotating by m, then by -n, is rotating by m - n). The next token
    then sits at position n_sink + window, as causal_lm gives it. A cache no longer than
    n_sink + window comes back as it is."""
    # tuple of {"k", "v": [..., H_kv, L_past, d_k]} -> the same with L_past <= n_sink + window
    length = _check_streaming_cache(cache, n_sink, window, rope_base)
    dropped = length - n_sink - window
    if dropped <= 0:
        return tuple(cache)

    def keep(a, rotate):  # [..., L_past, d_k] -> [..., n_sink + window, d_k]
        recent = a[..., length - window:, :]
        if rotate:  # every kept recent key moves back by `dropped` positions
            recent = apply_rope(recent, np.full_like(recent[..., 0], -dropped, dtype=int),
                                base=rope_base)
        return np.concatenate([a[..., :n_sink, :], recent], axis=-2)

    return tuple({"k": keep(layer["k"], rope_base is not None), "v": keep(layer["v"], False)}
                 for layer in cache)


def _check_streaming_cache(cache, n_sink, window, rope_base):
    for name, n in (("n_sink", n_sink), ("window", window)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"{name} must be an int >= 0, got {n!r}")
    if rope_base is not None:  # None: no RoPE; else as apply_rope's base
        checks.check_positive_real("rope_base", rope_base, allow_inf=True)
    if not isinstance(cache, checks.LIST_TYPES) or not all(
            isinstance(layer, checks.DICT_TYPES) and "k" in layer and "v" in layer
            for layer in cache):
        raise TypeError("cache must be a tuple of {'k', 'v'} dicts, one per layer, as causal_lm "
                        f"returns, got {type(cache).__name__}")
    lengths = {a.shape[-2] for layer in cache for a in (layer["k"], layer["v"])}
    if len(lengths) > 1:
        raise ValueError(f"the cache's layers differ in length: {sorted(lengths)}")
    return lengths.pop() if lengths else 0
