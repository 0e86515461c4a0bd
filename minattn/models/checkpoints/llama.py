"""Llama (Llama 2 and 3.x, SmolLM2, Mistral) by name: the layout models/llama_layout.py maps,
RoPE as config.json or the GGUF metadata sets it.

GGUF ("llama"): llama.cpp's converter reorders each head's rows of q_proj and k_proj, weights
and biases (its RoPE rotates adjacent pairs; from_gguf puts them back); it writes Llama 3.1's
RoPE schedule as per-pair divisors (the tensor rope_freqs.weight: LongRoPE's form, one factor
list, read as such), linear scaling and YaRN as rope.scaling.* keys (YaRN without
mscale/mscale_all_dim, which only DeepSeek's configs set, and without truncate). It writes a
Mistral as "llama" without its sliding_window: such a file is read without a window (a Mistral
7B v0.1, whose window is 4096, then differs beyond 4096 tokens).
"""
import sys

from .. import llama_layout
from .gguf_metadata import Config

MODEL_TYPES = ("llama", "mistral")
GGUF_ARCHITECTURES = ("llama",)
# What transformers reads for a key config.json leaves out: its config class's default
# (transformers 5.24, models/<family>/configuration_<family>.py), for every key these readers
# read; rope_theta stands for rope_parameters' default (4.x's key, which rope_settings reads
# where rope_parameters is absent). A num_key_value_heads or head_dim of None: the number of
# heads, and hidden_size / num_attention_heads.
COMMON = {"hidden_act": "silu", "rms_norm_eps": 1e-6, "head_dim": None, "attention_bias": False,
          "mlp_bias": False, "tie_word_embeddings": False, "num_key_value_heads": None,
          "rope_theta": 10000.0}
DEFAULTS = {"llama": {**COMMON, "max_position_embeddings": 2048},
            "mistral": {**COMMON, "num_key_value_heads": 8, "sliding_window": 4096,
                        "max_position_embeddings": 131072}}


def with_defaults(hf):
    """config.json (a dict) with the keys it leaves out filled as transformers fills them (the
    DEFAULTS of its model_type's module); a value that transformers' forward reads and minattn
    does not implement is refused by name."""
    from . import BY_MODEL_TYPE

    hf = {**BY_MODEL_TYPE[hf["model_type"]].DEFAULTS[hf["model_type"]], **hf}
    for key, value, why in REFUSED:
        if hf.get(key) is value:
            raise ValueError(f"{key}={value!r} is not supported ({why})")
    return hf


REFUSED = (("mlp_bias", True, "minattn's SwiGLU has no biases"),
           ("use_bidirectional_attention", True, "transformers then drops the causal mask; "
            "minattn's language model is causal"),
           ("is_causal", False, "minattn's language model is causal"))


def namespace(hf):
    hf = with_defaults(hf)
    return Config({**hf, "num_key_value_heads": hf["num_key_value_heads"] or
                   hf["num_attention_heads"]}, {})


def config(hf):
    """config.json (a dict) -> causal_lm's keyword arguments, as interop.from_hf gives them."""
    from ...families.llama import config_from_hf

    return config_from_hf(namespace(hf), hf["num_hidden_layers"])


def sizes(hf):
    # -> (D, F, H, H_kv, d_k, V)
    hf = with_defaults(hf)
    n_heads = hf["num_attention_heads"]
    return (hf["hidden_size"], hf["intermediate_size"], n_heads,
            hf.get("num_key_value_heads") or n_heads,
            hf.get("head_dim") or hf["hidden_size"] // n_heads, hf["vocab_size"])


def tensor_shapes(hf, biases=None, qk_norm=False):
    """-> {transformers' name: shape [d_out, d_in] or [d]} of every tensor the model has:
    q, k, v and o biases where attention_bias (or the names in biases), a QK-norm's weights
    [d_k] where qk_norm, lm_head where the embeddings are not tied."""
    hf = with_defaults(hf)
    D, F, H, H_kv, d_k, V = sizes(hf)
    if biases is None:
        biases = "qkvo" if hf["attention_bias"] else ""
    layer = {"self_attn.q_proj.weight": (H * d_k, D), "self_attn.k_proj.weight": (H_kv * d_k, D),
             "self_attn.v_proj.weight": (H_kv * d_k, D), "self_attn.o_proj.weight": (D, H * d_k),
             "input_layernorm.weight": (D,), "post_attention_layernorm.weight": (D,),
             "mlp.gate_proj.weight": (F, D), "mlp.up_proj.weight": (F, D),
             "mlp.down_proj.weight": (D, F)}
    widths = {"q": H * d_k, "k": H_kv * d_k, "v": H_kv * d_k, "o": D}
    layer.update({f"self_attn.{p}_proj.bias": (widths[p],) for p in biases})
    if qk_norm:
        layer.update({"self_attn.q_norm.weight": (d_k,), "self_attn.k_norm.weight": (d_k,)})
    return model_shapes(hf, layer)


def model_shapes(hf, layer):
    """-> {transformers' name: shape} of a model of Llama's layout: the embedding, the final
    norm, the lm_head unless tied, and each layer's tensors (layer: {name inside a layer:
    shape})."""
    hf = with_defaults(hf)
    D, V = hf["hidden_size"], sizes(hf)[-1]
    shapes = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,)}
    if not hf["tie_word_embeddings"]:
        shapes[llama_layout.LM_HEAD] = (V, D)
    shapes.update({f"model.layers.{i}.{name}": shape
                   for i in range(hf["num_hidden_layers"]) for name, shape in layer.items()})
    return shapes


def params(get, hf):
    """get(transformers' name) -> array -> minattn params (llama_layout's map)."""
    hf = with_defaults(hf)
    tied = hf["tie_word_embeddings"]
    return llama_layout.llama_params(
        lambda name: None if tied and name == llama_layout.LM_HEAD else get(name),
        hf["num_hidden_layers"])


def model_params(get, hf, layer):
    """get(transformers' name) -> array; layer("model.layers.{i}.") -> that layer's params ->
    the params of a model of Llama's layout whose layers are read by `layer` (a family with
    other layer tensors: Phi-3's fused projections, OLMo 2's norms): the embedding, the layers,
    the final norm, and the lm_head unless the embeddings are tied."""
    hf = with_defaults(hf)
    params = {"token_embedding": get("model.embed_tokens.weight"),
              "layers": [layer(f"model.layers.{i}.") for i in range(hf["num_hidden_layers"])],
              "final_norm": {"gamma": get("model.norm.weight")}}
    if not hf["tie_word_embeddings"]:
        params["lm_head"] = llama_layout.linear_weight(get(llama_layout.LM_HEAD))
    return params


# -- GGUF --------------------------------------------------------------------------------------

GGUF_NAMES = {  # transformers' name (inside a layer: after model.layers.{i}.) -> llama.cpp's
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    **{f"self_attn.{p}_proj.{kind}": f"attn_{g}.{kind}" for p, g in
       (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")) for kind in ("weight", "bias")},
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight":
    "attn_k_norm.weight", "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight":
    "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight":
    "ffn_down.weight"}
ROPE_FREQS = "rope_freqs.weight"  # Llama 3.1's schedule, as llama.cpp writes it


def gguf_config(meta, model_type="llama", partial_rotary=False, longrope=False):
    """GGUF metadata -> the config.json of the same model (what transformers would write), for
    the Llama-like architectures (all but Gemma's keys). partial_rotary: the family rotates
    rope.dimension_count of each head's d_k features (Phi-3); others refuse a difference.
    longrope: the family reads LongRoPE's factor tensors itself (Phi-3); others refuse
    rope.scaling.type 'longrope'."""
    n_heads = meta.require("attention.head_count")
    hidden = meta.require("embedding_length")
    rotated = meta.get("rope.dimension_count")
    d_k = meta.get("attention.key_length") or (None if partial_rotary else rotated) or \
        hidden // n_heads  # (transformers reads a llama's head_dim from rope.dimension_count)
    rotated = rotated or d_k
    if rotated != d_k and not (partial_rotary and 0 < rotated < d_k and rotated % 2 == 0):
        raise ValueError(f"{meta.file}: {meta.arch}.rope.dimension_count is {rotated}, not the "
                         f"head size {d_k}: RoPE on part of each head is not supported for "
                         f"{meta.arch}")
    n_kv = meta.default("attention.head_count_kv", n_heads, "the GGUF default: head_count, "
                        "no grouped-query attention")
    if not isinstance(n_kv, int):
        raise ValueError(f"{meta.file}: {meta.arch}.attention.head_count_kv varies by layer "
                         f"({n_kv!r}): not supported")
    if isinstance(n_kv, bool) or n_kv < 1 or n_heads % n_kv:
        raise ValueError(f"{meta.file}: {meta.arch}.attention.head_count_kv must be a positive "
                         f"int dividing head_count={n_heads}, got {n_kv!r}")
    hf = {"model_type": model_type, "hidden_size": hidden,
          "num_hidden_layers": meta.require("block_count"), "num_attention_heads": n_heads,
          "num_key_value_heads": n_kv, "head_dim": d_k,
          "intermediate_size": meta.require("feed_forward_length"),
          "rms_norm_eps": meta.require("attention.layer_norm_rms_epsilon", float),
          "max_position_embeddings": meta.require("context_length"), "hidden_act": "silu",
          "vocab_size": meta.tensors["token_embd.weight"][0],
          "tie_word_embeddings": "output.weight" not in meta.tensors,
          "attention_bias": "blk.0.attn_q.bias" in meta.tensors}
    if model_type == "llama" and "mistral" in str(meta.fields.get("general.basename", "")).lower():
        print(f"minattn: {meta.file} is a Mistral (general.basename) written as llama, which "
              "records no sliding window: read without one (a Mistral 7B v0.1, window 4096, "
              "then differs beyond 4096 tokens)", file=sys.stderr)
    hf["rope_parameters"] = gguf_rope(meta, rotated, longrope)
    if rotated != d_k:
        hf["rope_parameters"]["partial_rotary_factor"] = rotated / d_k
    return hf


def gguf_rope(meta, rotated, longrope=False):
    # rope.freq_base and rope.scaling.* (and rope_freqs.weight) -> transformers' rope_parameters;
    # longrope: the caller reads LongRoPE's factors (phi3.gguf_config), here default RoPE
    base = float(meta.default("rope.freq_base", 10000.0, "the GGUF default; a model trained "
                              "with another base computes wrong logits"))
    scaling = meta.get("rope.scaling.type", "none")
    if ROPE_FREQS in meta.tensors:
        if scaling not in ("none", None) or meta.tensors[ROPE_FREQS] != (rotated // 2,):
            raise ValueError(f"{meta.file}: {ROPE_FREQS} of shape {meta.tensors[ROPE_FREQS]} "
                             f"with rope.scaling.type {scaling!r}: expected ({rotated // 2},) (one "
                             "divisor per rotated pair) and no other scaling")
        divisors = [float(x) for x in meta.read(ROPE_FREQS)]
        return {"rope_type": "longrope", "rope_theta": base, "short_factor": divisors,
                "long_factor": divisors, "factor": 1.0,
                "original_max_position_embeddings": meta.require("context_length")}
    if scaling in ("none", None) or (scaling == "longrope" and longrope):
        return {"rope_type": "default", "rope_theta": base}
    if scaling == "linear":
        return {"rope_type": "linear", "rope_theta": base,
                "factor": meta.require("rope.scaling.factor", float)}
    if scaling == "yarn":  # what llama.cpp's converter writes of transformers' YaRN settings
        rope = {"rope_type": "yarn", "rope_theta": base,
                "factor": meta.require("rope.scaling.factor", float),
                "original_max_position_embeddings":
                meta.require("rope.scaling.original_context_length")}
        for key, name in (("rope.scaling.attn_factor", "attention_factor"),
                          ("rope.scaling.yarn_beta_fast", "beta_fast"),
                          ("rope.scaling.yarn_beta_slow", "beta_slow")):
            if meta.get(key) is not None:
                rope[name] = float(meta.get(key))
        return rope
    if scaling == "longrope":  # its factors are tensors only Phi-3's reader reads
        raise ValueError(f"{meta.file}: {meta.arch}.rope.scaling.type 'longrope' is read for "
                         "phi3 only (its rope_factors_short.weight and rope_factors_long.weight)")
    raise ValueError(f"{meta.file}: {meta.arch}.rope.scaling.type {scaling!r} is not supported "
                     "(minattn reads 'none', 'linear', 'yarn' and Llama 3's rope_freqs.weight)")


def from_gguf(name, w, hf):
    """A tensor as llama.cpp's "llama" converter wrote it -> as transformers has it."""
    if name.endswith(("q_proj.weight", "q_proj.bias")):
        return unpermute(w, hf["num_attention_heads"])
    if name.endswith(("k_proj.weight", "k_proj.bias")):
        return unpermute(w, hf["num_key_value_heads"])
    return w


def unpermute(w, n_heads):
    """Undo llama.cpp's reordering of a head's rows of w_q or w_k (or of b_q, b_k):
    [n_heads * d_k, ...] -> same. llama.cpp rotates adjacent pairs (x0, x1), (x2, x3), ...;
    transformers and minattn rotate a head's two halves, (x_i, x_{i + d_k/2}). So its converter
    interleaved each head's rows (0, d_k/2, 1, d_k/2 + 1, ...); this puts rows 0, 2, 4, ...
    first and 1, 3, 5, ... after."""
    rows = w.shape[0]
    halves = w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:])  # [H, d_k/2, 2, ...]
    return halves.swapaxes(1, 2).reshape(w.shape)  # [H, 2, d_k/2, ...] -> [H d_k, ...]
