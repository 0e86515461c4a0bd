"""from_hf beyond default-RoPE Llama: every RoPE scaling type, Qwen2 (q/k/v biases), Qwen3
(QK-norm, its own head width), Mistral (sliding window), GPT-2's relu/gelu, left-padded batches
and end-of-sequence tokens, each against the stock transformers model built from a config with
random weights (nothing is downloaded). Each configuration makes its feature matter: scaled RoPE
reaches beyond the original context, the window is shorter than the sequence."""
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity with transformers needs torch")
transformers = pytest.importorskip("transformers", reason="parity tests need transformers")

import minattn as ma  # noqa: E402
from minattn.interop import from_hf  # noqa: E402
from minattn.families.hf import rope_settings  # noqa: E402

from .test_hf_parity import V, _randomized  # noqa: E402

ORIGINAL = 8  # the "original context" of the scaled RoPE configs; the tests run 20 positions
ROPES = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL},
    "yarn_mscale": {"rope_type": "yarn", "factor": 4.0, "mscale": 0.8, "mscale_all_dim": 0.5,
                    "beta_fast": 8.0, "original_max_position_embeddings": ORIGINAL},
    "yarn_attention_factor": {"rope_type": "yarn", "factor": 3.0, "attention_factor": 1.3,
                              "original_max_position_embeddings": ORIGINAL},
    # with rope_theta 100 and d_k 8, the pairs turn 1.27, 0.40, 0.13, 0.04 times over the
    # original context: one kept, two smoothly interpolated, one divided by factor
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.1,
               "high_freq_factor": 1.0, "original_max_position_embeddings": ORIGINAL},
}

LONGROPE = {"rope_type": "longrope", "rope_theta": 100.0, "short_factor": [1.0, 1.5, 2.0, 3.0],
            "long_factor": [1.2, 3.0, 7.0, 11.0]}

COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=3e-6,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="sdpa")


def _build(family, dtype, **overrides):
    config_class, model_class = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),
        "gemma2": (transformers.Gemma2Config, transformers.Gemma2ForCausalLM),
        "gemma3": (transformers.Gemma3TextConfig, transformers.Gemma3ForCausalLM),
        "phi3": (transformers.Phi3Config, transformers.Phi3ForCausalLM),
        "gemma": (transformers.GemmaConfig, transformers.GemmaForCausalLM),
        "granite": (transformers.GraniteConfig, transformers.GraniteForCausalLM),
        "gpt_neox": (transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM),
        "stablelm": (transformers.StableLmConfig, transformers.StableLmForCausalLM),
        "smollm3": (transformers.SmolLM3Config, transformers.SmolLM3ForCausalLM),
        "cohere": (transformers.CohereConfig, transformers.CohereForCausalLM),
        "olmo2": (transformers.Olmo2Config, transformers.Olmo2ForCausalLM),
        "olmo3": (transformers.Olmo3Config, transformers.Olmo3ForCausalLM),
        "phi": (transformers.PhiConfig, transformers.PhiForCausalLM),
    }[family]
    # dynamic NTK scales beyond max_position_embeddings itself; the others name their
    # original context in the dict (transformers advises max_position_embeddings = factor times it)
    rope = overrides.get("rope_parameters", {})
    longest = ORIGINAL if rope.get("rope_type") == "dynamic" else int(ORIGINAL * rope.get(
        "factor", 8))
    settings = {**COMMON, "max_position_embeddings": longest, **overrides}
    if family in ("gpt_neox", "stablelm", "cohere", "phi"):  # LayerNorm (GPT-NeoX: no H_kv)
        settings = {k: v for k, v in settings.items() if k not in (
            "rms_norm_eps", "num_key_value_heads" if family == "gpt_neox" else "")}
    torch.manual_seed(0)
    return _randomized(model_class(config_class(**settings)), dtype)


FAMILIES = {
    "llama_gqa": ("llama", {}),
    "mistral_window": ("mistral", {"sliding_window": 4}),
    "qwen2_biases": ("qwen2", {}),
    "qwen2_windows": ("qwen2", {"use_sliding_window": True, "sliding_window": 3,
                                "max_window_layers": 1}),
    "llama_head_dim": ("llama", {"head_dim": 12}),  # 4 heads of 12 != 32 / 4
    # not a LlamaConfig key, and transformers' Llama reads no window: neither does from_hf
    "llama_sliding_window_attribute_ignored": ("llama", {"sliding_window": 3}),
    "qwen2_head_dim": ("qwen2", {"head_dim": 12}),  # not a Qwen2Config key; its forward reads it
    "qwen3_head_dim": ("qwen3", {"head_dim": 12, "attention_bias": True}),
    **{f"llama_{name}": ("llama", {"rope_parameters": {"rope_theta": 100.0, **rope}})
       for name, rope in ROPES.items()},
    # 6 pairs, beta_fast 2 and beta_slow 0.05: YaRN's ramp runs from pair 0 to pair 5
    "qwen3_yarn_ramp": ("qwen3", {"head_dim": 12, "use_sliding_window": True, "sliding_window": 5,
                                  "max_window_layers": 1, "rope_parameters": {
        "rope_theta": 50.0, **ROPES["yarn"], "beta_fast": 2.0, "beta_slow": 0.05}}),
    # Gemma 2: local (window 3) and global layers, caps small enough to bite (the scores and
    # logits here reach several units), query_pre_attn_scalar != d_k, head_dim 12 != 32 / 4
    "gemma2": ("gemma2", {"head_dim": 12, "sliding_window": 3, "attn_logit_softcapping": 1.5,
                          "attention_bias": True,
                          "final_logit_softcapping": 2.0, "query_pre_attn_scalar": 20,
                          "attn_implementation": "eager"}),
    # Gemma 3: QK-norm, local layers with base 10000 and window 4, a global layer with base 1e6
    # and linear scaling
    "gemma3": ("gemma3", {"head_dim": 12, "sliding_window": 4, "query_pre_attn_scalar": 12,
                          "attention_bias": True,
                          "layer_types": ["sliding_attention", "full_attention",
                                          "sliding_attention"], "num_hidden_layers": 3,
                          "rope_parameters": {
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                              "full_attention": {"rope_type": "linear", "factor": 4.0,
                                                 "rope_theta": 1e6}}}),
    # Phi-3: fused q/k/v and gate/up projections; LongRoPE with short factors up to the original
    # context of 8 and long factors beyond (one factor per pair of the 8-wide heads), its
    # factor max_position_embeddings / 8 = 4 by default; a window on every layer
    "phi3": ("phi3", {}),
    "phi3_longrope": ("phi3", {"max_position_embeddings": 32, "original_max_position_embeddings":
                               ORIGINAL, "rope_parameters": LONGROPE}),
    "phi3_longrope_attention_factor": ("phi3", {"max_position_embeddings": 32,
                                                "original_max_position_embeddings": ORIGINAL,
                                                "rope_parameters": {**LONGROPE, "factor": 2.5,
                                                                    "attention_factor": 0.9}}),
    "phi3_window": ("phi3", {"sliding_window": 3}),
    # partial RoPE: 4 of each 8-wide head's features rotated, with LongRoPE on their 2 pairs
    "phi3_partial_longrope": ("phi3", {
        "max_position_embeddings": 32, "original_max_position_embeddings": ORIGINAL,
        "rope_parameters": {**LONGROPE, "partial_rotary_factor": 0.5, "short_factor": [1.0, 2.0],
                            "long_factor": [1.5, 9.0]}}),
    # Gemma (1): (1 + w) norms, embeddings times sqrt(D), GEGLU, its own head width, biases
    "gemma1": ("gemma", {"head_dim": 12, "attention_bias": True, "rope_parameters": {
        "rope_type": "linear", "factor": 2.0, "rope_theta": 300.0}}),
    # Granite: its four multipliers, none 1 (attention_multiplier != 1/sqrt(d_k) = 0.35)
    "granite": ("granite", {"embedding_multiplier": 3.0, "attention_multiplier": 0.2,
                            "residual_multiplier": 0.4, "logits_scaling": 2.5}),
    "granite_tied_bias": ("granite", {"embedding_multiplier": 0.5, "attention_multiplier": 0.5,
                                      "residual_multiplier": 1.5, "logits_scaling": 0.3,
                                      "tie_word_embeddings": True, "attention_bias": True}),
    # GPT-NeoX: the parallel residual, partial RoPE (a quarter of each 16-wide head), LayerNorm,
    # the exact GELU, fused per-head q/k/v with biases; and its sequential residual, tied
    # embeddings, no attention biases, half the head rotated with YaRN, the tanh GELU
    "gpt_neox": ("gpt_neox", {"num_attention_heads": 2, "layer_norm_eps": 1e-3,
                              "rope_parameters": {"rope_type": "default", "rope_theta": 300.0,
                                                  "partial_rotary_factor": 0.25}}),
    "gpt_neox_sequential": ("gpt_neox", {
        "num_attention_heads": 2, "use_parallel_residual": False, "tie_word_embeddings": True,
        "attention_bias": False, "hidden_act": "gelu_new", "rope_parameters": {
            **ROPES["yarn"], "rope_theta": 300.0, "partial_rotary_factor": 0.5}}),
    # StableLM: LayerNorm, SwiGLU, a quarter of each head rotated, GQA; q/k/v biases and the
    # parallel residual (one norm for both sublayers), linear RoPE scaling
    "stablelm": ("stablelm", {"layer_norm_eps": 1e-3, "rope_parameters": {
        "rope_type": "default", "rope_theta": 300.0, "partial_rotary_factor": 0.25}}),
    "stablelm_parallel": ("stablelm", {"use_qkv_bias": True, "use_parallel_residual": True,
                                       "tie_word_embeddings": True,
                                       "rope_parameters": {"rope_type": "linear", "factor": 2.0,
                                                           "rope_theta": 300.0,
                                                           "partial_rotary_factor": 0.5}}),
    # SmolLM3: every third layer without RoPE (NoPE), those with a sliding window of 4
    "smollm3": ("smollm3", {"num_hidden_layers": 3, "no_rope_layer_interval": 3,
                            "use_sliding_window": True, "sliding_window": 4,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 300.0}}),
    "smollm3_nope_first": ("smollm3", {"no_rope_layers": [0, 1], "attention_bias": True,
                                       "rope_parameters": {**ROPES["llama3"],
                                                           "rope_theta": 100.0}}),
    # Cohere: one LayerNorm for a parallel block, interleaved RoPE, the logits scaled; tied
    # embeddings and attention biases, linear RoPE scaling
    "cohere": ("cohere", {"logit_scale": 0.3, "layer_norm_eps": 1e-3, "tie_word_embeddings": False,
                          "rope_parameters": {
        "rope_type": "default", "rope_theta": 300.0}}),
    "cohere_tied_bias": ("cohere", {"logit_scale": 2.0, "tie_word_embeddings": True,
                                    "attention_bias": True, "rope_parameters": {
                                        "rope_type": "linear", "factor": 2.0,
                                        "rope_theta": 300.0}}),
    # OLMo 2: norms after the sublayers only, QK-norm over all heads (GQA: 4 q heads, 2 k heads);
    # OLMo 3: with local layers (window 4, default RoPE) and a global one (linear scaling)
    "olmo2": ("olmo2", {"attention_bias": True, "rope_parameters": {
        "rope_type": "default", "rope_theta": 300.0}}),
    "olmo3": ("olmo3", {"num_hidden_layers": 3, "sliding_window": 4,
                        "layer_types": ["sliding_attention", "full_attention",
                                        "sliding_attention"],
                        "rope_parameters": {
                            "sliding_attention": {"rope_type": "default", "rope_theta": 300.0},
                            "full_attention": {"rope_type": "linear", "factor": 2.0,
                                               "rope_theta": 1000.0}}}),
    # Phi: the parallel block under one LayerNorm, half of each head rotated, biases everywhere
    # (the unembedding's too); tied embeddings, the exact GELU, YaRN
    "phi": ("phi", {"layer_norm_eps": 1e-3, "rope_parameters": {
        "rope_type": "default", "rope_theta": 300.0, "partial_rotary_factor": 0.5}}),
    "phi_tied_yarn": ("phi", {"tie_word_embeddings": True, "hidden_act": "gelu",
                              "rope_parameters": {**ROPES["yarn"], "rope_theta": 300.0,
                                                  "partial_rotary_factor": 0.5}}),
    # Gemma 3 with YaRN on its global layers (truncate: the top level's default, True)
    "gemma3_yarn": ("gemma3", {"head_dim": 8, "sliding_window": 4, "num_hidden_layers": 2,
                               "layer_types": ["sliding_attention", "full_attention"],
                               "rope_parameters": {
                                   "sliding_attention": {"rope_type": "default",
                                                         "rope_theta": 1e4},
                                   "full_attention": {**ROPES["yarn"], "beta_fast": 4.0,
                                                      "rope_theta": 100.0}}}),
    # (transformers' Gemma 3 caps the final logits only: its attention ignores the config's cap)
    "gemma3_capped": ("gemma3", {"head_dim": 8, "sliding_window": 5,
                                 "attn_logit_softcapping": 1.0, "final_logit_softcapping": 1.5,
                                 "attn_implementation": "eager"}),
}


def _tokens(b=2, length=20, seed=0):
    return np.random.default_rng(seed).integers(3, V, size=(b, length))


def _hf_logits(model, tokens, attention_mask=None, position_ids=None):
    t = torch.from_numpy(tokens)
    mask = torch.ones_like(t) if attention_mask is None else torch.from_numpy(attention_mask)
    with torch.no_grad():
        return model(t, attention_mask=mask, position_ids=position_ids).logits.numpy()


@pytest.mark.parametrize("name", FAMILIES)
def test_logits_equal_hf_float64(name, float64_islands):
    model = _build(FAMILIES[name][0], torch.float64, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", FAMILIES)
def test_logits_near_the_stock_float64_model(name):
    # transformers' float32 islands left in: within ~1e-5.
    model = _build(FAMILIES[name][0], torch.float64, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["mistral_window", "qwen3_head_dim", "llama_llama3",
                                  "llama_yarn", "gemma2", "gemma3", "gemma1",
                                  "phi3_partial_longrope", "granite", "gpt_neox"])
def test_logits_equal_hf_float32(name):
    model = _build(FAMILIES[name][0], torch.float32, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens = _tokens()
    logits = ma.causal_lm(params, tokens, **config)
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, _hf_logits(model, tokens), rtol=0, atol=1e-4)


def _hf_generate(model, tokens, n, attention_mask=None, eos_token_id=None):
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = 0
    t = torch.from_numpy(tokens)
    mask = torch.ones_like(t) if attention_mask is None else torch.from_numpy(attention_mask)
    with torch.no_grad():
        return model.generate(t, attention_mask=mask, max_new_tokens=n, do_sample=False).numpy()


@pytest.mark.parametrize("name", ["qwen2_windows", "qwen3_head_dim", "llama_dynamic",
                                  "llama_llama3", "gemma2", "gemma3", "gemma3_yarn", "gemma1",
                                  "phi3_window", "granite", "gpt_neox", "stablelm_parallel",
                                  "smollm3", "cohere", "olmo3", "phi"])
def test_greedy_generation_equals_hf_generate(name, float64_islands):
    model = _build(FAMILIES[name][0], torch.float64, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    ours = ma.generate(params, tokens, 10, **config)
    np.testing.assert_array_equal(ours, _hf_generate(model, tokens, 10))
    if name != "llama_dynamic":  # dynamic NTK: the cache keeps keys rotated at shorter lengths
        np.testing.assert_array_equal(ma.generate(params, tokens, 10, use_cache=False, **config),
                                      ours)


def _left_padded(seed=5):
    # Three prompts of 6, 3 and 1 real tokens, padded on the left with token 0.
    tokens = np.random.default_rng(seed).integers(3, V, size=(3, 6))
    attention_mask = (np.arange(6) >= np.array([[0], [3], [5]])).astype(np.int64)
    return np.where(attention_mask == 1, tokens, 0), attention_mask


@pytest.mark.parametrize("name", ["llama_gqa", "mistral_window", "qwen3_head_dim",
                                  "llama_llama3", "gemma1", "phi3_partial_longrope",
                                  "granite_tied_bias", "gpt_neox_sequential", "stablelm",
                                  "smollm3_nope_first", "cohere_tied_bias", "olmo2",
                                  "phi_tied_yarn"])
def test_left_padded_logits_equal_hf_with_generate_positions(name, float64_islands):
    model = _build(FAMILIES[name][0], torch.float64, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens, attention_mask = _left_padded()
    positions = np.where(attention_mask == 1, np.cumsum(attention_mask, -1) - 1, 0)
    ours = ma.causal_lm(params, tokens, attention_mask, **config)
    hf = _hf_logits(model, tokens, attention_mask, torch.from_numpy(positions))
    real = attention_mask == 1  # padded positions' logits are nobody's prediction
    np.testing.assert_allclose(ours[real], hf[real], rtol=0, atol=1e-10)
    # each row alone, unpadded, gives the same logits at its real tokens
    for row in range(3):
        alone = tokens[row:row + 1, real[row]]
        np.testing.assert_allclose(ma.causal_lm(params, alone, **config)[0], ours[row][real[row]],
                                   rtol=0, atol=1e-10)


@pytest.mark.parametrize("name, use_cache", [("mistral_window", True), ("qwen2_biases", False),
                                             ("llama_yarn", True), ("gemma2", True),
                                             ("gemma3", False), ("gemma1", True),
                                             ("phi3_window", True),
                                             ("granite_tied_bias", False),
                                             ("gpt_neox", True), ("stablelm", True),
                                             ("smollm3", True), ("cohere", True),
                                             ("olmo2", True), ("olmo3", False),
                                             ("phi", True)])
def test_left_padded_generation_with_eos_equals_hf(name, use_cache, float64_islands):
    model = _build(FAMILIES[name][0], torch.float64, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens, attention_mask = _left_padded()
    plain = ma.generate(params, tokens, 12, attention_mask, **config)
    eos = int(plain[0, 8])  # a token row 0 produces on its way: some rows end early
    hf = _hf_generate(model, tokens, 12, attention_mask, eos_token_id=eos)
    ours = ma.generate(params, tokens, 12, attention_mask, eos_token_id=eos, pad_token_id=0,
                       use_cache=use_cache, **config)
    np.testing.assert_array_equal(ours, hf)
    assert (ours[0, 9:] == 0).all()


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_new"])
def test_gpt2_activations_equal_hf(activation):
    config = transformers.GPT2Config(vocab_size=V, n_positions=64, n_embd=16, n_layer=2, n_head=4,
                                     n_inner=24, layer_norm_epsilon=1e-3,
                                     activation_function=activation, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = _randomized(transformers.GPT2LMHeadModel(config), torch.float64)
    params, kwargs = from_hf(model)
    tokens, attention_mask = _left_padded()
    positions = np.where(attention_mask == 1, np.cumsum(attention_mask, -1) - 1, 0)
    real = attention_mask == 1
    np.testing.assert_allclose(
        ma.causal_lm(params, tokens, attention_mask, **kwargs)[real],
        _hf_logits(model, tokens, attention_mask, torch.from_numpy(positions))[real],
        rtol=0, atol=1e-10)


def test_a_subclass_is_converted_by_its_architecture():
    subclass = type("MyLlama", (transformers.LlamaForCausalLM,), {})
    torch.manual_seed(0)
    model = _randomized(subclass(transformers.LlamaConfig(**COMMON)), torch.float64)
    params, config = from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-5)


def test_mixture_of_experts_is_refused_by_name():
    config = transformers.MixtralConfig(**{**COMMON, "num_local_experts": 2})
    model = transformers.MixtralForCausalLM(config)
    with pytest.raises(ValueError, match="mixture of experts layers .*num_local_experts.* not supported"):
        from_hf(model)


def test_other_architectures_are_refused_naming_the_supported_ones():
    model = transformers.OPTForCausalLM(transformers.OPTConfig(
        vocab_size=V, hidden_size=16, num_hidden_layers=1, ffn_dim=16, num_attention_heads=2))
    with pytest.raises(TypeError, match="model_type='opt'.*|'llama'"):
        from_hf(model)


def _config_4x(**attributes):
    # A transformers 4.x config as from_hf sees it: rope_theta and rope_scaling, no
    # rope_parameters (4.x is not installed here; the attributes are what 4.x configs have).
    return types.SimpleNamespace(max_position_embeddings=ORIGINAL, **attributes)


@pytest.mark.parametrize("name", ROPES)
def test_rope_settings_of_4x_and_5_configs_agree(name):
    rope = {k: v for k, v in ROPES[name].items()}
    model = _build("llama", torch.float64, rope_parameters={"rope_theta": 100.0, **rope})
    four = _config_4x(rope_theta=100.0, rope_scaling=dict(rope))
    assert rope_settings(four) == rope_settings(model.config)
    legacy = {"type" if k == "rope_type" else k: v for k, v in rope.items()}  # 4.x's older key
    assert rope_settings(_config_4x(rope_theta=100.0, rope_scaling=legacy)) == rope_settings(four)


def test_rope_settings_refuse_what_they_cannot_read():
    with pytest.raises(ValueError, match="neither rope_parameters.*nor rope_theta"):
        rope_settings(types.SimpleNamespace())
    with pytest.raises(ValueError, match="'su' is not supported"):  # 4.x Phi-3's older name
        rope_settings(_config_4x(rope_theta=1e4, rope_scaling={
            "rope_type": "su", "long_factor": [1.0], "short_factor": [1.0]}))
    with pytest.raises(ValueError, match="missing: .'factor', 'original_max_position_embeddings'."):
        rope_settings(_config_4x(rope_theta=1e4, rope_scaling={
            "rope_type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}))
    with pytest.raises(ValueError, match="unknown: \\['low_freq_factr'\\]"):
        rope_settings(_config_4x(rope_theta=1e4, rope_scaling={
            **ROPES["llama3"], "low_freq_factr": 1.0}))
    assert rope_settings(_config_4x(rope_theta=1e4, rope_scaling=None)) == (1e4, None)


def test_longrope_short_factors_within_the_original_context(float64_islands):
    model = _build("phi3", torch.float64, **FAMILIES["phi3_longrope"][1])
    params, config = from_hf(model)
    tokens = _tokens(2, ORIGINAL)  # positions 0..7: the short factors
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["phi3_longrope", "phi3_partial_longrope"])
def test_longrope_generation_across_the_original_context_equals_hf(name, float64_islands):
    # transformers' Phi-3 drops its cache when the sequence first outgrows the original context
    # (the keys were rotated with the short factors) and recomputes it with the long ones: what
    # minattn's generate does with use_cache=False.
    model = _build("phi3", torch.float64, **FAMILIES[name][1])
    params, config = from_hf(model)
    tokens, attention_mask = _left_padded()
    ours = ma.generate(params, tokens, 10, attention_mask, use_cache=False, **config)
    np.testing.assert_array_equal(ours, _hf_generate(model, tokens, 10, attention_mask))
