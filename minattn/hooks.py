"""Reading and replacing a model's activations (hooks=): for interpretability, patching.

causal_lm(params, tokens, hooks={(name, layer): function}, **config) runs the model with each
named activation of that layer passed through function(value) -> value: return it to read it
(run_with_cache keeps them all), return another array of its shape and dtype to replace it (by
another run's values, zeros, a mean: replaced). The names, as TransformerLens's hook points:

    resid_pre   [B, L, D]        the residual stream entering the block (layer 0: the embeddings)
    rot_q       [B, H, L, d_k]   the queries as the attention core takes them: after QK-norm
                                 and RoPE (TransformerLens's hook_rot_q)
    rot_k       [B, H_kv, L_k, d_k]  the keys likewise, the cached ones first (hook_rot_k)
    attn_out    [B, L, D]        the self-attention sublayer's output (before a norm after it)
    z           [B, H, L, d_v]   each head's output, its weights times the values, before w_o
    pattern     [B, H, L, L_k]   each head's attention weights (rows: queries); a replacement
                                 is multiplied by the values in place of the model's own
    mlp_out     [B, L, D]        the feed-forward sublayer's output (before a norm after it)
    resid_post  [B, L, D]        the residual stream leaving the block

It is a variant (engine/variants.py), as head_mask is: the call that sets hooks= runs it, the
model's own functions are unchanged and a call without it pays nothing. causal_lm hands each
layer its own hooks (a list, one entry a layer, as causal_lm hands every per-layer keyword);
the block's variant, asked before the families' blocks (priority FIRST), reads the residual
stream around whichever block runs and plugs its sublayers in through the keywords every block
takes, attention= and feed_forward=; self_attention's variant reads z and pattern through its
core=, after any attention variant has chosen its core (Gemma's soft-capping, gpt-oss's
sinks).
"""
import functools
import inspect

import autograd.numpy as np

from .engine.hook_checks import (check_heads_hookable, check_hooks, check_layer_hooks,
                                 check_replacement, check_selection)
from .engine.variants import FIRST, implements, show
from .kv_cache import self_attention
from .language_model import causal_lm
from .multi_head import grouped_attention
from .transformer_decoder import decoder_block, position_wise

ACTIVATIONS = ("resid_pre", "rot_q", "rot_k", "attn_out", "z", "pattern", "mlp_out",
               "resid_post")
HEADS = ("rot_q", "rot_k", "z", "pattern")  # read inside self_attention


def _model_hooks(params, tokens, attention_mask=None, *, hooks=None, **config):
    return hooks is not None and not isinstance(hooks, list)  # a list: one entry a layer


# after lora's (10) and head_mask's (0), which change the params; this changes only the keywords
@implements(causal_lm, when=_model_hooks, priority=-10)
def causal_lm_with_hooks(params, tokens, attention_mask=None, *, hooks, **config):
    """causal_lm with hooks {(name, layer): function(value) -> value} (module docstring): each
    named activation of that layer passed through its function; config as causal_lm's."""
    per_layer = check_hooks(hooks, params, ACTIVATIONS)  # [{name: function}], one a layer
    return causal_lm(params, tokens, attention_mask, hooks=per_layer, **config)


@implements(decoder_block, "hooks", priority=FIRST)  # around whichever block runs
def decoder_block_with_hooks(params, x, mask=None, *, hooks, attention=None, feed_forward=None,
                             cache=None, **config):
    """decoder_block (or the family's block that runs) with hooks {name: function} on this
    layer's activations (module docstring)."""
    # [..., L, D] -> [..., L, D] (with a cache: and the new cache)
    hooks = check_layer_hooks(hooks, ACTIVATIONS)
    x = _hooked(hooks, "resid_pre", x)
    attention = functools.partial(_attention, attention=attention or self_attention, hooks=hooks)
    feed_forward = functools.partial(_feed_forward, feed_forward=feed_forward or position_wise,
                                     hooks=hooks)
    out = decoder_block(params, x, mask, attention=attention, feed_forward=feed_forward,
                        cache=cache, **config)
    x, new_cache = out if cache is not None else (out, None)
    x = _hooked(hooks, "resid_post", x)
    return x if cache is None else (x, new_cache)


# the lowest priority of self_attention's variants: the innermost, it reads the core the others
# chose
@implements(self_attention, "hooks", priority=0)
def self_attention_with_hooks(params, x, mask=None, *, hooks, core=None, **config):
    """self_attention with hooks {"rot_q", "rot_k", "z", "pattern": function} on its heads
    (module docstring)."""
    core = functools.partial(_core, core=core or grouped_attention, hooks=hooks)
    return self_attention(params, x, mask, core=core, **config)


def _attention(params, x, mask=None, *, attention, hooks, **config):
    # The block's attention sublayer, its output hooked ("attn_out"), its heads' hooks handed on
    heads = {name: hooks[name] for name in HEADS if name in hooks}
    if heads:
        check_heads_hookable(heads, attention, "hooks" in inspect.signature(attention).parameters)
    out, new_cache = attention(params, x, mask, **config, **({"hooks": heads} if heads else {}))
    return _hooked(hooks, "attn_out", out), new_cache


def _feed_forward(params, x, activation, *, feed_forward, hooks):
    # The block's feed-forward sublayer, its output hooked ("mlp_out")
    return _hooked(hooks, "mlp_out", feed_forward(params, x, activation))


def _core(q, k, v, mask=None, *, core, hooks):
    # [..., H, L, d], [..., H_kv, L_k, d] x 2 -> heads [..., H, L, d], weights [..., H, L, L_k]
    q, k = _hooked(hooks, "rot_q", q), _hooked(hooks, "rot_k", k)
    heads, weights = core(q, k, v, mask)
    if "pattern" in hooks:  # the replaced weights read the values: query head h, kv head h // G
        weights = _hooked(hooks, "pattern", weights)
        heads = weights @ np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    return _hooked(hooks, "z", heads), weights


def _hooked(hooks, name, value):
    # value through hooks[name] (checked: the same shape and dtype), or value itself
    function = hooks.get(name)
    return value if function is None else check_replacement(name, value, function(value))


def run_with_cache(params, tokens, attention_mask=None, *, names=ACTIVATIONS, **config):
    """-> (causal_lm's logits, {(name, layer): activation}) for every name in names and every
    layer, recorded in one forward pass. config: as causal_lm's (and hooks= of its own, which
    run before the recording)."""
    cache, hooks = {}, dict(config.pop("hooks", None) or {})
    for layer in range(len(params["layers"])):
        for name in names:
            hooks[name, layer] = kept(cache, (name, layer), hooks.get((name, layer)))
    return causal_lm(params, tokens, attention_mask, hooks=hooks, **config), cache


def kept(store, key, before=None):
    """A hook: the activation (through the hook `before` first, where given) kept in store[key]
    and returned."""
    return functools.partial(_kept, store, key, before)


def _kept(store, key, before, value):
    value = value if before is None else before(value)
    store[key] = value
    return value


def replaced(new, *, position=None, head=None, batch=None):
    """A hook: the activation with `new` (its shape and dtype, or one that broadcasts to it) in
    place of the whole of it, or only at a query position (axis -2), a head (axis -3: z,
    pattern) or a batch row (axis 0); each None: all of that axis, an int or a list: those."""
    return functools.partial(_replaced, new, (batch, head, position))


def _replaced(new, where, value):
    # value [B, ..., (H,) L, d] with new at where = (batch, head, position): a boolean selection
    selected = check_selection(value, new, where)  # bool, broadcasting to value
    return np.where(selected, new, value)


# causal_lm passes hooks on to its blocks (**block_config)
show(causal_lm, hooks=None)
