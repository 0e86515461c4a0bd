"""A correct answer to exercise 15 (attention and recurrence): the gated delta rule as a loop."""
import numpy as np


def delta_rule(q, k, v, beta, g=None, *, scale=None, initial_state=None, return_state=False):
    if scale is None:
        scale = q.shape[-1] ** -0.5
    if initial_state is None:
        state = np.zeros(q.shape[:-2] + (k.shape[-1], v.shape[-1]), q.dtype)
    else:
        state = np.asarray(initial_state, q.dtype)
    outputs = []
    for t in range(q.shape[-2]):
        if g is not None:  # forget
            state = np.exp(np.asarray(g[..., t], q.dtype))[..., None, None] * state
        k_t = k[..., t, :]
        error = v[..., t, :] - np.einsum("...i,...ij->...j", k_t, state)  # v_t - k_t S
        state = state + np.asarray(beta[..., t], q.dtype)[..., None, None] * (
            k_t[..., :, None] * error[..., None, :])  # S += β_t k_tᵀ error_t
        outputs.append(scale * np.einsum("...i,...ij->...j", q[..., t, :], state))
    out = np.stack(outputs, axis=-2)
    return (out, state) if return_state else out
