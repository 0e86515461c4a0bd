"""Phi-3 (and Phi-4-mini) by name: Llama's block with q, k, v fused in one projection
(qkv_proj) and gate, up in another (gate_up_proj), RoPE on part of each head where
partial_rotary_factor < 1, a sliding window on every layer where sliding_window is set.

GGUF ("phi3"): llama.cpp's converter leaves the fused rows in place (its RoPE rotates halves);
rope.dimension_count gives the rotated part; attention.sliding_window 0 means none. LongRoPE's
factors are the tensors rope_factors_short/long.weight, its original context
rope.scaling.original_context_length, its attention factor rope.scaling.attn_factor; read as
transformers applies them (the long factors where a sequence outgrows the original context).
"""
from .. import llama_layout
from . import llama

MODEL_TYPES = ("phi3",)
GGUF_ARCHITECTURES = ("phi3",)
# transformers' Phi3Config defaults (llama.with_defaults)
DEFAULTS = {"phi3": {**llama.COMMON, "rms_norm_eps": 1e-5, "sliding_window": None,
                     "max_position_embeddings": 4096, "original_max_position_embeddings": 4096}}


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    return llama.config(hf)


def tensor_shapes(hf):
    D, F, H, H_kv, d_k, V = llama.sizes(hf)
    return llama.model_shapes(hf, {
        "self_attn.qkv_proj.weight": ((H + 2 * H_kv) * d_k, D),
        "self_attn.o_proj.weight": (D, H * d_k), "input_layernorm.weight": (D,),
        "post_attention_layernorm.weight": (D,), "mlp.gate_up_proj.weight": (2 * F, D),
        "mlp.down_proj.weight": (D, F)})


def params(get, hf):
    """get(transformers' name) -> array -> minattn params: the fused projections split."""
    D, F, H, H_kv, d_k, V = llama.sizes(hf)

    def layer(prefix):
        w_qkv = llama_layout.linear_weight(get(prefix + "self_attn.qkv_proj.weight"))  # [D, .]
        w_gate_up = llama_layout.linear_weight(get(prefix + "mlp.gate_up_proj.weight"))
        q, kv = H * d_k, H_kv * d_k
        return llama_layout.packed({
            "self_attention": {"w_q": w_qkv[:, :q], "w_k": w_qkv[:, q:q + kv],
                               "w_v": w_qkv[:, q + kv:], "w_o": llama_layout.linear_weight(
                                   get(prefix + "self_attn.o_proj.weight"))},
            "self_attention_norm": {"gamma": get(prefix + "input_layernorm.weight")},
            "feed_forward": {"w_gate": w_gate_up[:, :F], "w_up": w_gate_up[:, F:],
                             "w_down": llama_layout.linear_weight(
                                 get(prefix + "mlp.down_proj.weight"))},
            "feed_forward_norm": {"gamma": get(prefix + "post_attention_layernorm.weight")}})

    return llama.model_params(get, hf, layer)


GGUF_NAMES = {**llama.GGUF_NAMES, "self_attn.qkv_proj.weight": "attn_qkv.weight",
              "mlp.gate_up_proj.weight": "ffn_up.weight"}


LONGROPE = ("rope_factors_short.weight", "rope_factors_long.weight")
LONGROPE_KINDS = {LONGROPE[0]: "short factors (within the original context)",
                  LONGROPE[1]: "long factors (beyond it)"}


def gguf_config(meta):
    hf = llama.gguf_config(meta, model_type="phi3", partial_rotary=True, longrope=True)
    hf["sliding_window"] = meta.get("attention.sliding_window") or None  # 0: none (Phi-4)
    present = [name for name in LONGROPE if name in meta.tensors]
    declared = meta.get("rope.scaling.type") == "longrope"
    missing = [name for name in LONGROPE if name not in meta.tensors]
    if declared and missing:  # each named: the short factors and the long ones
        raise ValueError(f"{meta.file}: {meta.arch}.rope.scaling.type is 'longrope', but it has "
                         f"no tensor {' and no tensor '.join(missing)} (LongRoPE's "
                         f"{' and '.join(LONGROPE_KINDS[name] for name in missing)}, one per "
                         "rotated pair): LongRoPE needs both the short and the long factors")
    if present:
        if len(present) == 1:
            raise ValueError(f"{meta.file}: has {present[0]} without "
                             f"{(set(LONGROPE) - set(present)).pop()} (LongRoPE needs both)")
        original = meta.require("rope.scaling.original_context_length")
        short, long = ([float(x) for x in meta.read(name)] for name in LONGROPE)
        rope = {**hf["rope_parameters"], "rope_type": "longrope", "short_factor": short,
                "long_factor": long, "original_max_position_embeddings": original,
                "factor": hf["max_position_embeddings"] / original}
        if meta.get("rope.scaling.attn_factor") is not None:
            rope["attention_factor"] = float(meta.get("rope.scaling.attn_factor"))
        hf["rope_parameters"] = rope
        hf["original_max_position_embeddings"] = original
    return hf


def from_gguf(name, w, hf):
    return w
