"""PyTorch interop: copy weights out of torch.nn modules, and translate torch's mask conventions.

Optional, and apart from the core: torch is imported inside the functions that need it, so
`import minattn.interop` works (and imports nothing heavy) where torch is not installed.

    from_torch(module) -> (params, kwargs)   MultiheadAttention, LayerNorm,
                                             TransformerEncoderLayer, TransformerEncoder
    mask_from_torch(attn_mask, key_padding_mask, *, n_heads, dtype) -> one minattn mask

The results reproduce the module in eval mode (no dropout): `multi_head_attention(params, q, k, v,
mask, **kwargs)`, `layer_norm(x, **params, **kwargs)`, `encoder_block(params, x, mask, **kwargs)`,
`encoder(params, x, mask, **kwargs)`.

Two layouts differ between the engines:
- weights: torch.nn.Linear stores [d_out, d_in] (y = x W^T + b); minattn stores [d_in, d_out]
  (y = x @ w + b), so every weight is transposed on the way out.
- batch: minattn is batch-first, [B, L, D]. A torch module built with batch_first=False (torch's
  default) takes [L, B, D]: transpose its inputs and outputs with x.transpose(1, 0, 2).
"""
import numbers

import autograd.numpy as np

from ..rope_scaling import SCHEDULES, check_rope_scaling
from . import llama_layout

_INSTALL_HINT = ("pip install torch (the CPU build: pip install torch --index-url "
                 "https://download.pytorch.org/whl/cpu)")


def _import_torch():
    try:
        import torch
    except ImportError as error:
        raise ImportError(f"minattn.interop.from_torch needs PyTorch: {_INSTALL_HINT}") from error
    return torch


def from_torch(module):
    """Copy a torch module's weights into minattn params: -> (params, kwargs) such that the
    matching minattn function reproduces the module in eval mode. Takes nn.MultiheadAttention
    (-> multi_head_attention), nn.LayerNorm (-> layer_norm), nn.TransformerEncoderLayer
    (-> encoder_block), nn.TransformerEncoder (-> encoder). Weights are transposed to minattn's
    [d_in, d_out] and copied (later changes to the module do not leak in). Raises TypeError for
    other modules and ValueError for configurations minattn does not implement."""
    # torch.nn module -> (params, kwargs) for the matching minattn function (see the docstring).
    torch = _import_torch()
    nn = torch.nn
    # Most specific first: an encoder holds layers, a layer holds attention and norms.
    if isinstance(module, nn.TransformerDecoder):
        return _decoder_from_torch(module)
    if isinstance(module, nn.TransformerDecoderLayer):
        return _decoder_block_from_torch(module)
    if isinstance(module, nn.TransformerEncoder):
        return _encoder_from_torch(module)
    if isinstance(module, nn.TransformerEncoderLayer):
        return _encoder_block_from_torch(module)
    if isinstance(module, nn.MultiheadAttention):
        return _multi_head_from_torch(module)
    if isinstance(module, nn.LayerNorm):
        return _layer_norm_from_torch(module)
    raise TypeError(
        f"from_torch supports torch.nn.MultiheadAttention, LayerNorm, TransformerEncoderLayer, "
        f"TransformerEncoder, TransformerDecoderLayer and TransformerDecoder, "
        f"got {type(module).__name__}"
    )


def _array(tensor):
    # torch tensor -> a NumPy copy in the same dtype, so later changes to the module leave it alone.
    if str(tensor.dtype) not in ("torch.float16", "torch.float32", "torch.float64"):
        raise TypeError(f"parameters must be float16, float32 or float64, got {tensor.dtype} "
                        "(convert the module first, e.g. module.float())")
    return tensor.detach().cpu().numpy().copy()


def _weight(tensor):
    # torch [d_out, d_in] -> minattn [d_in, d_out], in torch's memory layout
    # (llama_layout.linear_weight: decoding's matrix-vector products are faster so)
    return _array(tensor).T


def _bias(tensor, weight):
    # A module built with bias=False has None here; a zero bias computes the same function.
    return np.zeros(weight.shape[1], dtype=weight.dtype) if tensor is None else _array(tensor)


def _multi_head_from_torch(mha):
    # -> ({"w_q", "w_k", "w_v", "w_o": [D, D], "b_q", "b_k", "b_v", "b_o": [D]}, {"n_heads": H})
    if not mha._qkv_same_embed_dim:
        raise ValueError(
            f"MultiheadAttention with kdim={mha.kdim}, vdim={mha.vdim} (not both embed_dim="
            f"{mha.embed_dim}) is not supported: minattn projects query, key and value from d_model"
        )
    if mha.bias_k is not None:
        raise ValueError("MultiheadAttention with add_bias_kv=True is not supported "
                         "(minattn has no learned extra key/value)")
    if mha.add_zero_attn:
        raise ValueError("MultiheadAttention with add_zero_attn=True is not supported "
                         "(minattn appends no zero key/value)")
    # torch packs the three input projections into one [3D, D] matrix, rows q, then k, then v.
    in_weights = mha.in_proj_weight.chunk(3)
    in_biases = (None,) * 3 if mha.in_proj_bias is None else mha.in_proj_bias.chunk(3)
    params = {}
    for name, w, b in zip("qkvo", (*in_weights, mha.out_proj.weight),
                          (*in_biases, mha.out_proj.bias)):
        params[f"w_{name}"] = _weight(w)
        params[f"b_{name}"] = _bias(b, params[f"w_{name}"])
    return params, {"n_heads": mha.num_heads}


def _layer_norm_from_torch(norm):
    # -> ({"gamma": [D], "beta": [D]}, {"eps": eps})
    if len(norm.normalized_shape) != 1:
        raise ValueError(f"LayerNorm over normalized_shape={tuple(norm.normalized_shape)} is not "
                         "supported: minattn normalizes the last dim only")
    if not norm.elementwise_affine:
        raise ValueError("LayerNorm with elementwise_affine=False is not supported "
                         "(it has no parameters to copy, so no dtype to give gamma and beta)")
    gamma = _array(norm.weight)
    beta = np.zeros_like(gamma) if norm.bias is None else _array(norm.bias)  # bias=False
    return {"gamma": gamma, "beta": beta}, {"eps": norm.eps}


def _activation_name(activation):
    # A TransformerEncoderLayer stores a callable (the strings "relu"/"gelu" become F.relu/F.gelu).
    torch = _import_torch()
    if activation is torch.nn.functional.relu or isinstance(activation, torch.nn.ReLU):
        return "relu"
    if activation is torch.nn.functional.gelu:
        return "gelu"
    if isinstance(activation, torch.nn.GELU):
        return {"none": "gelu", "tanh": "gelu_tanh"}[activation.approximate]
    raise ValueError(f"activation {activation!r} is not supported: use 'relu', 'gelu', F.relu, "
                     "F.gelu, nn.ReLU() or nn.GELU() (approximate='none' or 'tanh')")


def _encoder_block_from_torch(layer):
    # -> ({"self_attention", "self_attention_norm", "feed_forward", "feed_forward_norm"},
    #     {n_heads, norm_first, activation, eps}); torch's norm1 is self_attention_norm, norm2
    #     feed_forward_norm
    attention, attention_kwargs = _multi_head_from_torch(layer.self_attn)
    norm1, norm1_kwargs = _layer_norm_from_torch(layer.norm1)
    norm2, norm2_kwargs = _layer_norm_from_torch(layer.norm2)
    if norm1_kwargs["eps"] != norm2_kwargs["eps"]:
        raise ValueError(f"norm1.eps={norm1_kwargs['eps']} and norm2.eps={norm2_kwargs['eps']} "
                         "differ: minattn's encoder_block takes one eps")
    w_1, w_2 = _weight(layer.linear1.weight), _weight(layer.linear2.weight)
    feed_forward = {"w_1": w_1, "b_1": _bias(layer.linear1.bias, w_1),
                    "w_2": w_2, "b_2": _bias(layer.linear2.bias, w_2)}
    params = {"self_attention": attention, "self_attention_norm": norm1,
              "feed_forward": feed_forward, "feed_forward_norm": norm2}
    kwargs = {**attention_kwargs, "norm_first": bool(layer.norm_first),
              "activation": _activation_name(layer.activation), **norm1_kwargs}
    return params, kwargs


def _encoder_from_torch(stack):
    # -> ({"layers": [...]} (+ "final_norm"), kwargs shared by every layer)
    torch = _import_torch()
    return _stack_from_torch(stack, torch.nn.TransformerEncoderLayer, _encoder_block_from_torch,
                             "encoder")


def _stack_from_torch(stack, layer_type, block_from_torch, what):
    # A TransformerEncoder or TransformerDecoder -> ({"layers": [...]} (+ "final_norm"), the
    # kwargs every layer shares): minattn's stacks apply one config to every layer.
    torch = _import_torch()
    if len(stack.layers) == 0:
        raise ValueError(f"{type(stack).__name__} has no layers")
    blocks = []
    for i, layer in enumerate(stack.layers):
        if not isinstance(layer, layer_type):
            raise TypeError(f"layers[{i}] is a {type(layer).__name__}, not a {layer_type.__name__}")
        blocks.append(block_from_torch(layer))
    kwargs = blocks[0][1]
    for i, (_, layer_kwargs) in enumerate(blocks[1:], start=1):
        if layer_kwargs != kwargs:
            raise ValueError(f"layers[{i}] has config {layer_kwargs}, layers[0] has {kwargs}: "
                             f"minattn's {what} applies one config to every layer")
    params = {"layers": [block for block, _ in blocks]}
    if stack.norm is not None:
        if not isinstance(stack.norm, torch.nn.LayerNorm):
            raise TypeError(f"the final norm is a {type(stack.norm).__name__}, not a LayerNorm")
        params["final_norm"], norm_kwargs = _layer_norm_from_torch(stack.norm)
        if norm_kwargs["eps"] != kwargs["eps"]:
            raise ValueError(f"the final norm's eps={norm_kwargs['eps']} differs from the layers' "
                             f"eps={kwargs['eps']}: minattn's {what} takes one eps")
    return params, kwargs


def mask_from_torch(attn_mask=None, key_padding_mask=None, *, n_heads=None, dtype=None):
    """Translate torch's masks (bool True = IGNORE, or floating = added) into one minattn
    mask (bool True = MAY attend, or floating = added) broadcasting to [B, H, L_q, L_k].
    attn_mask [L_q, L_k] or [B * H, L_q, L_k] (then pass n_heads), key_padding_mask [B, L_k];
    None when both are None. dtype= asks for an additive mask of that dtype."""
    # attn_mask [L_q, L_k] or [B * H, L_q, L_k], key_padding_mask [B, L_k], in torch's convention
    # (boolean True = ignore, floating = added) -> one minattn mask (boolean True = may attend,
    # floating = added) that broadcasts to the scores [B, H, L_q, L_k]; None if both are None.
    # Both boolean -> boolean, unless `dtype` asks for an additive mask; any floating -> floating.
    masks = []  # each in a layout that broadcasts to [B, H, L_q, L_k]
    if attn_mask is not None:
        attn_mask = _mask_array("attn_mask", attn_mask)
        if attn_mask.ndim == 3:
            attn_mask = _split_batch_heads(attn_mask, n_heads)  # [B, H, L_q, L_k]
        elif attn_mask.ndim != 2:
            raise ValueError(f"attn_mask must have shape (L_q, L_k) or (B * n_heads, L_q, L_k), "
                             f"got shape {tuple(attn_mask.shape)}")
        masks.append(attn_mask)
    if key_padding_mask is not None:
        key_padding_mask = _mask_array("key_padding_mask", key_padding_mask)
        if key_padding_mask.ndim != 2:
            raise ValueError(f"key_padding_mask must have shape (B, L_k), "
                             f"got shape {tuple(key_padding_mask.shape)}")
        # [B, 1, 1, L_k]: the same keys are hidden from every head and every query.
        masks.append(key_padding_mask[:, None, None, :])
    if not masks:
        return None
    if len(masks) == 2:
        _check_compatible(attn_mask, key_padding_mask)

    floating = [m.dtype for m in masks if m.dtype.kind == "f"]
    if dtype is None and not floating:
        may_attend = [~m for m in masks]  # torch's True = ignore is minattn's False
        return may_attend[0] if len(masks) == 1 else may_attend[0] & may_attend[1]
    dtype = np.result_type(*floating) if dtype is None else _floating_dtype(dtype)
    # A boolean mask beside a floating one becomes -inf where torch ignores: what torch itself
    # does before adding the two; exp(-inf) is exactly 0, so no weight leaks through.
    added = [np.where(m, -np.inf, 0.0).astype(dtype) if m.dtype.kind == "b" else m.astype(dtype)
             for m in masks]
    return added[0] if len(added) == 1 else added[0] + added[1]


def _mask_array(name, mask):
    if hasattr(mask, "detach"):  # a torch tensor: to NumPy without importing torch here
        mask = mask.detach().cpu().numpy()
    elif isinstance(mask, (list, tuple)):
        mask = np.array(mask)
    if not hasattr(mask, "dtype"):
        raise TypeError(f"{name} must be a tensor or array, got {type(mask).__name__}")
    if np.dtype(mask.dtype).kind not in "bf":
        raise TypeError(f"{name} must be boolean (True = ignore, torch's convention) or floating "
                        f"(added to the scores), got dtype {mask.dtype}")
    return mask


def _split_batch_heads(attn_mask, n_heads):
    # [B * H, L_q, L_k] -> [B, H, L_q, L_k]; torch orders the first axis batch-major (b * H + h).
    if n_heads is None:
        raise ValueError(f"attn_mask of shape {tuple(attn_mask.shape)} is (B * n_heads, L_q, L_k): "
                         "pass n_heads= to split it into (B, n_heads, L_q, L_k)")
    if isinstance(n_heads, bool) or not isinstance(n_heads, numbers.Integral) or n_heads < 1:
        raise TypeError(f"n_heads must be a positive int, got {n_heads!r}")
    if attn_mask.shape[0] % n_heads:
        raise ValueError(f"attn_mask's first dim {attn_mask.shape[0]} is not B * n_heads "
                         f"for n_heads={n_heads}")
    return np.reshape(attn_mask, (-1, n_heads) + tuple(attn_mask.shape[1:]))


def _check_compatible(attn_mask, key_padding_mask):
    if attn_mask.shape[-1] != key_padding_mask.shape[-1]:
        raise ValueError(f"attn_mask {tuple(attn_mask.shape)} and key_padding_mask "
                         f"{tuple(key_padding_mask.shape)} disagree on L_k (their last dims)")
    if attn_mask.ndim == 4 and attn_mask.shape[0] != key_padding_mask.shape[0]:
        raise ValueError(f"attn_mask split into {tuple(attn_mask.shape)} (B, H, L_q, L_k) and "
                         f"key_padding_mask {tuple(key_padding_mask.shape)} disagree on B")


def _floating_dtype(dtype):
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a NumPy floating dtype such as np.float32, "
                        f"got {dtype!r}") from None
    if dtype.kind != "f":
        raise TypeError(f"dtype must be a floating dtype (an additive mask), got {dtype}")
    return dtype


def _decoder_block_from_torch(layer):
    # -> ({"self_attention", "self_attention_norm", "cross_attention", "cross_attention_norm",
    #     "feed_forward", "feed_forward_norm"}, {n_heads, norm_first, activation, eps}) for
    #     minattn.transformer_decoder.decoder_block (torch's norm1, norm2, norm3, in that order)
    self_attention, kwargs = _multi_head_from_torch(layer.self_attn)
    cross_attention, _ = _multi_head_from_torch(layer.multihead_attn)
    norms = [_layer_norm_from_torch(n) for n in (layer.norm1, layer.norm2, layer.norm3)]
    if len({norm_kwargs["eps"] for _, norm_kwargs in norms}) != 1:
        raise ValueError("norm1, norm2 and norm3 have different eps: minattn's decoder_block "
                         "takes one eps")
    w_1, w_2 = _weight(layer.linear1.weight), _weight(layer.linear2.weight)
    params = {"self_attention": self_attention, "self_attention_norm": norms[0][0],
              "cross_attention": cross_attention, "cross_attention_norm": norms[1][0],
              "feed_forward": {"w_1": w_1, "b_1": _bias(layer.linear1.bias, w_1),
                               "w_2": w_2, "b_2": _bias(layer.linear2.bias, w_2)},
              "feed_forward_norm": norms[2][0]}
    return params, {**kwargs, "norm_first": bool(layer.norm_first),
                    "activation": _activation_name(layer.activation), **norms[0][1]}


def _decoder_from_torch(stack):
    # -> ({"layers": [...]} (+ "final_norm"), kwargs shared by every layer)
    torch = _import_torch()
    return _stack_from_torch(stack, torch.nn.TransformerDecoderLayer, _decoder_block_from_torch,
                             "decoder")


def from_hf(model):
    """Copy a Hugging Face transformers causal LM into minattn: -> (params, config) such that
    minattn.causal_lm(params, tokens, attention_mask, **config) returns model(tokens,
    attention_mask).logits (eval mode; left padding with generate's positions) and
    minattn.generate(params, tokens, n, **config) model.generate(tokens, max_new_tokens=n,
    do_sample=False). Chosen by architecture (config.model_type, so a subclass works): see
    FROM_HF; anything else, mixture-of-experts included, is refused naming what is missing.
    Each converter reads the config keys its family's transformers forward reads, as that
    forward reads them, and refuses by name a value it does not implement or a key the config
    sets and the forward ignores (tests/test_hf_config_keys.py classifies every key). Reads the
    RoPE settings of transformers 5 (rope_parameters) and 4.x (rope_theta, rope_scaling).
    Nothing is downloaded."""
    # transformers model -> (params, config) for minattn.causal_lm
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    experts = [k for k in _EXPERT_KEYS if getattr(config, k, None)]
    if experts and model_type not in ("deepseek_v3", "qwen3_next"):  # their converters check
        # which layers are dense
        raise ValueError(f"{type(model).__name__} ({model_type}): mixture of experts layers "
                         f"({', '.join(f'{k}={getattr(config, k)}' for k in experts)}) are not "
                         "supported: minattn has no experts layer")
    if model_type not in FROM_HF or not hasattr(model, "lm_head"):
        raise TypeError(f"from_hf supports causal LMs (with an lm_head) of model_type "
                        f"{', '.join(map(repr, FROM_HF))}; got {type(model).__name__} "
                        f"(model_type={model_type!r})")
    _refuse_what_the_forward_reads_otherwise(config)
    return FROM_HF[model_type](model)


def _refuse_what_the_forward_reads_otherwise(config):
    # Keys transformers' forward reads whatever the family: masking_utils builds a bidirectional
    # mask where config.is_causal is False (Gemma 2 and 3: use_bidirectional_attention), and
    # then whether a sdpa call is causal depends on the attention implementation. minattn's
    # language model is causal: refused by name.
    if getattr(config, "is_causal", True) is not True:
        raise ValueError(f"is_causal={config.is_causal!r} (bidirectional attention) is not "
                         "supported: minattn's causal_lm is causal")
    if getattr(config, "use_bidirectional_attention", False):
        raise ValueError("use_bidirectional_attention=True is not supported: transformers then "
                         "drops the causal mask (and Gemma 3 makes the sliding window "
                         "symmetric); minattn's causal_lm is causal")


_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")


def _unembedding(model, embedding):
    # Tied embeddings share one tensor: minattn then unembeds with token_embedding.T.
    head = model.lm_head.weight
    return {} if head.data_ptr() == embedding.data_ptr() else {"lm_head": _weight(head)}


def rope_settings(config, layer_type=None, partial_rotary_factor=1.0):
    """(rope_base, rope_scaling) from a transformers config: transformers 5's
    config.rope_parameters, else 4.x's config.rope_theta and config.rope_scaling; refused when
    neither is there (never a silent default). layer_type: "sliding_attention" or
    "full_attention", for models whose layer types have their own RoPE (Gemma 3: 5's
    rope_parameters per layer type, 4.x's rope_local_base_freq for the sliding layers).
    partial_rotary_factor: the one the caller's family applies (1: a family that rotates whole
    heads); the config's must equal it."""
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and layer_type in rope:  # transformers 5, per layer type
        rope = _nested_rope(rope, layer_type)
    elif isinstance(rope, dict):  # transformers 5
        pass
    elif layer_type == "sliding_attention" and getattr(config, "rope_local_base_freq", None):
        rope = {"rope_theta": config.rope_local_base_freq}  # 4.x Gemma 3: local layers unscaled
    elif getattr(config, "rope_theta", None) is not None:  # transformers 4.x
        rope = {"rope_theta": config.rope_theta, **(getattr(config, "rope_scaling", None) or {})}
    if not isinstance(rope, dict) or "rope_theta" not in rope:
        raise ValueError(f"cannot read the RoPE settings of {type(config).__name__}: it has "
                         "neither rope_parameters (transformers 5) nor rope_theta (4.x)")
    rope = {k: v for k, v in rope.items() if v is not None}
    rope_type = rope.pop("rope_type", rope.pop("type", "default"))  # 4.x's older key: "type"
    base = float(rope.pop("rope_theta"))
    if rope.pop("partial_rotary_factor", 1.0) != partial_rotary_factor:
        raise ValueError(f"{type(config).__name__}: partial_rotary_factor != 1 (RoPE on part of "
                         "each head) is not supported by this family's converter")
    if rope_type == "default":
        return base, None
    if rope_type == "dynamic":  # transformers scales from max_position_embeddings
        rope = {"factor": rope["factor"],
                "max_position_embeddings": config.max_position_embeddings}
    if rope_type in ("llama3", "yarn", "longrope"):  # 4.x Phi-3 kept it beside rope_scaling
        original = getattr(config, "original_max_position_embeddings", None)
        rope.setdefault("original_max_position_embeddings", original)
    if rope_type in ("yarn", "longrope") and "factor" not in rope and \
            rope["original_max_position_embeddings"] is not None:  # transformers' default factor
        rope["factor"] = config.max_position_embeddings / rope["original_max_position_embeddings"]
    rope = {k: v for k, v in rope.items() if v is not None}
    if rope_type not in SCHEDULES:
        raise ValueError(f"RoPE type {rope_type!r} is not supported (minattn has "
                         f"'default', {', '.join(map(repr, SCHEDULES))})")
    scaling = {"rope_type": rope_type, **rope}
    check_rope_scaling(scaling, f"{type(config).__name__}'s RoPE scaling")
    return base, scaling


def _nested_rope(rope, layer_type):
    # transformers' YaRN reads `truncate` from the top level of rope_parameters
    # (config.rope_parameters.get("truncate", True)), never from a layer type's own dict: a
    # layer type's truncate that disagrees with the top level's is refused, not picked.
    layer = dict(rope[layer_type])
    read = rope.get("truncate", True)
    if layer.get("rope_type") == "yarn" and layer.get("truncate", read) != read:
        raise ValueError(f"rope_parameters[{layer_type!r}]['truncate']={layer['truncate']!r} "
                         f"disagrees with what transformers' YaRN reads, the top level's "
                         f"rope_parameters.get('truncate', True) = {read!r}")
    return {**layer, "truncate": read} if layer.get("rope_type") == "yarn" else layer


def check_silu(config):
    """SwiGLU's gate is SiLU: any other hidden_act is refused by name (every SwiGLU family)."""
    if config.hidden_act != "silu":
        raise ValueError(f"hidden_act={config.hidden_act!r} is not supported (SwiGLU uses 'silu')")


def _llama_from_hf(model, layer_from_hf=None, activation_key="hidden_act", rope=None):
    # Llama and the models built like it (Mistral, Qwen2, Qwen3, Phi-3): RMSNorm, RoPE, SwiGLU,
    # GQA. Llama's own layers are read through llama_layout, the name map the GGUF and
    # safetensors loaders share (models/chat_model.py); a family with other tensor names passes
    # its own layer_from_hf.
    config = model.config
    if layer_from_hf is None:
        tensors = dict(model.named_parameters())  # a tied lm_head is embed_tokens': listed once
        unknown = sorted(set(tensors) - set(llama_layout.names(len(model.model.layers))))
        if unknown:  # mlp_bias=True, or a part of another architecture: refused, never dropped
            raise ValueError(f"{type(model).__name__} has tensors outside the Llama layout: "
                             f"{', '.join(unknown[:4])}{' ...' if len(unknown) > 4 else ''} "
                             "(mlp_bias=True is not supported: minattn's SwiGLU has no biases)")
    kwargs = llama_config(config, len(model.model.layers), activation_key=activation_key,
                          rope=rope)
    inner = model.model
    layer_from_hf = layer_from_hf or _llama_layer_from_hf
    layers = [layer_from_hf(layer) for layer in inner.layers]
    params = {"token_embedding": _array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": {"gamma": _array(inner.norm.weight)},
              **_unembedding(model, inner.embed_tokens.weight)}
    return params, kwargs


def llama_config(config, n_layers, *, activation_key="hidden_act", rope=None):
    """A transformers Llama-style config (or any object with its attributes, e.g. config.json
    read into a SimpleNamespace) -> the keyword arguments of causal_lm. rope(config, n_layers)
    -> (rope_base, rope_scaling) for families whose layer types have their own RoPE."""
    partial = partial_rotary_factor(config) if config.model_type in _PARTIAL_ROPE else 1.0
    rope_base, rope_scaling = rope(config, n_layers) if rope else \
        rope_settings(config, partial_rotary_factor=partial)
    n_heads = config.num_attention_heads
    d_k = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    if activation_key:
        check_silu(config)
    kwargs = {"n_heads": n_heads, "n_kv_heads": config.num_key_value_heads, "d_k": d_k,
              "norm": "rms_norm", "activation": "swiglu", "eps": config.rms_norm_eps,
              "position": "rope", "rope_base": rope_base, "rope_scaling": rope_scaling,
              "window": _windows(config, n_layers)}
    if partial != 1.0:
        kwargs["partial_rotary_factor"] = partial
    return kwargs


# The families whose transformers forward rotates part of each head (apply_rotary_pos_emb
# splitting off cos.shape[-1] features); Llama's, Mistral's and Qwen's rotate the whole head
# (a partial_rotary_factor there fails in transformers, and is refused here).
_PARTIAL_ROPE = ("phi3",)


def partial_rotary_factor(config):
    """The fraction of each head RoPE rotates: transformers 5's
    config.rope_parameters["partial_rotary_factor"], else 4.x's config.partial_rotary_factor,
    else 1."""
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("partial_rotary_factor") is not None:
        return float(rope["partial_rotary_factor"])
    return float(getattr(config, "partial_rotary_factor", None) or 1.0)


def _llama_layer_from_hf(layer):
    # One decoder layer's modules -> its params, through llama_layout (Gemma's converter adds its
    # own norms on top).
    if getattr(layer.mlp.gate_proj, "bias", None) is not None:
        raise ValueError("mlp_bias=True is not supported: minattn's SwiGLU has no biases")
    tensors = dict(layer.named_parameters())
    return llama_layout.layer_params(
        lambda name: _array(tensors[name]) if name in tensors else None)


def _llama_sublayers_from_hf(layer):
    a, m = layer.self_attn, layer.mlp
    attention = {}
    for p, proj in zip("qkvo", (a.q_proj, a.k_proj, a.v_proj, a.o_proj)):
        attention[f"w_{p}"] = _weight(proj.weight)
        if proj.bias is not None:  # attention_bias=True; Qwen2: q, k, v only
            attention[f"b_{p}"] = _array(proj.bias)
    for key in ("q_norm", "k_norm"):  # QK-norm (Qwen3)
        if getattr(a, key, None) is not None:
            attention[key] = {"gamma": _array(getattr(a, key).weight)}
    if getattr(m.gate_proj, "bias", None) is not None:
        raise ValueError("mlp_bias=True is not supported: minattn's SwiGLU has no biases")
    return {"self_attention": attention,
            "feed_forward": {"w_gate": _weight(m.gate_proj.weight),
                             "w_up": _weight(m.up_proj.weight),
                             "w_down": _weight(m.down_proj.weight)}}


def _gpt_neox_from_hf(model):
    # GPT-NeoX (Pythia): LayerNorm, partial RoPE, a GELU feed-forward with biases, q, k, v fused
    # head by head, and the parallel residual x + attention(ln_1(x)) + mlp(ln_2(x)) (or GPT-2's
    # sequential one: use_parallel_residual=False).
    config, inner = model.config, model.gpt_neox
    activations = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                   "relu": "relu"}
    if config.hidden_act not in activations:
        raise ValueError(f"hidden_act={config.hidden_act!r} is not supported (minattn has "
                         f"{', '.join(map(repr, activations))})")
    partial = partial_rotary_factor(config)
    rope_base, rope_scaling = rope_settings(config, partial_rotary_factor=partial)
    n_heads = config.num_attention_heads
    layers = [_gpt_neox_layer_from_hf(layer, n_heads) for layer in inner.layers]
    params = {"token_embedding": _array(inner.embed_in.weight), "layers": layers,
              "final_norm": _layer_norm_from_torch(inner.final_layer_norm)[0],
              **_unembedding(model, inner.embed_in.weight)}
    kwargs = {"n_heads": n_heads, "norm": "layer_norm",
              "activation": activations[config.hidden_act], "eps": config.layer_norm_eps,
              "position": "rope", "rope_base": rope_base, "rope_scaling": rope_scaling,
              "partial_rotary_factor": partial, "parallel": bool(config.use_parallel_residual)}
    return params, kwargs


def _gpt_neox_layer_from_hf(layer, n_heads):
    a, m = layer.attention, layer.mlp
    # query_key_value's output is [H, 3, d_k] (view(..., H, 3 d_k), then chunk(3)): head h's
    # q, k and v are its three consecutive d_k-wide slices.
    w = _weight(a.query_key_value.weight)  # [D, 3 D]
    d_k = w.shape[1] // (3 * n_heads)
    heads = np.reshape(w, (w.shape[0], n_heads, 3, d_k))
    attention = {f"w_{p}": np.reshape(heads[:, :, i], (w.shape[0], n_heads * d_k))
                 for i, p in enumerate("qkv")}
    if a.query_key_value.bias is not None:  # attention_bias=True (the default)
        biases = np.reshape(_array(a.query_key_value.bias), (n_heads, 3, d_k))
        attention.update({f"b_{p}": np.reshape(biases[:, i], (n_heads * d_k,))
                          for i, p in enumerate("qkv")})
    attention["w_o"] = _weight(a.dense.weight)
    if a.dense.bias is not None:
        attention["b_o"] = _array(a.dense.bias)
    return {"self_attention": attention,
            "self_attention_norm": _layer_norm_from_torch(layer.input_layernorm)[0],
            "feed_forward": {"w_1": _weight(m.dense_h_to_4h.weight),
                             "b_1": _array(m.dense_h_to_4h.bias),
                             "w_2": _weight(m.dense_4h_to_h.weight),
                             "b_2": _array(m.dense_4h_to_h.bias)},
            "feed_forward_norm": _layer_norm_from_torch(layer.post_attention_layernorm)[0]}


def _refuse_per_head_layer_norm(key, family):
    raise ValueError(f"{key}=True is not supported: {family}'s QK-norm is a LayerNorm with its "
                     "own weights per head; minattn's QK-norm is one RMSNorm shared by the heads")


def _stablelm_from_hf(model):
    # StableLM: Llama's attention and SwiGLU with LayerNorm, partial RoPE, q/k/v biases
    # (use_qkv_bias), and GPT-NeoX's parallel residual where use_parallel_residual, its two
    # sublayers then reading the same input_layernorm.
    config, inner = model.config, model.model
    if config.qk_layernorm:
        _refuse_per_head_layer_norm("qk_layernorm", "StableLM")
    check_silu(config)
    partial = partial_rotary_factor(config)
    rope_base, rope_scaling = rope_settings(config, partial_rotary_factor=partial)
    parallel = bool(config.use_parallel_residual)
    layers = []
    for layer in inner.layers:
        block = _llama_sublayers_from_hf(layer)
        block["self_attention_norm"] = _layer_norm_from_torch(layer.input_layernorm)[0]
        block["feed_forward_norm"] = block["self_attention_norm"] if parallel else \
            _layer_norm_from_torch(layer.post_attention_layernorm)[0]
        layers.append(block)
    params = {"token_embedding": _array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": _layer_norm_from_torch(inner.norm)[0],
              **_unembedding(model, inner.embed_tokens.weight)}
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "norm": "layer_norm", "activation": "swiglu", "eps": config.layer_norm_eps,
              "position": "rope", "rope_base": rope_base, "rope_scaling": rope_scaling,
              "partial_rotary_factor": partial, "parallel": parallel}
    return params, kwargs


def _smollm3_from_hf(model):
    # SmolLM3: Llama with layers that have no RoPE at all (NoPE: no_rope_layers[i] == 0), told
    # to causal_lm by a rope_base of None for those layers.
    config = model.config
    params, kwargs = _llama_from_hf(model)
    rotated = list(config.no_rope_layers)[:len(params["layers"])]
    if len(rotated) != len(params["layers"]):
        raise ValueError(f"no_rope_layers has {len(rotated)} entries for "
                         f"{len(params['layers'])} layers")
    kwargs["rope_base"] = [kwargs["rope_base"] if use else None for use in rotated]
    return params, kwargs


def _cohere_from_hf(model):
    # Cohere (Command R): a parallel block under one LayerNorm without bias, SwiGLU, logits times
    # logit_scale (folded into the unembedding, untied), and interleaved RoPE, which pairs
    # features (2i, 2i + 1): each head's q and k columns are reordered to (even..., odd...) here,
    # where minattn's rotate-half pairs i with i + d/2 (the same rotation; section 20 of the
    # walkthrough, DeepSeek's interleaved RoPE).
    config, inner = model.config, model.model
    if config.use_qk_norm:
        _refuse_per_head_layer_norm("use_qk_norm", "Cohere")
    check_silu(config)
    rope_base, rope_scaling = rope_settings(config)
    n_heads, n_kv_heads = config.num_attention_heads, config.num_key_value_heads
    d_k = config.hidden_size // n_heads
    layers = []
    for layer in inner.layers:
        block = _llama_sublayers_from_hf(layer)
        attention = block["self_attention"]
        for p, heads in (("q", n_heads), ("k", n_kv_heads)):
            for key in (f"w_{p}", f"b_{p}"):
                if key in attention:
                    attention[key] = _halves_from_interleaved(attention[key], heads, d_k)
        norm = {"gamma": _array(layer.input_layernorm.weight)}
        norm["beta"] = np.zeros_like(norm["gamma"])  # CohereLayerNorm has no bias
        block.update(self_attention_norm=norm, feed_forward_norm=norm)
        layers.append(block)
    final = {"gamma": _array(inner.norm.weight)}
    unembedding = _unembedding(model, inner.embed_tokens.weight).get(
        "lm_head", _array(inner.embed_tokens.weight).T)
    params = {"token_embedding": _array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": {**final, "beta": np.zeros_like(final["gamma"])},
              "lm_head": unembedding * config.logit_scale}
    kwargs = {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "norm": "layer_norm",
              "activation": "swiglu", "eps": config.layer_norm_eps, "position": "rope",
              "rope_base": rope_base, "rope_scaling": rope_scaling, "parallel": True}
    return params, kwargs


def _halves_from_interleaved(w, n_heads, d_k):
    # [..., H d_k] with each head's features in RoPE pairs (x0, x1), (x2, x3), ... ->
    # (x0, x2, ..., x1, x3, ...): the pairs (i, i + d_k/2) of rotate-half.
    heads = np.reshape(w, w.shape[:-1] + (n_heads, d_k))
    return np.reshape(np.concatenate([heads[..., 0::2], heads[..., 1::2]], axis=-1), w.shape)


def _olmo_from_hf(model):
    # OLMo 2 and 3: Llama's block with its norms after the sublayers only,
    # x + post_norm(sublayer(x)), and QK-norm over all heads at once (gammas [H d_k] and
    # [H_kv d_k]); OLMo 3 adds local (sliding) and global layers with their own RoPE.
    rope = None if model.config.model_type == "olmo2" else _per_layer_rope
    return _llama_from_hf(model, _olmo_layer_from_hf, rope=rope)


def _olmo_layer_from_hf(layer):
    return {**_llama_sublayers_from_hf(layer),
            "post_self_attention_norm": {"gamma": _array(layer.post_attention_layernorm.weight)},
            "post_feed_forward_norm": {"gamma": _array(layer.post_feedforward_layernorm.weight)}}


def _per_layer_rope(config, n_layers):
    # -> (rope_base, rope_scaling), each one value or a list with one entry per layer: the RoPE of
    # each layer's type (Gemma 3, OLMo 3: transformers 5's rope_parameters per layer type).
    types = list(getattr(config, "layer_types", None) or ["full_attention"] * n_layers)
    bases, scalings = zip(*(rope_settings(config, t) for t in types[:n_layers]))
    same = lambda values: values[0] if len(set(map(repr, values))) == 1 else list(values)
    return same(bases), same(scalings)


def _phi_from_hf(model):
    # Phi (1, 1.5, 2): GPT-NeoX's parallel block under one LayerNorm, partial RoPE, q/k/v/o and
    # a GELU feed-forward with biases, and an unembedding with a bias.
    config, inner = model.config, model.model
    if config.qk_layernorm:
        raise ValueError("qk_layernorm=True is not supported: Phi's QK-norm is a LayerNorm; "
                         "minattn's QK-norm is an RMSNorm")
    activations = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
                   "relu": "relu"}
    if config.hidden_act not in activations:
        raise ValueError(f"hidden_act={config.hidden_act!r} is not supported (minattn has "
                         f"{', '.join(map(repr, activations))})")
    partial = partial_rotary_factor(config)
    rope_base, rope_scaling = rope_settings(config, partial_rotary_factor=partial)
    layers = []
    for layer in inner.layers:
        a, m = layer.self_attn, layer.mlp
        attention = {}
        for p, proj in zip("qkvo", (a.q_proj, a.k_proj, a.v_proj, a.dense)):
            attention[f"w_{p}"], attention[f"b_{p}"] = _weight(proj.weight), _array(proj.bias)
        norm = _layer_norm_from_torch(layer.input_layernorm)[0]  # one norm, both sublayers
        layers.append({"self_attention": attention, "self_attention_norm": norm,
                       "feed_forward": {"w_1": _weight(m.fc1.weight), "b_1": _array(m.fc1.bias),
                                        "w_2": _weight(m.fc2.weight), "b_2": _array(m.fc2.bias)},
                       "feed_forward_norm": norm})
    params = {"token_embedding": _array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": _layer_norm_from_torch(inner.final_layernorm)[0],
              **_unembedding(model, inner.embed_tokens.weight),
              "lm_head_bias": _array(model.lm_head.bias)}
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "norm": "layer_norm", "activation": activations[config.hidden_act],
              "eps": config.layer_norm_eps, "position": "rope", "rope_base": rope_base,
              "rope_scaling": rope_scaling, "partial_rotary_factor": partial, "parallel": True}
    return params, kwargs


def _granite_from_hf(model):
    # Granite: Llama's block with four multipliers, each a scalar on a linear map's input or
    # output, so each lands on a weight or on an existing keyword: the embeddings times
    # embedding_multiplier (embedding_scale), the scores times attention_multiplier (in place of
    # 1/sqrt(d_k): query_pre_attn_scalar = attention_multiplier^-2), each sublayer's output times
    # residual_multiplier (folded into w_o and w_down), the logits divided by logits_scaling
    # (folded into the unembedding, untied).
    config = model.config
    for key in ("embedding_multiplier", "attention_multiplier", "residual_multiplier",
                "logits_scaling"):
        if not getattr(config, key) > 0:
            raise ValueError(f"{key}={getattr(config, key)!r} is not supported (a positive "
                             "scale)")
    params, kwargs = _llama_from_hf(model)
    residual = config.residual_multiplier
    for layer in params["layers"]:
        attention, feed = layer["self_attention"], layer["feed_forward"]
        attention.update({k: attention[k] * residual for k in ("w_o", "b_o") if k in attention})
        feed["w_down"] = feed["w_down"] * residual
    unembedding = params.get("lm_head", params["token_embedding"].T)
    params["lm_head"] = unembedding / config.logits_scaling
    kwargs.update(embedding_scale=config.embedding_multiplier,
                  query_pre_attn_scalar=config.attention_multiplier ** -2)
    return params, kwargs


def _phi3_from_hf(model):
    # Phi-3: Llama's block with q, k, v fused in one projection and gate, up in another.
    return _llama_from_hf(model, _phi3_layer_from_hf)


def _phi3_layer_from_hf(layer):
    a, m = layer.self_attn, layer.mlp
    w_qkv, w_gate_up = _weight(a.qkv_proj.weight), _weight(m.gate_up_proj.weight)  # [D, ...]
    q_width = a.config.num_attention_heads * a.head_dim
    kv_width = a.num_key_value_heads * a.head_dim
    d_ff = w_gate_up.shape[1] // 2  # gate_up_proj's output: gate, then up (its .chunk(2))
    return {"self_attention": {"w_q": w_qkv[:, :q_width],
                               "w_k": w_qkv[:, q_width:q_width + kv_width],
                               "w_v": w_qkv[:, q_width + kv_width:],
                               "w_o": _weight(a.o_proj.weight)},
            "self_attention_norm": {"gamma": _array(layer.input_layernorm.weight)},
            "feed_forward": {"w_gate": w_gate_up[:, :d_ff], "w_up": w_gate_up[:, d_ff:],
                             "w_down": _weight(m.down_proj.weight)},
            "feed_forward_norm": {"gamma": _array(layer.post_attention_layernorm.weight)}}


def _windows(config, n_layers):
    # -> None (every layer global), an int (every layer a sliding window), or a list with one
    # entry per layer (None: global). What each family's forward reads (transformers 5.24):
    # Llama, Granite, Cohere, OLMo 2 and Gemma 1 no window at all (a sliding_window attribute is
    # ignored); Mistral and Phi-3 config.sliding_window on every layer; Qwen2, Qwen3, SmolLM3,
    # OLMo 3, Gemma 2 and 3 config.sliding_window on the layers config.layer_types names
    # "sliding_attention" (Qwen's use_sliding_window and max_window_layers are folded into those
    # two by its config, and not read by its forward).
    family = config.model_type
    if family in ("llama", "gemma", "granite", "cohere", "olmo2"):
        return None
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if family in ("mistral", "phi3"):
        if types is not None:  # transformers warns that Mistral ignores them
            raise ValueError(f"layer_types={types!r} on a {family} config: its transformers "
                             "forward ignores them and applies sliding_window to every layer; "
                             "refused rather than picking one")
        return None if window is None else int(window)
    types = list(types or ["full_attention"] * n_layers)
    if family == "smollm3" and "sliding_attention" in types and not config.use_sliding_window:
        raise ValueError("layer_types names sliding_attention layers but use_sliding_window is "
                         "False: transformers' SmolLM3 masks those layers by the window under "
                         "sdpa and eager but not under flash attention; refused rather than "
                         "picking one")
    unknown = set(types) - {"full_attention", "sliding_attention"}
    if unknown:
        raise ValueError(f"layer_types {sorted(unknown)} are not supported (minattn has "
                         "'full_attention' and 'sliding_attention')")
    if window is None and "sliding_attention" in types:
        raise ValueError("layer_types names sliding_attention layers but sliding_window is None")
    windows = [int(window) if t == "sliding_attention" else None for t in types[:n_layers]]
    return windows if len(set(windows)) > 1 else windows[0]


def _gpt2_from_hf(model):
    config = model.config
    activations = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu",
                   "gelu": "gelu"}
    if config.activation_function not in activations:
        raise ValueError(f"activation_function={config.activation_function!r} is not supported "
                         f"(minattn has {', '.join(map(repr, activations))})")
    if getattr(config, "scale_attn_by_inverse_layer_idx", False) or \
            getattr(config, "reorder_and_upcast_attn", False) or not config.scale_attn_weights:
        raise ValueError("GPT-2 attention variants (scale_attn_by_inverse_layer_idx, "
                         "reorder_and_upcast_attn, scale_attn_weights=False) are not supported")
    inner, d_model = model.transformer, config.n_embd
    layers = []
    for block in inner.h:
        # GPT-2's Conv1D stores its weight [d_in, d_out] already: no transpose. c_attn packs
        # q, k, v side by side along d_out.
        w_qkv, b_qkv = _array(block.attn.c_attn.weight), _array(block.attn.c_attn.bias)
        attention = {f"w_{p}": w_qkv[:, i * d_model:(i + 1) * d_model] for i, p in enumerate("qkv")}
        attention.update({f"b_{p}": b_qkv[i * d_model:(i + 1) * d_model]
                          for i, p in enumerate("qkv")})
        attention["w_o"], attention["b_o"] = (_array(block.attn.c_proj.weight),
                                              _array(block.attn.c_proj.bias))
        layers.append({
            "self_attention": attention,
            "self_attention_norm": _layer_norm_from_torch(block.ln_1)[0],
            "feed_forward": {"w_1": _array(block.mlp.c_fc.weight), "b_1": _array(block.mlp.c_fc.bias),
                             "w_2": _array(block.mlp.c_proj.weight),
                             "b_2": _array(block.mlp.c_proj.bias)},
            "feed_forward_norm": _layer_norm_from_torch(block.ln_2)[0]})
    params = {"token_embedding": _array(inner.wte.weight),
              "position_embedding": _array(inner.wpe.weight), "layers": layers,
              "final_norm": _layer_norm_from_torch(inner.ln_f)[0],
              **_unembedding(model, inner.wte.weight)}
    kwargs = {"n_heads": config.n_head, "norm": "layer_norm",
              "activation": activations[config.activation_function],
              "eps": config.layer_norm_epsilon, "position": "learned"}
    return params, kwargs


def _gemma1_from_hf(model):
    # Gemma (1): Llama's block with Gemma's RMSNorm (1 + w), embeddings times sqrt(D) and the
    # tanh-GELU gated feed-forward (its hidden_act; Gemma 2 and 3 read hidden_activation).
    config, inner = model.config, model.model
    _check_tanh_gelu("hidden_act", config.hidden_act)
    params, kwargs = _llama_from_hf(model, _gemma1_layer_from_hf, activation_key=None)
    params["final_norm"] = _one_plus(inner.norm)
    scale = inner.embed_tokens.embed_scale  # the model's own value (a float32 buffer)
    kwargs.update(activation="geglu_tanh", embedding_scale=float(scale))
    return params, kwargs


def _gemma1_layer_from_hf(layer):
    block = _llama_layer_from_hf(layer)
    block.update(self_attention_norm=_one_plus(layer.input_layernorm),
                 feed_forward_norm=_one_plus(layer.post_attention_layernorm))
    return block


def _one_plus(norm):  # Gemma's RMSNorm scales by (1 + w): stored as gamma = 1 + w
    return {"gamma": 1.0 + _array(norm.weight)}


def _check_tanh_gelu(key, value):
    if value not in ("gelu_pytorch_tanh", "gelu_new"):
        raise ValueError(f"{key}={value!r} is not supported (minattn's GEGLU uses the tanh GELU)")


def _gemma_from_hf(model):
    # Gemma 2 and 3 (text): Llama's layout plus sandwich norms, RMSNorm with (1 + w) (stored
    # here as gamma = 1 + w), embeddings scaled by sqrt(D), the tanh-GELU gated feed-forward,
    # query_pre_attn_scalar, soft-capping, local (sliding) and global layers with their own
    # windows and RoPE bases.
    config, inner = model.config, model.model
    _check_tanh_gelu("hidden_activation", config.hidden_activation)
    one_plus = _one_plus
    layers = []
    for layer in inner.layers:
        block = _llama_layer_from_hf(layer)
        for key in ("q_norm", "k_norm"):
            if key in block["self_attention"]:
                block["self_attention"][key] = one_plus(getattr(layer.self_attn, key))
        block.update({"self_attention_norm": one_plus(layer.input_layernorm),
                      "post_self_attention_norm": one_plus(layer.post_attention_layernorm),
                      "feed_forward_norm": one_plus(layer.pre_feedforward_layernorm),
                      "post_feed_forward_norm": one_plus(layer.post_feedforward_layernorm)})
        layers.append(block)
    rope_base, rope_scaling = _per_layer_rope(config, len(layers))
    params = {"token_embedding": _array(inner.embed_tokens.weight), "layers": layers,
              "final_norm": one_plus(inner.norm), **_unembedding(model, inner.embed_tokens.weight)}
    scale = getattr(inner.embed_tokens, "embed_scale", None)  # the model's own (float32) value
    kwargs = {"n_heads": config.num_attention_heads, "n_kv_heads": config.num_key_value_heads,
              "d_k": config.head_dim, "norm": "rms_norm", "activation": "geglu_tanh",
              "eps": config.rms_norm_eps, "position": "rope", "rope_base": rope_base,
              "rope_scaling": rope_scaling, "window": _windows(config, len(layers)),
              "embedding_scale": float(scale) if scale is not None else config.hidden_size ** 0.5,
              "query_pre_attn_scalar": config.query_pre_attn_scalar,
              # transformers' Gemma3Attention does not apply attn_logit_softcapping (Gemma 3
              # checkpoints set it None): neither does minattn for gemma3_text
              "attn_logit_softcapping": None if config.model_type == "gemma3_text" else
              getattr(config, "attn_logit_softcapping", None),
              "final_logit_softcapping": getattr(config, "final_logit_softcapping", None)}
    return params, kwargs


# model_type -> converter: a new architecture is one line here.
FROM_HF = {"llama": _llama_from_hf, "mistral": _llama_from_hf, "qwen2": _llama_from_hf,
           "qwen3": _llama_from_hf, "phi3": _phi3_from_hf, "granite": _granite_from_hf,
           "gemma": _gemma1_from_hf,
           "gemma2": _gemma_from_hf, "gemma3_text": _gemma_from_hf, "gpt2": _gpt2_from_hf,
           "gpt_neox": _gpt_neox_from_hf, "stablelm": _stablelm_from_hf,
           "smollm3": _smollm3_from_hf, "cohere": _cohere_from_hf, "olmo2": _olmo_from_hf,
           "olmo3": _olmo_from_hf, "phi": _phi_from_hf,
           # attention variants: minattn/models/hf_variants.py (imported when used)
           "deepseek_v3": lambda model: _variant_from_hf(model),
           "diffllama": lambda model: _variant_from_hf(model),
           "qwen3_next": lambda model: _qwen3_next_from_hf(model)}  # models/hf_qwen3_next.py


def _variant_from_hf(model):
    from . import hf_variants

    return hf_variants.CONVERTERS[model.config.model_type](model)


def _qwen3_next_from_hf(model):
    from .hf_qwen3_next import qwen3_next_from_hf

    return qwen3_next_from_hf(model)
