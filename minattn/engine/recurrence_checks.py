"""Argument checks of the recurrent layers: linear_attention, delta_rule, l2_normalize.

As everywhere (checks.py): shapes and dtypes are read, each argument is named with its shape,
and nothing is computed before the inputs are known to fit. The one value read is g, the log
decay: a positive entry would make the state grow at every step (e^g > 1), so it is refused.
"""
import numbers

import autograd.numpy as np
from autograd.tracer import getval

from . import checks


def check_chunk_size(chunk_size):
    """None (the loop over time) or a positive int (the chunked form)."""
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral):
        raise TypeError(f"chunk_size must be None or a positive int, got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be None or a positive int, got {chunk_size!r}")
    return int(chunk_size)


def check_sequence(q, k, v):
    """q, k [..., L, d_k] and v [..., L, d_v], one sequence: the same L for all three (a query
    reads the state its own token has written). -> q, k, v, each broadcast to the common batch
    dims, and those dims."""
    q, k, v, batch = checks.check_qkv(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"q and k must have the same length L (one query per token): "
                         f"q {tuple(q.shape)}, k {tuple(k.shape)}")
    q, k, v = (np.broadcast_to(x, batch + tuple(x.shape[-2:])) for x in (q, k, v))
    return q, k, v, batch


def _check_linear_attention(q, k, v, chunk_size):
    q, k, v, _ = check_sequence(q, k, v)
    return q, k, v, check_chunk_size(chunk_size)


def _per_token(name, x, batch, length, dtype):
    # beta or g: floating, broadcasting to the tokens' shape (..., L); -> broadcast, in dtype.
    x = checks.in_dtype(checks.as_float_array(name, x), dtype)
    tokens = batch + (length,)
    if x.ndim < 1 or not checks.broadcasts_to(x.shape, tokens):
        raise ValueError(f"{name} of shape {tuple(x.shape)} does not broadcast to the tokens' "
                         f"shape (..., L) = {tokens} (one value per token)")
    return np.broadcast_to(x, tokens)


def _check_delta_rule(q, k, v, beta, g, scale, initial_state, chunk_size, return_state):
    """-> q, k, v, beta, g (zeros when None), scale, the initial state (zeros when None), all
    broadcast to the common batch dims and in q's dtype, and chunk_size."""
    q, k, v, batch = check_sequence(q, k, v)
    length, d_k, d_v, dtype = q.shape[-2], q.shape[-1], v.shape[-1], q.dtype
    beta = _per_token("beta", beta, batch, length, dtype)
    if g is None:
        g = np.zeros_like(beta)  # DeltaNet: no decay, e^0 = 1
    g = _per_token("g", g, batch, length, dtype)
    if g.size and bool(np.any(getval(g) > 0)):
        raise ValueError(f"g is the log of a decay and must be <= 0 (e^g <= 1), got a largest "
                         f"entry of {float(np.max(getval(g)))!r}: a positive g grows the state "
                         "at every step")
    scale = 1.0 / d_k ** 0.5 if scale is None else checks.check_positive_real(
        "scale", scale, allow_zero=True, dtype=dtype)
    state_shape = batch + (d_k, d_v)
    if initial_state is None:  # zeros [..., d_k, d_v], made from k and v (on their device)
        initial_state = np.swapaxes(k[..., :0, :], -1, -2) @ v[..., :0, :]
    initial_state = checks.in_dtype(checks.as_float_array("initial_state", initial_state), dtype)
    if initial_state.ndim < 2 or not checks.broadcasts_to(initial_state.shape, state_shape):
        raise ValueError(f"initial_state of shape {tuple(initial_state.shape)} does not "
                         f"broadcast to the state's shape (..., d_k, d_v) = {state_shape}")
    if not isinstance(return_state, bool):
        raise TypeError(f"return_state must be True or False, got {return_state!r}")
    initial_state = np.broadcast_to(initial_state, state_shape)
    return q, k, v, beta, g, scale, initial_state, check_chunk_size(chunk_size)


def _check_l2_normalize(x, eps):
    """x [..., d] floating; eps >= 0, and eps = 0 only where no row of x is all zeros (0 / 0)."""
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 1, "(..., d)")
    eps = checks.check_positive_real("eps", eps, allow_zero=True, dtype=x.dtype)
    if eps == 0 and x.size and bool(np.any(np.all(getval(x) == 0, axis=-1))):
        raise ValueError(f"eps=0 leaves the norm undefined (0 / 0) on a row of x (shape "
                         f"{tuple(x.shape)}) that is all zeros; give eps > 0")
    return x, eps


def _check_causal_conv1d(x, weight, state):
    """x [..., L, C] floating, weight [K, C], state None (zeros) or [..., K - 1, C] -> x, weight
    and state in x's dtype."""
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, C)")
    weight = checks.check_shape("weight", weight, ("K", x.shape[-1]), x.dtype)
    if weight.shape[0] < 1:
        raise ValueError(f"weight has shape {tuple(weight.shape)}: the kernel needs K >= 1 taps")
    shape = x.shape[:-2] + (weight.shape[0] - 1, x.shape[-1])
    if state is None:  # a new sequence: zeros before it, made from x (on its device)
        return x, weight, np.zeros_like(x, shape=shape)
    state = checks.in_dtype(checks.as_float_array("state", state), x.dtype)
    if tuple(state.shape) != shape:
        raise ValueError(f"state has shape {tuple(state.shape)}, expected (..., K - 1, C) = "
                         f"{shape}: the last K - 1 inputs of the same batch")
    return x, weight, state


def _token_is_real(mask, x):
    # causal_lm's mask [L, L_past + L] or [B, 1, L, L_past + L] (True = may attend) -> float
    # [..., L]: 1 for a real token, 0 for padding, whose query may not even attend to itself.
    length = x.shape[-2]
    if mask is None:
        return np.ones_like(x[..., 0])
    mask = checks.as_array("mask", mask)
    if np.dtype(mask.dtype).kind != "b" or mask.ndim < 2 or mask.shape[-2] != length \
            or mask.shape[-1] < length or mask.ndim > x.ndim + 1:
        raise ValueError(f"mask must be boolean [L, L_past + L] or [B, 1, L, L_past + L] (a "
                         f"causal LM's, True = may attend) with L = {length}, got "
                         f"{mask.dtype} of shape {tuple(mask.shape)}")
    own = np.diagonal(mask[..., mask.shape[-1] - length:], axis1=-2, axis2=-1)  # [..., (1,) L]
    own = own[..., 0, :] if own.ndim == x.ndim else own  # drop the head axis
    return np.broadcast_to(own, x.shape[:-1]).astype(x.dtype)


def _check_gated_deltanet(params, x, mask, n_key_heads, n_value_heads, eps, chunk_size, cache):
    """-> params (checked, in x's dtype), x, which tokens are real [..., L], the convolution's
    state and the delta rule's (None: zeros), d_k and d_v."""
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    for name, n in (("n_key_heads", n_key_heads), ("n_value_heads", n_value_heads)):
        checks.check_size(name, n)
    if n_value_heads % n_key_heads:
        raise ValueError(f"n_value_heads={n_value_heads} must be a multiple of n_key_heads="
                         f"{n_key_heads} (each key head serves a group of value heads)")
    checks.check_positive_real("eps", eps, allow_zero=True)
    check_chunk_size(chunk_size)
    d_model = x.shape[-1]
    params = checks.check_params(params, {"gamma": ("d_v",), "w_qkv": (d_model, "C"),
                                          "conv": ("K", "C")}, "params")
    d_v, channels = params["gamma"].shape[0], params["w_qkv"].shape[1]
    d_k, odd = divmod(channels - n_value_heads * d_v, 2 * n_key_heads)
    if odd or d_k < 1:
        raise ValueError(f"params['w_qkv'] has {channels} columns, not 2 n_key_heads d_k + "
                         f"n_value_heads d_v with n_key_heads={n_key_heads}, n_value_heads="
                         f"{n_value_heads}, d_v={d_v} (params['gamma']) and an integer d_k >= 1")
    h_v = n_value_heads
    params = checks.check_params(params, {
        "w_qkv": (d_model, channels), "conv": ("K", channels), "w_z": (d_model, h_v * d_v),
        "w_b": (d_model, h_v), "w_a": (d_model, h_v), "dt_bias": (h_v,), "A_log": (h_v,),
        "gamma": (d_v,), "w_out": (h_v * d_v, d_model)}, "params", x.dtype)
    real = _token_is_real(mask, x)
    conv_state = state = None
    if cache is not None and not (isinstance(cache, checks.DICT_TYPES) and not cache):
        if not isinstance(cache, checks.DICT_TYPES) or set(cache) != {"conv", "state"}:
            raise ValueError("cache must be None, {} (a new sequence) or the {'conv', 'state'} "
                             f"a previous call returned, got {type(cache).__name__}"
                             + (f" with keys {sorted(cache)}"
                                if isinstance(cache, checks.DICT_TYPES) else ""))
        window = params["conv"].shape[0]
        conv_state = checks.check_shape("cache['conv']", cache["conv"],
                                        x.shape[:-2] + (window - 1, channels), x.dtype)
        state = checks.check_shape("cache['state']", cache["state"],
                                   x.shape[:-2] + (h_v, d_k, d_v), x.dtype)
    return params, x, real, conv_state, state, d_k, d_v
