"""Properties of multi-head attention's and the encoder's checks that the mutation test showed
no test stated (tests/MUTANTS.md): which argument a message names inside a stack of layers, and
that params are taken in the dtype of the inputs (checks.in_dtype) whichever input has it."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
ENCODER = ma.init_encoder(rng, 2, 4, 2, 8)


def _layer_1(drop=None, **change):
    """ENCODER with layer 1 changed (a new dict each call: the shared one is never touched)."""
    layers = [dict(layer) for layer in ENCODER["layers"]]
    layers[1].update(change)
    layers[1].pop(drop, None)
    return {**ENCODER, "layers": layers}


@pytest.mark.parametrize("params, message", [
    (lambda: _layer_1(drop="self_attention_norm",
                      norm1=ENCODER["layers"][1]["self_attention_norm"]),
     "params['layers'][1] has key(s) 'norm1', the old names of a block's params; they are now "
     "'norm1' -> 'self_attention_norm'"),
    (lambda: _layer_1(self_attention_norm={"gamma": np.ones(3), "beta": np.zeros(4)}),
     "params['layers'][1]['self_attention_norm']['gamma'] has shape (3,), expected (4,)"),
])
def test_a_bad_layer_of_an_encoder_is_named_by_its_index(params, message):
    with pytest.raises(ValueError) as error:
        ma.encoder(params(), np.ones((3, 4)), n_heads=2)
    assert str(error.value) == message


@pytest.mark.parametrize("call, message", [
    (lambda: ma.init_multi_head_attention(rng, 0, 2), "d_model must be a positive int, got 0"),
    (lambda: ma.init_encoder(rng, 0, 4, 2, 8), "n_layers must be a positive int, got 0"),
    (lambda: ma.encoder_block(ENCODER["layers"][0], np.ones((3, 4)), n_heads=2, eps=-1.0),
     "eps must be a non-negative, finite float, got -1.0"),
])
def test_size_and_eps_refusals_name_their_argument(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


@pytest.mark.parametrize("wide", ["query", "key", "value"])
def test_float64_params_stay_float64_when_any_input_is_float64(wide):
    """The params are taken in the result type of query, key and value: one float64 input is
    enough for float64 params to be used as they are (not rounded to float32)."""
    params = ma.init_multi_head_attention(np.random.default_rng(1), 4, 2)  # float64
    inputs = {name: np.random.default_rng(i).normal(size=(3, 4)).astype(np.float32)
              for i, name in enumerate(("query", "key", "value"))}
    inputs[wide] = inputs[wide].astype(np.float64)
    out, _ = ma.multi_head_attention(params, *inputs.values(), n_heads=2)
    expected, _ = ma.multi_head_attention(
        params, *(a.astype(np.float64) for a in inputs.values()), n_heads=2)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-15)


def test_a_float64_mask_beyond_float32s_range_masks_the_key_without_a_warning():
    q = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    mask = np.zeros((3, 3))
    mask[:, 1] = -1e300  # -inf in float32 (the mask is taken in the inputs' dtype)
    out, weights = ma.scaled_dot_product_attention(q, q, q, mask)
    assert weights.dtype == np.float32 and np.all(weights[:, 1] == 0)


def test_attention_variants_without_sinks_refuse_params_sinks_by_name():
    from minattn.differential import differential_attention, init_differential_attention
    from minattn.mla import init_latent_attention, latent_attention
    x = np.random.default_rng(1).normal(size=(3, 8))
    differential = init_differential_attention(np.random.default_rng(0), 8, 2, layer_index=1)
    with pytest.raises(ValueError) as error:
        differential_attention({**differential, "sinks": np.ones(2)}, x, n_heads=2)
    assert str(error.value) == ("differential_attention does not support attention sinks "
                                "(params['sinks'])")
    sizes = dict(qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)
    latent = init_latent_attention(np.random.default_rng(0), 8, 2, kv_lora_rank=4, **sizes)
    with pytest.raises(ValueError) as error:
        latent_attention({**latent, "sinks": np.ones(2)}, x, n_heads=2, positions=np.arange(3),
                         **sizes)
    assert str(error.value) == "latent_attention does not support attention sinks (params['sinks'])"


# --- the decoder's refusals of a key or keyword that would go unused, in full (2026-11-27 night) ---

D, H = 8, 2


def _decoder_block_params(**kwargs):
    return ma.init_decoder_block(np.random.default_rng(1), D, H, 16, **kwargs)


def _x():
    return np.random.default_rng(2).normal(size=(2, 3, D))


def test_norms_after_the_sublayers_in_a_post_norm_block_are_refused_in_full():
    params = _decoder_block_params()
    params["post_feed_forward_norm"] = params["feed_forward_norm"]
    with pytest.raises(ValueError) as error:
        ma.decoder_block(params, _x(), n_heads=H, norm_first=False)
    assert str(error.value) == (
        "params has ['post_feed_forward_norm'] (norms after the sublayers, x + "
        "norm(sublayer(x)): Gemma 2 and 3's sandwich norms, OLMo 2's), which the post-norm block "
        "(norm_first=False: x = norm(x + sublayer(x))) does not use: pass norm_first=True")


def test_a_cross_attention_sublayer_without_memory_is_refused_in_full():
    with pytest.raises(ValueError) as error:
        ma.decoder_block(_decoder_block_params(cross_attention=True), _x(), n_heads=H)
    assert str(error.value) == (
        "params has ['cross_attention', 'cross_attention_norm'] (the cross-attention sublayer), "
        "which runs only with memory (the encoder's output): pass memory")


def test_rope_keywords_beside_learned_positions_are_all_named_in_full():
    params, config = ma.init_causal_lm(np.random.default_rng(3), 12, 1, D, H, 16)
    with pytest.raises(ValueError) as error:
        ma.causal_lm(params, np.array([[1, 2, 3]]), **config, rope_base=500.0,
                     partial_rotary_factor=0.5)
    assert str(error.value) == (
        "rope_base=500.0, partial_rotary_factor=0.5 set RoPE, which position='learned' (the "
        "default: learned position embeddings) does not use: pass position='rope'")


def test_a_model_key_causal_lm_does_not_read_is_refused_in_full():
    params, config = ma.init_causal_lm(np.random.default_rng(3), 12, 1, D, H, 16)
    params["output"] = np.ones((D, 12))
    with pytest.raises(ValueError) as error:
        ma.causal_lm(params, np.array([[1, 2, 3]]), **config)
    assert str(error.value) == (
        "params has keys ['output'], which causal_lm does not read (its keys: "
        "'token_embedding', 'position_embedding', 'layers', 'final_norm', 'lm_head', "
        "'lm_head_bias')")


def test_pad_token_id_without_eos_token_id_is_refused_in_full():
    params, config = ma.init_causal_lm(np.random.default_rng(3), 12, 1, D, H, 16)
    with pytest.raises(ValueError) as error:
        ma.generate(params, np.array([[1, 2, 3]]), 2, pad_token_id=0, **config)
    assert str(error.value) == (
        "pad_token_id=0 fills a row after its eos_token_id, and eos_token_id is None (no row "
        "ends): pass eos_token_id, or leave pad_token_id None")


def _attention_params():
    return _decoder_block_params(bias=False)["self_attention"]


def test_self_attentions_eps_is_refused_naming_it_in_full():
    from minattn.kv_cache import self_attention

    with pytest.raises(ValueError) as error:
        self_attention(_attention_params(), _x(), n_heads=H, eps=-1.0)
    assert str(error.value) == "eps must be a non-negative, finite float, got -1.0"


def test_rope_keywords_without_positions_are_all_named_in_full():
    from minattn.kv_cache import self_attention

    scaling = {"rope_type": "linear", "factor": 2.0}
    with pytest.raises(ValueError) as error:
        self_attention(_attention_params(), _x(), n_heads=H, rope_scaling=scaling,
                       partial_rotary_factor=0.5)
    assert str(error.value) == (
        "rope_scaling={'rope_type': 'linear', 'factor': 2.0} and partial_rotary_factor=0.5 set "
        "RoPE, which rotates q and k only where positions are given: pass positions, or leave "
        "them None")


def test_a_post_norm_in_place_of_a_pre_norm_is_named_with_the_keyword_that_reads_it_in_full():
    params = _decoder_block_params()
    params["post_self_attention_norm"] = params.pop("self_attention_norm")
    with pytest.raises(ValueError) as error:
        ma.decoder_block(params, _x(), n_heads=H)  # norm_first=False, the default
    assert str(error.value) == (
        "params is missing key 'self_attention_norm' (expected keys: 'self_attention', "
        "'self_attention_norm', 'feed_forward', 'feed_forward_norm'); params has "
        "'post_self_attention_norm', which only a pre-norm block reads: pass norm_first=True")


def test_an_encoder_block_key_it_does_not_read_is_refused_listing_its_keys_in_full():
    params = ma.init_encoder_block(np.random.default_rng(4), D, H, 16)
    params["ffn_norm"] = params["feed_forward_norm"]  # llama.cpp's name, not the block's
    with pytest.raises(ValueError) as error:
        ma.encoder_block(params, _x(), n_heads=H)
    assert str(error.value) == (
        "params has keys ['ffn_norm'], which this block does not read (its keys: "
        "'self_attention', 'self_attention_norm', 'feed_forward', 'feed_forward_norm')")


@pytest.mark.parametrize("eps", [0.25, 3.0])
def test_qk_norm_over_all_heads_uses_the_eps_given(eps):
    # OLMo 2's QK-norm (gamma [H d_k]: each token's q, k normalised over all heads at once)
    # against the formula: the cache's keys are k's RMSNorm with this eps (no RoPE here).
    rng = np.random.default_rng(7)
    D, H, H_kv, d = 8, 4, 2, 4
    params = {"w_q": rng.standard_normal((D, H * d)), "w_k": rng.standard_normal((D, H_kv * d)),
              "w_v": rng.standard_normal((D, H_kv * d)), "w_o": rng.standard_normal((H * d, D)),
              "q_norm": {"gamma": rng.uniform(0.5, 2, H * d)},
              "k_norm": {"gamma": rng.uniform(0.5, 2, H_kv * d)}}
    x = 0.1 * rng.standard_normal((3, D))  # small: mean(k²) near eps, so eps shows
    _, cache = ma.self_attention(params, x, n_heads=H, n_kv_heads=H_kv, d_k=d, eps=eps,
                                 cache={})
    k = x @ params["w_k"]  # [L, H_kv d]
    expected = k / np.sqrt(np.mean(k ** 2, axis=-1, keepdims=True) + eps) * params["k_norm"]["gamma"]
    np.testing.assert_allclose(cache["k"], expected.reshape(3, H_kv, d).transpose(1, 0, 2),
                               rtol=1e-12)
