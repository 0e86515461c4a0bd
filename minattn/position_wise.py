"""The position-wise feed-forward network: the same two-layer MLP applied to every token."""
import math

import autograd.numpy as np

from . import _validate
from .dropout import dropout as _dropout
from .linear import linear

ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def relu(x):
    # x * (x > 0) rather than np.maximum(x, 0): the same values, and a far cheaper gradient in
    # autograd (np.maximum's VJP compares every element twice to split ties).
    return x * (x > 0)


def gelu(x):
    # Exact GELU, x * Phi(x) with the Gaussian CDF written through erf (torch's default).
    from autograd.scipy.special import erf  # scipy, imported only when GELU is used

    if x.dtype == np.float16:  # scipy's erf has no float16 loop: it would return float64
        return gelu(x.astype(np.float32)).astype(np.float16)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    # The tanh approximation of GELU (GPT-2, torch's approximate="tanh").
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x * x * x)))


def init_feed_forward(rng, d_model, d_ff, *, dtype=np.float64):
    """-> {"w_1": [D, F], "b_1": [F], "w_2": [F, D], "b_2": [D]}: torch's nn.Linear default
    init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases, drawn from the Generator
    `rng` in float64 and cast to `dtype`."""
    d_model, d_ff = _validate.check_size("d_model", d_model), _validate.check_size("d_ff", d_ff)
    dtype = _validate.check_init(rng, dtype)
    b1, b2 = 1.0 / math.sqrt(d_model), 1.0 / math.sqrt(d_ff)
    params = {
        "w_1": rng.uniform(-b1, b1, size=(d_model, d_ff)), "b_1": rng.uniform(-b1, b1, size=d_ff),
        "w_2": rng.uniform(-b2, b2, size=(d_ff, d_model)), "b_2": rng.uniform(-b2, b2, size=d_model),
    }
    return {name: w.astype(dtype) for name, w in params.items()}


def check_feed_forward_params(params, d_model, where="params"):
    _validate.check_params(params, {"w_1": (d_model, "d_ff")}, where)
    d_ff = _validate.as_array(f"{where}['w_1']", params["w_1"]).shape[1]
    return _validate.check_params(params, {"w_1": (d_model, d_ff), "b_1": (d_ff,),
                                           "w_2": (d_ff, d_model), "b_2": (d_model,)}, where)


def _check_feed_forward(params, x, activation, dropout, rng):
    x = _validate.as_float_array("x", x)
    _validate.check_min_ndim("x", x, 1, "(..., D)")
    _validate.check_choice("activation", activation, ACTIVATIONS)
    _validate.check_dropout(dropout, rng)
    return check_feed_forward_params(params, x.shape[-1]), x


def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
    """The position-wise MLP, applied to every token alike: x [..., D] -> [..., D] through a
    hidden width F = params["w_1"].shape[1], with activation "relu", "gelu" (exact, erf) or
    "gelu_tanh", and dropout (with an rng) after the activation, as torch's encoder layer."""
    # [..., D] -> [..., D] through [..., F]; dropout (if any) after the activation, as torch.
    params, x = _check_feed_forward(params, x, activation, dropout, rng)
    act = {"relu": relu, "gelu": gelu, "gelu_tanh": gelu_tanh}[activation]
    hidden = act(linear(x, params["w_1"], params["b_1"]))  # [..., F]
    hidden = _dropout(hidden, dropout, rng)
    return linear(hidden, params["w_2"], params["b_2"])  # [..., D]


def silu(x):
    # x * sigmoid(x) (also "swish"); sigmoid(x) = exp(-log(1 + exp(-x))) through logaddexp:
    # no overflow warning for large negative x, full relative precision in the tails.
    return x * np.exp(-np.logaddexp(0.0, -x))


def init_gated_feed_forward(rng, d_model, d_ff, *, dtype=np.float64):
    """-> {"w_gate": [D, F], "w_up": [D, F], "w_down": [F, D]}, no biases (Llama), nn.Linear's
    default U(+-1/sqrt(fan_in)), drawn from the Generator `rng` in float64, cast to `dtype`."""
    d_model, d_ff = _validate.check_size("d_model", d_model), _validate.check_size("d_ff", d_ff)
    dtype = _validate.check_init(rng, dtype)
    b1, b2 = 1.0 / math.sqrt(d_model), 1.0 / math.sqrt(d_ff)
    params = {"w_gate": rng.uniform(-b1, b1, size=(d_model, d_ff)),
              "w_up": rng.uniform(-b1, b1, size=(d_model, d_ff)),
              "w_down": rng.uniform(-b2, b2, size=(d_ff, d_model))}
    return {name: w.astype(dtype) for name, w in params.items()}


def gated_feed_forward(params, x):
    """SwiGLU (Shazeer 2020; Llama's MLP): down(silu(gate(x)) * up(x)), x [..., D] -> [..., D]
    through a hidden width F. The gate decides, per token and hidden unit, how much of up(x)
    passes."""
    # [..., D] -> [..., F] -> [..., D]
    params, x = _check_gated_feed_forward(params, x)
    hidden = silu(x @ params["w_gate"]) * (x @ params["w_up"])  # [..., F]
    return hidden @ params["w_down"]  # [..., D]


def _check_gated_feed_forward(params, x):
    x = _validate.as_float_array("x", x)
    _validate.check_min_ndim("x", x, 1, "(..., D)")
    return check_gated_feed_forward_params(params, x.shape[-1]), x


def check_gated_feed_forward_params(params, d_model, where="params"):
    _validate.check_params(params, {"w_gate": (d_model, "d_ff")}, where)
    d_ff = params["w_gate"].shape[1]
    return _validate.check_params(params, {"w_gate": (d_model, d_ff), "w_up": (d_model, d_ff),
                                           "w_down": (d_ff, d_model)}, where)
