"""The block's sublayer plugs (decoder_block's attention= and feed_forward=, every family's block
too), the per-layer keywords cut by one rule (transformer_decoder.layer_config), and the model's
head on any residual stream (language_model.final_logits, the logit lens's)."""
import numpy as np
import pytest

import minattn as ma
from minattn.hooks import run_with_cache
from minattn.language_model import final_logits
from minattn.transformer_decoder import layer_config

D, H, F, L = 8, 2, 12, 5


def _block(kind):
    # a Llama block, and as each family's block reads it: -> (params, keywords)
    params = ma.init_decoder_block(np.random.default_rng(0), D, H, F, norm="rms_norm",
                                   activation="swiglu", bias=False)
    post = {"post_self_attention_norm": {"gamma": np.full(D, 1.5)},
            "post_feed_forward_norm": {"gamma": np.full(D, 0.5)}}
    if kind == "sandwich":  # Gemma 2
        params = {**params, **post}
    if kind == "norms_after":  # OLMo 2
        params = {**{k: v for k, v in params.items() if not k.endswith("_norm")}, **post}
    keywords = {"n_heads": H, "norm": "rms_norm", "activation": "swiglu", "norm_first": True}
    return params, {**keywords, **({"parallel": True} if kind == "parallel" else {})}


@pytest.mark.parametrize("kind", ["llama", "parallel", "sandwich", "norms_after"])
def test_every_block_runs_the_feed_forward_it_is_given(kind):
    # the reference: the block whose feed-forward outputs zeros (w_down = 0), run as it is
    params, keywords = _block(kind)
    x = np.random.default_rng(1).normal(size=(1, L, D))
    seen = []

    def zeros(p, h, activation):
        seen.append((np.array_equal(p["w_up"], params["feed_forward"]["w_up"]), h.shape,
                     activation))
        return np.zeros_like(h)

    silent = {**params, "feed_forward": {**params["feed_forward"],
                                         "w_down": np.zeros((F, D))}}
    np.testing.assert_array_equal(
        ma.decoder_block(params, x, ma.causal_mask(L), feed_forward=zeros, **keywords),
        ma.decoder_block(silent, x, ma.causal_mask(L), **keywords))
    assert seen == [(True, (1, L, D), "swiglu")]


def test_a_list_keyword_is_one_value_a_layer_whatever_its_length():
    config = {"window": [4, None, 2], "n_heads": 2, "rope_scaling": {"factor": 2.0}}
    assert layer_config(config, 1) == {"window": None, "n_heads": 2,
                                       "rope_scaling": {"factor": 2.0}}
    assert layer_config(config, slice(1, None))["window"] == [None, 2]
    assert layer_config({"window": [3]}, slice(2, None)) == {"window": []}  # cut, not guessed


@pytest.mark.parametrize("extra", [{}, {"final_logit_softcapping": 3.0}],
                         ids=["plain", "capped"])
def test_final_logits_of_the_last_blocks_output_are_the_models_logits(extra):
    import minattn.families.gemma  # noqa: F401  (final_logit_softcapping's variants)

    params, config = ma.init_causal_lm(np.random.default_rng(0), 30, 2, D, H, F,
                                       position="rope", norm="rms_norm", activation="swiglu",
                                       bias=False, tied=False)
    config = {**config, "eps": 1e-6, **extra}
    tokens = np.random.default_rng(1).integers(0, 30, size=(2, L))
    logits, cache = run_with_cache(params, tokens, names=("resid_post",), **config)
    np.testing.assert_allclose(final_logits(params, cache["resid_post", 1], **config), logits,
                               rtol=1e-12, atol=1e-12)
    if extra:  # the cap is applied: the logits stay inside it
        assert np.abs(final_logits(params, 100 * cache["resid_post", 1], **config)).max() < 3.0
