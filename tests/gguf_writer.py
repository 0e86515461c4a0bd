"""A transformers model written as a GGUF file the way llama.cpp's convert_hf_to_gguf.py writes
it (llama.cpp b-series vendored in llama-cpp-python 0.3.36, conversion/*.py), independently of
minattn's reader: tensor names from gguf's own TensorNameMap; q_proj and k_proj rows (weights
and biases) permuted for the architectures whose llama.cpp RoPE rotates adjacent pairs (its
LlamaModel.permute: llama, smollm3); Gemma's norms stored as 1 + w (Gemma2Model /
Gemma3Model.modify_tensors); Llama 3's RoPE schedule as the tensor rope_freqs.weight
(LlamaModel.generate_extra_tensors); the metadata keys its set_gguf_parameters write."""
import math

import numpy as np

gguf = __import__("gguf")

ARCH = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
        "gemma2": "gemma2", "gemma3_text": "gemma3", "phi3": "phi3", "smollm3": "smollm3",
        "olmo2": "olmo2"}
PERMUTED = ("llama", "smollm3")  # llama.cpp's undo_permute = True
BYTES = [chr(c) for c in range(ord("!"), ord("~") + 1)] + ["Ġ"]
TOKENS = ["<|endoftext|>", "<|im_end|>"] + BYTES + ["Ġt", "he", "Ġthe"]
MERGES = ["Ġ t", "h e", "Ġt he"]


def permute(w, n_head, n_head_kv=None):
    # LlamaModel.permute, as llama.cpp writes it
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def rope_freqs(rope, head_dim):
    # LlamaModel.generate_extra_tensors: llama3's per-pair divisors, in float32 as it computes them
    base = rope.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    factor, low, high = rope.get("factor", 8.0), rope.get("low_freq_factor", 1.0), \
        rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write(path, model, quantize=None, dtype=np.float32, tokens=TOKENS, pre=None, skip=(),
          blocks=None, extra=None, eos=1, general=None, sentencepiece=None, drop=()):
    """model (transformers, float) -> path, a GGUF file. quantize: a GGMLQuantizationType for
    every 2-D tensor (blocks(w) -> its raw bytes, where gguf.quants cannot quantize to it);
    dtype: the others' type (float32 or float16). skip: metadata keys left out (as
    "rope.freq_base"); extra: {name: w} tensors written as they are, in place of the model's
    of that name or beside them; eos: tokenizer.ggml.eos_token_id; general: {key: str} more
    metadata (general.basename); sentencepiece: {"tokens", "scores", "types"} a SentencePiece
    vocabulary ("llama", no merges, <unk> 0, <s> 1, </s> 2) in place of the byte-level one;
    drop: tensors (GGUF names) left out of the file."""
    c = model.config
    hf = c.to_dict()
    arch = ARCH[c.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    n_heads, n_kv = c.num_attention_heads, c.num_key_value_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // n_heads
    rope = dict(hf.get("rope_parameters") or {})
    full = rope.get("full_attention", rope)
    keys = {"block_count": c.num_hidden_layers, "context_length": c.max_position_embeddings,
            "embedding_length": c.hidden_size, "feed_forward_length": c.intermediate_size,
            "attention.head_count": n_heads, "attention.head_count_kv": n_kv,
            "attention.layer_norm_rms_epsilon": c.rms_norm_eps,
            "rope.freq_base": full.get("rope_theta", 10000.0)}
    if arch in ("llama", "smollm3"):
        keys["rope.dimension_count"] = head_dim
    if arch == "phi3":
        keys["rope.dimension_count"] = int(full.get("partial_rotary_factor", 1.0) * head_dim)
        keys["attention.sliding_window"] = c.sliding_window or 0
    if hf.get("head_dim") is not None:  # TextModel.set_gguf_parameters
        keys["attention.key_length"] = keys["attention.value_length"] = hf["head_dim"]
    if arch == "gemma2":
        keys.update({"attn_logit_softcapping": c.attn_logit_softcapping,
                     "final_logit_softcapping": c.final_logit_softcapping,
                     "attention.sliding_window": c.sliding_window})
    if arch == "gemma3":
        keys["attention.sliding_window"] = c.sliding_window
        if c.final_logit_softcapping:
            keys["final_logit_softcapping"] = c.final_logit_softcapping
        if "sliding_attention" in rope:
            keys["rope.freq_base_swa"] = rope["sliding_attention"]["rope_theta"]
    if full.get("rope_type") == "longrope":  # Phi3MiniModel: its attn_factor from the scale
        original = c.original_max_position_embeddings or full["original_max_position_embeddings"]
        scale = c.max_position_embeddings / original
        keys.update({"rope.scaling.type": "longrope", "rope.scaling.original_context_length":
                     original, "rope.scaling.attn_factor": math.sqrt(
                         1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0})
    if full.get("rope_type") == "yarn":  # TextModel.set_gguf_parameters
        keys.update({"rope.scaling.type": "yarn", "rope.scaling.factor": full["factor"],
                     "rope.scaling.original_context_length":
                     full["original_max_position_embeddings"]})
        for name, key in (("attention_factor", "attn_factor"), ("beta_fast", "yarn_beta_fast"),
                          ("beta_slow", "yarn_beta_slow")):
            if full.get(name) is not None:
                keys[f"rope.scaling.{key}"] = float(full[name])
    if full.get("rope_type") == "linear":
        keys["rope.scaling.type"], keys["rope.scaling.factor"] = "linear", full["factor"]
    for key, value in keys.items():
        if key in skip:
            continue
        if isinstance(value, str):
            writer.add_string(f"{arch}.{key}", value)
        elif isinstance(value, float):
            writer.add_float32(f"{arch}.{key}", value)
        else:
            writer.add_uint32(f"{arch}.{key}", value)
    for key, value in (general or {}).items():
        writer.add_string(key, value)
    if sentencepiece:  # LlamaModel._set_vocab_sentencepiece
        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(sentencepiece["tokens"])
        writer.add_token_scores(sentencepiece["scores"])
        writer.add_token_types(sentencepiece["types"])
        writer.add_unk_token_id(0)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
    else:
        writer.add_tokenizer_model("gpt2")
        if pre is not None:
            writer.add_tokenizer_pre(pre)
        writer.add_token_list(tokens)
        writer.add_token_merges(MERGES)
        writer.add_token_types([3, 3] + [1] * (len(tokens) - 2))
        writer.add_eos_token_id(eos)
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch.upper()),
                                     c.num_hidden_layers)
    tied = c.tie_word_embeddings or arch == "gemma2"
    tensors = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and tied:
            continue
        w = t.detach().to(dtype=__import__("torch").float64).numpy()
        if arch in PERMUTED and name.endswith(("q_proj.weight", "q_proj.bias")):
            w = permute(w, n_heads, n_heads)
        if arch in PERMUTED and name.endswith(("k_proj.weight", "k_proj.bias")):
            w = permute(w, n_heads, n_kv)
        if arch in ("gemma2", "gemma3") and name.endswith("norm.weight"):
            w = w + 1
        tensors[names.get_name(name, try_suffixes=(".weight", ".bias"))] = w
    if full.get("rope_type") == "llama3":
        tensors["rope_freqs.weight"] = rope_freqs(full, head_dim)
    if full.get("rope_type") == "longrope":
        for kind in ("long", "short"):
            tensors[f"rope_factors_{kind}.weight"] = np.array(full[f"{kind}_factor"], np.float32)
    tensors.update(extra or {})
    tensors = {name: w for name, w in tensors.items() if name not in drop}
    for name, w in tensors.items():
        if quantize is not None and w.ndim == 2:
            data = blocks(w) if blocks else gguf.quants.quantize(w.astype(np.float32), quantize)
            writer.add_tensor(name, data, raw_dtype=quantize)
        else:
            writer.add_tensor(name, w.astype(np.float32 if w.ndim == 1 else dtype))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
