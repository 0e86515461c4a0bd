"""Qwen 2 and Qwen 3 by name: Llama's layout with biases on q, k and v (Qwen 2) or a QK-norm
over each head (Qwen 3).

GGUF ("qwen2", "qwen3"): llama.cpp's RoPE for these rotates halves as transformers does, so its
converter leaves every row in place. It writes no sliding window: a file is read with every
layer global, as these checkpoints are configured (use_sliding_window false).
"""
from . import llama

MODEL_TYPES = ("qwen2", "qwen3")
GGUF_ARCHITECTURES = ("qwen2", "qwen3")
GGUF_NAMES = llama.GGUF_NAMES
# transformers' Qwen2Config and Qwen3Config defaults (llama.with_defaults)
QWEN = {**llama.COMMON, "num_key_value_heads": 32, "use_sliding_window": False,
        "sliding_window": 4096, "max_window_layers": 28, "max_position_embeddings": 32768}
DEFAULTS = {"qwen2": QWEN, "qwen3": {**QWEN, "head_dim": 128}}


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    return llama.config(windows(hf))


def windows(hf):
    # As Qwen2Config's __post_init__: no window unless use_sliding_window, and where layer_types
    # is left out, the layers from max_window_layers on are the sliding ones.
    hf = llama.with_defaults(hf)
    window = hf["sliding_window"] if hf["use_sliding_window"] else None
    types = hf.get("layer_types") or [
        "sliding_attention" if window is not None and i >= hf["max_window_layers"]
        else "full_attention" for i in range(hf["num_hidden_layers"])]
    return {**hf, "sliding_window": window, "layer_types": types}


def tensor_shapes(hf):
    if hf["model_type"] == "qwen2":
        return llama.tensor_shapes(hf, biases="qkv")
    return llama.tensor_shapes(hf, qk_norm=True)


params = llama.params


def gguf_config(meta):
    return llama.gguf_config(meta, model_type=meta.arch)


def from_gguf(name, w, hf):
    return w
