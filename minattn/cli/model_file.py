"""What a command checks its arguments against before it loads a language model: the model's
sizes, read from a GGUF file's header or a folder's config.json in milliseconds, where loading
SmolLM2 takes seconds. A refusal (`heads --k 1000`, `chat --max-new-tokens 100000000`) then
costs no load.

The GGUF header is read by minattn/models/gguf_header.py (the metadata, and every tensor's
extent against the file's size). A file that is not GGUF, whose header is cut or that ends
before its tensors do is refused here; anything else unexpected gives {}, and the load then
says in its own words what is wrong with the file.
"""
import json
import struct
from pathlib import Path

from ..models.gguf_header import NotGGUF, gguf_header


def model_limits(path):
    """A .gguf file or a save_pretrained folder -> what the arguments are checked against, as far
    as the file says it: {"n_layers", "n_heads", "context_length", "vocab_size" (ints),
    "chat_template" (bool)}, each key only when known; {} for a file that cannot be read so.
    A file that is not GGUF, whose header ends early or that ends before its tensors do (a cut
    download), or a folder without its config.json, weights or tokenizer.json, is refused at
    once (ValueError, FileNotFoundError) naming the file, as the loader would."""
    path = Path(path)
    if path.is_dir():
        from ..models.chat_model import folder_files

        folder_files(path)  # its config, weights and tokenizer, refused as the loader does
    try:
        return _folder_limits(path) if path.is_dir() else _gguf_limits(path)
    except NotGGUF:  # said as the loader says it
        raise
    except (OSError, ValueError, KeyError, IndexError, struct.error, ImportError):
        return {}


def _folder_limits(path):
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    limits = {"n_layers": config.get("num_hidden_layers"),
              "n_heads": config.get("num_attention_heads"),
              "context_length": config.get("max_position_embeddings", 2048),  # the loader's
              "vocab_size": config.get("vocab_size")}
    template = (path / "chat_template.jinja").is_file()
    if not template and (path / "tokenizer_config.json").is_file():
        tokenizer_config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        template = isinstance(tokenizer_config, dict) and \
            tokenizer_config.get("chat_template") is not None
    return {**_positive_ints(limits), "chat_template": template}


def _gguf_limits(path):
    fields = gguf_header(path)
    arch = fields["general.architecture"]
    limits = {"n_layers": fields.get(f"{arch}.block_count"),
              "n_heads": fields.get(f"{arch}.attention.head_count"),
              "context_length": fields.get(f"{arch}.context_length"),
              "vocab_size": fields.get(f"{arch}.vocab_size", fields.get("tokenizer.ggml.tokens"))}
    return {**_positive_ints(limits), "chat_template": "tokenizer.chat_template" in fields}


def _positive_ints(limits):
    return {k: v for k, v in limits.items()
            if isinstance(v, int) and not isinstance(v, bool) and v > 0}


# the weight each LoRA target adapts, as a GGUF file (llama.cpp's names) and a folder
# (transformers' names) call it
_GGUF_WEIGHTS = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
                 "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def check_adapter(path, adapter, limits):
    """--adapter DIR against the model at path, from the files' headers before anything loads:
    adapter_config.json, the adapter's tensor names and shapes (minattn.lora_files.check_adapter_files)
    against the shapes of the weights they adapt, read from the model file's header (a GGUF's
    tensor records, a folder's safetensors headers). Raises FileNotFoundError or ValueError
    naming the file and the tensor as the file names it."""
    from ..lora_files import check_adapter_files

    shapes = adapted_weights(path)
    n_layers = limits.get("n_layers") or (1 + max(i for i, _ in shapes) if shapes else None)
    check_adapter_files(adapter, n_layers, lambda i, target: shapes.get((i, target)))


def adapted_weights(path):
    """A .gguf file or a save_pretrained folder -> {(layer, LoRA target): (d_in, d_out)} of the
    weights its header names (a GGUF's tensor records, a folder's safetensors headers); {} where
    they cannot be read so (the load then checks against the weights themselves)."""
    import re

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
        from ..models.gguf_header import gguf_tensor_shapes

        names = {name: t for t, name in _GGUF_WEIGHTS.items()}
        found = {}
        for name, dims in gguf_tensor_shapes(path).items():
            m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", name)
            if m and m.group(2) in names and len(dims) == 2:
                found[int(m.group(1)), names[m.group(2)]] = tuple(dims)
        return found
    except (OSError, ValueError, KeyError, TypeError, struct.error, ImportError):
        return {}
