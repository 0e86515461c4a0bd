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


def check_adapter(path, adapter, limits):
    """--adapter DIR against the model at path, from the files' headers before anything loads
    (minattn.models.adapter_files.check_adapter, with the layer count the model file states)."""
    from ..models.adapter_files import check_adapter as check

    check(path, adapter, limits.get("n_layers"))
