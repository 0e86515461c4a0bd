"""PyTorch interop: copy weights out of torch.nn modules, translate torch's mask conventions, and
dispatch a Hugging Face model to its family's converter (from_hf: minattn/families/).

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

from .. import families
from ..families.hf import array as _array, layer_norm as _layer_norm_from_torch, weight as _weight

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
    (-> multi_head_attention), nn.LayerNorm (-> layer_norm), nn.RMSNorm (-> rms_norm: eps None
    becomes the weight dtype's machine epsilon, as torch's), nn.Linear (-> minattn.linear.linear:
    {"w": [d_in, d_out]} and "b" where it has one), nn.TransformerEncoderLayer
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
    if isinstance(module, nn.RMSNorm):
        return _rms_norm_from_torch(module, torch)
    if isinstance(module, nn.Linear):  # -> ({"w": [d_in, d_out], "b": [d_out] if it has one}, {})
        return {"w": _weight(module.weight),
                **({"b": _array(module.bias)} if module.bias is not None else {})}, {}
    raise TypeError(
        f"from_torch supports torch.nn.MultiheadAttention, LayerNorm, RMSNorm, Linear, "
        f"TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer and TransformerDecoder, "
        f"got {type(module).__name__}"
    )


def _rms_norm_from_torch(norm, torch):
    # -> ({"gamma": [D]}, {"eps": eps}); torch's eps=None is its dtype's machine epsilon
    if len(norm.normalized_shape) != 1:
        raise ValueError(f"RMSNorm over normalized_shape={tuple(norm.normalized_shape)} is not "
                         "supported: minattn normalizes the last dim only")
    if not norm.elementwise_affine:
        raise ValueError("RMSNorm with elementwise_affine=False is not supported (it has no "
                         "parameters to copy, so no dtype to give gamma)")
    eps = norm.eps if norm.eps is not None else torch.finfo(norm.weight.dtype).eps
    return {"gamma": _array(norm.weight)}, {"eps": float(eps)}


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
    do_sample=False). Chosen by architecture (config.model_type, so a subclass works): the
    family file minattn.families.FAMILIES names (FROM_HF); anything else, mixture-of-experts included, is refused naming what is missing.
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
    return families.converter(model_type)(model)


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


# config.model_type -> its family's module in minattn/families/: a new architecture is a family
# file and one line there.
FROM_HF = families.FAMILIES


def llama_config(config, n_layers, **keywords):
    """minattn.families.llama.config_from_hf, under the name models/chat_model.py imports."""
    from ..families import llama

    return llama.config_from_hf(config, n_layers, **keywords)
