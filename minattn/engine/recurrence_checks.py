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
