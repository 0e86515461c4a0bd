"""Gemma 2 and Gemma 3 (text) by name: Llama's layout plus sandwich norms, RMSNorm scaling by
(1 + w) (stored as gamma = 1 + w), embeddings times sqrt(D), the tanh-GELU gated feed-forward,
query_pre_attn_scalar, soft-capping, local (sliding) and global layers (families/gemma.py).

GGUF ("gemma2", "gemma3"): llama.cpp's converter stores every norm as 1 + w (from_gguf takes
the 1 off) and leaves the rows in place (its RoPE rotates halves). It does not write
query_pre_attn_scalar: llama.cpp uses the head size, or D / n_heads for the 27B models (46
layers for Gemma 2, 62 for Gemma 3), and so does this reader, saying so on stderr. The layer
pattern is llama.cpp's: Gemma 2 alternates local and global layers, Gemma 3 has five local
layers to one global, unless the file has attention.sliding_window_pattern; Gemma 3's local
layers use rope.freq_base_swa (default 10000, Gemma 3's local base) without scaling. Where a
Gemma 2 file has no attention.sliding_window or soft-capping keys, llama.cpp (and transformers'
Gemma2Config) take a 4096-token window and caps of 50 (scores) and 30 (logits), and so does this
reader, saying so on stderr; a Gemma 3 file without a window has only global layers (llama.cpp).
"""
import sys

from . import llama
from .gguf_metadata import Config

MODEL_TYPES = ("gemma2", "gemma3_text")
GGUF_ARCHITECTURES = ("gemma2", "gemma3")
# transformers' Gemma2Config and Gemma3TextConfig defaults (llama.with_defaults): Gemma 2
# soft-caps its scores at 50 and its logits at 30 unless config.json says otherwise.
GEMMA = {**{k: v for k, v in llama.COMMON.items() if k != "hidden_act"},  # (not Gemma's key)
         "hidden_activation": "gelu_pytorch_tanh", "head_dim": 256,
         "num_key_value_heads": 4, "tie_word_embeddings": True, "query_pre_attn_scalar": 256,
         "sliding_window": 4096}
DEFAULTS = {"gemma2": {**GEMMA, "attn_logit_softcapping": 50.0,
                       "final_logit_softcapping": 30.0, "max_position_embeddings": 8192},
            "gemma3_text": {**GEMMA, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                            "attn_logit_softcapping": None, "final_logit_softcapping": None,
                            "max_position_embeddings": 131072}}


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    from ...families.gemma import _check_tanh_gelu
    from ...families.hf import per_layer_rope, windows

    hf = llama.with_defaults(hf)
    c = Config({**hf, "layer_types": hf.get("layer_types") or layer_types(hf)}, {})
    _check_tanh_gelu("hidden_activation", c.hidden_activation)
    n_layers = c.num_hidden_layers
    rope_base, rope_scaling = per_layer_rope(c, n_layers)
    return {"n_heads": c.num_attention_heads, "n_kv_heads": c.num_key_value_heads,
            "d_k": c.head_dim, "norm": "rms_norm", "activation": "geglu_tanh",
            "eps": c.rms_norm_eps, "position": "rope", "rope_base": rope_base,
            "rope_scaling": rope_scaling, "window": windows(c, n_layers),
            "embedding_scale": c.hidden_size ** 0.5,
            "query_pre_attn_scalar": c.query_pre_attn_scalar,
            # transformers' Gemma3Attention does not apply attn_logit_softcapping
            "attn_logit_softcapping": None if c.model_type == "gemma3_text" else
            c.attn_logit_softcapping,
            "final_logit_softcapping": c.final_logit_softcapping}


def layer_types(hf):
    # transformers' default where config.json has none (those written by older transformers
    # releases): Gemma 2 alternates local and global layers, Gemma 3 has
    # sliding_window_pattern - 1 local layers (default 5) before each global one
    pattern = 2 if hf["model_type"] == "gemma2" else hf.get("sliding_window_pattern", 6)
    return ["sliding_attention" if (i + 1) % pattern else "full_attention"
            for i in range(hf["num_hidden_layers"])]


def tensor_shapes(hf):
    D = hf["hidden_size"]
    shapes = llama.tensor_shapes(hf, qk_norm=hf["model_type"] == "gemma3_text")
    for i in range(hf["num_hidden_layers"]):
        for norm in ("pre_feedforward_layernorm", "post_feedforward_layernorm"):
            shapes[f"model.layers.{i}.{norm}.weight"] = (D,)
    return shapes


def params(get, hf):
    """get(transformers' name) -> array -> minattn params."""
    one_plus = lambda name: {"gamma": 1.0 + get(name)}
    params = llama.params(get, hf)
    for i, block in enumerate(params["layers"]):
        prefix = f"model.layers.{i}."
        for key in ("q_norm", "k_norm"):
            if key in block["self_attention"]:
                block["self_attention"][key] = one_plus(f"{prefix}self_attn.{key}.weight")
        block.update({"self_attention_norm": one_plus(f"{prefix}input_layernorm.weight"),
                      "post_self_attention_norm":
                      one_plus(f"{prefix}post_attention_layernorm.weight"),
                      "feed_forward_norm": one_plus(f"{prefix}pre_feedforward_layernorm.weight"),
                      "post_feed_forward_norm":
                      one_plus(f"{prefix}post_feedforward_layernorm.weight")})
    params["final_norm"] = one_plus("model.norm.weight")
    return params


# -- GGUF --------------------------------------------------------------------------------------

GGUF_NAMES = {**llama.GGUF_NAMES,
              "post_attention_layernorm.weight": "post_attention_norm.weight",
              "pre_feedforward_layernorm.weight": "ffn_norm.weight",
              "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}
PATTERN = {"gemma2": 2, "gemma3": 6}  # llama.cpp's default: one global layer in every n
SIZE_27B = {"gemma2": 46, "gemma3": 62}  # layers: llama.cpp's test for the 27B model


def gguf_config(meta):
    hf = llama.gguf_config(meta, model_type="gemma2" if meta.arch == "gemma2" else "gemma3_text")
    n_layers, d_k = hf["num_hidden_layers"], hf["head_dim"]
    window = meta.get("attention.sliding_window") if meta.arch == "gemma3" else meta.default(
        "attention.sliding_window", 4096, "Gemma 2's window, as llama.cpp and Gemma2Config")
    pattern = meta.get("attention.sliding_window_pattern", PATTERN[meta.arch])
    if isinstance(pattern, list):  # one bool per layer: True = local
        sliding = [bool(p) for p in pattern]
    else:
        sliding = [i % pattern < pattern - 1 for i in range(n_layers)]
    if not window:
        sliding = [False] * n_layers
    scalar = hf["hidden_size"] // hf["num_attention_heads"] \
        if n_layers == SIZE_27B[meta.arch] else d_k
    print(f"minattn: {meta.file} does not record query_pre_attn_scalar: using {scalar}, as "
          f"llama.cpp does ({'D / n_heads for a 27B model' if scalar != d_k else 'the head size'})",
          file=sys.stderr)
    hf.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=scalar,
              sliding_window=window or None,
              layer_types=["sliding_attention" if s else "full_attention" for s in sliding],
              final_logit_softcapping=meta.get("final_logit_softcapping"),
              attn_logit_softcapping=meta.get("attn_logit_softcapping"))
    if meta.arch == "gemma2":  # llama.cpp's (and Gemma2Config's) caps where the file has none
        hf.update({key: float(meta.default(key, cap, "Gemma 2's, as llama.cpp and Gemma2Config"))
                   for key, cap in (("attn_logit_softcapping", 50.0),
                                    ("final_logit_softcapping", 30.0))})
    if meta.arch == "gemma3":
        local_base = float(meta.default("rope.freq_base_swa", 10000.0,
                                        "Gemma 3's base for its local layers"))
        hf["rope_parameters"] = {"full_attention": hf["rope_parameters"],
                                 "sliding_attention": {"rope_type": "default",
                                                       "rope_theta": local_base}}
    return hf


def from_gguf(name, w, hf):
    # llama.cpp stores Gemma's norms as 1 + w: back to w (in float64, then the caller's dtype)
    return (w.astype("float64") - 1.0).astype(w.dtype) if name.endswith("norm.weight") else w
