"""What every family's converter reads from a transformers model: its tensors (copied to NumPy,
Linear weights transposed to minattn's [d_in, d_out]), its LayerNorms, its RoPE settings
(transformers 5's rope_parameters, 4.x's rope_theta and rope_scaling) and its sliding windows.
Used by the family files beside it and by minattn.interop's from_torch; torch is imported by the
caller (these functions only call methods of the tensors they are given).
"""
import autograd.numpy as np

from ..rope_scaling import SCHEDULES, check_rope_scaling


def array(tensor):
    # torch tensor -> a NumPy copy in the same dtype, so later changes to the module leave it alone.
    if str(tensor.dtype) not in ("torch.float16", "torch.float32", "torch.float64"):
        raise TypeError(f"parameters must be float16, float32 or float64, got {tensor.dtype} "
                        "(convert the module first, e.g. module.float())")
    return tensor.detach().cpu().numpy().copy()


def weight(tensor):
    # torch [d_out, d_in] -> minattn [d_in, d_out], in torch's memory layout
    # (llama_layout.linear_weight: decoding's matrix-vector products are faster so)
    return array(tensor).T


def layer_norm(norm):
    # -> ({"gamma": [D], "beta": [D]}, {"eps": eps})
    if len(norm.normalized_shape) != 1:
        raise ValueError(f"LayerNorm over normalized_shape={tuple(norm.normalized_shape)} is not "
                         "supported: minattn normalizes the last dim only")
    if not norm.elementwise_affine:
        raise ValueError("LayerNorm with elementwise_affine=False is not supported "
                         "(it has no parameters to copy, so no dtype to give gamma and beta)")
    gamma = array(norm.weight)
    beta = np.zeros_like(gamma) if norm.bias is None else array(norm.bias)  # bias=False
    return {"gamma": gamma, "beta": beta}, {"eps": norm.eps}


def unembedding(model, embedding):
    # Tied embeddings share one tensor: minattn then unembeds with token_embedding.T.
    head = model.lm_head.weight
    return {} if head.data_ptr() == embedding.data_ptr() else {"lm_head": weight(head)}


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


# transformers' names of the non-gated activations -> minattn's feed_forward activations.
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "relu": "relu"}


def activation(config, key="hidden_act"):
    """config.<key> as minattn's activation name; any other is refused by name."""
    name = getattr(config, key)
    if name not in ACTIVATIONS:
        raise ValueError(f"{key}={name!r} is not supported (minattn has "
                         f"{', '.join(map(repr, ACTIVATIONS))})")
    return ACTIVATIONS[name]


def check_silu(config):
    """SwiGLU's gate is SiLU: any other hidden_act is refused by name (every SwiGLU family)."""
    if config.hidden_act != "silu":
        raise ValueError(f"hidden_act={config.hidden_act!r} is not supported (SwiGLU uses 'silu')")


def partial_rotary_factor(config):
    """The fraction of each head RoPE rotates: transformers 5's
    config.rope_parameters["partial_rotary_factor"], else 4.x's config.partial_rotary_factor,
    else 1."""
    rope = getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("partial_rotary_factor") is not None:
        return float(rope["partial_rotary_factor"])
    return float(getattr(config, "partial_rotary_factor", None) or 1.0)


def refuse_per_head_layer_norm(key, family):
    raise ValueError(f"{key}=True is not supported: {family}'s QK-norm is a LayerNorm with its "
                     "own weights per head; minattn's QK-norm is one RMSNorm shared by the heads")


def layer_types(config, n_layers):
    # -> config.layer_types as a list (None: every layer "full_attention"), one entry per layer:
    # a list of another length refused, as transformers' validate_layer_type does (a config.json
    # read without transformers would otherwise be cut or run short silently).
    types = getattr(config, "layer_types", None)
    if types is None:
        return ["full_attention"] * n_layers
    if len(types) != n_layers:
        raise ValueError(f"layer_types has {len(types)} entries but the model has {n_layers} "
                         "layers (num_hidden_layers): one entry per layer")
    return list(types)


def per_layer_rope(config, n_layers):
    # -> (rope_base, rope_scaling), each one value or a list with one entry per layer: the RoPE of
    # each layer's type (Gemma 3, OLMo 3: transformers 5's rope_parameters per layer type).
    bases, scalings = zip(*(rope_settings(config, t) for t in layer_types(config, n_layers)))
    same = lambda values: values[0] if len(set(map(repr, values))) == 1 else list(values)
    return same(bases), same(scalings)


def windows(config, n_layers):
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
    types = layer_types(config, n_layers)
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
    windows = [int(window) if t == "sliding_attention" else None for t in types]
    return windows if len(set(windows)) > 1 else windows[0]


def default_rope_base(config):
    # Default RoPE only: its base; any scaling refused by name.
    rope = getattr(config, "rope_parameters", None) or {"rope_type": "default",
                                                         "rope_theta": config.rope_theta}
    if rope.get("rope_type", "default") != "default":
        raise ValueError(f"RoPE scaling {rope['rope_type']!r} is not supported (default RoPE "
                         "only)")
    return float(rope["rope_theta"])
