"""OLMo 2 by name: Llama's block with its norms after the sublayers only,
x + post_norm(sublayer(x)), and a QK-norm over all heads at once (gammas [H d_k], [H_kv d_k]).

GGUF ("olmo2"): llama.cpp's RoPE for OLMo 2 rotates halves, so its converter leaves the rows in
place.
"""
from .. import llama_layout
from . import llama

MODEL_TYPES = ("olmo2",)
GGUF_ARCHITECTURES = ("olmo2",)
# transformers' Olmo2Config defaults (llama.with_defaults)
DEFAULTS = {"olmo2": {**llama.COMMON, "rms_norm_eps": 1e-5, "max_position_embeddings": 2048}}
PROJECTIONS = {name: keys for name, (keys, transpose) in llama_layout.LAYER.items() if transpose}


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    return llama.config(hf)


def tensor_shapes(hf):
    D, F, H, H_kv, d_k, V = llama.sizes(hf)
    shapes = llama.tensor_shapes(hf)
    for i in range(hf["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        del shapes[prefix + "input_layernorm.weight"]
        shapes.update({prefix + "post_feedforward_layernorm.weight": (D,),
                       prefix + "self_attn.q_norm.weight": (H * d_k,),
                       prefix + "self_attn.k_norm.weight": (H_kv * d_k,)})
    return shapes


def params(get, hf):
    """get(transformers' name) -> array -> minattn params."""
    bias = llama.with_defaults(hf)["attention_bias"]

    def layer(prefix):
        block = {}
        for name, keys in PROJECTIONS.items():
            llama_layout._put(block, keys, llama_layout.linear_weight(get(prefix + name)))
        for p in "qkvo":
            if bias:
                block["self_attention"][f"b_{p}"] = get(f"{prefix}self_attn.{p}_proj.bias")
        for key in ("q_norm", "k_norm"):
            block["self_attention"][key] = {"gamma": get(f"{prefix}self_attn.{key}.weight")}
        block["post_self_attention_norm"] = {
            "gamma": get(prefix + "post_attention_layernorm.weight")}
        block["post_feed_forward_norm"] = {
            "gamma": get(prefix + "post_feedforward_layernorm.weight")}
        return llama_layout.packed(block)

    return llama.model_params(get, hf, layer)


GGUF_NAMES = {**llama.GGUF_NAMES,
              "post_attention_layernorm.weight": "post_attention_norm.weight",
              "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}


def gguf_config(meta):
    hf = llama.gguf_config(meta, model_type="olmo2")
    if meta.get("attention.sliding_window"):
        raise ValueError(f"{meta.file}: olmo2.attention.sliding_window is set: local layers "
                         "(OLMo 3) are not supported in GGUF")
    return hf


def from_gguf(name, w, hf):
    return w
