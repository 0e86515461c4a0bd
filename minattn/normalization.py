"""Layer normalization and RMS normalization over the feature axis, with their gradients."""
import autograd.numpy as np
from autograd.extend import defvjp_argnums, primitive
from autograd.numpy.numpy_vjps import unbroadcast_f

from .engine import checks


def layer_norm(x, gamma, beta, eps=1e-5):
    """Normalize each feature vector to mean 0 and variance 1, then scale by gamma and shift by
    beta: x [..., D], gamma [D], beta [D] -> [..., D], as torch.nn.LayerNorm (biased variance,
    eps inside the square root). eps must be a non-negative float. Raises on shape mismatches."""
    # [..., D], [D], [D] -> [..., D]. Biased variance and eps inside the square root, exactly as
    # torch.nn.LayerNorm (not std + eps, which is a different function). sum / D rather than
    # np.mean (autograd's mean turns float32 gradients into float64); the gradient is by hand.
    x, gamma, beta, eps = checks.check_layer_norm(x, gamma, beta, eps)
    if x.dtype == np.float16:  # (x - mean)² overflows float16 at |x| ~ 256: float32 inside
        f32 = lambda a: a.astype(np.float32)
        return _layer_norm(f32(x), f32(gamma), f32(beta), eps).astype(np.float16)
    return _layer_norm(x, gamma, beta, eps)


@primitive
def _layer_norm(x, gamma, beta, eps):
    d_model = x.shape[-1]
    mean = np.sum(x, axis=-1, keepdims=True) / d_model
    centered = x - mean
    variance = np.sum(centered * centered, axis=-1, keepdims=True) / d_model  # biased: / D
    return centered / np.sqrt(variance + eps) * gamma + beta


def _layer_norm_vjp(argnums, y, args, kwargs):
    # With x̂ = (x - μ) / σ, σ = sqrt(var + eps), and dx̂ = g ⊙ γ, the chain rule through μ and
    # var collapses to  dx = (dx̂ - mean(dx̂) - x̂ ⊙ mean(dx̂ ⊙ x̂)) / σ;  dγ = Σ g ⊙ x̂;  dβ = Σ g.
    x, gamma, beta, eps = args
    d_model = x.shape[-1]
    centered = x - np.sum(x, axis=-1, keepdims=True) / d_model
    sigma = np.sqrt(np.sum(centered * centered, axis=-1, keepdims=True) / d_model + eps)
    x_hat = centered / sigma

    def vjp(g):
        mean = lambda a: np.sum(a, axis=-1, keepdims=True) / d_model
        d_x_hat = g * gamma
        grads = {
            0: lambda: (d_x_hat - mean(d_x_hat) - x_hat * mean(d_x_hat * x_hat)) / sigma,
            1: lambda: g * x_hat,  # summed over the leading dims by unbroadcast
            2: lambda: g,
            3: lambda: np.sum(d_x_hat * x_hat / (sigma * sigma)) * -0.5,  # d eps
        }
        return tuple(unbroadcast_f(args[i], lambda _, i=i: grads[i]())(None) for i in argnums)

    return vjp


defvjp_argnums(_layer_norm, _layer_norm_vjp)


def rms_norm(x, gamma, eps=1e-6):
    """Root-mean-square normalization (Zhang & Sennrich 2019; Llama's RMSNorm): x [..., D],
    gamma [D] -> x / sqrt(mean(x², -1) + eps) * gamma, computed in x's dtype. No centering and no
    beta. eps must be a non-negative float."""
    # [..., D], [D] -> [..., D]
    x, gamma, _, eps = checks.check_layer_norm(x, gamma, gamma, eps)
    if x.dtype == np.float16:  # x² overflows float16 at |x| ~ 256: float32 inside
        return _rms_norm(x.astype(np.float32), gamma.astype(np.float32), eps).astype(np.float16)
    return _rms_norm(x, gamma, eps)


@primitive
def _rms_norm(x, gamma, eps):
    rms = np.sqrt(np.sum(x * x, axis=-1, keepdims=True) / x.shape[-1] + eps)
    return x / rms * gamma


def _rms_norm_vjp(argnums, y, args, kwargs):
    # With r = sqrt(mean(x²) + eps), x̂ = x / r and dx̂ = g ⊙ γ:  dx = (dx̂ - x̂ ⊙ mean(dx̂ ⊙ x̂)) / r.
    x, gamma, eps = args
    d_model = x.shape[-1]
    rms = np.sqrt(np.sum(x * x, axis=-1, keepdims=True) / d_model + eps)
    x_hat = x / rms

    def vjp(g):
        d_x_hat = g * gamma
        grads = {
            0: lambda: (d_x_hat - x_hat * np.sum(d_x_hat * x_hat, axis=-1, keepdims=True) / d_model) / rms,
            1: lambda: g * x_hat,
            2: lambda: np.sum(d_x_hat * x_hat / (rms * rms)) * -0.5,
        }
        return tuple(unbroadcast_f(args[i], lambda _, i=i: grads[i]())(None) for i in argnums)

    return vjp


defvjp_argnums(_rms_norm, _rms_norm_vjp)


def init_layer_norm(d_model, *, dtype=np.float64):
    """-> {"gamma": ones [D], "beta": zeros [D]}: the identity map on normalized features."""
    d_model = checks.check_size("d_model", d_model)
    dtype = checks.check_init(None, dtype, need_rng=False)
    return {"gamma": np.ones(d_model, dtype), "beta": np.zeros(d_model, dtype)}

