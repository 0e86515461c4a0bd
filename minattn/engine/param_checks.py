"""The param and argument checks the concepts below the decoder share with the checks of the
blocks built on them: attention's projections (multi_head.py), the feed-forwards
(position_wise.py), RoPE's positions, partial width and frequency schedules (rope.py,
rope_scaling.py). Here, in the engine room, so that decoder_checks.py checks a block's sublayers
exactly as each sublayer checks its own without importing a concept; the concept modules import
them from here (and keep their names).

ROPE_SCHEDULES is filled by rope_scaling.py, which defines the schedules (a name -> function
table read here for the keywords each takes).
"""
import inspect

import autograd.numpy as np
import numpy

from . import checks

PROJECTIONS = ("q", "k", "v", "o")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
ROPE_SCHEDULES = {}  # rope_type -> schedule function: filled by minattn/rope_scaling.py


class _DefaultRopeBase(float):
    # A float that is the default, so that a rope_base the caller gave (10000.0 included) is
    # told apart from the one nobody gave: a base given without positions is refused.
    __slots__ = ()

    def __repr__(self):
        return "10000.0"


ROPE_BASE = _DefaultRopeBase(10000.0)  # every RoPE keyword's default rope_base, RoPE's 10000


def rope_base_given(rope_base):
    """Whether a caller chose rope_base: not left at ROPE_BASE, and not None (no RoPE)."""
    return rope_base is not None and not isinstance(rope_base, _DefaultRopeBase)


def n_kv_heads_hint(params, d_k, n_heads, n_kv_heads):
    """A params check refusing w_k, in a call without n_kv_heads, whose width is a whole number
    of heads dividing n_heads: the error then says which n_kv_heads the weights hold. (A context
    manager of its own, not contextlib's: every layer of a decode step enters it.)"""
    return _NKvHeadsHint(params, d_k, n_heads, n_kv_heads)


class _NKvHeadsHint:
    __slots__ = ("params", "d_k", "n_heads", "n_kv_heads")

    def __init__(self, params, d_k, n_heads, n_kv_heads):
        self.params, self.d_k, self.n_heads, self.n_kv_heads = params, d_k, n_heads, n_kv_heads

    def __enter__(self):
        return None

    def __exit__(self, kind, error, traceback):
        if kind is None or not issubclass(kind, ValueError):
            return False
        params, d_k, n_heads = self.params, self.d_k, self.n_heads
        w_k = params.get("w_k") if isinstance(params, checks.DICT_TYPES) else None
        width = numpy.shape(w_k)[-1] if numpy.ndim(w_k) == 2 else 0
        if self.n_kv_heads is not None or "w_k" not in str(error) or not width or width % d_k \
                or n_heads % (width // d_k) or width // d_k == n_heads:
            return False
        raise ValueError(f"{error}; w_k holds {width // d_k} heads of d_k={d_k}: a grouped-query "
                         f"model's, give n_kv_heads={width // d_k}") from None


def check_multi_head_params(params, d_model, where="params", d_kv=None, *, n_heads, dtype=None):
    # d_kv: the width of K and V (n_kv_heads * d_k; d_model without GQA). Biases are optional,
    # each on its own (GPT-2 has them, Llama has none); so are attention sinks, one per head
    # (n_heads of them: minattn.sinks).
    # dtype: the inputs', in which the params are taken (checks.in_dtype).
    d_kv = d_model if d_kv is None else d_kv
    d_out = {"q": d_model, "k": d_kv, "v": d_kv, "o": d_model}
    checks.check_params(params, {}, where)
    qk_norm = [key for key in ("q_norm", "k_norm") if key in params]
    if qk_norm:  # (self_attention applies them: minattn.kv_cache)
        raise ValueError(f"{where} has {qk_norm} (QK-norm), which multi_head_attention does not "
                         "apply: use self_attention, or leave them out")
    return checks.check_params(
        params,
        {**{f"w_{p}": (d_model, d_out[p]) for p in PROJECTIONS},
         **{f"b_{p}": (d_out[p],) for p in PROJECTIONS if f"b_{p}" in params},
         **({"sinks": (n_heads,)} if "sinks" in params else {})},
        where, dtype,
    )


def check_feed_forward_params(params, d_model, where="params", dtype=None):
    d_ff = _d_ff(params, "w_1", d_model, where)
    return _only(checks.check_params(params, {"w_1": (d_model, d_ff), "b_1": (d_ff,),
                                              "w_2": (d_ff, d_model), "b_2": (d_model,)}, where,
                                     dtype), ("w_1", "b_1", "w_2", "b_2"), where)


def _d_ff(params, key, d_model, where):
    # The hidden width: params[key] [D, d_ff] read directly in the common case (a dict holding
    # a NumPy array with D rows: the full check that follows answers for its dtype), else
    # through the check, which raises for the others.
    w = params.get(key) if type(params) is dict else None
    if type(w) is numpy.ndarray and w.ndim == 2 and w.shape[0] == d_model:
        return w.shape[1]
    return checks.check_params(params, {key: (d_model, "d_ff")}, where)[key].shape[1]


_GATED_WEIGHTS = frozenset(("w_gate", "w_up", "w_down"))


def check_gated_feed_forward_params(params, d_model, where="params", dtype=None):
    # (its adapters, params["lora"], are read by minattn.lora's variant of linear.project)
    if type(params) is dict and params.keys() == _GATED_WEIGHTS:  # the common case first (a
        gate, up, down = params["w_gate"], params["w_up"], params["w_down"]  # model's layer),
        if type(gate) is type(up) is type(down) is numpy.ndarray and gate.ndim == 2 and \
                gate.dtype.kind == up.dtype.kind == down.dtype.kind == "f" and \
                (dtype is None or gate.dtype == up.dtype == down.dtype == dtype) and \
                gate.shape[0] == d_model and up.shape == gate.shape and \
                down.shape == (gate.shape[1], d_model):
            return dict(params)  # as the checks below return it
    d_ff = _d_ff(params, "w_gate", d_model, where)
    return _only(checks.check_params(params, {"w_gate": (d_model, d_ff), "w_up": (d_model, d_ff),
                                              "w_down": (d_ff, d_model)}, where, dtype),
                 ("w_gate", "w_up", "w_down") + (("lora",) if "lora" in params else ()), where,
                 "the gated feed-forward has no biases")


def _only(params, expected, where, why=None):
    # A feed-forward's params hold its weights only: another key (a bias the formula has no
    # place for, the other form's weight) would be silently left out, so it is refused by name.
    if len(params) > len(expected):
        extra = [key for key in params if key not in expected]
        raise ValueError(f"{where} has {extra}, which this feed-forward does not use (its keys: "
                         f"{', '.join(map(repr, expected))}{f'; {why}' if why else ''})")
    return params


def check_partial_rotary_factor(partial_rotary_factor, d):
    """partial_rotary_factor in (0, 1], rotating an even number >= 2 of a head's d features;
    -> that number, rotary_width(d, partial_rotary_factor)."""
    factor = checks.check_positive_real("partial_rotary_factor", partial_rotary_factor)
    d_rope = int(d * factor)  # rope.rotary_width
    if factor > 1 or d_rope < 2 or d_rope % 2:
        raise ValueError(f"partial_rotary_factor must be in (0, 1] and rotate an even number "
                         f">= 2 of the {d} features of a head, got partial_rotary_factor="
                         f"{partial_rotary_factor!r}: int({d} * {partial_rotary_factor!r}) = "
                         f"{d_rope}")
    return d_rope


def as_int_array(name, x):
    """checks.as_array (lists converted, torch tensors refused with the .numpy() hint), then
    require an integer dtype."""
    x = checks.as_array(name, x)
    if np.dtype(x.dtype).kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {x.dtype}")
    return x


def check_positions(positions, x):
    """positions: integers (an array, or a list) that broadcast to x's (..., L); -> an array."""
    positions = as_int_array("positions", positions)
    if not checks.broadcasts_to(positions.shape, tuple(x.shape[:-1])):
        raise ValueError(f"positions of shape {tuple(positions.shape)} must broadcast to "
                         f"x's (..., L) = {tuple(x.shape[:-1])}")
    return positions


def check_rope_scaling(scaling, name="rope_scaling"):
    """scaling: None or a dict {"rope_type": one of ROPE_SCHEDULES, its keywords}; anything else is
    refused naming the type or the keyword (never approximated by default RoPE)."""
    if scaling is None:
        return
    if not isinstance(scaling, dict) or scaling.get("rope_type") not in ROPE_SCHEDULES:
        got = scaling.get("rope_type") if isinstance(scaling, dict) else type(scaling).__name__
        raise ValueError(f"{name} must be None or a dict with 'rope_type' one of "
                         f"{', '.join(map(repr, ROPE_SCHEDULES))}, got {got!r}")
    signature = inspect.signature(ROPE_SCHEDULES[scaling["rope_type"]])
    known = list(signature.parameters)[3:]
    needed = [k for k in known if signature.parameters[k].default is inspect.Parameter.empty]
    unknown = [k for k in scaling if k != "rope_type" and k not in known]
    missing = [k for k in needed if k not in scaling]
    if unknown or missing:
        raise ValueError(f"{name} of rope_type {scaling['rope_type']!r} takes {known}; "
                         f"unknown: {unknown}, missing: {missing}")
    # The values: each schedule divides by factor and by its context length, and llama3 by
    # high_freq_factor - low_freq_factor; refused by name where that is 0 or has no sign.
    for key in ("factor", "max_position_embeddings", "original_max_position_embeddings",
                "beta_fast", "beta_slow"):  # YaRN takes the log of original / beta
        if key in scaling:
            checks.check_positive_real(f"{name}[{key!r}]", scaling[key])
    for key in ("short_factor", "long_factor"):  # longrope divides each frequency by one
        factors = scaling.get(key, [])
        if isinstance(factors, (str, bytes)) or np.ndim(factors) != 1:
            raise TypeError(f"{name}[{key!r}] must be a list of positive floats (one per "
                            f"rotated feature pair), got {factors!r}")
        for value in factors:
            checks.check_positive_real(f"{name}[{key!r}]", value)
    for key, zero in (("attention_factor", False), ("mscale", True), ("mscale_all_dim", True)):
        if scaling.get(key) is not None:  # None: the default; m(s) = 0.1 s ln(factor) + 1 >= 1
            checks.check_positive_real(f"{name}[{key!r}]", scaling[key], allow_zero=zero)
    if not isinstance(scaling.get("truncate", True), (bool, np.bool_)):
        raise TypeError(f"{name}['truncate'] must be a bool, got {scaling['truncate']!r}")
    if scaling["rope_type"] == "llama3" and not (
            checks.check_positive_real(f"{name}['low_freq_factor']", scaling["low_freq_factor"],
                                        allow_zero=True)
            < checks.check_positive_real(f"{name}['high_freq_factor']",
                                         scaling["high_freq_factor"])):
        raise ValueError(f"{name}['high_freq_factor'] must be greater than low_freq_factor "
                         f"(the ramp between them divides by their difference), got "
                         f"{scaling['high_freq_factor']!r} and {scaling['low_freq_factor']!r}")
