"""Every config key of every family from_hf converts, classified from the family's transformers
source (transformers 5.24: models/<family>/modeling_*.py, masking_utils.py,
modeling_rope_utils.py), so that no key is silently honoured or silently ignored:

- READ: the forward reads it and from_hf reads it the same way; named with the parity
  configuration(s) (tests/test_hf_families.py, test_hf_parity.py, test_variants_hf.py) that give
  it a value that matters;
- REFUSED: a value the forward reads and minattn does not implement (or where the config says
  one thing and the forward does another), refused by from_hf naming the key: each is tried
  below (a READ key may name one such value too);
- INERT: the forward (eval mode, causal LM logits) never reads it; the reason in a few words.

test_every_config_key_is_classified enumerates the config class's keys (its dataclass fields,
PreTrainedConfig's included), so a transformers release that adds a key fails here until someone
reads what the family's forward does with it.
"""
import dataclasses
import importlib

import pytest

torch = pytest.importorskip("torch", reason="from_hf needs torch")
transformers = pytest.importorskip("transformers", reason="from_hf converts transformers models")

from minattn.interop import from_hf  # noqa: E402

# PreTrainedConfig's own fields: metadata, and the outputs of heads other than the LM's.
BASE_INERT = {
    "architectures": "metadata", "transformers_version": "metadata", "dtype": "the load dtype "
    "(from_hf takes the weights' own)", "id2label": "classification heads",
    "label2id": "classification heads", "problem_type": "classification heads",
    "is_encoder_decoder": "generation setup (these are decoder-only classes)",
    "output_hidden_states": "extra outputs", "return_dict": "output container",
    "chunk_size_feed_forward": "read by encoder models' apply_chunking_to_forward, not these",
}
# Keys the forward reads from any config, field or not (masking_utils: getattr(config,
# "is_causal", True)), and keys every family reads alike.
ANY_FAMILY = {"is_causal": ("refused", False)}
COMMON_INERT = {
    "attention_dropout": "dropout (eval mode)", "initializer_range": "initialisation",
    "use_cache": "whether a cache is returned, not the logits",
    "bos_token_id": "generation config", "eos_token_id": "generation config (generate's "
    "eos_token_id=)", "pad_token_id": "nn.Embedding's padding_idx: gradients only",
}
SHAPES = {"vocab_size": "test_hf_families::llama_gqa", "hidden_size": "test_hf_families::llama_gqa",
          "intermediate_size": "test_hf_families::llama_gqa",
          "num_hidden_layers": "test_hf_parity::one_layer",
          "num_attention_heads": "test_hf_parity::mha",
          "num_key_value_heads": "test_hf_parity::mqa"}
LLAMA_LIKE = {
    **{key: ("read", where) for key, where in SHAPES.items()},
    "head_dim": ("read", "test_hf_families::llama_head_dim"),
    "rms_norm_eps": ("read", "test_hf_families::llama_gqa"),
    "rope_parameters": ("read", "test_hf_families::llama_yarn"),
    "max_position_embeddings": ("read", "test_hf_families::llama_dynamic"),  # the RoPE schedules'
    "tie_word_embeddings": ("read", "test_hf_parity::tied"),
    "hidden_act": ("refused", "gelu"),
}
LLAMA = {**LLAMA_LIKE, "attention_bias": ("read", "test_hf_parity::bias"),
         "mlp_bias": ("refused", True),
         "pretraining_tp": ("inert", "not read by transformers 5's Llama"),
         # not a LlamaConfig field: transformers' Llama has no window whatever the attribute says
         "sliding_window": ("read", "test_hf_families::llama_sliding_window_attribute_ignored")}
LAYER_TYPES = {"layer_types": ("read", "test_hf_families::qwen2_windows"),
               "sliding_window": ("read", "test_hf_families::qwen2_windows")}
QWEN = {**LLAMA_LIKE, **LAYER_TYPES,
        "use_sliding_window": ("inert", "folded into sliding_window by the config's "
                                        "__post_init__; the forward reads sliding_window"),
        "max_window_layers": ("inert", "folded into layer_types by the config's __post_init__; "
                                       "the forward reads layer_types")}
GEMMA = {**LLAMA_LIKE, **LAYER_TYPES,
         "head_dim": ("read", "test_hf_families::gemma2"),
         "hidden_act": ("inert", "not a Gemma key (hidden_activation is)"),
         "hidden_activation": ("refused", "relu"),
         "attention_bias": ("read", "test_hf_families::gemma2"),
         "query_pre_attn_scalar": ("read", "test_hf_families::gemma2"),
         "final_logit_softcapping": ("read", "test_hf_families::gemma2"),
         "use_bidirectional_attention": ("refused", True)}
KEYS = {
    "llama": (transformers.LlamaConfig, LLAMA),
    "mistral": (transformers.MistralConfig, {
        **LLAMA_LIKE, "sliding_window": ("read", "test_hf_families::mistral_window"),
        # not a MistralConfig field: its forward ignores them (and transformers warns)
        "layer_types": ("refused", ["full_attention", "sliding_attention"])}),
    "qwen2": (transformers.Qwen2Config, {**QWEN, "head_dim": ("read",
                                                              "test_hf_families::qwen2_head_dim")}),
    "qwen3": (transformers.Qwen3Config, {
        **QWEN, "head_dim": ("read", "test_hf_families::qwen3_head_dim"),
        "attention_bias": ("read", "test_hf_families::qwen3_head_dim"),
        "sliding_window": ("read", "test_hf_families::qwen3_yarn_ramp"),
        "layer_types": ("read", "test_hf_families::qwen3_yarn_ramp")}),
    "gemma2": (transformers.Gemma2Config, {
        **GEMMA, "attn_logit_softcapping": ("read", "test_hf_families::gemma2")}),
    "gemma3_text": (transformers.Gemma3TextConfig, {
        **GEMMA, "rope_parameters": ("read", "test_hf_families::gemma3"),
        "attention_bias": ("read", "test_hf_families::gemma3"),
        "attn_logit_softcapping": ("inert", "stored by Gemma3Attention, never passed to the "
                                            "attention (test_hf_families::gemma3_capped)")}),
    "gemma": (transformers.GemmaConfig, {
        **LLAMA_LIKE, "head_dim": ("read", "test_hf_families::gemma1"),
        "attention_bias": ("read", "test_hf_families::gemma1"),
        "rope_parameters": ("read", "test_hf_families::gemma1"),
        "hidden_act": ("refused", "relu"),  # (its config turns a legacy "gelu" into the tanh one)
        "use_bidirectional_attention": ("refused", True)}),
    "gpt_neox": (transformers.GPTNeoXConfig, {
        **{key: ("read", "test_hf_families::gpt_neox") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "layer_norm_eps", "rope_parameters", "max_position_embeddings",
            "use_parallel_residual")},
        **{key: ("read", "test_hf_families::gpt_neox_sequential") for key in (
            "attention_bias", "tie_word_embeddings")},
        "hidden_act": ("read", "test_hf_families::gpt_neox_sequential", "silu"),
        "hidden_dropout": ("inert", "dropout (eval mode)"),
        "classifier_dropout": ("inert", "classification heads"),
        "is_decoder": ("inert", "not read by transformers 5's GPT-NeoX")}),
    "stablelm": (transformers.StableLmConfig, {
        **{key: ("read", "test_hf_families::stablelm") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "layer_norm_eps", "rope_parameters",
            "max_position_embeddings")},
        **{key: ("read", "test_hf_families::stablelm_parallel") for key in (
            "use_parallel_residual", "use_qkv_bias", "tie_word_embeddings")},
        "hidden_act": ("read", "test_hf_families::stablelm", "relu"),
        "qk_layernorm": ("refused", True),
        "hidden_dropout": ("inert", "dropout (eval mode)")}),
    "smollm3": (transformers.SmolLM3Config, {
        **LLAMA_LIKE, "attention_bias": ("read", "test_hf_families::smollm3_nope_first"),
        "mlp_bias": ("refused", True),
        "no_rope_layers": ("read", "test_hf_families::smollm3_nope_first"),
        "no_rope_layer_interval": ("inert", "folded into no_rope_layers by the config's "
                                            "__post_init__"),
        "layer_types": ("read", "test_hf_families::smollm3"),
        "sliding_window": ("read", "test_hf_families::smollm3"),
        # folded into layer_types by __post_init__; where they disagree: refused (below)
        "use_sliding_window": ("read", "test_hf_families::smollm3")}),
    "cohere": (transformers.CohereConfig, {
        **{key: ("read", "test_hf_families::cohere") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "layer_norm_eps", "logit_scale",
            "max_position_embeddings", "tie_word_embeddings")},
        **{key: ("read", "test_hf_families::cohere_tied_bias") for key in (
            "attention_bias", "rope_parameters")},
        "hidden_act": ("read", "test_hf_families::cohere", "gelu"),
        "use_qk_norm": ("refused", True)}),
    "olmo2": (transformers.Olmo2Config, {
        **LLAMA_LIKE, "attention_bias": ("read", "test_hf_families::olmo2"),
        "rope_parameters": ("read", "test_hf_families::olmo2")}),
    "olmo3": (transformers.Olmo3Config, {
        **LLAMA_LIKE, "attention_bias": ("read", "test_hf_families::olmo2"),
        **{key: ("read", "test_hf_families::olmo3") for key in (
            "rope_parameters", "layer_types", "sliding_window")}}),
    "phi": (transformers.PhiConfig, {
        **{key: ("read", "test_hf_families::phi") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "layer_norm_eps",
            "max_position_embeddings")},
        **{key: ("read", "test_hf_families::phi_tied_yarn") for key in (
            "rope_parameters", "tie_word_embeddings")},
        "hidden_act": ("read", "test_hf_families::phi_tied_yarn", "silu"),
        "qk_layernorm": ("refused", True),
        "embd_pdrop": ("inert", "dropout (eval mode)"),
        "resid_pdrop": ("inert", "dropout (eval mode)")}),
    "granite": (transformers.GraniteConfig, {
        **LLAMA_LIKE, "attention_bias": ("read", "test_hf_families::granite_tied_bias"),
        "tie_word_embeddings": ("read", "test_hf_families::granite_tied_bias"),
        **{key: ("read", "test_hf_families::granite", 0.0) for key in (  # 0 refused by name
            "embedding_multiplier", "attention_multiplier", "residual_multiplier",
            "logits_scaling")},
        "mlp_bias": ("refused", True)}),
    "phi3": (transformers.Phi3Config, {
        **LLAMA_LIKE, "sliding_window": ("read", "test_hf_families::phi3_window"),
        "original_max_position_embeddings": ("read", "test_hf_families::phi3_longrope"),
        "rope_parameters": ("read", "test_hf_families::phi3_partial_longrope"),
        "embd_pdrop": ("inert", "dropout (eval mode)"),
        "resid_pdrop": ("inert", "dropout (eval mode)"),
        "layer_types": ("refused", ["full_attention", "sliding_attention"])}),
    "gpt2": (transformers.GPT2Config, {
        "vocab_size": ("read", "test_hf_parity::test_gpt2_logits"),
        "n_embd": ("read", "test_hf_parity::test_gpt2_logits"),
        "n_layer": ("read", "test_hf_parity::test_gpt2_logits"),
        "n_head": ("read", "test_hf_parity::test_gpt2_logits"),
        "n_positions": ("read", "test_hf_parity::test_gpt2_logits"),
        "n_inner": ("read", "test_hf_families::test_gpt2_activations_equal_hf"),
        "layer_norm_epsilon": ("read", "test_hf_families::test_gpt2_activations_equal_hf"),
        "activation_function": ("read", "test_hf_families::test_gpt2_activations_equal_hf"),
        "tie_word_embeddings": ("read", "test_hf_parity::test_gpt2_logits"),
        "scale_attn_weights": ("refused", False),
        "scale_attn_by_inverse_layer_idx": ("refused", True),
        "reorder_and_upcast_attn": ("refused", True),
        "attn_pdrop": ("inert", "dropout (eval mode)"),
        "embd_pdrop": ("inert", "dropout (eval mode)"),
        "resid_pdrop": ("inert", "dropout (eval mode)"),
        "add_cross_attention": ("inert", "its layers run only with encoder_hidden_states"),
        **{key: ("inert", "GPT2DoubleHeadsModel's summary head") for key in (
            "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
            "summary_first_dropout")}}),
    "deepseek_v3": (transformers.DeepseekV3Config, {
        **{key: ("read", "test_variants_hf::q_lora") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "rms_norm_eps", "kv_lora_rank", "qk_nope_head_dim",
            "qk_rope_head_dim", "v_head_dim", "max_position_embeddings")},
        "rope_parameters": ("read", "test_variants_hf::test_deepseek_v3_yarn_equals_hf"),
        "q_lora_rank": ("read", "test_variants_hf::no_q_lora"),
        "rope_interleave": ("read", "test_variants_hf::not_interleaved"),
        "attention_bias": ("read", "test_variants_hf::bias"),
        "tie_word_embeddings": ("read", "test_variants_hf::q_lora"),
        "hidden_act": ("refused", "gelu"),
        "first_k_dense_replace": ("refused", 0),
        # transformers' MLA repeats its per-head keys num_attention_heads / num_key_value_heads
        # times and fails; minattn's MLA has one key per head
        "num_key_value_heads": ("refused", 2),
        **{key: ("inert", "the experts' layers (refused by first_k_dense_replace)") for key in (
            "moe_intermediate_size", "n_group", "n_routed_experts", "n_shared_experts",
            "norm_topk_prob", "num_experts_per_tok", "routed_scaling_factor", "topk_group",
            "output_router_logits")},
        "num_mtp_layers": ("inert", "multi-token prediction, generate(use_mtp=True) only"),
        "pretraining_tp": ("inert", "not read by transformers 5's DeepSeek-V3")}),
    "diffllama": (transformers.DiffLlamaConfig, {
        **{key: ("read", "test_variants_hf::gqa") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "rms_norm_eps", "rope_parameters", "max_position_embeddings")},
        "num_attention_heads": ("read", "test_variants_hf::eight_heads"),
        "num_key_value_heads": ("read", "test_variants_hf::mha"),
        "attention_bias": ("read", "test_variants_hf::bias"),
        "tie_word_embeddings": ("read", "test_variants_hf::gqa"),
        "head_dim": ("refused", 8),
        "hidden_act": ("refused", "gelu"),
        "lambda_std_dev": ("inert", "the initialisation of the λ vectors")}),
    # Qwen3-Next: tests/test_qwen3_next.py (its float64 parity model, and VARIANTS of it)
    "qwen3_next": (transformers.Qwen3NextConfig, {
        **{key: ("read", "test_qwen3_next::test_logits_equal_transformers_float64") for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "head_dim", "rms_norm_eps", "linear_conv_kernel_dim",
            "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
            "linear_num_value_heads")},
        "num_key_value_heads": ("read", "test_qwen3_next::one_kv_head_full_rope"),
        "rope_parameters": ("read", "test_qwen3_next::one_kv_head_full_rope",
                            {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}),
        "layer_types": ("read", "test_qwen3_next::attention_first",
                        ["linear_attention", "sliding_attention"]),
        "tie_word_embeddings": ("read", "test_qwen3_next::tied"),
        "num_experts": ("read", "test_qwen3_next::interval_2_mlp_only", 4),
        "mlp_only_layers": ("read", "test_qwen3_next::interval_2_mlp_only"),
        "decoder_sparse_step": ("read", "test_qwen3_next::"
                                "test_unsupported_configurations_are_refused_by_name"),
        "hidden_act": ("refused", "gelu"),
        "attention_bias": ("refused", True),
        "max_position_embeddings": ("inert", "read by RoPE schedules only; from_hf refuses "
                                             "any but the default"),
        **{key: ("inert", "the experts' layers (refused by num_experts, mlp_only_layers and "
                          "decoder_sparse_step)") for key in (
            "moe_intermediate_size", "shared_expert_intermediate_size", "num_experts_per_tok",
            "norm_topk_prob", "output_router_logits", "router_aux_loss_coef")}}),
}


def _classified(family):
    _, keys = KEYS[family]
    table = {**{k: ("inert", why) for k, why in {**BASE_INERT, **COMMON_INERT}.items()},
             **ANY_FAMILY, **keys}
    return table


@pytest.mark.parametrize("family", KEYS)
def test_every_config_key_is_classified(family):
    config_class, _ = KEYS[family]
    fields = {f.name for f in dataclasses.fields(config_class)}
    unclassified = fields - set(_classified(family))
    assert not unclassified, (
        f"{config_class.__name__} has keys nobody has classified: {sorted(unclassified)}: read "
        f"what transformers' {family} forward does with them, then make from_hf read or refuse "
        "them and classify them here")


@pytest.mark.parametrize("family", KEYS)
def test_converters_are_registered_for_the_classified_families(family):
    from minattn.models.interop import FROM_HF
    assert family in FROM_HF


def _parity_configuration_exists(where):
    module_name, name = where.split("::")
    module = importlib.import_module(f"tests.{module_name}")
    tables = [v for v in vars(module).values() if isinstance(v, dict)]
    return callable(getattr(module, name, None)) or any(name in t for t in tables)


@pytest.mark.parametrize("family", KEYS)
def test_every_read_key_names_a_parity_configuration_that_exists(family):
    for key, (kind, *where) in _classified(family).items():
        if kind == "read":
            assert _parity_configuration_exists(where[0]), (family, key, where[0])


# Tiny models per family, for the refusals (nothing is downloaded).
LLAMA_SIZES = dict(vocab_size=37, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
TINY = {
    "llama": (transformers.LlamaForCausalLM, LLAMA_SIZES),
    "mistral": (transformers.MistralForCausalLM, LLAMA_SIZES),
    "qwen2": (transformers.Qwen2ForCausalLM, LLAMA_SIZES),
    "qwen3": (transformers.Qwen3ForCausalLM, LLAMA_SIZES),
    "gemma2": (transformers.Gemma2ForCausalLM, {**LLAMA_SIZES, "head_dim": 4}),
    "gemma3_text": (transformers.Gemma3ForCausalLM, {**LLAMA_SIZES, "head_dim": 4,
                                                     "sliding_window": 4}),
    "phi3": (transformers.Phi3ForCausalLM, {**LLAMA_SIZES, "pad_token_id": 0}),
    "gemma": (transformers.GemmaForCausalLM, LLAMA_SIZES),
    "granite": (transformers.GraniteForCausalLM, LLAMA_SIZES),
    "stablelm": (transformers.StableLmForCausalLM, LLAMA_SIZES),
    "phi": (transformers.PhiForCausalLM, LLAMA_SIZES),
    "olmo2": (transformers.Olmo2ForCausalLM, {**LLAMA_SIZES, "pad_token_id": 0}),
    "olmo3": (transformers.Olmo3ForCausalLM, {**LLAMA_SIZES, "pad_token_id": 0,
                                              "sliding_window": 4}),
    "cohere": (transformers.CohereForCausalLM, LLAMA_SIZES),
    "smollm3": (transformers.SmolLM3ForCausalLM, {**LLAMA_SIZES, "pad_token_id": 0}),
    "gpt_neox": (transformers.GPTNeoXForCausalLM, dict(
        vocab_size=37, hidden_size=16, intermediate_size=24, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=32)),
    "gpt2": (transformers.GPT2LMHeadModel, dict(vocab_size=37, n_positions=16, n_embd=16,
                                                n_layer=1, n_head=4)),
    "deepseek_v3": (transformers.DeepseekV3ForCausalLM, dict(
        vocab_size=37, hidden_size=16, intermediate_size=24, moe_intermediate_size=8,
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=8,
        q_lora_rank=None, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4,
        first_k_dense_replace=1, n_routed_experts=4, n_group=1, topk_group=1,
        num_experts_per_tok=2)),
    "diffllama": (transformers.DiffLlamaForCausalLM, LLAMA_SIZES),
    "qwen3_next": (transformers.Qwen3NextForCausalLM, dict(
        vocab_size=37, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, linear_num_key_heads=2,
        linear_num_value_heads=2, linear_key_head_dim=4, linear_value_head_dim=4, num_experts=0,
        full_attention_interval=2)),
}


def _tiny(family, **overrides):
    config_class, _ = KEYS[family]
    model_class, sizes = TINY[family]
    torch.manual_seed(0)
    return model_class(config_class(**{**sizes, **overrides})).eval()


# A refused key's value; a read key's third entry: a value of it that is refused.
REFUSALS = [(family, key, entry[1] if entry[0] == "refused" else entry[2]) for family in KEYS
            for key, entry in _classified(family).items()
            if entry[0] == "refused" or entry[0] == "read" and len(entry) == 3]


@pytest.mark.parametrize("family, key, value", REFUSALS,
                         ids=[f"{f}-{k}" for f, k, _ in REFUSALS])
def test_a_refused_value_is_refused_naming_its_key(family, key, value):
    try:
        model = _tiny(family, **{key: value})
    except Exception:  # a value its own model cannot be built with: set on a built model
        model = _tiny(family)
        setattr(model.config, key, value)
    with pytest.raises(ValueError, match=key):
        from_hf(model)


# The four silently wrong cases of issue 36, each now parity-tested or refused by name.
def test_a_llama_sliding_window_attribute_is_ignored_as_transformers_ignores_it():
    from .test_hf_families import FAMILIES
    assert FAMILIES["llama_sliding_window_attribute_ignored"][1]["sliding_window"] == 3
    model = _tiny("llama", sliding_window=3)
    assert from_hf(model)[1]["window"] is None  # parity: test_hf_families, the entry above


def test_mistral_layer_types_are_refused_naming_the_disagreement():
    model = _tiny("mistral", sliding_window=3, layer_types=["sliding_attention"])
    with pytest.raises(ValueError, match="layer_types=.*ignores them and applies "
                                         "sliding_window to every layer"):
        from_hf(model)


def test_a_gemma3_layer_types_yarn_truncate_is_refused_where_transformers_never_reads_it():
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8,
            "rope_theta": 100.0}
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {**yarn, "truncate": False}}
    model = _tiny("gemma3_text", num_hidden_layers=2, rope_parameters=rope,
                  layer_types=["sliding_attention", "full_attention"])
    with pytest.raises(ValueError, match="\\['full_attention'\\]\\['truncate'\\]=False disagrees"):
        from_hf(model)
    rope["full_attention"]["truncate"] = True  # what transformers reads anyway: accepted
    model = _tiny("gemma3_text", num_hidden_layers=2, rope_parameters=rope,
                  layer_types=["sliding_attention", "full_attention"])
    assert from_hf(model)[1]["rope_scaling"][1]["truncate"] is True


def test_gemma3_bidirectional_attention_is_refused():
    with pytest.raises(ValueError, match="use_bidirectional_attention=True .*drops the causal"):
        from_hf(_tiny("gemma3_text", use_bidirectional_attention=True))


def test_smollm3_sliding_layers_without_use_sliding_window_are_refused():
    # transformers' SmolLM3 then windows those layers through its mask (sdpa, eager) but not in
    # flash attention, which reads use_sliding_window
    model = _tiny("smollm3", sliding_window=4, use_sliding_window=False,
                  layer_types=["sliding_attention"])
    with pytest.raises(ValueError, match="use_sliding_window is False"):
        from_hf(model)
