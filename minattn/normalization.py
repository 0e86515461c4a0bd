"""Layer normalization over the feature axis."""
import autograd.numpy as np

from . import _validate


def layer_norm(x, gamma, beta, eps=1e-5):
    """Normalize each feature vector to mean 0 and variance 1, then scale by gamma and shift by
    beta: x [..., D], gamma [D], beta [D] -> [..., D], as torch.nn.LayerNorm (biased variance,
    eps inside the square root). eps must be a non-negative float. Raises on shape mismatches."""
    # [..., D], [D], [D] -> [..., D]. Biased variance and eps inside the square root, exactly as
    # torch.nn.LayerNorm (not std + eps, which is a different function).
    x, gamma, beta, eps = _validate.check_layer_norm(x, gamma, beta, eps)
    # sum / D rather than np.mean: autograd's mean turns float32 gradients into float64.
    d_model = x.shape[-1]
    mean = np.sum(x, axis=-1, keepdims=True) / d_model
    centered = x - mean
    variance = np.sum(centered * centered, axis=-1, keepdims=True) / d_model  # biased: / D
    return centered / np.sqrt(variance + eps) * gamma + beta


def init_layer_norm(d_model, *, dtype=np.float64):
    """-> {"gamma": ones [D], "beta": zeros [D]}: the identity map on normalized features."""
    d_model = _validate.check_size("d_model", d_model)
    dtype = _validate.check_init(None, dtype, need_rng=False)
    return {"gamma": np.ones(d_model, dtype), "beta": np.zeros(d_model, dtype)}


def rms_norm(x, gamma, eps=1e-6):
    """x [..., D], gamma [D] -> [..., D]: x / sqrt(mean(x^2, -1) + eps) * gamma, Llama's RMSNorm
    (LayerNorm without the centering and without beta), computed in x's dtype."""
    x, gamma, eps = _check_rms_norm(x, gamma, eps)
    mean_square = np.sum(x * x, axis=-1, keepdims=True) / x.shape[-1]  # sum / D: see layer_norm
    return x / np.sqrt(mean_square + eps) * gamma


def _check_rms_norm(x, gamma, eps):
    x = _validate.as_float_array("x", x)
    _validate.check_min_ndim("x", x, 1, "(..., D)")
    gamma = _validate.check_shape("gamma", gamma, x.shape[-1:])
    return x, gamma, _validate.check_positive_real("eps", eps, allow_zero=True)
