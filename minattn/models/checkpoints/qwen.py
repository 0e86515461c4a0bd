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


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    return llama.config(hf)


def tensor_shapes(hf):
    if hf["model_type"] == "qwen2":
        return llama.tensor_shapes(hf, biases="qkv")
    return llama.tensor_shapes(hf, qk_norm=True)


params = llama.params


def gguf_config(meta):
    return llama.gguf_config(meta, model_type=meta.arch)


def from_gguf(name, w, hf):
    return w
