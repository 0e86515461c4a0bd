"""Attention sinks: StreamingLLM's cache policy (Xiao et al. 2023, "Efficient Streaming Language
Models with Attention Sinks").

Trained language models put much of their attention on the first few tokens, whatever they say:
a softmax row must sum to 1, and a head with nothing to look at parks its weight there. A cache
that keeps only a window of recent tokens evicts those "sinks", and the model's output degrades
once the text outgrows the window. StreamingLLM keeps the first n_sink tokens and a window of
recent ones. gpt-oss builds the sink in instead: a learned logit joins each softmax row and
holds no value (walkthrough.md, "Attention sinks"), so a head can put weight nowhere. That core
is attention_with_sinks, the variant of scaled_dot_product_attention its keyword sinks= selects;
grouped_attention(sinks=) groups one sink per head, and multi_head_attention and self_attention
take them as params["sinks"] [H] (engine/variants.py).
"""
import functools
import numbers

import autograd.numpy as np

from .attention import scaled_dot_product_attention, softmax
from .dropout import dropout as _dropout
from .engine import checks
from .engine.decoder_checks import check_sinks_alone
from .engine.dtypes import float16_in_float32
from .engine.variants import implements
from .kv_cache import self_attention
from .multi_head import _group_heads, _group_mask, _ungroup_heads, grouped_attention, \
    multi_head_attention
from .rope import apply_rope


@implements(scaled_dot_product_attention, "sinks")
@float16_in_float32("q", "k", "v")
def attention_with_sinks(q, k, v, mask=None, *, sinks, scale=None, dropout=0.0, rng=None):
    """scaled_dot_product_attention with attention sinks (gpt-oss): one more logit per query
    row, broadcasting to [..., L_q] (one per head: [H, 1]), that joins the softmax's
    denominator and holds no value, so the weights of a row may sum to less than 1.
    -> (output [..., L_q, d_v], weights [..., L_q, L_k])."""
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v], [..., L_q] -> [..., L_q, d_v], weights
    q, k, v, keep, bias, scale, sinks = checks.check_attention(q, k, v, mask, scale, dropout, rng,
                                                               sinks)
    scores = (q * scale) @ k.swapaxes(-1, -2)  # [..., L_q, L_k]
    if bias is not None:
        scores = scores + bias
    # The sink is one more column of logits, a key with no value, never masked: it takes its
    # share of the softmax, then is dropped (as gpt-oss computes it).
    rows = scores.shape[:-1] + (1,)  # [..., L_q, 1]
    sink = np.zeros_like(scores[..., :1]) + sinks[..., None].astype(scores.dtype)  # [..., L_q, 1]
    scores = np.concatenate([scores, sink], axis=-1)  # [..., L_q, L_k + 1]
    if keep is not None:
        keep = np.concatenate([np.broadcast_to(keep, rows[:-1] + (scores.shape[-1] - 1,)),
                               np.ones_like(keep, shape=rows)], axis=-1)
    weights = _dropout(softmax(scores, mask=keep)[..., :-1], dropout, rng)  # [..., L_q, L_k]
    return weights @ v, weights


@implements(grouped_attention, "sinks")
def grouped_attention_with_sinks(q, k, v, mask=None, *, sinks, dropout=0.0, rng=None):
    # grouped_attention with one sink per query head, sinks [H] -> [H_kv, G, 1] as the heads.
    n_heads, n_kv_heads = q.shape[-3], k.shape[-3]
    q = _group_heads(q, n_kv_heads)  # [..., H_kv, G, L_q, d_k]
    k, v = k[..., None, :, :], v[..., None, :, :]  # [..., H_kv, 1, L_k, d_k]
    sinks = np.reshape(sinks, (n_kv_heads, n_heads // n_kv_heads, 1))
    heads, weights = scaled_dot_product_attention(q, k, v, _group_mask(mask, n_heads, n_kv_heads),
                                                  dropout=dropout, rng=rng, sinks=sinks)
    return _ungroup_heads(heads), _ungroup_heads(weights)


def _has_sinks(params, *args, **config):
    return isinstance(params, checks.DICT_TYPES) and "sinks" in params


@implements(multi_head_attention, when=_has_sinks)
def multi_head_attention_with_sinks(params, query, key, value, mask=None, *, n_heads, **config):
    """multi_head_attention with params["sinks"] [H]: one attention-sink logit per head."""
    params, sinks = _split_sinks(params, n_heads, query, "query")
    core = functools.partial(grouped_attention, sinks=sinks)
    return multi_head_attention(params, query, key, value, mask, n_heads=n_heads, core=core,
                                **config)


@implements(self_attention, when=_has_sinks, priority=10)
def self_attention_with_sinks(params, x, mask=None, *, n_heads, **config):
    """self_attention with params["sinks"] [H]: one attention-sink logit per head (gpt-oss)."""
    check_sinks_alone(config)
    params, sinks = _split_sinks(params, n_heads, x, "x")
    core = functools.partial(grouped_attention, sinks=sinks)
    return self_attention(params, x, mask, n_heads=n_heads, core=core, **config)


def _split_sinks(params, n_heads, x, name):
    # -> (params without "sinks", sinks [H] in x's dtype), the sinks checked against n_heads;
    # name: x's, as the caller's argument is called (query, x).
    checks.check_size("n_heads", n_heads)
    sinks = checks.check_shape("params['sinks']", params["sinks"], (n_heads,),
                               checks.as_float_array(name, x).dtype)
    return {key: params[key] for key in params if key != "sinks"}, sinks


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
