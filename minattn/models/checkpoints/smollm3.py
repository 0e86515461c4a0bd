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
# transformers' SmolLM3Config defaults (llama.with_defaults)
DEFAULTS = {"smollm3": {**llama.COMMON, "num_key_value_heads": 4, "tie_word_embeddings": True,
                        "rope_theta": 2000000.0, "use_sliding_window": False,
                        "sliding_window": None, "no_rope_layer_interval": 4,
                        "max_position_embeddings": 32768}}


def layers(hf):
    # As SmolLM3Config's __post_init__: where no_rope_layers is left out, every
    # no_rope_layer_interval-th layer has no RoPE; where layer_types is, the layers without
    # RoPE are the sliding ones if use_sliding_window and sliding_window are set.
    hf = llama.with_defaults(hf)
    n_layers, interval = hf["num_hidden_layers"], hf["no_rope_layer_interval"]
    rotated = hf.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n_layers)]
    sliding = hf["use_sliding_window"] and hf["sliding_window"] is not None
    types = hf.get("layer_types") or ["sliding_attention" if sliding and not rotated[i] else
                                      "full_attention" for i in range(n_layers)]
    return {**hf, "no_rope_layers": rotated, "layer_types": types}


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    hf = layers(hf)
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
