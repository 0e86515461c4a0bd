"""The checks of minattn.lora: an adapter against the model it adapts, and the LoRA settings.

An adapter (lora) is {"alpha": a positive number, "layers": [one dict per layer: {target:
{"A": [d_in, r], "B": [r, d_out]}}]}, a target one of TARGETS, each the projection
params["layers"][i][sublayer][weight] of the model (WEIGHTS, which also names PEFT's module of
it). A check refuses by name what would compute another model: a target the model lacks, another
layer count, shapes that do not match, another dtype.
"""
import numbers
from collections import namedtuple

import numpy

from . import checks

Target = namedtuple("Target", "sublayer weight module")

# target -> the layer's sublayer, its weight [d_in, d_out], and PEFT's module of a Llama-style
# layer (the name its adapter files give it): the one table of the targets.
WEIGHTS = {"q": Target("self_attention", "w_q", "self_attn.q_proj"),
           "k": Target("self_attention", "w_k", "self_attn.k_proj"),
           "v": Target("self_attention", "w_v", "self_attn.v_proj"),
           "o": Target("self_attention", "w_o", "self_attn.o_proj"),
           "gate": Target("feed_forward", "w_gate", "mlp.gate_proj"),
           "up": Target("feed_forward", "w_up", "mlp.up_proj"),
           "down": Target("feed_forward", "w_down", "mlp.down_proj")}
TARGETS = tuple(WEIGHTS)


def check_targets(targets):
    """targets: a non-empty sequence of TARGETS, no repeats -> a tuple."""
    if isinstance(targets, str) or not isinstance(targets, (list, tuple)) or not targets:
        raise TypeError(f"targets must be a non-empty list or tuple of {TARGETS}, got "
                        f"{targets!r}")
    unknown = [t for t in targets if t not in WEIGHTS]
    if unknown:
        raise ValueError(f"unknown LoRA target(s) {unknown}: the targets are "
                         f"{', '.join(map(repr, TARGETS))}")
    if len(set(targets)) != len(targets):
        raise ValueError(f"targets has a repeated target: {list(targets)}")
    return tuple(targets)


def model_weight(params, i, target, where="params"):
    """The model's weight [d_in, d_out] that target adapts in layer i, refused by name where the
    layer has none (another attention or feed-forward: MLA, a GPT-2 MLP, ...)."""
    sublayer, key, _ = WEIGHTS[target]
    layer = params["layers"][i]
    block = layer.get(sublayer) if isinstance(layer, checks.DICT_TYPES) else None
    if not isinstance(block, checks.DICT_TYPES) or key not in block:
        raise ValueError(f"LoRA target {target!r} adapts {where}['layers'][{i}][{sublayer!r}]"
                         f"[{key!r}], which this model does not have (the targets need a "
                         "Llama-style layer: w_q, w_k, w_v, w_o and a gated feed-forward w_gate, "
                         "w_up, w_down)")
    return checks.check_shape(f"{where}['layers'][{i}][{sublayer!r}][{key!r}]", block[key],
                              ("d_in", "d_out"))


def check_layers(params):
    """params: a model's, {"layers": [...], ...} -> its number of layers."""
    if not isinstance(params, checks.DICT_TYPES) or \
            not isinstance(params.get("layers"), checks.LIST_TYPES):
        raise ValueError("params must be a model's params, a dict with key 'layers' holding "
                         "one dict per layer")
    return len(params["layers"])


def check_rank(rank, d_in, d_out, where):
    """rank: an int in [1, min(d_in, d_out)] (a wider one adds nothing a full matrix cannot)."""
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be a positive int, got {rank!r}")
    if not 0 < rank <= min(d_in, d_out):
        raise ValueError(f"rank must be in [1, min(d_in, d_out)] = [1, {min(d_in, d_out)}] for "
                         f"{where} [{d_in}, {d_out}], got rank={rank!r}")
    return int(rank)


def check_adapter(params, lora, name="lora"):
    """lora against the model params it adapts -> (its alpha, a float; its layers, a list of
    dicts {target: {"A", "B"}}), every A [d_in, r] and B [r, d_out] of its projection's shape and
    dtype."""
    n_layers = check_layers(params)
    if not isinstance(lora, checks.DICT_TYPES) or \
            not isinstance(lora.get("layers"), checks.LIST_TYPES) or \
            set(lora) != {"alpha", "layers"}:
        raise ValueError(f"{name} must be a dict {{'alpha': a number, 'layers': [one dict per "
                         f"layer]}} (as init_lora or load_adapter return), got {_describe(lora)}")
    alpha = check_alpha(lora["alpha"], f"{name}['alpha']")
    if len(lora["layers"]) != n_layers:
        raise ValueError(f"{name} has {len(lora['layers'])} layers, the model {n_layers}: an "
                         "adapter made for another model")
    for i, layer in enumerate(lora["layers"]):
        if not isinstance(layer, checks.DICT_TYPES):
            raise TypeError(f"{name}['layers'][{i}] must be a dict {{target: {{'A', 'B'}}}}, got "
                            f"{type(layer).__name__}")
        check_targets(list(layer) or ["q"])
        for target, pair in layer.items():
            _check_pair(params, i, target, pair, f"{name}['layers'][{i}][{target!r}]")
    return alpha, list(lora["layers"])


def _check_pair(params, i, target, pair, where):
    weight = model_weight(params, i, target)
    d_in, d_out = weight.shape
    if not isinstance(pair, checks.DICT_TYPES) or set(pair) != {"A", "B"}:
        raise ValueError(f"{where} must be a dict {{'A': [d_in, r], 'B': [r, d_out]}}, got "
                         f"{_describe(pair)}")
    a = checks.check_shape(f"{where}['A']", pair["A"], (d_in, "r"))
    check_rank(a.shape[1], d_in, d_out, f"{where}'s projection")
    b = checks.check_shape(f"{where}['B']", pair["B"], (a.shape[1], d_out))
    for key, x in (("A", a), ("B", b)):
        if numpy.dtype(x.dtype) != numpy.dtype(weight.dtype):
            raise TypeError(f"{where}[{key!r}] is {x.dtype}, the model's weight {weight.dtype}: "
                            "make the adapter in the model's dtype (init_lora(dtype=None))")


def check_alpha(alpha, name="alpha"):
    """alpha: a positive, finite real number -> a float."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {alpha!r}")
    return float(checks.check_positive_real(name, alpha))


def check_lora_dropout(lora_dropout):
    """lora_dropout: a float in [0, 1) -> a float."""
    if isinstance(lora_dropout, bool) or not isinstance(lora_dropout, numbers.Real) or \
            not 0 <= lora_dropout < 1:
        raise ValueError(f"lora_dropout must be a float in [0, 1), got {lora_dropout!r}")
    return float(lora_dropout)


def check_lora_call(params, lora, lora_dropout, rng, config, name="lora"):
    """causal_lm's lora=, lora_dropout= and rng= (an rng where lora_dropout > 0), against the
    model and its config (config: causal_lm's other keywords) -> (alpha, layers, lora_dropout);
    layers None where lora is None (the model as it is)."""
    if "lora_alpha" in config:
        raise TypeError("lora_alpha is not a keyword of causal_lm: the adapter carries its alpha, "
                        "lora['alpha'] (init_lora(alpha=...), load_adapter)")
    rate = check_lora_dropout(lora_dropout)
    if rate > 0 and not isinstance(rng, numpy.random.Generator):
        raise TypeError(f"lora_dropout={lora_dropout!r} needs rng, a np.random.Generator (the "
                        f"dropout masks are drawn from it), got {type(rng).__name__}")
    if lora is None:
        return None, None, rate
    if config.get("attention") is not None:
        raise ValueError(f"lora adapts self_attention's projections (and its variants'); the "
                         f"attention {config['attention']!r} computes its own: leave lora out")
    alpha, layers = check_adapter(params, lora, name)
    if config.get("head_mask") is not None and any("o" in layer for layer in layers):
        raise ValueError("head_mask scales w_o's rows (minattn.head_mask), which the LoRA path of "
                         "target 'o' beside w_o does not see: leave out head_mask or target 'o'")
    return alpha, layers, rate


def _describe(x):
    return f"a dict with keys {list(x)}" if isinstance(x, checks.DICT_TYPES) else \
        type(x).__name__
