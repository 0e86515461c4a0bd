"""Layer normalization over the feature axis."""
import numbers

import autograd.numpy as np

from . import _validate


def layer_norm(x, gamma, beta, eps=1e-5):
    # [..., D], [D], [D] -> [..., D]. Biased variance and eps inside the square root, exactly as
    # torch.nn.LayerNorm (not std + eps, which is a different function).
    x = _validate.as_float_array("x", x)
    _validate.check_min_ndim("x", x, 1, "(..., D)")
    _validate.check_shape("gamma", gamma, x.shape[-1:])
    _validate.check_shape("beta", beta, x.shape[-1:])
    # sum / D rather than np.mean: autograd's mean turns float32 gradients into float64.
    d_model = x.shape[-1]
    eps = float(eps) if isinstance(eps, numbers.Real) else eps  # np.float64(eps) would upcast
    mean = np.sum(x, axis=-1, keepdims=True) / d_model
    centered = x - mean
    variance = np.sum(centered * centered, axis=-1, keepdims=True) / d_model  # biased: / D
    return centered / np.sqrt(variance + eps) * gamma + beta


def init_layer_norm(d_model):
    # -> {"gamma": ones [D], "beta": zeros [D]}: the identity map on normalized features.
    return {"gamma": np.ones(d_model), "beta": np.zeros(d_model)}


def rms_norm(x, gamma, eps=1e-6):
    # [..., D], [D] -> [..., D]: x / sqrt(mean(x^2) + eps) * gamma (Llama's RMSNorm): LayerNorm
    # without the centering and without beta, computed in x's dtype.
    x = _validate.as_float_array("x", x)
    _validate.check_min_ndim("x", x, 1, "(..., D)")
    _validate.check_shape("gamma", gamma, x.shape[-1:])
    eps = float(eps) if isinstance(eps, numbers.Real) else eps  # np.float64(eps) would upcast
    mean_square = np.sum(x * x, axis=-1, keepdims=True) / x.shape[-1]  # not np.mean: see above
    return x / np.sqrt(mean_square + eps) * gamma
