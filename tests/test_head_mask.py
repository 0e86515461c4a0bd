"""causal_lm's head_mask reaches every attention variant causal_lm runs, or is refused by name.

The reference never uses head_mask: scaling head h's output by m before the output projection
is scaling rows h * d_v .. (h + 1) * d_v of w_o by m (the output projection reads head h's
values through those rows only; its bias is added after), so the masked model must equal the
unmasked model with those rows of every layer's w_o scaled. Float64, small random models."""
import functools

import numpy as np
import pytest

import minattn as ma
from minattn.differential import differential_attention, init_differential_attention
from minattn.mla import init_latent_attention, latent_attention

V, D, H, LAYERS, F = 23, 24, 4, 3, 32


def _llama(seed, **block):
    rng = np.random.default_rng(seed)
    return ma.init_causal_lm(rng, V, LAYERS, D, H, F, position="rope", norm="rms_norm",
                             activation="swiglu", bias=False, tied=False, **block)


def _gpt2(seed):
    return ma.init_causal_lm(np.random.default_rng(seed), V, LAYERS, D, H, F, n_positions=16)


def _with(params, make):
    # params with each layer's self_attention replaced by make(rng, layer index)
    rng = np.random.default_rng(99)
    layers = [{**layer, "self_attention": make(rng, i)} for i, layer in enumerate(params["layers"])]
    return {**params, "layers": layers}


def _sinks(seed):
    params, config = _llama(seed, n_kv_heads=2)
    return _with(params, lambda rng, i: {**params["layers"][i]["self_attention"],
                                         "sinks": rng.normal(size=H)}), config


def _gemma(seed):
    params, config = _llama(seed, n_kv_heads=2)
    return params, {**config, "query_pre_attn_scalar": 9.0, "attn_logit_softcapping": 3.0}


def _qk_norm(seed):
    return _llama(seed, qk_norm=True, d_k=8)


def _latent(seed):
    params, config = _llama(seed)
    widths = {"qk_nope_head_dim": 4, "qk_rope_head_dim": 4, "v_head_dim": 5}
    params = _with(params, lambda rng, i: init_latent_attention(rng, D, H, kv_lora_rank=6,
                                                                q_lora_rank=7, **widths))
    return params, {**config, "attention": functools.partial(latent_attention, **widths)}


MODELS = {"gpt2 (biases, learned positions)": _gpt2, "llama gqa": lambda s: _llama(s, n_kv_heads=2),
          "sinks": _sinks, "gemma scalars and soft-capping": _gemma, "qk-norm, d_k 8": _qk_norm,
          "latent attention (MLA)": _latent}


def _scaled_w_o(params, mask):
    # the reference: rows of w_o scaled per head, head_mask never used
    layers = []
    for layer, row in zip(params["layers"], mask):
        attention = dict(layer["self_attention"])
        w_o = attention["w_o"]  # [H * d_v, D]
        per_row = np.repeat(row, w_o.shape[0] // len(row))[:, None]  # [H * d_v, 1]
        attention["w_o"] = w_o * per_row
        layers.append({**layer, "self_attention": attention})
    return {**params, "layers": layers}


@pytest.mark.parametrize("name", MODELS)
def test_head_mask_scales_each_heads_output_before_the_output_projection(name):
    params, config = MODELS[name](0)
    tokens = np.random.default_rng(1).integers(0, V, size=(2, 7))
    mask = np.random.default_rng(2).uniform(-1, 2, size=(LAYERS, H))
    mask[0, 1] = mask[2, 3] = 0.0  # ablated heads among scaled ones
    ours = ma.causal_lm(params, tokens, head_mask=mask, **config)
    reference = ma.causal_lm(_scaled_w_o(params, mask), tokens, **config)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)
    plain = ma.causal_lm(params, tokens, **config)
    assert np.abs(ours - plain).max() > 1e-3  # the mask changed something
    np.testing.assert_array_equal(ma.causal_lm(params, tokens, head_mask=None, **config), plain)


@pytest.mark.parametrize("name", ["llama gqa", "latent attention (MLA)"])
def test_head_mask_holds_through_the_kv_cache(name):
    params, config = MODELS[name](3)
    tokens = np.random.default_rng(4).integers(0, V, size=(1, 6))
    mask = np.ones((LAYERS, H))
    mask[1, 2] = 0.0
    full = ma.causal_lm(params, tokens, head_mask=mask, **config)
    _, cache = ma.causal_lm(params, tokens[:, :4], head_mask=mask, return_cache=True, **config)
    step, _ = ma.causal_lm(params, tokens[:, 4:], head_mask=mask, cache=cache, **config)
    np.testing.assert_allclose(step, full[:, 4:], rtol=0, atol=1e-12)


def test_differential_attention_refuses_a_head_mask_by_name():
    params, config = _llama(5, n_kv_heads=2)
    params = _with(params, lambda rng, i: init_differential_attention(rng, D, H, n_kv_heads=2,
                                                                      layer_index=i))
    config = {**config, "attention": differential_attention}
    tokens = np.zeros((1, 3), dtype=int)
    ma.causal_lm(params, tokens, **config)  # runs without one
    with pytest.raises(ValueError, match="differential_attention does not support head_mask"):
        ma.causal_lm(params, tokens, head_mask=np.ones((LAYERS, H)), **config)


@pytest.mark.parametrize("head_mask, error, match", [
    (np.ones((LAYERS, H + 1)), ValueError, r"head_mask has shape \(3, 5\), expected \(3, 4\)"),
    (np.ones(H), ValueError, r"head_mask has shape \(4,\), expected \(3, 4\)"),
    (np.ones((LAYERS, H), dtype=bool), TypeError, "head_mask must be a floating-point array"),
    ("ones", TypeError, "head_mask must be an array"),
    (np.full((LAYERS, H), np.nan), ValueError, "head_mask must be finite"),
])
def test_a_bad_head_mask_is_refused_by_name(head_mask, error, match):
    params, config = _llama(6)
    with pytest.raises(error, match=match):
        ma.causal_lm(params, np.zeros((1, 3), dtype=int), head_mask=head_mask, **config)


@pytest.mark.parametrize("name", ["llama gqa", "latent attention (MLA)"])
@pytest.mark.parametrize("change, error, match", [
    (lambda a: {k: v for k, v in a.items() if k != "w_o"}, ValueError,
     "params is missing key 'w_o'"),
    (lambda a: {**a, "w_o": a["w_o"][:-1]}, ValueError,  # a row short: not H d_v rows
     r"params\['w_o'\] has shape \(\d+, 24\), expected"),
    (lambda a: {**a, "w_o": a["w_o"][:, 0]}, ValueError,  # one axis: no rows to scale
     r"params\['w_o'\] has shape \(\d+,\), expected"),
])
def test_a_bad_w_o_under_a_head_mask_is_refused_by_the_attention(name, change, error, match):
    # the head_mask variant scales only a w_o of H d_v rows and leaves any other to the call
    params, config = MODELS[name](10)
    params = _with(params, lambda rng, i: change(params["layers"][i]["self_attention"]))
    with pytest.raises(error, match=match):
        ma.causal_lm(params, np.zeros((1, 3), dtype=int), head_mask=np.ones((LAYERS, H)),
                     **config)


def test_self_attention_checks_its_own_head_mask():
    params, _ = _llama(7)
    x = np.random.default_rng(8).normal(size=(2, 5, D))
    with pytest.raises(ValueError, match=r"head_mask has shape \(3,\), expected \(4,\)"):
        ma.self_attention(params["layers"][0]["self_attention"], x, n_heads=H,
                          head_mask=np.ones(3))


def test_a_head_mask_leaves_the_callers_array_alone():
    params, config = _llama(9)
    mask = np.ones((LAYERS, H))
    mask[0, 0] = 0.0
    before = mask.copy()
    ma.causal_lm(params, np.zeros((1, 3), dtype=int), head_mask=mask, **config)
    np.testing.assert_array_equal(mask, before)
