"""The Transformer encoder block (attention + feed-forward, each with residual and LayerNorm),
and the encoder: a stack of blocks."""
import numpy

from .engine import checks
from .dropout import dropout as _dropout
from .multi_head import check_multi_head_params, init_multi_head_attention, multi_head_attention
from .normalization import init_layer_norm, layer_norm
from .position_wise import ACTIVATIONS, check_feed_forward_params, feed_forward, init_feed_forward


def init_encoder_block(rng, d_model, n_heads, d_ff, *, dtype=numpy.float64):
    """-> {"self_attention": {...}, "self_attention_norm": {...}, "feed_forward": {...},
    "feed_forward_norm": {...}} (each norm named for the sublayer it belongs to), each part
    initialised as its init_* function does (as torch's TransformerEncoderLayer), in `dtype`."""
    return {
        "self_attention": init_multi_head_attention(rng, d_model, n_heads, dtype=dtype),
        "self_attention_norm": init_layer_norm(d_model, dtype=dtype),
        "feed_forward": init_feed_forward(rng, d_model, d_ff, dtype=dtype),
        "feed_forward_norm": init_layer_norm(d_model, dtype=dtype),
    }


ENCODER_BLOCK_KEYS = ("self_attention", "self_attention_norm", "feed_forward", "feed_forward_norm")


def _check_block_params(params, d_model, n_heads, where="params"):
    checks.check_params(params, {}, where)  # a dict at all
    checks.check_no_renamed_block_keys(params, where, known=ENCODER_BLOCK_KEYS)
    for key in ENCODER_BLOCK_KEYS:
        if key not in params:
            raise ValueError(f"{where} is missing key {key!r} (expected keys: 'self_attention', "
                             "'self_attention_norm', 'feed_forward', 'feed_forward_norm')")
    norm = {"gamma": (d_model,), "beta": (d_model,)}
    return {
        "self_attention": check_multi_head_params(params["self_attention"], d_model,
                                                  f"{where}['self_attention']", n_heads=n_heads),
        "self_attention_norm": checks.check_params(params["self_attention_norm"], norm,
                                                   f"{where}['self_attention_norm']"),
        "feed_forward": check_feed_forward_params(params["feed_forward"], d_model,
                                                  f"{where}['feed_forward']"),
        "feed_forward_norm": checks.check_params(params["feed_forward_norm"], norm,
                                                 f"{where}['feed_forward_norm']"),
    }


def _check_block_config(x, n_heads, activation, eps, dropout, rng):
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    checks.check_n_heads(n_heads, x.shape[-1])
    checks.check_choice("activation", activation, ACTIVATIONS)
    checks.check_positive_real("eps", eps, allow_zero=True)
    checks.check_dropout(dropout, rng)
    return x


def _check_encoder_block(params, x, n_heads, activation, eps, dropout, rng):
    x = _check_block_config(x, n_heads, activation, eps, dropout, rng)
    return _check_block_params(params, x.shape[-1], n_heads), x


def encoder_block(params, x, mask=None, *, n_heads, norm_first=False, activation="relu",
                  eps=1e-5, dropout=0.0, rng=None, return_weights=False):
    """One encoder layer, as torch.nn.TransformerEncoderLayer (batch_first=True): x [..., L, D]
    -> [..., L, D] (and the weights [..., H, L, L] with return_weights=True). Post-norm by
    default (the 2017 paper), pre-norm with norm_first=True. mask as in multi_head_attention
    (True = may attend). dropout > 0 needs rng. Raises TypeError/ValueError before computing."""
    # [..., L, D] -> [..., L, D] (and weights [..., H, L, L] with return_weights=True).
    # Post-norm (2017 paper, torch's default): x = norm(x + sublayer(x)).
    # Pre-norm (norm_first=True):             x = x + sublayer(norm(x)).
    params, x = _check_encoder_block(params, x, n_heads, activation, eps, dropout, rng)
    norm = lambda h, name: layer_norm(h, params[name]["gamma"], params[name]["beta"], eps)
    h = norm(x, "self_attention_norm") if norm_first else x
    attended, weights = multi_head_attention(params["self_attention"], h, h, h, mask,
                                             n_heads=n_heads, dropout=dropout, rng=rng)
    attended = _dropout(attended, dropout, rng)  # [..., L, D]
    x = x + attended if norm_first else norm(x + attended, "self_attention_norm")
    h = norm(x, "feed_forward_norm") if norm_first else x
    fed = feed_forward(params["feed_forward"], h, activation=activation, dropout=dropout, rng=rng)
    fed = _dropout(fed, dropout, rng)  # [..., L, D]
    x = x + fed if norm_first else norm(x + fed, "feed_forward_norm")
    return (x, weights) if return_weights else x


def init_encoder(rng, n_layers, d_model, n_heads, d_ff, final_norm=False, *, dtype=numpy.float64):
    """-> {"layers": [block params] * n_layers} (+ {"final_norm": {...}} if final_norm), in
    `dtype`. n_layers must be a positive int."""
    # A final norm is what pre-norm stacks need, since their last block ends un-normalized.
    n_layers = checks.check_size("n_layers", n_layers)
    if not isinstance(final_norm, bool):
        raise TypeError(f"final_norm must be True or False, got {final_norm!r}")
    layers = [init_encoder_block(rng, d_model, n_heads, d_ff, dtype=dtype) for _ in range(n_layers)]
    params = {"layers": layers}
    if final_norm:
        params["final_norm"] = init_layer_norm(d_model, dtype=dtype)
    return params


def _check_encoder(params, x, n_heads, activation, eps, dropout, rng):
    x = _check_block_config(x, n_heads, activation, eps, dropout, rng)
    if not isinstance(params, checks.DICT_TYPES) or not isinstance(
            params.get("layers"), checks.LIST_TYPES):
        raise ValueError("params must be a dict with key 'layers' holding a list of block params")
    layers = [_check_block_params(params["layers"][i], x.shape[-1], n_heads,
                                  f"params['layers'][{i}]")
              for i in range(len(params["layers"]))]
    checked = {"layers": layers}
    if "final_norm" in params:
        checked["final_norm"] = checks.check_params(
            params["final_norm"], {"gamma": x.shape[-1:], "beta": x.shape[-1:]},
            "params['final_norm']")
    return checked, x


def encoder(params, x, mask=None, *, n_heads, norm_first=False, activation="relu", eps=1e-5,
            dropout=0.0, rng=None, return_weights=False):
    """A stack of encoder blocks, as torch.nn.TransformerEncoder: x [..., L, D] -> [..., L, D]
    (and a list of n_layers weights [..., H, L, L] with return_weights=True), with the same
    keyword arguments as encoder_block, then params["final_norm"] if present."""
    # [..., L, D] -> [..., L, D] (and a list of n_layers weights [..., H, L, L]).
    params, x = _check_encoder(params, x, n_heads, activation, eps, dropout, rng)
    weights = []
    for layer in params["layers"]:
        x, w = encoder_block(layer, x, mask, n_heads=n_heads, norm_first=norm_first,
                             activation=activation, eps=eps, dropout=dropout, rng=rng,
                             return_weights=True)
        weights.append(w)
    if "final_norm" in params:
        x = layer_norm(x, params["final_norm"]["gamma"], params["final_norm"]["beta"], eps)
    return (x, weights) if return_weights else x
