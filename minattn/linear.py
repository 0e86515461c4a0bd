"""The affine map y = x @ w + b, done as one 2-D matrix product."""
import autograd.numpy as np


def linear(x, w, b):
    # [..., d_in], [d_in, d_out], [d_out] -> [..., d_out]. Flattening the leading dims first makes
    # one big matrix product (one BLAS call) instead of a batch of small ones.
    *lead, d_in = x.shape
    y = np.reshape(x, (-1, d_in)) @ w + b  # [N, d_out]
    return np.reshape(y, (*lead, w.shape[1]))
