"""What a command checks its arguments against before it loads a language model: the model's
sizes, read from a GGUF file's header or a folder's config.json in milliseconds, where loading
SmolLM2 takes 15 to 20 s on a 2-core machine (issue 43). A refusal (`heads --k 1000`,
`chat --max-new-tokens 100000000`) then costs no load.

gguf's GGUFReader would read the header too, but it first builds array views of each of the
tokenizer's 100,000 strings and merges, which takes seconds: here the header's key-value pairs
are walked with struct, their types named by gguf's own GGUFValueType, and the long arrays
skipped (tests/test_cli_model_refusals.py holds every field to GGUFReader's). A file that is not
GGUF or whose header is cut is refused here; anything else unexpected gives {}, and the load
then says in its own words what is wrong with the file.
"""
import json
import mmap
import struct
from pathlib import Path

_SCALARS = {"UINT8": "B", "INT8": "b", "UINT16": "H", "INT16": "h", "UINT32": "I", "INT32": "i",
            "FLOAT32": "f", "BOOL": "?", "UINT64": "Q", "INT64": "q", "FLOAT64": "d"}


def model_limits(path):
    """A .gguf file or a save_pretrained folder -> what the arguments are checked against, as far
    as the file says it: {"n_layers", "n_heads", "context_length", "vocab_size" (ints),
    "chat_template" (bool)}, each key only when known; {} for a file that cannot be read so.
    A file that is not GGUF, or whose header ends early (a cut download), is refused at once:
    ValueError naming the file, as the loader would after its own reading of the header."""
    path = Path(path)
    try:
        return _folder_limits(path) if path.is_dir() else _gguf_limits(path)
    except _NotGGUF as error:
        raise ValueError(f"{path} cannot be read as GGUF (truncated or corrupted?): {error}") \
            from None
    except (OSError, ValueError, KeyError, IndexError, struct.error, ImportError):
        return {}


class _NotGGUF(Exception):
    pass


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


def gguf_header(path):
    """A GGUF file -> {key: value} of its metadata: numbers and strings as they are, an array as
    its length (its items are skipped)."""
    from gguf import GGUF_MAGIC, GGUFValueType

    if Path(path).stat().st_size < 24:  # the magic, the version, the two counts
        raise _NotGGUF(f"{Path(path).stat().st_size} bytes, shorter than a GGUF header")
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        def read(fmt, at):
            if at + struct.calcsize(fmt) > len(data):
                raise _NotGGUF(f"the header ends early, at byte {len(data)}")
            return struct.unpack_from("<" + fmt, data, at)[0], at + struct.calcsize(fmt)

        def string(at):
            n, at = read("Q", at)
            if at + n > len(data):
                raise _NotGGUF(f"the header ends early, at byte {len(data)}")
            return bytes(data[at:at + n]).decode("utf-8"), at + n

        def value(kind, at):  # -> (value, the offset after it)
            kind = GGUFValueType(kind).name
            if kind == "STRING":
                return string(at)
            if kind != "ARRAY":
                return read(_SCALARS[kind], at)
            item, at = read("I", at)
            n, at = read("Q", at)
            if GGUFValueType(item).name == "STRING":
                for _ in range(n):  # each string: its length, then its bytes
                    at += 8 + read("Q", at)[0]
            elif GGUFValueType(item).name == "ARRAY":
                raise ValueError("nested arrays are not read here")
            else:
                at += n * struct.calcsize(_SCALARS[GGUFValueType(item).name])
            if at > len(data):
                raise _NotGGUF(f"the header ends early, at byte {len(data)}")
            return n, at

        magic, at = read("I", 0)
        if magic != GGUF_MAGIC:
            raise _NotGGUF(f"it does not begin with GGUF's magic number, got {bytes(data[:4])!r}")
        _version, at = read("I", at)
        _n_tensors, at = read("Q", at)
        n_fields, at = read("Q", at)
        fields = {}
        for _ in range(n_fields):
            key, at = string(at)
            kind, at = read("I", at)
            fields[key], at = value(kind, at)
        return fields
