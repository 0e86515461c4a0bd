"""Variants: another form of a concept function, in its own file, chosen by the call.

NumPy's public functions carry their dispatch as one decorator line (@array_function_dispatch):
the body is the algorithm, and an array of another library reaches that library's own
implementation. minattn's concept functions on the common path do the same by keyword: the
function is the canonical formula the course teaches, and a variant (Gemma's scaled, soft-capped
attention, gpt-oss's sinks, GPT-NeoX's parallel block, ...) lives in its own file, where it
registers the calls it answers:

    @variants.dispatch                        # the canonical function
    def self_attention(params, x, mask=None, *, n_heads, ...): ...

    @variants.implements(self_attention, "query_pre_attn_scalar", "attn_logit_softcapping")
    def scaled_self_attention(params, x, mask=None, *, query_pre_attn_scalar=None, ...): ...

A call that sets one of a variant's keywords (to anything but None or False), or whose arguments
pass the variant's `when(*args, **kwargs)`, runs the variant. The variant does its part and
calls the dispatched function again without its keywords, so variants compose (a head_mask on
Gemma's attention); the canonical function never sees a variant's keyword. A call that leaves
them None or False runs the canonical function with them left out.

Which variant a call runs first, when several would answer it, is stated where each registers:
`implements(..., priority=p)`; the variants are asked in order of priority, highest first (the
outermost), and of equal priorities in the order registered (which is import order: each file
states its priority so that this does not decide). `trace(f, *args, **kwargs)` lists the
functions a call runs, in order:

    trace(ma.self_attention, params, x, n_heads=2, head_mask=m, rope_scaling=scaling)
    # [self_attention_with_head_mask, self_attention_with_scaled_rope, self_attention, ...]

A predicate that cannot take the call (a missing argument: the TypeError of the call itself)
does not apply, and the canonical function raises its own error; any other error a predicate
raises, a TypeError from inside it included, surfaces.

The signature a dispatched function shows (inspect.signature, help(): the grader, the docs) is
the canonical one with each variant's keywords added (default None) and the keywords it passes
on to its parts (`shows`: causal_lm's block and attention keywords, which it takes in
**block_config), less the canonical function's `hooks`: the keywords through which a variant
plugs its part into the canonical formula (self_attention's core= and rope=), which only
variants pass.
"""
import functools
import inspect
import weakref

import numpy
from autograd.tracer import box_types as _BOX_TYPES  # isbox(x): type(x) in it

from . import autograd_rules

_DISPATCHED = weakref.WeakSet()  # every dispatched function, for trace()
_NONE = frozenset()


def dispatch(function=None, *, hooks=(), shows=None):
    """Decorator: the canonical `function`, answering also the variants registered for it.
    hooks: its keywords left out of the signature it shows; shows: {keyword: default} added."""
    if function is None:
        return functools.partial(dispatch, hooks=hooks, shows=shows)
    registered = []  # (keywords, when, variant), in the order they were registered
    selecting = set()  # every variant's keywords
    # function's own function where function is gradient_by_hand's wrapper (RoPE's): called
    # here where no argument is an autograd box, as that wrapper would (a frame fewer a call)
    unrecorded = autograd_rules.unrecorded(function)

    @functools.wraps(function)
    def dispatched(*args, **kwargs):
        # (in this one frame: it runs about ten times in every layer of a decode step)
        named = _NONE if selecting.isdisjoint(kwargs) else selecting.intersection(kwargs)
        on = _NONE  # the variants' keywords this call names and sets: None and False (a bool,
        for k in named:  # NumPy's too) leave a variant off; anything else, even a wrong value,
            value = kwargs[k]  # selects it, so that the variant's own check refuses it by name
            if value is not None and not (isinstance(value, (bool, numpy.bool_)) and not value):
                on = on | {k}
        for keywords, when, variant in registered:
            if on and not on.isdisjoint(keywords):
                return variant(*args, **kwargs)
            if when is None:
                continue
            # A call the predicate cannot take (a missing argument) is no variant's: the
            # canonical function raises its own error. That TypeError is raised by the call
            # itself, before any line of the predicate runs, so its traceback ends in this
            # frame; one raised inside the predicate (a frame further on) is its own, and
            # surfaces.
            try:
                holds = when(*args, **kwargs)
            except TypeError as error:
                if error.__traceback__.tb_next is not None:
                    raise
                holds = False
            if holds:
                return variant(*args, **kwargs)
        for k in named:  # every variant's keywords are off: left out
            del kwargs[k]
        if unrecorded is not None and _BOX_TYPES.isdisjoint(map(type, args)) and \
                (not kwargs or _BOX_TYPES.isdisjoint(map(type, kwargs.values()))):
            return unrecorded(*args, **kwargs)  # as gradient_by_hand's wrapper would call it
        return function(*args, **kwargs)

    dispatched.variants = registered
    dispatched.priorities = []  # each variant's priority, in the order of `registered`
    dispatched.selecting = selecting
    dispatched.variant_keywords = set()  # the keywords variants add to the signature shown
    parameters = inspect.signature(function).parameters.values()
    dispatched.__signature__ = inspect.signature(function).replace(
        parameters=[p for p in parameters if p.name not in hooks])
    _show_keywords(dispatched, shows or {})
    _DISPATCHED.add(dispatched)
    return dispatched


FIRST = float("inf")  # the priority of a variant that wraps whichever of the others runs


def implements(dispatched, *keywords, when=None, priority=0):
    """Decorator: register a variant of `dispatched`, run for a call that sets one of
    `keywords` or for which when(*args, **kwargs) is true. Variants are asked in order of
    priority, highest first, equal ones in the order registered; priority=FIRST: a variant that
    wraps whichever of the others runs (minattn.hooks's block)."""

    def register(variant):
        at = sum(p >= priority for p in dispatched.priorities)  # after the higher and equal
        dispatched.variants.insert(at, (frozenset(keywords), when, variant))
        dispatched.priorities.insert(at, priority)
        dispatched.selecting.update(keywords)
        _show_keywords(dispatched, dict.fromkeys(keywords), variant=True)
        return variant
    return register


def show(dispatched, **defaults):
    """Add keywords (with their defaults) to the signature `dispatched` shows: a variant's
    keywords that a function higher up (causal_lm, decoder_block) passes on to it."""
    _show_keywords(dispatched, defaults, variant=True)


def _show_keywords(dispatched, keywords, variant=False):
    # {keyword: default} join the dispatched function's signature, before its **keywords.
    signature = dispatched.__signature__
    parameters = list(signature.parameters.values())
    at = next((i for i, p in enumerate(parameters) if p.kind is p.VAR_KEYWORD), len(parameters))
    new = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=default)
           for k, default in keywords.items() if k not in signature.parameters]
    dispatched.__signature__ = signature.replace(parameters=parameters[:at] + new + parameters[at:])
    if variant:  # a variant's keyword, which the canonical formula (and the course) never takes
        dispatched.variant_keywords.update(p.name for p in new)


def trace(f, *args, **kwargs):
    """The functions that the call f(*args, **kwargs) runs through dispatched functions, in the
    order they run: each variant, and each canonical function whose own body runs (the call is
    made, its result dropped). For reading which variants answer a call and in what order; while
    it runs, every dispatched function records, so run it on one thread."""
    chain, saved = [], {}

    def recorded(function, runs):
        def recording(*args, **kwargs):
            chain.append(runs)
            return function(*args, **kwargs)
        return recording

    def canonical(dispatched):
        # what a call that no variant answers runs: the body, every variant's keyword left out
        body = dispatched.__wrapped__

        def without_variant_keywords(*args, **kwargs):
            return body(*args, **{k: v for k, v in kwargs.items()
                                  if k not in dispatched.selecting})
        return recorded(without_variant_keywords, body)

    try:
        for dispatched in list(_DISPATCHED):
            saved[dispatched] = list(dispatched.variants)
            dispatched.variants[:] = [(keywords, when, recorded(variant, variant))
                                      for keywords, when, variant in saved[dispatched]] + \
                [(frozenset(), _always, canonical(dispatched))]
        f(*args, **kwargs)
    finally:
        for dispatched, variants in saved.items():
            dispatched.variants[:] = variants
    return chain


def _always(*args, **kwargs):
    return True
