"""Nothing silently unused: a weight in params that the chosen path does not read, or a keyword
whose effect another keyword (or a missing argument) makes vanish, is refused by name, naming
the key and the keyword that leaves it unused; and RoPE's keywords are checked whether or not
positions are given (a wrong value is wrong on every path)."""
import numpy as np
import pytest

import minattn as ma
from minattn.kv_cache import self_attention

D, H = 8, 2


def block_params(rng, **kwargs):
    return ma.init_decoder_block(rng, D, H, 16, norm="rms_norm", activation="geglu_tanh",
                                 bias=False, **kwargs)


def x():
    return np.random.default_rng(1).normal(size=(2, 3, D))


@pytest.mark.parametrize("post", ["post_self_attention_norm", "post_feed_forward_norm"])
def test_a_post_norm_block_refuses_the_norms_after_the_sublayers(post):
    # Gemma 2/3's sandwich norms (and OLMo 2's) are read by a pre-norm block only
    params = block_params(np.random.default_rng(0))
    params[post] = {"gamma": np.full(D, 2.0)}
    with pytest.raises(ValueError, match=rf"{post}.*norm_first=False.*pass norm_first=True"):
        ma.decoder_block(params, x(), n_heads=H, norm="rms_norm", activation="geglu_tanh",
                         norm_first=False)


def test_olmo_norms_after_only_with_norm_first_false_is_refused_by_name():
    params = block_params(np.random.default_rng(0))
    params["post_self_attention_norm"] = params.pop("self_attention_norm")
    params["post_feed_forward_norm"] = params.pop("feed_forward_norm")
    with pytest.raises(ValueError, match=r"missing key 'self_attention_norm'.*"
                                         r"'post_self_attention_norm'.*norm_first=True"):
        ma.decoder_block(params, x(), n_heads=H, norm="rms_norm", activation="geglu_tanh")


def test_the_same_params_with_norm_first_run_the_sandwich_block():
    # the refusal above is of the combination only: pre-norm, the sandwich norm is read
    rng = np.random.default_rng(0)
    params = block_params(rng)
    plain = ma.decoder_block(params, x(), n_heads=H, norm="rms_norm", activation="geglu_tanh",
                             norm_first=True)
    doubled = {**params, "post_feed_forward_norm": {"gamma": np.full(D, 2.0)}}
    out = ma.decoder_block(doubled, x(), n_heads=H, norm="rms_norm", activation="geglu_tanh",
                           norm_first=True)
    # x + 2 rms_norm(ff) against x + ff: the sandwich norm changed the output
    assert not np.allclose(out, plain)


def test_cross_attention_params_without_memory_are_refused():
    params = block_params(np.random.default_rng(0), cross_attention=True)
    with pytest.raises(ValueError, match=r"cross_attention.*pass memory"):
        ma.decoder_block(params, x(), n_heads=H, norm="rms_norm", activation="geglu_tanh")


def test_a_block_key_no_block_reads_is_refused_by_name():
    params = block_params(np.random.default_rng(0))
    params["post_attention_layernorm"] = {"gamma": np.ones(D)}  # transformers' name, not ours
    with pytest.raises(ValueError, match=r"post_attention_layernorm.*which this block does not read"):
        ma.decoder_block(params, x(), n_heads=H, norm="rms_norm", activation="geglu_tanh",
                         norm_first=True)


def test_olmo_block_refuses_a_memory_it_would_not_read():
    params = block_params(np.random.default_rng(0), cross_attention=True)
    for key in ("self_attention_norm", "feed_forward_norm"):
        params[f"post_{key}"] = params.pop(key)
    memory = np.random.default_rng(2).normal(size=(2, 4, D))
    with pytest.raises(ValueError, match=r"memory.*not supported by OLMo 2"):
        ma.decoder_block(params, x(), memory=memory, n_heads=H, norm="rms_norm",
                         activation="geglu_tanh", norm_first=True)


@pytest.mark.parametrize("keyword", [{"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
                                     {"partial_rotary_factor": 0.5}, {"rope_base": 500.0}])
def test_learned_positions_refuse_the_rope_keywords(keyword):
    rng = np.random.default_rng(0)
    params, config = ma.init_causal_lm(rng, 12, 1, D, H, 16)  # GPT-2 style: learned positions
    name = next(iter(keyword))
    with pytest.raises(ValueError, match=rf"{name}=.*position='learned'.*pass position='rope'"):
        ma.causal_lm(params, np.array([[1, 2, 3]]), **config, **keyword)


def attention_params():
    return ma.init_decoder_block(np.random.default_rng(0), D, H, 16, bias=False)["self_attention"]


@pytest.mark.parametrize("positions", [None, np.arange(3)])
@pytest.mark.parametrize("keyword, name", [
    ({"partial_rotary_factor": 1.5}, "partial_rotary_factor"),
    ({"partial_rotary_factor": 0.0}, "partial_rotary_factor"),
    ({"rope_scaling": {"rope_type": "bogus"}}, "rope_scaling"),
    ({"rope_scaling": {"rope_type": "linear"}}, "rope_scaling"),  # its factor missing
    ({"rope_base": -1.0}, "rope_base")])
def test_a_bad_rope_keyword_is_refused_with_or_without_positions(keyword, name, positions):
    with pytest.raises((ValueError, TypeError), match=name):
        self_attention(attention_params(), x(), n_heads=H, positions=positions, **keyword)


@pytest.mark.parametrize("keyword", [{"partial_rotary_factor": 0.5},
                                     {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}])
def test_a_rope_keyword_without_positions_is_refused_not_ignored(keyword):
    name = next(iter(keyword))
    with pytest.raises(ValueError, match=rf"{name}=.*only where positions are given"):
        self_attention(attention_params(), x(), n_heads=H, **keyword)


def test_a_nope_layer_takes_the_models_rope_settings_and_rotates_nothing():
    # SmolLM3: rope_base None for a layer without RoPE; the model's schedule, passed to every
    # layer, is the rotated layers'. The reference: the same layer with no position at all.
    scaling = {"rope_type": "linear", "factor": 2.0}
    params = attention_params()
    out, _ = self_attention(params, x(), n_heads=H, positions=np.arange(3), rope_base=None,
                            rope_scaling=scaling)
    plain, _ = self_attention(params, x(), n_heads=H)
    np.testing.assert_allclose(out, plain, rtol=0, atol=1e-12)


@pytest.mark.parametrize("activation, extra", [("swiglu", "b_gate"), ("geglu_tanh", "b_down"),
                                               ("gelu", "w_gate")])
def test_a_feed_forward_key_the_formula_has_no_place_for_is_refused(activation, extra):
    rng = np.random.default_rng(0)
    params = ma.init_decoder_block(rng, D, H, 16, activation=activation)
    width = params["feed_forward"]["w_2" if "w_2" in params["feed_forward"] else "w_down"]
    params["feed_forward"][extra] = np.ones(width.shape[0] if extra == "b_gate" else D) \
        if extra.startswith("b_") else np.ones((D, 16))
    with pytest.raises(ValueError, match=rf"\['feed_forward'\] has \['{extra}'\].*does not use"):
        ma.decoder_block(params, x(), n_heads=H, activation=activation, norm_first=True)


def test_qk_norm_in_multi_head_attention_params_is_refused_not_skipped():
    params = ma.init_decoder_block(np.random.default_rng(0), D, H, 16, qk_norm=True,
                                   bias=False)["self_attention"]
    with pytest.raises(ValueError, match=r"\['q_norm', 'k_norm'\].*multi_head_attention does not"):
        ma.multi_head_attention(params, x(), x(), x(), n_heads=H)


def test_a_model_key_causal_lm_does_not_read_is_refused_by_name():
    params, config = ma.init_causal_lm(np.random.default_rng(0), 12, 1, D, H, 16)
    params["output"] = np.ones((D, 12))  # llama.cpp's name for lm_head: the model stays tied
    with pytest.raises(ValueError, match=r"\['output'\], which causal_lm does not read"):
        ma.causal_lm(params, np.array([[1, 2, 3]]), **config)


def test_pad_token_id_without_eos_token_id_is_refused():
    params, config = ma.init_causal_lm(np.random.default_rng(0), 12, 1, D, H, 16)
    with pytest.raises(ValueError, match=r"pad_token_id=0 fills a row after its eos_token_id"):
        ma.generate(params, np.array([[1, 2, 3]]), 2, pad_token_id=0, **config)


@pytest.mark.parametrize("extra", ["cross_attention", "post_feed_forward_norm", "ffn_norm"])
def test_an_encoder_block_refuses_a_key_it_does_not_read(extra):
    params = ma.init_encoder_block(np.random.default_rng(0), D, H, 16)
    params[extra] = params["self_attention" if extra == "cross_attention" else
                           "feed_forward_norm"]
    with pytest.raises(ValueError, match=rf"\['{extra}'\], which this block does not read"):
        ma.encoder_block(params, x(), n_heads=H)


@pytest.mark.parametrize("eps", [-1.0, "1e-6", float("nan")])
def test_self_attentions_eps_is_checked_with_or_without_a_qk_norm(eps):
    # (eps is QK-norm's: a wrong value is wrong whether or not these params have one)
    with pytest.raises((ValueError, TypeError), match="eps"):
        self_attention(attention_params(), x(), n_heads=H, eps=eps)
