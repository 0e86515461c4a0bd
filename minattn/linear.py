"""The affine map y = x @ w + b, done as one 2-D matrix product, with its gradient by hand."""
import autograd.numpy as np
from autograd.extend import defvjp_argnums, primitive


@primitive
def linear(x, w, b):
    # [..., d_in], [d_in, d_out], [d_out] -> [..., d_out]. Flattening the leading dims first makes
    # one big matrix product (one BLAS call) instead of a batch of small ones.
    *lead, d_in = x.shape
    y = np.reshape(x, (-1, d_in)) @ w + b  # [N, d_out]
    return np.reshape(y, (*lead, w.shape[1]))


def _linear_vjp(argnums, y, args, kwargs):
    # dx = g wᵀ, dw = xᵀ g, db = Σ g over all tokens: three products on the flattened tokens.
    x, w, b = args

    def vjp(g):
        tokens, g_tokens = np.reshape(x, (-1, w.shape[0])), np.reshape(g, (-1, w.shape[1]))
        grads = {0: lambda: np.reshape(g_tokens @ np.swapaxes(w, 0, 1), np.shape(x)),
                 1: lambda: np.swapaxes(tokens, 0, 1) @ g_tokens,
                 2: lambda: np.sum(g_tokens, axis=0)}
        return tuple(grads[i]() for i in argnums)

    return vjp


defvjp_argnums(linear, _linear_vjp)
