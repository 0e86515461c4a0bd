"""The Llama layout: where each tensor of a Llama-style checkpoint goes in minattn's params.

One name map, shared by every way the weights arrive: a transformers model (interop.from_hf), a
folder written by save_pretrained (model.safetensors) and a GGUF file, whose tensor names the
gguf library translates from these (minattn/models/chat_model.py). Names are transformers';
its Linear weights [d_out, d_in] are transposed to minattn's [d_in, d_out], so y = x @ w, and
keep torch's memory layout (linear_weight): each output's weights lie in one contiguous row.

    params = llama_params(get, n_layers)   # get(name) -> array, or None where the file has none

Llama, Mistral, Qwen2 (biases on q, k, v) and Qwen3 (QK-norm) share it; Gemma adds its own norms
on top (interop._gemma_from_hf).
"""
import numpy as np

# transformers' name inside one decoder layer -> (minattn's keys inside that layer's params,
# whether it is a Linear weight to transpose). None of the optional ones: the layer lacks it.
LAYER = {
    "self_attn.q_proj.weight": (("self_attention", "w_q"), True),
    "self_attn.k_proj.weight": (("self_attention", "w_k"), True),
    "self_attn.v_proj.weight": (("self_attention", "w_v"), True),
    "self_attn.o_proj.weight": (("self_attention", "w_o"), True),
    "input_layernorm.weight": (("self_attention_norm", "gamma"), False),
    "mlp.gate_proj.weight": (("feed_forward", "w_gate"), True),
    "mlp.up_proj.weight": (("feed_forward", "w_up"), True),
    "mlp.down_proj.weight": (("feed_forward", "w_down"), True),
    "post_attention_layernorm.weight": (("feed_forward_norm", "gamma"), False),
}
LAYER_OPTIONAL = {
    "self_attn.q_proj.bias": (("self_attention", "b_q"), False),  # attention_bias; Qwen2: q, k, v
    "self_attn.k_proj.bias": (("self_attention", "b_k"), False),
    "self_attn.v_proj.bias": (("self_attention", "b_v"), False),
    "self_attn.o_proj.bias": (("self_attention", "b_o"), False),
    "self_attn.q_norm.weight": (("self_attention", "q_norm", "gamma"), False),  # QK-norm (Qwen3)
    "self_attn.k_norm.weight": (("self_attention", "k_norm", "gamma"), False),
}
MODEL = {
    "model.embed_tokens.weight": (("token_embedding",), False),  # [V, D]
    "model.norm.weight": (("final_norm", "gamma"), False),
}
LM_HEAD = "lm_head.weight"  # absent when the embeddings are tied: minattn unembeds with its .T


def layer_params(get, prefix=""):
    """get(name) -> array or None (prefix + a name of LAYER or LAYER_OPTIONAL) -> one layer's
    params. Raises ValueError naming the first required tensor get does not have."""
    params = {}
    for names, required in ((LAYER, True), (LAYER_OPTIONAL, False)):
        for name, (keys, transpose) in names.items():
            value = get(prefix + name)
            if value is None and required:
                raise ValueError(f"no tensor {prefix + name!r}: a Llama-layout layer needs "
                                 f"{', '.join(prefix + n for n in LAYER)}")
            if value is not None:
                _put(params, keys, linear_weight(value) if transpose else value)
    return packed(params)


def llama_params(get, n_layers):
    """get(name) -> array or None (transformers' names, model.layers.{i}. for layer i) ->
    minattn params for causal_lm {"token_embedding", "layers", "final_norm"[, "lm_head"]}."""
    params = {"layers": [layer_params(get, f"model.layers.{i}.") for i in range(n_layers)]}
    for name, (keys, _) in MODEL.items():
        value = get(name)
        if value is None:
            raise ValueError(f"no tensor {name!r}: a Llama-layout model needs {', '.join(MODEL)}")
        _put(params, keys, value)
    head = get(LM_HEAD)
    if head is not None:  # untied: its own unembedding, [V, D] -> [D, V]
        params["lm_head"] = linear_weight(head)
    return params


def linear_weight(weight):
    """A Linear weight [d_out, d_in] (torch's, a file's) -> minattn's [d_in, d_out], a copy kept
    in the same memory layout (the transpose of a row-major [d_out, d_in]: Fortran order).
    Decoding multiplies one token by each weight, and that matrix-vector product is faster when
    each output's weights are contiguous (with packed(), below: the products' rows of
    benchmarks/bench_smollm2.py and docs/benchmarks.md)."""
    return np.array(weight, order="C").T


def packed(params):
    """params (a tree of dicts and lists) with every array moved into one buffer per dtype,
    side by side, each in its own memory order; returns the same tree, its leaves now views.
    NumPy backs a large buffer with huge pages, so reading every weight once per token misses
    the TLB less: with linear_weight's order, a decode step's products are faster than over
    separate row-major arrays. layer_params packs each layer (an 18 MB buffer for SmolLM2): a
    layer's arrays are copied in, then dropped, so loading holds about one copy of the model at
    a time (docs/benchmarks.md, "Weights in one buffer, each output's weights contiguous")."""
    leaves = []

    def collect(tree):
        for key, value in (tree.items() if isinstance(tree, dict) else enumerate(tree)):
            if isinstance(value, (dict, list)):
                collect(value)
            else:
                leaves.append((tree, key))

    collect(params)
    for dtype in {tree[key].dtype for tree, key in leaves}:
        group = [(tree, key) for tree, key in leaves if tree[key].dtype == dtype]
        sizes = [-(-tree[key].size // 16) * 16 for tree, key in group]  # 64-byte steps
        buffer = np.empty(sum(sizes), dtype)
        start = 0
        for (tree, key), size in zip(group, sizes):
            value = tree[key]
            view = buffer[start:start + value.size]
            view = view.reshape(value.shape[::-1]).T if value.ndim > 1 and \
                value.flags.f_contiguous and not value.flags.c_contiguous else \
                view.reshape(value.shape)  # Fortran order kept (linear_weight's)
            view[...] = value
            tree[key] = view
            start += size
    return params


def names(n_layers):
    """Every name llama_params may ask for, optional ones included."""
    per_layer = [*LAYER, *LAYER_OPTIONAL]
    return [*MODEL, LM_HEAD] + [f"model.layers.{i}.{n}" for i in range(n_layers) for n in per_layer]


def _put(tree, keys, value):
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value
