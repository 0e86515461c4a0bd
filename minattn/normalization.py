"""Layer normalization and RMS normalization over the feature axis, with their gradients."""
import autograd.numpy as np

from .engine import checks
from .engine.autograd_rules import gradient_by_hand, reads
from .engine.dtypes import float16_in_float32
from .engine.plain_vjps import layer_norm_vjp_in_place  # its VJP in fewer passes
from .engine.reductions import row_dot


def feature_mean(a):
    # [..., D] -> [..., 1]: sum / D (autograd's np.mean would turn float32 gradients into
    # float64); no features (D = 0) give 0, so an empty x comes back empty, as torch's, not 0 / 0.
    # The sum is a product with a column of ones: one BLAS call, 2-8x faster than NumPy's
    # reduction along rows of a few hundred (benchmarks/bench_char_gpt.py --profile).
    return a @ np.ones_like(a, shape=(a.shape[-1], 1)) / max(a.shape[-1], 1)


def feature_mean_of_product(a, b):
    # [..., D], [..., D] -> [..., 1]: feature_mean(a * b) without making a * b: each row's dot
    # product, one read of a and b (faster than the product and its mean: docs/benchmarks.md,
    # "Fewer elementwise passes").
    return row_dot(a, b) / max(a.shape[-1], 1)


def layer_norm_vjp(wrt, g, y, x, gamma, beta, eps):
    # With x̂ = (x - μ) / σ, σ = sqrt(var + eps), and dx̂ = g ⊙ γ, the chain rule through μ and
    # var collapses to  dx = (dx̂ - mean(dx̂) - x̂ ⊙ mean(dx̂ ⊙ x̂)) / σ;  dγ = Σ g ⊙ x̂;  dβ = Σ g.
    x, gamma, beta, eps = checks.check_layer_norm(x, gamma, beta, eps)  # eps as the forward's
    centered = x - feature_mean(x)
    sigma = np.sqrt(feature_mean_of_product(centered, centered) + eps)
    x_hat = centered / sigma
    d_x_hat = g * gamma
    grads = {
        "x": lambda: (d_x_hat - feature_mean(d_x_hat)
                      - x_hat * feature_mean_of_product(d_x_hat, x_hat)) / sigma,
        "gamma": lambda: g * x_hat,  # summed over the leading dims by the decorator
        "beta": lambda: g,
        "eps": lambda: np.sum(d_x_hat * x_hat / (sigma * sigma)) * -0.5,
    }
    return {name: grads[name]() for name in wrt}


@float16_in_float32("x")
@gradient_by_hand(layer_norm_vjp, in_place=layer_norm_vjp_in_place)
def layer_norm(x, gamma, beta, eps=1e-5):
    """Normalize each feature vector to mean 0 and variance 1, then scale by gamma and shift by
    beta: x [..., D], gamma [D], beta [D] -> [..., D], as torch.nn.LayerNorm (biased variance,
    eps inside the square root). eps must be a non-negative float. Raises on shape mismatches."""
    # [..., D], [D], [D] -> [..., D]. Biased variance and eps inside the square root, exactly as
    # torch.nn.LayerNorm (not std + eps, which is a different function).
    x, gamma, beta, eps = checks.check_layer_norm(x, gamma, beta, eps)
    centered = x - feature_mean(x)  # [..., D]
    variance = feature_mean_of_product(centered, centered)  # [..., 1], biased: / D
    y = np.divide(centered, np.sqrt(variance + eps), out=centered)  # in place: an array of ours
    return np.add(np.multiply(y, gamma, out=y), beta, out=y)


@reads(x=("x", "gamma"), gamma=("x",), eps=("x", "gamma"))  # the tape keeps no output
def rms_norm_vjp(wrt, g, y, x, gamma, eps):
    # With r = sqrt(mean(x²) + eps), x̂ = x / r and dx̂ = g ⊙ γ:  dx = (dx̂ - x̂ ⊙ mean(dx̂ ⊙ x̂)) / r.
    # eps as the forward's
    x, gamma, _, eps = checks.check_layer_norm(x, gamma, gamma, eps, centered=False)
    rms = np.sqrt(feature_mean_of_product(x, x) + eps)
    x_hat = x / rms
    d_x_hat = g * gamma
    grads = {
        "x": lambda: (d_x_hat - x_hat * feature_mean_of_product(d_x_hat, x_hat)) / rms,
        "gamma": lambda: g * x_hat,
        "eps": lambda: np.sum(d_x_hat * x_hat / (rms * rms)) * -0.5,
    }
    return {name: grads[name]() for name in wrt}


def rms_norm_vjp_in_place(wrt, g, y, x, gamma, eps):
    # rms_norm_vjp's operations in its order, on plain arrays, in place: equal to the last bit.
    x, gamma, _, eps = checks.check_layer_norm(x, gamma, gamma, eps, centered=False)
    rms = np.sqrt(feature_mean_of_product(x, x) + eps)
    x_hat = x / rms
    d_x_hat = g * gamma
    grads = {"gamma": g * x_hat if "gamma" in wrt else None,
             "eps": np.sum(d_x_hat * x_hat / (rms * rms)) * -0.5 if "eps" in wrt else None}
    if "x" in wrt:  # last: it overwrites x_hat and d_x_hat
        scaled = np.multiply(x_hat, feature_mean_of_product(d_x_hat, x_hat), out=x_hat)
        d_x = np.subtract(d_x_hat, scaled, out=d_x_hat)
        grads["x"] = np.divide(d_x, rms, out=d_x)
    return {name: grads[name] for name in wrt}


@float16_in_float32("x")
@gradient_by_hand(rms_norm_vjp, in_place=rms_norm_vjp_in_place)
def rms_norm(x, gamma, eps=1e-6):
    """Root-mean-square normalization (Zhang & Sennrich 2019; Llama's RMSNorm): x [..., D],
    gamma [D] -> x / sqrt(mean(x², -1) + eps) * gamma, computed in x's dtype. No centering and no
    beta. eps must be a non-negative float."""
    # [..., D], [D] -> [..., D]
    x, gamma, _, eps = checks.check_layer_norm(x, gamma, gamma, eps, centered=False)
    rms = np.sqrt(feature_mean_of_product(x, x) + eps)  # [..., 1]
    y = x / rms
    return np.multiply(y, gamma, out=y)  # in place: an array of ours


def init_layer_norm(d_model, *, dtype=np.float64):
    """-> {"gamma": ones [D], "beta": zeros [D]}: the identity map on normalized features."""
    d_model = checks.check_size("d_model", d_model)
    dtype = checks.check_init(None, dtype, need_rng=False)
    return {"gamma": np.ones(d_model, dtype), "beta": np.zeros(d_model, dtype)}

