"""LoRA: low-rank adapters on a model's projections (Hu et al. 2021, "LoRA: Low-Rank Adaptation of
Large Language Models"), computed as PEFT computes them.

A projection y = x W + b ([..., d_in] -> [..., d_out]) keeps its weight frozen and gets a
trainable low-rank path beside it:

    y = x W + b + (alpha / r) (dropout(x) A) B          A [d_in, r], B [r, d_out], r << d_in

A starts as PEFT draws it (kaiming_uniform_(a=sqrt(5)) on its [r, d_in] lora_A: U(+-1/sqrt(d_in)))
and B at zero, so the adapted model starts as the pretrained one exactly. The adapter is its
alpha and a nested dict of arrays, one dict per layer, keyed by TARGETS (PEFT's q_proj ...
down_proj):

    lora = {"alpha": 16.0, "layers": [{"q": {"A": [D, r], "B": [r, H d_k]}, "v": {...}}, ...]}

causal_lm(params, tokens, lora=lora, lora_dropout=0.0, rng=None, **config) is the variant the
keyword lora selects (engine/variants.py; help(causal_lm) leaves it out, so the course's
signatures stay its exercises'). It places each layer's adapters in its sublayers' params (key
"lora", beside the weights, which are not copied): B scaled by alpha / r, and where
lora_dropout > 0 each projection's dropout drawn from rng before the run, as an array. The one
seam every projection of attention and of the gated feed-forwards goes through,
linear.project, then adds the low-rank path (project_with_lora). It is computed factored,
(x A) B, never as x (W + A B): W is neither copied nor differentiated, and autograd.grad with
respect to lora["layers"] records only the small products (docs/benchmarks.md, "LoRA factored
against merged"). merge folds the adapter into the weights for inference; lora_files.py reads
and writes PEFT's adapter_model.safetensors and adapter_config.json (save_adapter,
load_adapter).
"""
import math

import numpy

from .engine import checks
from .engine.lora_checks import TARGETS, WEIGHTS, check_adapter, check_alpha, check_layers, \
    check_lora_call, check_rank, check_targets, model_weight
from .engine.variants import implements
from .language_model import causal_lm
from .linear import linear, project
from .lora_files import check_adapter_files, load_adapter, save_adapter

__all__ = ["TARGETS", "init_lora", "merge", "unmerge", "save_adapter", "load_adapter",
           "check_adapter_files"]

ADAPTER = "lora"  # a sublayer's params key holding its adapters, read by project_with_lora


def init_lora(rng, params, *, targets=("q", "v"), rank=8, alpha=16.0, dtype=None):
    """-> lora {"alpha": alpha, "layers": [{target: {"A": [d_in, r], "B": [r, d_out]}}, one per
    layer]} for the model params: A drawn from the Generator rng as PEFT draws it,
    U(+-1/sqrt(d_in)) (layer by layer, target by target), B zero. rank r in [1, min(d_in,
    d_out)]; alpha > 0 scales the path by alpha / r; dtype: the weights' (None: each weight's
    own). targets: some of TARGETS."""
    weights = _weights(params, check_targets(targets))  # [{target: W [d_in, d_out]}] per layer
    alpha = check_alpha(alpha)
    checked = checks.check_init(rng, numpy.float64 if dtype is None else dtype)
    dtype = None if dtype is None else checked
    return {"alpha": alpha,
            "layers": [{t: _init_pair(rng, w, check_rank(rank, *w.shape, f"{t}'s projection"),
                                      w.dtype if dtype is None else dtype)
                        for t, w in layer.items()} for layer in weights]}


def _weights(params, targets):
    return [{t: model_weight(params, i, t) for t in targets} for i in range(check_layers(params))]


def _init_pair(rng, w, rank, dtype):
    bound = 1.0 / math.sqrt(w.shape[0])  # kaiming_uniform_(a=sqrt(5)) with fan_in = d_in
    return {"A": rng.uniform(-bound, bound, size=(w.shape[0], rank)).astype(dtype),
            "B": numpy.zeros((rank, w.shape[1]), dtype=dtype)}


def _lora_call(params, tokens, attention_mask=None, **config):
    return any(key in config for key in ("lora", "lora_dropout", "lora_alpha"))


@implements(causal_lm, when=_lora_call, priority=10)
def causal_lm_with_lora(params, tokens, attention_mask=None, *, lora=None, lora_dropout=0.0,
                        rng=None, **config):
    """causal_lm with every projection lora adapts computed as x W + b + (alpha / r)
    (dropout(x) A) B, the dropout (rate lora_dropout) drawn from the Generator rng. lora=None:
    the model as it is. config: as causal_lm's."""
    # int [B, L] -> [B, L, V] (with a cache: and the new cache)
    alpha, layers, rate = check_lora_call(params, lora, lora_dropout, rng, config)
    if layers is None:
        return causal_lm(params, tokens, attention_mask, **config)
    tokens_shape = numpy.shape(tokens)
    layers = [_with_adapters(layer, _placed(adapters, alpha, rate, rng, tokens_shape))
              for layer, adapters in zip(params["layers"], layers)]
    return causal_lm({**params, "layers": layers}, tokens, attention_mask, **config)


def _placed(adapters, alpha, rate, rng, tokens_shape):
    # {target: {"A", "B"}} -> {target: {"A", "B" times alpha / r, ("keep": [B, L, d_in])}}: each
    # projection's dropout (a mask of its own, scaled by 1 / (1 - rate)), drawn in the order the
    # projections run (TARGETS' order)
    placed = {}
    for target in (t for t in TARGETS if t in adapters):
        a, b = adapters[target]["A"], adapters[target]["B"]
        placed[target] = {"A": a, "B": b * (alpha / a.shape[1])}
        if rate > 0:
            kept = rng.random((*tokens_shape, a.shape[0])) >= rate  # [B, L, d_in]
            placed[target]["keep"] = (kept / (1.0 - rate)).astype(a.dtype)
    return placed


def _with_adapters(layer, adapters):
    # The layer with each sublayer's adapters in its params (key ADAPTER): new dicts, the
    # same weights.
    layer = dict(layer)
    for sublayer in {WEIGHTS[t].sublayer for t in adapters}:
        mine = {t: pair for t, pair in adapters.items() if WEIGHTS[t].sublayer == sublayer}
        layer[sublayer] = {**layer[sublayer], ADAPTER: mine}
    return layer


def _adapted(params, *args, **kwargs):
    return isinstance(params, checks.DICT_TYPES) and ADAPTER in params


@implements(project, when=_adapted)
def project_with_lora(params, x, names):
    """project with each projection that params["lora"] adapts given its low-rank path:
    x W + b + (dropout(x) A) B, B already scaled by alpha / r (causal_lm_with_lora)."""
    # [..., d_in] -> ([..., d_out], ...)
    adapters = params[ADAPTER]
    ys = project({k: v for k, v in params.items() if k != ADAPTER}, x, names)  # x W + b
    return tuple(y + _low_rank(x, adapters[p]) if p in adapters else y
                 for p, y in zip(names, ys))


def _low_rank(x, adapter):
    # [..., d_in] -> [..., d_out]: (dropout(x) A) B, factored ([..., r] between)
    x = x * adapter["keep"] if "keep" in adapter else x
    return linear(linear(x, adapter["A"]), adapter["B"])


def merge(params, lora):
    """-> params with each weight lora adapts replaced by W + (alpha / r) A B: the adapted model
    as a plain one, as fast as the base model (PEFT's merge_and_unload). New dicts and arrays
    where changed; params and lora are left as they are."""
    return _merged(params, lora, 1.0)


def unmerge(params, lora):
    """merge undone: each weight lora adapts replaced by W - (alpha / r) A B."""
    return _merged(params, lora, -1.0)


def _merged(params, lora, sign):
    alpha, layers = check_adapter(params, lora)
    merged = []
    for layer, adapters in zip(params["layers"], layers):
        layer = dict(layer)
        for target, pair in adapters.items():
            sublayer, key, _ = WEIGHTS[target]
            update = pair["A"] @ pair["B"] * (sign * alpha / pair["A"].shape[1])  # [d_in, d_out]
            layer[sublayer] = {**layer[sublayer], key: layer[sublayer][key] + update}
        merged.append(layer)
    return {**params, "layers": merged}
