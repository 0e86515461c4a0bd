"""A LoRA adapter checked against a language model from the files' headers, before either is
loaded: adapter_config.json and the names and shapes in adapter_model.safetensors' header
(minattn.lora_files.check_adapter_files) against the shapes of the weights they adapt, as the model
file's header states them (a GGUF's tensor records, a folder's safetensors headers). Both
load_language_model(adapter=...) and the commands' --adapter (minattn/cli/model_file.py) check
an adapter here, so a misfit is refused in milliseconds rather than after the model's load.
"""
import json
import re
import struct
from pathlib import Path

# the weight each LoRA target adapts, as a GGUF file (llama.cpp's names) and a folder
# (transformers' names) call it
_GGUF_WEIGHTS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
                 "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def check_adapter(path, adapter, n_layers=None):
    """The adapter folder against the model at path (a .gguf file or a save_pretrained folder),
    from the files' headers: its config, and each tensor's name and shape against the weight it
    adapts; n_layers: the model's layer count where known (None: the layers the model file's
    tensors name). Raises FileNotFoundError or ValueError naming the file and the tensor as the
    file names it."""
    from ..lora_files import check_adapter_files

    shapes = adapted_weights(path)
    n_layers = n_layers or (1 + max(i for i, _ in shapes) if shapes else None)
    check_adapter_files(adapter, n_layers, lambda i, target: shapes.get((i, target)))


def adapted_weights(path):
    """A .gguf file or a save_pretrained folder -> {(layer, LoRA target): (d_in, d_out)} of the
    weights its header names (a GGUF's tensor records, a folder's safetensors headers); {} where
    they cannot be read so (the load then checks against the weights themselves)."""
    path = Path(path)
    try:
        if path.is_dir():
            from ..engine.lora_checks import WEIGHTS
            from ..lora_files import safetensors_shapes

            index = path / "model.safetensors.index.json"
            files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"]
                               .values())) if index.is_file() else ["model.safetensors"]
            modules = {w.module: t for t, w in WEIGHTS.items()}
            found = {}
            for file in files:
                for name, shape in safetensors_shapes(path / file).items():
                    m = re.search(r"layers\.(\d+)\.(\w+\.\w+)\.weight$", name)
                    if m and m.group(2) in modules and len(shape) == 2:
                        found[int(m.group(1)), modules[m.group(2)]] = shape[::-1]
            return found
        from .gguf_header import gguf_tensor_shapes

        names = {name: t for t, name in _GGUF_WEIGHTS.items()}
        found = {}
        for name, dims in gguf_tensor_shapes(path).items():
            m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
            if m and m.group(2) in names and len(dims) == 2:
                found[int(m.group(1)), names[m.group(2)]] = tuple(dims)
        return found
    except (OSError, ValueError, KeyError, TypeError, struct.error, ImportError):
        return {}
