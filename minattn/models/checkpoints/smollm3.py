"""SmolLM3 by name: Llama with no RoPE at all in every fourth layer (no_rope_layers[i] == 0).

GGUF ("smollm3"): llama.cpp's converter treats it as Llama (q and k rows reordered, put back by
from_gguf) and writes no list of the layers without RoPE: llama.cpp fixes them at every fourth
layer (its n_no_rope_layer_step, 4), as transformers' default no_rope_layer_interval; a file is
read so.
"""
from . import llama

MODEL_TYPES = ("smollm3",)
GGUF_ARCHITECTURES = ("smollm3",)
GGUF_NAMES = llama.GGUF_NAMES
NO_ROPE_LAYER_INTERVAL = 4  # llama.cpp's n_no_rope_layer_step for smollm3


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    kwargs = llama.config(hf)
    n_layers = hf["num_hidden_layers"]
    rotated = list(hf["no_rope_layers"])[:n_layers]
    if len(rotated) != n_layers:
        raise ValueError(f"no_rope_layers has {len(rotated)} entries for {n_layers} layers")
    kwargs["rope_base"] = [kwargs["rope_base"] if use else None for use in rotated]
    return kwargs


def tensor_shapes(hf):
    return llama.tensor_shapes(hf)


params = llama.params


def gguf_config(meta):
    hf = llama.gguf_config(meta, model_type="smollm3")
    hf["no_rope_layers"] = [int((i + 1) % NO_ROPE_LAYER_INTERVAL != 0)
                            for i in range(hf["num_hidden_layers"])]
    hf["use_sliding_window"] = False
    return hf


from_gguf = llama.from_gguf
