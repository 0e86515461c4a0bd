"""PEFT's adapter files, both ways: adapter_config.json and adapter_model.safetensors, as
peft.PeftModel.save_pretrained writes and from_pretrained reads them for a LoRA of a
LlamaForCausalLM (and of every model of its layout: Qwen2, Qwen3, Gemma 2, ...).

    save_adapter(directory, lora)             # lora {"alpha", "layers"}, as init_lora returns it
    lora = load_adapter(directory, params, config)
    check_adapter_files(directory, n_layers, weight_shape)   # the same checks, before a load

PEFT's module of each target (self_attn.q_proj, mlp.down_proj, ...) is named in
engine/lora_checks.py's WEIGHTS; its tensors are lora_A.weight [r, d_in] and lora_B.weight
[d_out, r], torch's Linear layout, the transposes of minattn's A and B.
"""
import json
import re
from pathlib import Path

import numpy

from .engine import checks
from .engine.files import write_replacing
from .engine.lora_checks import WEIGHTS, check_alpha, check_layers, check_lora_call, \
    check_lora_dropout, check_targets, model_weight

__all__ = ["save_adapter", "load_adapter", "check_adapter_files", "safetensors_shapes"]

TENSOR = "base_model.model.model.layers.{i}.{module}.lora_{which}.weight"  # [r, d_in], [d_out, r]
CONFIG_FILE, WEIGHTS_FILE = "adapter_config.json", "adapter_model.safetensors"


def save_adapter(directory, lora, *, lora_dropout=0.0, base_model_name_or_path=None):
    """Write lora ({"alpha", "layers"}) as PEFT writes an adapter of a LlamaForCausalLM (and of
    every model of its layout: Qwen2, Qwen3, Gemma 2, ...): adapter_model.safetensors
    (lora_A.weight [r, d_in] and lora_B.weight [d_out, r], torch's Linear layout) and
    adapter_config.json (r, lora_alpha, lora_dropout, target_modules), for
    peft.PeftModel.from_pretrained. Each file is written under another name, then renamed, with
    the mode the umask gives (engine/files.py)."""
    alpha, layers, rank, targets = _check_saved(lora, lora_dropout)
    tensors = {TENSOR.format(i=i, module=WEIGHTS[t].module, which=which):
               numpy.ascontiguousarray(numpy.asarray(pair[which]).T)
               for i, layer in enumerate(layers) for t, pair in layer.items() for which in "AB"}
    config = _peft_config(rank, alpha, lora_dropout, targets, base_model_name_or_path)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_replacing(directory / WEIGHTS_FILE, lambda f: _save_tensors(tensors, f))
    write_replacing(directory / CONFIG_FILE,
                    lambda f: Path(f).write_text(json.dumps(config, indent=2)))


def _peft_config(rank, alpha, rate, targets, base_model_name_or_path):
    # adapter_config.json as PEFT writes it for a plain LoRA
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": alpha,
            "lora_dropout": float(rate), "bias": "none", "fan_in_fan_out": False,
            "target_modules": sorted(WEIGHTS[t].module.split(".")[1] for t in targets),
            "base_model_name_or_path": base_model_name_or_path, "inference_mode": True,
            "init_lora_weights": True, "use_rslora": False, "use_dora": False,
            "modules_to_save": None, "layers_to_transform": None, "rank_pattern": {},
            "alpha_pattern": {}}


def _check_saved(lora, rate):
    # -> its alpha, its layers, their one rank, their one set of targets (PEFT's config has one
    # of each)
    if not isinstance(lora, checks.DICT_TYPES) or set(lora) != {"alpha", "layers"} or \
            not isinstance(lora.get("layers"), checks.LIST_TYPES) or not lora["layers"]:
        raise ValueError("lora must be a dict {'alpha': a number, 'layers': [one dict per "
                         "layer]}, as init_lora returns it")
    alpha = check_alpha(lora["alpha"], "lora['alpha']")
    check_lora_dropout(rate)
    layers = list(lora["layers"])
    targets = {tuple(layer) for layer in layers}
    ranks = {numpy.shape(pair.get("A"))[-1] for layer in layers for pair in layer.values()}
    if len(targets) != 1 or len(ranks) != 1 or not next(iter(targets)):
        raise ValueError(f"PEFT's adapter_config.json holds one r and one target_modules for "
                         f"every layer: lora has targets {sorted(targets)} and ranks "
                         f"{sorted(ranks)} over its layers")
    return alpha, layers, int(next(iter(ranks))), check_targets(list(next(iter(targets))))


def _save_tensors(tensors, file):
    from safetensors.numpy import save_file

    save_file(tensors, file, metadata={"format": "pt"})  # as PEFT (torch) writes it


def load_adapter(directory, params, config=None, *, base_model=None):
    """PEFT's adapter in directory (adapter_config.json, adapter_model.safetensors; a LoRA of a
    Llama-layout model) -> lora {"alpha": its lora_alpha, "layers"} for the model params (its
    config, the keywords of causal_lm, where given: refused if its attention is not one lora
    adapts). Refuses by name
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
    lora = {"alpha": settings["lora_alpha"], "layers": [{} for _ in range(n_layers)]}
    for name, tensor in tensors.items():
        i, target, which = _tensor_place(name, n_layers, directory)
        dtype = model_weight(params, i, target).dtype
        lora["layers"][i].setdefault(target, {})[which] = numpy.asarray(tensor.T, dtype=dtype)
    check_lora_call(params, lora, 0.0, None, dict(config or {}), f"{directory}: lora")
    return lora


def check_adapter_files(directory, n_layers, weight_shape):
    """The checks of load_adapter, from the files alone: adapter_config.json and the header of
    adapter_model.safetensors (its tensors' names and shapes; no weight is read), against a
    model of n_layers layers (None: not known) whose weight adapted by target in layer i is
    weight_shape(i, target) = (d_in, d_out), or None where that is not known before the load. Raises
    FileNotFoundError or ValueError naming the file and the tensor as the file names it; returns
    the adapter's settings."""
    directory = Path(directory)
    settings = _read_config(directory, None)
    _check_tensors(directory, settings, safetensors_shapes(directory / WEIGHTS_FILE), n_layers,
                   weight_shape)
    return settings


def safetensors_shapes(file):
    """A safetensors file -> {tensor name: shape}, from its header alone (8 bytes, its length,
    little-endian, then JSON {name: {"shape", ...}}); ValueError naming the file where it is
    not one."""
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
                             f"{WEIGHTS[target].module} is [{d_out or '?'} x {d_in or '?'}] as "
                             "torch stores it): an adapter made for another model")
    for i, layer in enumerate(found):
        incomplete = [t for t, which in layer.items() if which != {"A", "B"}]
        if set(layer) != targets or incomplete:
            raise ValueError(f"{file}: layer {i} has LoRA weights for "
                             f"{sorted(WEIGHTS[t].module for t in layer)} "
                             f"({'without A or B: ' + str(incomplete) if incomplete else 'whole'}),"
                             f" target_modules of {CONFIG_FILE} says "
                             f"{sorted(WEIGHTS[t].module for t in targets)}")


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
    check_alpha(settings.get("lora_alpha"), "lora_alpha")
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
    modules = "|".join(re.escape(w.module) for w in WEIGHTS.values())
    found = re.fullmatch(r"base_model\.model\.model\.layers\.(\d+)\.(" + modules +
                         r")\.lora_([AB])\.weight", name)
    if found is None:
        raise ValueError(f"{directory / WEIGHTS_FILE}: tensor {name!r} is not a LoRA weight of a "
                         f"Llama-layout layer's {', '.join(w.module for w in WEIGHTS.values())}")
    i = int(found.group(1))
    if n_layers is not None and i >= n_layers:
        raise ValueError(f"{directory / WEIGHTS_FILE}: tensor {name!r} adapts layer {i}, the "
                         f"model has {n_layers} layers: an adapter made for another model")
    target = next(t for t, w in WEIGHTS.items() if w.module == found.group(2))
    return i, target, found.group(3)


def _config_targets(settings, directory):
    # adapter_config.json's target_modules and r -> minattn's targets, refused by name
    modules, rank = settings.get("target_modules"), settings.get("r")
    names = {w.module.split(".")[1]: t for t, w in WEIGHTS.items()}
    if isinstance(modules, str) or not isinstance(modules, list) or \
            any(m not in names for m in modules):
        raise ValueError(f"{directory / CONFIG_FILE}: target_modules={modules!r}; minattn reads "
                         f"a list of {', '.join(names)}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"{directory / CONFIG_FILE}: r={rank!r}; LoRA's rank is a positive int")
    return {names[m] for m in modules}
