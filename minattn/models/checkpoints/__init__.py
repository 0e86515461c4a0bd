"""Checkpoints by name, without torch: for each family, the tensors of a checkpoint, named as
transformers names them, and its config.json (a dict) -> minattn's (params, config), the same
pair interop.from_hf gives for the same model (tests/test_checkpoints.py holds them equal); and
the names llama.cpp gives the same tensors and settings in a GGUF file.

One module per family; each has the same parts:

    MODEL_TYPES, GGUF_ARCHITECTURES    what it reads: config.json's model_type, GGUF's
                                       general.architecture
    config(hf) -> causal_lm's keyword arguments           hf: config.json as a dict
    tensor_shapes(hf) -> {transformers' name: shape}      every tensor the model needs
    params(get, hf) -> params          get(name) -> the tensor as an array (None: not there)
    gguf_config(metadata) -> hf        a GGUF's metadata (gguf_metadata.Metadata) -> the
                                       config.json transformers would have written
    GGUF_NAMES                         transformers' name -> llama.cpp's (gguf_name below)
    from_gguf(name, array, hf)         undo what llama.cpp's converter did to a tensor

models/chat_model.py reads files through these (load_language_model).
"""
from . import gemma, llama, olmo2, phi3, qwen, smollm3

FAMILIES = (llama, qwen, gemma, phi3, smollm3, olmo2)
BY_MODEL_TYPE = {t: family for family in FAMILIES for t in family.MODEL_TYPES}
BY_GGUF_ARCHITECTURE = {a: family for family in FAMILIES for a in family.GGUF_ARCHITECTURES}


def gguf_name(name, names):
    """transformers' tensor name -> llama.cpp's, through a family's GGUF_NAMES (names inside a
    layer without their "model.layers.{i}." prefix): model.layers.3.self_attn.q_proj.weight ->
    blk.3.attn_q.weight. None where the family's GGUF has no such tensor."""
    if name in names:
        return names[name]
    if name.startswith("model.layers."):
        _, _, i, rest = name.split(".", 3)
        return f"blk.{i}.{names[rest]}" if rest in names else None
    return None
