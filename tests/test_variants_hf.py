"""Multi-head latent attention (DeepSeek-V3) and differential attention (DiffLlama) against
transformers, built from configs with random weights (nothing is downloaded), in eval mode."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity with transformers needs torch")
transformers = pytest.importorskip("transformers", reason="parity tests need transformers")

import minattn as ma  # noqa: E402
from minattn.families.deepseek_v3 import from_hf as deepseek_v3_from_hf  # noqa: E402
from minattn.families.diffllama import from_hf as diffllama_from_hf  # noqa: E402

from .test_hf_parity import _hf_generate, _hf_logits, _randomized, _tokens  # noqa: E402

V = 37


def _deepseek(dtype, q_lora_rank=12, interleave=True, n_layers=2, bias=False, dense=True,
              **overrides):
    config = transformers.DeepseekV3Config(**{
        **dict(vocab_size=V, hidden_size=32, intermediate_size=40, moe_intermediate_size=8,
               num_hidden_layers=n_layers, num_attention_heads=4, num_key_value_heads=4,
               kv_lora_rank=8, q_lora_rank=q_lora_rank, qk_nope_head_dim=6, qk_rope_head_dim=4,
               v_head_dim=5, first_k_dense_replace=n_layers if dense else 1, n_routed_experts=4,
               n_group=1, topk_group=1, num_experts_per_tok=2, rope_interleave=interleave,
               attention_bias=bias, rms_norm_eps=1e-5, max_position_embeddings=64,
               tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               attn_implementation="sdpa"), **overrides})
    torch.manual_seed(0)
    return _randomized(transformers.DeepseekV3ForCausalLM(config), dtype)


def _lm(params, tokens, kwargs, cache=None):
    # A pre-norm decoder with kwargs["attention"] as its self-attention sublayer: minattn's pieces
    # composed by hand (rms_norm, the attention variant, gated_feed_forward).
    config = dict(kwargs)
    attention, eps = config.pop("attention"), config["eps"]
    past = 0 if cache is None else next(iter(cache[0].values())).shape[-2]
    length = tokens.shape[1]
    positions = np.arange(past, past + length)
    mask = ma.causal_mask(length, past + length, align="bottom_right")
    x = params["token_embedding"][tokens]
    new_cache = []
    for i, layer in enumerate(params["layers"]):
        out, layer_cache = attention(layer["self_attention"], ma.rms_norm(x, layer["self_attention_norm"]["gamma"], eps),
                                     mask, positions=positions,
                                     cache=None if cache is None else cache[i],
                                     **{key: config[key] for key in
                                        ("n_heads", "n_kv_heads", "eps", "rope_base",
                                         "rope_scaling") if key in config})
        x = x + out
        new_cache.append(layer_cache)
        x = x + ma.gated_feed_forward(layer["feed_forward"], ma.rms_norm(x, layer["feed_forward_norm"]["gamma"], eps))
    logits = ma.rms_norm(x, params["final_norm"]["gamma"], eps) @ params["lm_head"]
    return logits, tuple(new_cache)


DEEPSEEKS = {"q_lora": {}, "no_q_lora": {"q_lora_rank": None},
             "not_interleaved": {"interleave": False}, "bias": {"bias": True}}


@pytest.mark.parametrize("variant", DEEPSEEKS)
@pytest.mark.parametrize("absorb", [False, True])
def test_deepseek_v3_logits_float64(variant, absorb, float64_islands):
    model = _deepseek(torch.float64, **DEEPSEEKS[variant])
    params, kwargs = deepseek_v3_from_hf(model)
    kwargs["attention"] = lambda *a, **k: kwargs_attention(*a, absorb=absorb, **k)
    kwargs_attention = deepseek_v3_from_hf(model)[1]["attention"]
    tokens = _tokens()
    np.testing.assert_allclose(_lm(params, tokens, kwargs)[0], _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


def test_deepseek_v3_logits_float32_and_stock_float64():
    model = _deepseek(torch.float64)
    params, kwargs = deepseek_v3_from_hf(model)
    tokens = _tokens()
    # The stock float64 model computes its norms and RoPE angles in float32.
    np.testing.assert_allclose(_lm(params, tokens, kwargs)[0], _hf_logits(model, tokens),
                               rtol=0, atol=1e-5)
    model = _deepseek(torch.float32)
    params, kwargs = deepseek_v3_from_hf(model)
    logits = _lm(params, tokens, kwargs)[0]
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, _hf_logits(model, tokens), rtol=0, atol=1e-4)


def _greedy(params, kwargs, tokens, n, empty_cache):
    # Greedy decoding through the cache, one token a step, with _lm.
    cache, new = tuple(empty_cache(tokens) for _ in params["layers"]), tokens
    for _ in range(n):
        logits, cache = _lm(params, new, kwargs, cache)
        new = np.argmax(logits[:, -1], axis=-1)[:, None]
        tokens = np.concatenate([tokens, new], axis=1)
    return tokens


@pytest.mark.parametrize("q_lora_rank", [12, None])
def test_deepseek_v3_greedy_generation_equals_hf_generate(q_lora_rank, float64_islands):
    from minattn.mla import empty_latent_cache

    model = _deepseek(torch.float64, q_lora_rank=q_lora_rank)
    params, kwargs = deepseek_v3_from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    empty = lambda t: empty_latent_cache(params["token_embedding"][t], 8, 4)
    np.testing.assert_array_equal(_greedy(params, kwargs, tokens, 12, empty),
                                  _hf_generate(model, tokens, 12))


def test_deepseek_v3_with_experts_is_refused():
    from minattn.interop import from_hf

    with pytest.raises(ValueError, match="mixture of experts .* not supported"):
        from_hf(_deepseek(torch.float32, dense=False))


def test_from_hf_dispatches_to_the_variants():
    from minattn.interop import from_hf

    assert from_hf(_deepseek(torch.float32))[1]["attention"].func.__name__ == "latent_attention"
    assert from_hf(_diffllama(torch.float32))[1]["attention"].__name__ == "differential_attention"


def _diffllama(dtype, n_heads=4, n_kv_heads=2, n_layers=2, bias=False):
    config = transformers.DiffLlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=40, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, num_key_value_heads=n_kv_heads, attention_bias=bias,
        rms_norm_eps=1e-5, max_position_embeddings=64, tie_word_embeddings=False,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="sdpa")
    torch.manual_seed(0)
    return _randomized(transformers.DiffLlamaForCausalLM(config), dtype)


DIFFLLAMAS = {"gqa": {}, "mha": {"n_kv_heads": 4}, "bias": {"bias": True},
              "eight_heads": {"n_heads": 8, "n_kv_heads": 4, "n_layers": 3}}


@pytest.mark.parametrize("variant", DIFFLLAMAS)
def test_diffllama_logits_float64(variant, float64_islands):
    model = _diffllama(torch.float64, **DIFFLLAMAS[variant])
    params, kwargs = diffllama_from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(_lm(params, tokens, kwargs)[0], _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


def test_diffllama_logits_float32_and_stock_float64():
    tokens = _tokens()
    model = _diffllama(torch.float64)
    params, kwargs = diffllama_from_hf(model)
    np.testing.assert_allclose(_lm(params, tokens, kwargs)[0], _hf_logits(model, tokens),
                               rtol=0, atol=1e-5)
    model = _diffllama(torch.float32)
    params, kwargs = diffllama_from_hf(model)
    logits = _lm(params, tokens, kwargs)[0]
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, _hf_logits(model, tokens), rtol=0, atol=1e-4)


def test_diffllama_greedy_generation_equals_hf_generate(float64_islands):
    model = _diffllama(torch.float64)
    params, kwargs = diffllama_from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    empty = lambda t: {key: np.zeros((t.shape[0], 2, 0, 8)) for key in ("k", "v")}
    np.testing.assert_array_equal(_greedy(params, kwargs, tokens, 12, empty),
                                  _hf_generate(model, tokens, 12))


# Through minattn's own language model: from_hf's (params, config) straight into causal_lm and
# generate, the variant's cache ({"c_kv", "k_rope"} for MLA) starting empty.
@pytest.mark.parametrize("q_lora_rank", [12, None])
def test_deepseek_v3_through_causal_lm_and_generate(q_lora_rank, float64_islands):
    from minattn.interop import from_hf

    model = _deepseek(torch.float64, q_lora_rank=q_lora_rank)
    params, config = from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)
    _, cache = ma.causal_lm(params, tokens, return_cache=True, **config)
    assert sorted(cache[0]) == ["c_kv", "k_rope"] and cache[0]["c_kv"].shape == (2, 5, 8)
    expected = _hf_generate(model, tokens, 12)
    np.testing.assert_array_equal(ma.generate(params, tokens, 12, **config), expected)
    np.testing.assert_array_equal(ma.generate(params, tokens, 12, use_cache=False, **config),
                                  expected)


def test_diffllama_through_causal_lm_and_generate(float64_islands):
    from minattn.interop import from_hf

    model = _diffllama(torch.float64)
    params, config = from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)
    np.testing.assert_array_equal(ma.generate(params, tokens, 12, **config),
                                  _hf_generate(model, tokens, 12))


# DeepSeek-V3's YaRN: its frequencies and attention factor on the RoPE part, and the softmax
# scale times m(factor, mscale_all_dim)^2 (transformers' yarn_apply_mscale). 8 RoPE features,
# an original context of 8 and 20 positions; mscale != mscale_all_dim so the attention factor
# is not 1.
YARN = {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0, "mscale": 0.8,
        "mscale_all_dim": 0.6, "beta_fast": 8.0, "original_max_position_embeddings": 8}


@pytest.mark.parametrize("q_lora_rank", [12, None])
def test_deepseek_v3_yarn_equals_hf(q_lora_rank, float64_islands):
    from minattn.interop import from_hf

    model = _deepseek(torch.float64, q_lora_rank=q_lora_rank, qk_rope_head_dim=8,
                      max_position_embeddings=32, rope_parameters=dict(YARN))
    params, config = from_hf(model)
    assert config["rope_scaling"]["rope_type"] == "yarn"
    tokens = _tokens(2, 20)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)
    short = _tokens(2, 5, seed=3)
    expected = _hf_generate(model, short, 12)
    np.testing.assert_array_equal(ma.generate(params, short, 12, **config), expected)
    np.testing.assert_array_equal(ma.generate(params, short, 12, use_cache=False, **config),
                                  expected)


def test_deepseek_v3_yarn_near_the_stock_model():
    from minattn.interop import from_hf

    model = _deepseek(torch.float64, qk_rope_head_dim=8, max_position_embeddings=32,
                      rope_parameters=dict(YARN))
    params, config = from_hf(model)
    tokens = _tokens(2, 20)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-5)
