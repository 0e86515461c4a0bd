"""The argument checks of gated attention (gated_attention.py), a hybrid model's attention
layers: self_attention's checks (decoder_checks.py), plus its gate and its QK-norm (required)."""
from . import checks
from .decoder_checks import _check_self_attention


def _check_gated_attention(params, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base,
                           rope_scaling, partial_rotary_factor, eps, cache, others):
    checks.check_unused_keywords("gated_attention", others)
    if not isinstance(params, checks.DICT_TYPES) or any(
            key not in params for key in ("w_gate", "q_norm", "k_norm")):
        raise ValueError("params must be a dict with 'w_gate' (the output gate's projection), "
                         "'q_norm' and 'k_norm' besides self-attention's 'w_q', 'w_k', 'w_v', "
                         "'w_o'")
    attention = {key: params[key] for key in params if key != "w_gate"}
    attention, x, mask, positions, d_k, cache = _check_self_attention(
        attention, x, mask, n_heads, n_kv_heads, d_k, positions, rope_base, rope_scaling, cache,
        partial_rotary_factor=partial_rotary_factor)
    checks.check_positive_real("eps", eps, allow_zero=True)
    gate = checks.check_shape("params['w_gate']", params["w_gate"], (x.shape[-1], n_heads * d_k),
                              x.dtype)
    return {**attention, "w_gate": gate}, x, mask, positions, d_k, cache
