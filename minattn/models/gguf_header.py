"""A GGUF file's header, read in milliseconds: its metadata and where each tensor lies, checked
against the file's size before any weight is read.

gguf's GGUFReader would read the header too, but it first builds array views of each of the
tokenizer's 100,000 strings and merges, which takes seconds, and a file cut inside its weights
(a download that stopped early) reaches it as a bare `cannot reshape array` about one of them.
Here the header's key-value pairs and tensor records are walked with struct, their types named
by gguf's own GGUFValueType, GGMLQuantizationType and GGML_QUANT_SIZES, and the long arrays
skipped (tests/test_cli_model_refusals.py holds every field to GGUFReader's). Used by the
command line's checks before a load (minattn/cli/model_file.py) and by the loader
(chat_model.py) before GGUFReader.
"""
import mmap
import struct
from pathlib import Path

_SCALARS = {"UINT8": "B", "INT8": "b", "UINT16": "H", "INT16": "h", "UINT32": "I", "INT32": "i",
            "FLOAT32": "f", "BOOL": "?", "UINT64": "Q", "INT64": "q", "FLOAT64": "d"}


class NotGGUF(ValueError):
    """A file that is not GGUF, or that ends before its header or its tensors do."""


def gguf_header(path):
    """A GGUF file -> {key: value} of its metadata: numbers and strings as they are, an array as
    its length (its items are skipped). Raises NotGGUF, naming the file, for a file that does not
    begin as GGUF does, whose header ends early, or that ends before one of the tensors its
    header lists (naming the first such tensor and the bytes missing)."""
    return _header(path)[0]


def gguf_tensor_shapes(path):
    """A GGUF file -> {tensor name: its dims as the file lists them} (GGML's order, the
    fastest-varying first: a linear layer's weight is (d_in, d_out)), from the header alone;
    refused as gguf_header refuses."""
    return _header(path)[1]


def _header(path):
    try:
        return _read_header(path)
    except NotGGUF as error:
        raise NotGGUF(f"{path} cannot be read as GGUF (truncated or corrupted?): {error}") \
            from None


def _read_header(path):
    from gguf import GGUF_MAGIC, GGUFValueType

    size = Path(path).stat().st_size
    if size < 24:  # the magic, the version, the two counts
        raise NotGGUF(f"{size} bytes, shorter than a GGUF header")
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        def read(fmt, at):
            if at + struct.calcsize(fmt) > len(data):
                raise NotGGUF(f"the header ends early, at byte {len(data)}")
            return struct.unpack_from("<" + fmt, data, at)[0], at + struct.calcsize(fmt)

        def string(at):
            n, at = read("Q", at)
            if at + n > len(data):
                raise NotGGUF(f"the header ends early, at byte {len(data)}")
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
                raise NotGGUF(f"the header ends early, at byte {len(data)}")
            return n, at

        magic, at = read("I", 0)
        if magic != GGUF_MAGIC:
            raise NotGGUF(f"it does not begin with GGUF's magic number, got {bytes(data[:4])!r}")
        _version, at = read("I", at)
        n_tensors, at = read("Q", at)
        n_fields, at = read("Q", at)
        fields = {}
        for _ in range(n_fields):
            key, at = string(at)
            kind, at = read("I", at)
            fields[key], at = value(kind, at)
        tensors, shapes = [], {}  # (name, type, number of elements, offset in the data)
        for _ in range(n_tensors):
            name, at = string(at)
            n_dims, at = read("I", at)
            n_elements, shapes[name] = 1, ()
            for _ in range(n_dims):
                dim, at = read("Q", at)
                n_elements *= dim
                shapes[name] += (dim,)
            kind, at = read("I", at)
            offset, at = read("Q", at)
            tensors.append((name, kind, n_elements, offset))
    _check_extents(tensors, _aligned(at, fields.get("general.alignment")), size)
    return fields, shapes


def _aligned(at, alignment):
    # The tensor data starts at the first multiple of general.alignment (GGUF's 32 by default)
    # after the header, as GGUFReader places it.
    from gguf import GGUF_DEFAULT_ALIGNMENT

    alignment = alignment if isinstance(alignment, int) and alignment > 0 else \
        GGUF_DEFAULT_ALIGNMENT
    return at + (-at) % alignment


def _check_extents(tensors, start, size):
    # Each tensor's bytes (its elements / the type's block size * the block's bytes) must end
    # inside the file; the first one that does not is named, with the bytes missing to the end
    # of the last one.
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    ends = []
    for name, kind, n_elements, offset in tensors:
        block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        ends.append((start + offset + n_elements * type_size // block_size, name))
    cut = sorted(end for end in ends if end[0] > size)
    if cut:
        end, name = cut[0]
        raise NotGGUF(f"the file has {size:,} bytes, and its tensor {name!r} ends at byte "
                      f"{end:,}: {cut[-1][0] - size:,} bytes of its tensors are missing (a "
                      "download cut short?)")
