"""Switching heads off (an ablation, for analysis): head_mask.

transformers' head_mask multiplies each head's output (its softmax-weighted values) by a number
before the output projection; 0 removes the head. That product reaches the output through the
head's rows of w_o only (its bias is added after), so it is the same as scaling head h's rows
h d_v .. (h + 1) d_v of w_o: scale_heads does that to the params, once, and the model runs
unchanged. causal_lm(..., head_mask=M) ([n_layers, H]) and self_attention(..., head_mask=m)
([H]) are the variants that keyword selects (engine/variants.py). MLA (minattn.mla) merges its
heads into w_o [H d_v, D] the same way, so its w_o is scaled as well; another attention variant
with params of its own (minattn.differential) gets its row of M as its own head_mask, and takes
it or refuses it by name.
"""
import autograd.numpy as np

from .engine import checks
from .engine.decoder_checks import check_head_mask
from .engine.variants import implements, show
from .kv_cache import self_attention
from .language_model import causal_lm
from .mla import latent_attention

# The attentions whose heads reach their output through their rows of w_o [H d_v, D] only (the
# bias added after): for them head_mask is scale_heads. A functools.partial counts as its function.
THROUGH_W_O = (self_attention, latent_attention)


def scale_heads(params, head_mask):
    """Attention params with head h's rows of w_o [H d_v, D] times head_mask[h] ([H])."""
    # [H d_v, D] * [H d_v, 1]: each head's d_v rows by its entry
    rows = np.repeat(head_mask, params["w_o"].shape[0] // head_mask.shape[0])[:, None]
    return {**params, "w_o": params["w_o"] * rows}


@implements(self_attention, "head_mask", priority=30)
def self_attention_with_head_mask(params, x, mask=None, *, n_heads, head_mask, **config):
    """self_attention with each head's output times head_mask [H] before the output projection
    (0 ablates the head)."""
    head_mask = check_head_mask(head_mask, (n_heads,), checks.as_float_array("x", x).dtype)
    return self_attention(_with_w_o_scaled(params, head_mask), x, mask, n_heads=n_heads,
                          **config)


def _model_head_mask(params, tokens, attention_mask=None, *, head_mask=None, **config):
    return head_mask is not None and not isinstance(head_mask, list)  # a list: one row a layer


# after lora's variant (priority 10), which refuses a head_mask its o path would miss
@implements(causal_lm, when=_model_head_mask, priority=0)
def causal_lm_with_head_mask(params, tokens, attention_mask=None, *, head_mask, **config):
    """causal_lm with head_mask [n_layers, H]: each head's output times head_mask[layer, head]
    before the output projection, as transformers' head_mask (0 ablates a head): w_o scaled
    once, before the model runs (THROUGH_W_O); another attention variant (config["attention"])
    gets its layer's row as its own head_mask."""
    if not (isinstance(params, checks.DICT_TYPES) and "layers" in params):
        return causal_lm(params, tokens, attention_mask, **config)  # refused by the call, by name
    layers, embedding = params["layers"], params.get("token_embedding")
    head_mask = check_head_mask(head_mask, (len(layers), config.get("n_heads")),
                                checks.as_float_array("params['token_embedding']", embedding).dtype)
    attention = config.get("attention") or self_attention
    if getattr(attention, "func", attention) not in THROUGH_W_O:
        return causal_lm(params, tokens, attention_mask, head_mask=list(head_mask), **config)
    layers = [_with_heads_scaled(layer, row) for layer, row in zip(layers, head_mask)]
    return causal_lm({**params, "layers": layers}, tokens, attention_mask, **config)


def _with_heads_scaled(layer, row):
    # The layer with its attention's w_o scaled by row [H] (the layer itself where it is not).
    attention = layer.get("self_attention") if isinstance(layer, checks.DICT_TYPES) else None
    scaled = _with_w_o_scaled(attention, row)
    return layer if scaled is attention else {**layer, "self_attention": scaled}


def _with_w_o_scaled(params, row):
    # Attention params with w_o scaled by row [H]; params without a w_o of H d_v rows are left
    # as they are, for the call to refuse by name.
    w_o = params.get("w_o") if isinstance(params, checks.DICT_TYPES) else None
    if np.ndim(w_o) != 2 or np.shape(w_o)[0] % row.shape[0]:
        return params
    w_o = checks.as_array("params['w_o']", w_o)  # a nested list as the call takes it
    return scale_heads({**params, "w_o": w_o}, row)


show(causal_lm, head_mask=None)
