"""LoRA: low-rank adapters on a model's projections (Hu et al. 2021, "LoRA: Low-Rank Adaptation of
Large Language Models"), computed as PEFT computes them.

A projection y = x W + b ([..., d_in] -> [..., d_out]) keeps its weight frozen and gets a
trainable low-rank path beside it:

    y = x W + b + (alpha / r) (dropout(x) A) B          A [d_in, r], B [r, d_out], r << d_in

A starts as PEFT draws it (kaiming_uniform_(a=sqrt(5)) on its [r, d_in] lora_A: U(+-1/sqrt(d_in)))
and B at zero, so the adapted model starts as the pretrained one exactly. The adapter is a nested
dict of arrays, one dict per layer, keyed by TARGETS (PEFT's q_proj ... down_proj):

    lora = {"layers": [{"q": {"A": [D, r], "B": [r, H d_k]}, "v": {...}, ...}, ...]}

causal_lm(params, tokens, lora=lora, lora_alpha=16, lora_dropout=0.0, rng=None, **config) is
the variant the keyword lora selects (engine/variants.py; help(causal_lm) leaves it out, so the
course's signatures stay its exercises'). It gives each layer's sublayers their adapters in their
params (key "lora", beside the weights, which are not copied), and the variants below, selected
by that key, compute the projections: attention's (self_attention's and every attention built on
it) and the gated feed-forwards'. The low-rank path is computed factored, (x A) B, never as
x (W + A B): W is neither copied nor differentiated, and autograd.grad with respect to lora
alone records only the small products. merge folds the adapter into the weights for inference;
save_adapter and load_adapter read and write PEFT's adapter_model.safetensors and
adapter_config.json.

What factored saves (benchmarks/bench_lora.py: SmolLM2-135M-Instruct in float32, tokens [1, 64],
rank 8, 2 BLAS threads, 3 interleaved rounds; 2026-11-28 09:46-09:57 UTC on a 2-core machine
busy with other sessions, load average 9, so the absolute times are several times a quiet
machine's): value_and_grad with respect to lora on all seven targets took 26.8 s factored
against 41.8 s through merge (ratio 0.68, IQR 0.56-0.75), tracemalloc's peak 251 MiB against
584 MiB; on q and v only, 18.5 s against 17.2 s (ratio 0.93, IQR 0.86-1.26: no difference the
noise lets through) and 178 MiB against 218 MiB. Unused, the dispatch costs a decode step
nothing the same machine could measure (benchmarks/ab_lora_dispatch.py, the functions as they
were before patched back in, interleaved, 10:02-10:04 UTC, load 8.5-10): with SmolLM2's 30
layers at tiny widths (its Python alone) a ratio of 1.014 (IQR 0.986-1.022), SmolLM2's own
step 1.008 (IQR 0.969-1.024).
"""
import json
import math
from pathlib import Path

import numpy

from .dropout import dropout
from .engine import checks
from .engine.lora_checks import TARGETS, WEIGHTS, check_adapter, check_alpha, \
    check_layers, check_lora_settings, check_rank, check_targets, model_weight
from .engine.files import write_replacing
from .engine.param_checks import check_gated_feed_forward_params
from .engine.variants import implements
from .language_model import causal_lm
from .linear import linear
from .multi_head import _projections
from .position_wise import gated_feed_forward, geglu, swiglu
from .transformer_decoder import geglu_tanh

__all__ = ["TARGETS", "init_lora", "merge", "unmerge", "save_adapter", "load_adapter"]

ADAPTER = "lora"  # a sublayer's params key holding its adapters, read by the variants below


def init_lora(rng, params, *, targets=("q", "v"), rank=8, dtype=None):
    """-> lora {"layers": [{target: {"A": [d_in, r], "B": [r, d_out]}}, one per layer]} for the
    model params: A drawn from the Generator rng as PEFT draws it, U(+-1/sqrt(d_in)) (layer by
    layer, target by target), B zero. rank r in [1, min(d_in, d_out)]; dtype: the weights' (None:
    each weight's own). targets: some of TARGETS."""
    weights = _weights(params, check_targets(targets))  # [{target: W [d_in, d_out]}] per layer
    checked = checks.check_init(rng, numpy.float64 if dtype is None else dtype)
    dtype = None if dtype is None else checked
    return {"layers": [{t: _init_pair(rng, w, check_rank(rank, *w.shape, f"{t}'s projection"),
                                      w.dtype if dtype is None else dtype)
                        for t, w in layer.items()} for layer in weights]}


def _weights(params, targets):
    return [{t: model_weight(params, i, t) for t in targets} for i in range(check_layers(params))]


def _init_pair(rng, w, rank, dtype):
    bound = 1.0 / math.sqrt(w.shape[0])  # kaiming_uniform_(a=sqrt(5)) with fan_in = d_in
    return {"A": rng.uniform(-bound, bound, size=(w.shape[0], rank)).astype(dtype),
            "B": numpy.zeros((rank, w.shape[1]), dtype=dtype)}


def _lora_call(params, tokens, attention_mask=None, **config):
    return any(key in config for key in ("lora", "lora_alpha", "lora_dropout"))


@implements(causal_lm, when=_lora_call)
def causal_lm_with_lora(params, tokens, attention_mask=None, *, lora=None, lora_alpha=16,
                        lora_dropout=0.0, rng=None, **config):
    """causal_lm with every projection lora adapts computed as x W + b + (lora_alpha / r)
    (dropout(x) A) B, the dropout (rate lora_dropout) drawn from the Generator rng. lora=None:
    the model as it is. config: as causal_lm's."""
    # int [B, L] -> [B, L, V] (with a cache: and the new cache)
    layers = _check_lora_call(params, lora, config)
    alpha, rate = check_lora_settings(lora_alpha, lora_dropout, rng)
    if layers is None:
        return causal_lm(params, tokens, attention_mask, **config)
    settings = {"alpha": alpha, "dropout": rate, "rng": rng}
    layers = [_with_adapters(layer, adapters, settings)
              for layer, adapters in zip(params["layers"], layers)]
    return causal_lm({**params, "layers": layers}, tokens, attention_mask, **config)


def _check_lora_call(params, lora, config, name="lora"):
    if lora is None:
        return None
    if config.get("attention") is not None:
        raise ValueError(f"lora adapts self_attention's projections (and its variants'); the "
                         f"attention {config['attention']!r} computes its own: leave lora out")
    layers = check_adapter(params, lora, name)
    if config.get("head_mask") is not None and any("o" in layer for layer in layers):
        raise ValueError("head_mask scales w_o's rows (minattn.head_mask), which the LoRA path of "
                         "target 'o' beside w_o does not see: leave out head_mask or target 'o'")
    return layers


def _with_adapters(layer, adapters, settings):
    # The layer with each sublayer's adapters in its params (key ADAPTER): new dicts, the
    # same weights.
    layer = dict(layer)
    for sublayer in {WEIGHTS[t][0] for t in adapters}:
        mine = {t: pair for t, pair in adapters.items() if WEIGHTS[t][0] == sublayer}
        layer[sublayer] = {**layer[sublayer], ADAPTER: {"weights": mine, **settings}}
    return layer


def _adapted(params, *args, **kwargs):
    return isinstance(params, checks.DICT_TYPES) and ADAPTER in params


@implements(_projections, when=_adapted)
def lora_projections(params, x, names):
    """The projections of x [..., d_in] (attention's "qkv", "o"; the feed-forward's "gate",
    "up", "down"), each that params["lora"] adapts with its low-rank path:
    x W + b + (alpha / r) (dropout(x) A) B -> ([..., d_out], ...)."""
    adapter = params[ADAPTER]
    ys = _projections({k: v for k, v in params.items() if k != ADAPTER}, x, names)  # x W + b
    return tuple(y + _low_rank(x, adapter, p) if p in adapter["weights"] else y
                 for p, y in zip(names, ys))


def _low_rank(x, adapter, p):
    # [..., d_in] -> [..., d_out]: (alpha / r) (dropout(x) A) B, factored ([..., r] between)
    a, b = adapter["weights"][p]["A"], adapter["weights"][p]["B"]
    x = dropout(x, adapter["dropout"], adapter["rng"])  # a mask of its own for each projection
    return linear(linear(x, a), b) * (adapter["alpha"] / a.shape[1])


@implements(gated_feed_forward, when=_adapted)
def lora_gated_feed_forward(params, x):
    """gated_feed_forward (SwiGLU) with the projections params["lora"] adapts."""
    return _gated(params, x, swiglu)


@implements(geglu_tanh, when=_adapted)
def lora_geglu_tanh(params, x):
    """geglu_tanh (Gemma's feed-forward) with the projections params["lora"] adapts."""
    return _gated(params, x, geglu)


def _gated(params, x, gating):
    # [..., D] -> [..., F] -> [..., D]: down(gating(gate(x), up(x))), through lora_projections
    # (gating: position_wise's swiglu or geglu, activation(gate) * up with its VJP by hand)
    x = checks.as_float_array("x", x)
    params = check_gated_feed_forward_params(params, x.shape[-1], dtype=x.dtype)
    gate, up = _projections(params, x, ("gate", "up"))  # [..., F] each
    return _projections(params, gating(gate, up), ("down",))[0]  # [..., D]


def merge(params, lora, *, alpha):
    """-> params with each weight lora adapts replaced by W + (alpha / r) A B: the adapted model
    as a plain one, as fast as the base model (PEFT's merge_and_unload). New dicts and arrays
    where changed; params and lora are left as they are."""
    return _merged(params, lora, alpha, 1.0)


def unmerge(params, lora, *, alpha):
    """merge undone: each weight lora adapts replaced by W - (alpha / r) A B."""
    return _merged(params, lora, alpha, -1.0)


def _merged(params, lora, alpha, sign):
    layers = check_adapter(params, lora)
    alpha = check_alpha(alpha, "alpha")
    merged = []
    for layer, adapters in zip(params["layers"], layers):
        layer = dict(layer)
        for target, pair in adapters.items():
            sublayer, key = WEIGHTS[target]
            update = pair["A"] @ pair["B"] * (sign * alpha / pair["A"].shape[1])  # [d_in, d_out]
            layer[sublayer] = {**layer[sublayer], key: layer[sublayer][key] + update}
        merged.append(layer)
    return {**params, "layers": merged}


# PEFT's files: a LlamaForCausalLM's module of each target, and the name of its tensors.
MODULES = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
           "o": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
           "down": "mlp.down_proj"}
TENSOR = "base_model.model.model.layers.{i}.{module}.lora_{which}.weight"  # [r, d_in], [d_out, r]
CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"


def save_adapter(directory, lora, *, alpha, lora_dropout=0.0, base_model_name_or_path=None):
    """Write lora as PEFT writes an adapter of a LlamaForCausalLM (and of every model of its
    layout: Qwen2, Qwen3, Gemma 2, ...): adapter_model.safetensors (lora_A.weight [r, d_in] and
    lora_B.weight [d_out, r], torch's Linear layout) and adapter_config.json (r, lora_alpha,
    lora_dropout, target_modules), for peft.PeftModel.from_pretrained. Each file is written
    under another name, then renamed, with the mode the umask gives (engine/files.py)."""
    layers, rank, targets = _check_saved(lora, alpha, lora_dropout)
    tensors = {TENSOR.format(i=i, module=MODULES[t], which=which): numpy.ascontiguousarray(
        numpy.asarray(pair[which]).T) for i, layer in enumerate(layers)
        for t, pair in layer.items() for which in ("A", "B")}
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": alpha,
              "lora_dropout": float(lora_dropout), "bias": "none", "fan_in_fan_out": False,
              "target_modules": sorted(MODULES[t].split(".")[1] for t in targets),
              "base_model_name_or_path": base_model_name_or_path, "inference_mode": True,
              "init_lora_weights": True, "use_rslora": False, "use_dora": False,
              "modules_to_save": None, "layers_to_transform": None, "rank_pattern": {},
              "alpha_pattern": {}}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_replacing(directory / WEIGHTS_FILE, lambda f: _save_tensors(tensors, f))
    write_replacing(directory / CONFIG_FILE, lambda f: Path(f).write_text(json.dumps(config, indent=2)))


def _check_saved(lora, alpha, rate):
    # -> the layers, their one rank, their one set of targets (PEFT's config has one of each)
    if not isinstance(lora, checks.DICT_TYPES) or \
            not isinstance(lora.get("layers"), checks.LIST_TYPES) or not lora["layers"]:
        raise ValueError("lora must be a dict {'layers': [one dict per layer]}, as init_lora "
                         "returns it")
    alpha = check_alpha(alpha, "alpha")
    check_lora_settings(alpha, rate, numpy.random.default_rng(0))
    layers = list(lora["layers"])
    targets = {tuple(layer) for layer in layers}
    ranks = {numpy.shape(pair.get("A"))[-1] for layer in layers for pair in layer.values()}
    if len(targets) != 1 or len(ranks) != 1 or not next(iter(targets)):
        raise ValueError(f"PEFT's adapter_config.json holds one r and one target_modules for "
                         f"every layer: lora has targets {sorted(targets)} and ranks "
                         f"{sorted(ranks)} over its layers")
    return layers, int(next(iter(ranks))), check_targets(list(next(iter(targets))))


def _save_tensors(tensors, file):
    from safetensors.numpy import save_file

    save_file(tensors, file, metadata={"format": "pt"})  # as PEFT (torch) writes it


def load_adapter(directory, params, config=None, *, base_model=None):
    """PEFT's adapter in directory (adapter_config.json, adapter_model.safetensors; a LoRA of a
    Llama-layout model) -> (lora, lora_alpha) for the model params (its config, the keywords of
    causal_lm, where given: refused if its attention is not one lora adapts). Refuses by name
    what PEFT's adapter would compute and minattn would not (DoRA, rsLoRA, biases, modules to
    save, per-layer ranks) and an adapter of another model: layer count, targets, shapes (each
    tensor named as the file names it), and its base_model_name_or_path where both it and
    base_model (a name) are given. check_adapter_files makes the same checks from the files'
    headers, before a model is loaded."""
    directory = Path(directory)
    settings = _read_config(directory, base_model)
    tensors = _read_tensors(directory / WEIGHTS_FILE)
    n_layers = check_layers(params)
    shapes = {name: tensor.shape for name, tensor in tensors.items()}
    _check_tensors(directory, settings, shapes, n_layers,
                   lambda i, target: model_weight(params, i, target).shape)
    lora = {"layers": [{} for _ in range(n_layers)]}
    for name, tensor in tensors.items():
        i, target, which = _tensor_place(name, n_layers, directory)
        dtype = model_weight(params, i, target).dtype
        lora["layers"][i].setdefault(target, {})[which] = numpy.asarray(tensor.T, dtype=dtype)
    _check_lora_call(params, lora, dict(config or {}), f"{directory}: lora")
    return lora, settings["lora_alpha"]


def check_adapter_files(directory, n_layers, weight_shape):
    """The checks of load_adapter, from the files alone: adapter_config.json and the header of
    adapter_model.safetensors (its tensors' names and shapes; no weight is read), against a
    model of n_layers layers (None: not known) whose weight adapted by target in layer i is
    weight_shape(i, target) = (d_in, d_out), or None where that is not known before the load. Raises
    FileNotFoundError or ValueError naming the file and the tensor as the file names it; returns
    the adapter's settings."""
    directory = Path(directory)
    settings = _read_config(directory, None)
    _check_tensors(directory, settings, _tensor_shapes(directory / WEIGHTS_FILE), n_layers,
                   weight_shape)
    return settings


def _tensor_shapes(file):
    # safetensors' header: 8 bytes (its length, little-endian), then JSON {name: {"shape", ...}}
    if not file.is_file():
        raise FileNotFoundError(f"{str(file)!r} does not exist (PEFT writes the adapter's "
                                f"weights there)")
    try:
        with open(file, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= file.stat().st_size - 8:
                raise ValueError(f"a header of {size} bytes in a file of {file.stat().st_size}")
            header = json.loads(f.read(size).decode("utf-8"))
        return {name: tuple(entry["shape"]) for name, entry in header.items()
                if name != "__metadata__"}
    except (ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"{file} cannot be read as safetensors: {error}") from None


def _check_tensors(directory, settings, shapes, n_layers, weight_shape):
    # every tensor a LoRA weight of a layer the model has, of rank r and the shape its
    # projection needs (lora_A [r, d_in], lora_B [d_out, r]); every layer adapting the config's
    # target_modules with both
    # (n_layers None: not known before the load; the layers the file names are checked)
    file = directory / WEIGHTS_FILE
    targets, rank = _config_targets(settings, directory), settings.get("r")
    places = [(name, shape, *_tensor_place(name, n_layers, directory))
              for name, shape in shapes.items()]
    found = [{} for _ in range(n_layers if n_layers is not None else
                               1 + max((i for _, _, i, _, _ in places), default=-1))]
    for name, shape, i, target, which in places:
        found[i].setdefault(target, set()).add(which)
        known = weight_shape(i, target)
        d_in, d_out = known if known is not None else (None, None)
        wanted = (rank, d_in) if which == "A" else (d_out, rank)
        if len(shape) != 2 or any(w is not None and s != w for s, w in zip(shape, wanted)):
            said = " x ".join("?" if w is None else str(w) for w in wanted)
            raise ValueError(f"{file}: tensor {name!r} has shape {list(shape)}, expected "
                             f"[{said}] (r={rank} of adapter_config.json; the model's "
                             f"{MODULES[target]} is [{d_out or '?'} x {d_in or '?'}] as torch "
                             "stores it): an adapter made for another model")
    for i, layer in enumerate(found):
        incomplete = [t for t, which in layer.items() if which != {"A", "B"}]
        if set(layer) != targets or incomplete:
            raise ValueError(f"{file}: layer {i} has LoRA weights for "
                             f"{sorted(MODULES[t] for t in layer)} "
                             f"({'without A or B: ' + str(incomplete) if incomplete else 'whole'}),"
                             f" target_modules of {CONFIG_FILE} says "
                             f"{sorted(MODULES[t] for t in targets)}")


def _read_config(directory, base_model):
    file = directory / CONFIG_FILE
    if not file.is_file():
        raise FileNotFoundError(f"{str(file)!r} does not exist (an adapter folder holds "
                                f"{CONFIG_FILE} and {WEIGHTS_FILE}, as PEFT's save_pretrained "
                                "writes them)")
    try:
        settings = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{file} is not JSON: {error}") from None
    refused = {"peft_type": "LORA", "use_dora": False, "use_rslora": False, "bias": "none",
               "fan_in_fan_out": False, "modules_to_save": None, "layers_to_transform": None,
               "layers_pattern": None, "layer_replication": None, "rank_pattern": {},
               "alpha_pattern": {}}
    for key, plain in refused.items():
        if settings.get(key, plain) not in (plain, None, [], {}) or \
                key == "peft_type" and settings.get(key) != plain:
            raise ValueError(f"{file}: {key}={settings.get(key)!r} is not supported (minattn "
                             f"reads a plain LoRA adapter: {key}={plain!r})")
    check_lora_settings(settings.get("lora_alpha"), 0.0, None)
    made_for = settings.get("base_model_name_or_path")
    if base_model is not None and made_for is not None and made_for != base_model:
        raise ValueError(f"{directory}: an adapter made for {made_for!r}, not {base_model!r} "
                         "(its base_model_name_or_path)")
    return settings


def _read_tensors(file):
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    if not file.is_file():
        raise FileNotFoundError(f"{str(file)!r} does not exist (PEFT writes the adapter's "
                                f"weights there)")
    try:
        return load_file(str(file))
    except SafetensorError as error:
        raise ValueError(f"{file} cannot be read as safetensors: {error}") from None


def _tensor_place(name, n_layers, directory):
    # PEFT's tensor name -> (layer, target, "A" or "B"), refused by name if it is none of them
    import re

    modules = "|".join(re.escape(m) for m in MODULES.values())
    found = re.fullmatch(r"base_model\.model\.model\.layers\.(\d+)\.(" + modules +
                         r")\.lora_([AB])\.weight", name)
    if found is None:
        raise ValueError(f"{directory / WEIGHTS_FILE}: tensor {name!r} is not a LoRA weight of a Llama-layout "
                         f"layer's {', '.join(MODULES.values())}")
    i = int(found.group(1))
    if n_layers is not None and i >= n_layers:
        raise ValueError(f"{directory / WEIGHTS_FILE}: tensor {name!r} adapts layer {i}, the model has "
                         f"{n_layers} layers: an adapter made for another model")
    target = next(t for t, module in MODULES.items() if module == found.group(2))
    return i, target, found.group(3)


def _config_targets(settings, directory):
    # adapter_config.json's target_modules and r -> minattn's targets, refused by name
    modules, rank = settings.get("target_modules"), settings.get("r")
    names = {module.split(".")[1]: t for t, module in MODULES.items()}
    if isinstance(modules, str) or not isinstance(modules, list) or \
            any(m not in names for m in modules):
        raise ValueError(f"{directory / CONFIG_FILE}: target_modules={modules!r}; minattn reads "
                         f"a list of {', '.join(names)}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"{directory / CONFIG_FILE}: r={rank!r}; LoRA's rank is a positive int")
    return {names[m] for m in modules}
