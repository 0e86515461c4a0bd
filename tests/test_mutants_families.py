"""What the mutation run of minattn/families/ showed untested (tests/MUTANTS.md): each family's
refusals in full (what they name is what a user reads); hf's readers of a config's RoPE and
windows on transformers 5's form and 4.x's (a config without rope_parameters, layer_types or
its own defaults); DeepSeek-V3's YaRN softmax scale against transformers' own function; Gemma's
embedding scale as the model's float32 buffer; a float32 DiffLlama's params in float32; and the
blocks the families register as decoder_block's variants (OLMo 2's, Gemma's sandwich, GPT-NeoX's
parallel block), each against its formula written out with minattn's parts, with its defaults
and its refusals of what it has no params for."""
import inspect
import math
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the families convert transformers models")
transformers = pytest.importorskip("transformers",
                                   reason="the families convert transformers models")

import minattn as ma  # noqa: E402
from minattn.families import hf  # noqa: E402
from minattn.interop import from_hf  # noqa: E402

from .test_hf_families import FAMILIES, _build, _hf_logits, _tokens  # noqa: E402
from .test_hf_parity import _gpt2  # noqa: E402
from .test_variants_hf import _deepseek, _diffllama  # noqa: E402


def refusal(model):
    with pytest.raises(ValueError) as error:
        from_hf(model)
    return str(error.value)


@pytest.mark.parametrize("family, key, name", [("cohere", "use_qk_norm", "Cohere"),
                                               ("stablelm", "qk_layernorm", "StableLM")])
def test_a_per_head_layer_norm_is_refused_naming_the_key_and_the_family(family, key, name):
    model = _build(family, torch.float64, **{key: True})
    assert refusal(model) == (
        f"{key}=True is not supported: {name}'s QK-norm is a LayerNorm with its own weights per "
        "head; minattn's QK-norm is one RMSNorm shared by the heads")


def test_phis_qk_layernorm_is_refused_by_name():
    assert refusal(_build("phi", torch.float64, qk_layernorm=True)) == (
        "qk_layernorm=True is not supported: Phi's QK-norm is a LayerNorm; minattn's QK-norm is "
        "an RMSNorm")


@pytest.mark.parametrize("key, value", [("scale_attn_by_inverse_layer_idx", True),
                                        ("reorder_and_upcast_attn", True),
                                        ("scale_attn_weights", False)])
def test_gpt2s_attention_variants_are_refused_by_name(key, value):
    model = _gpt2(torch.float64)
    setattr(model.config, key, value)
    assert refusal(model) == (
        "GPT-2 attention variants (scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, "
        "scale_attn_weights=False) are not supported")


@pytest.mark.parametrize("key", ["embedding_multiplier", "attention_multiplier",
                                 "residual_multiplier", "logits_scaling"])
def test_a_granite_multiplier_that_is_not_positive_is_refused_by_name(key):
    model = _build("granite", torch.float64, **FAMILIES["granite"][1])
    setattr(model.config, key, -0.5)
    assert refusal(model) == f"{key}=-0.5 is not supported (a positive scale)"


def test_gemma1s_activation_other_than_tanh_gelu_is_refused_naming_hidden_act():
    model = _build("gemma", torch.float64)
    model.config.hidden_act = "gelu"
    assert refusal(model) == ("hidden_act='gelu' is not supported (minattn's GEGLU uses the tanh "
                              "GELU)")


def test_smollm3s_no_rope_layers_shorter_than_its_layers_is_refused_by_count():
    model = _build("smollm3", torch.float64, **FAMILIES["smollm3"][1])
    n_layers = model.config.num_hidden_layers
    model.config.no_rope_layers = [1] * (n_layers - 1)
    assert refusal(model) == f"no_rope_layers has {n_layers - 1} entries for {n_layers} layers"


def test_a_diffllama_whose_head_dim_is_not_d_over_h_is_refused_by_name():
    model = _diffllama(torch.float64)
    d = model.config.hidden_size // model.config.num_attention_heads
    model.config.head_dim = d + 2
    assert refusal(model) == (f"head_dim={d + 2} != hidden_size / num_attention_heads = {d} is "
                              "not supported")


def test_a_diffllama_whose_head_norm_has_another_eps_is_refused_naming_both():
    model = _diffllama(torch.float64)
    model.model.layers[1].self_attn.groupnorm.eps = 1e-3
    eps = model.config.rms_norm_eps
    assert refusal(model) == (f"the per-head norm's eps=0.001 differs from rms_norm_eps={eps}: "
                              "minattn's block takes one eps")


def test_a_float32_diffllama_has_every_parameter_in_float32():
    params, _ = from_hf(_diffllama(torch.float32))
    for layer in params["layers"]:
        assert {np.asarray(v).dtype for v in layer["self_attention"].values()} == {
            np.dtype(np.float32)}


def test_a_deepseek_v3_with_experts_is_refused_in_full():
    assert refusal(_deepseek(torch.float64, dense=False)) == (
        "mixture of experts layers (first_k_dense_replace=1 < num_hidden_layers=2) are not "
        "supported: minattn converts DeepSeek-V3 models whose layers are all dense")


def test_a_deepseek_v3_with_fewer_kv_heads_is_refused_in_full():
    model = _deepseek(torch.float64)
    model.config.num_key_value_heads = 2
    assert refusal(model) == (
        "num_key_value_heads=2 != num_attention_heads=4 is not supported: transformers' "
        "DeepSeek-V3 then repeats the latent's per-head keys (and fails); minattn's latent "
        "attention has one key per head")


# hf.default_rope_base: the families with default RoPE only (DiffLlama): transformers 5's
# rope_parameters, or 4.x's rope_theta (a config without rope_parameters)
@pytest.mark.parametrize("config, base", [
    (SimpleNamespace(rope_theta=500), 500.0),
    (SimpleNamespace(rope_parameters={"rope_theta": 300.0}), 300.0),  # no rope_type: default
    (SimpleNamespace(rope_parameters={"rope_type": "default", "rope_theta": 200.0}), 200.0)])
def test_the_default_rope_base_is_read_from_either_transformers_form(config, base):
    assert hf.default_rope_base(config) == base and type(hf.default_rope_base(config)) is float


def test_a_scaled_rope_is_refused_where_only_default_rope_is_read():
    config = SimpleNamespace(rope_parameters={"rope_type": "linear", "rope_theta": 1.0,
                                              "factor": 2.0})
    with pytest.raises(ValueError) as error:
        hf.default_rope_base(config)
    assert str(error.value) == "RoPE scaling 'linear' is not supported (default RoPE only)"


@pytest.mark.parametrize("mscale_all_dim", [None, 0, 0.5, 1.0])
@pytest.mark.parametrize("factor", [0.5, 1.0, 1.5, 4.0, 40.0])
def test_deepseek_v3s_yarn_softmax_scale_is_transformers(mscale_all_dim, factor):
    from minattn.families.deepseek_v3 import _yarn_softmax_mscale

    # transformers' public behaviour: the softmax scale its DeepSeek-V3 attention is built with,
    # over the plain 1/sqrt(d_qk) (d_qk = 4 + 4), for a config with this YaRN
    rope = {"rope_type": "yarn", "rope_theta": 100.0, "factor": factor,
            "original_max_position_embeddings": 8}
    if mscale_all_dim is not None:
        rope["mscale_all_dim"] = mscale_all_dim
    config = transformers.DeepseekV3Config(
        vocab_size=11, hidden_size=16, intermediate_size=8, moe_intermediate_size=4,
        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=4,
        q_lora_rank=None, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4,
        first_k_dense_replace=1, n_routed_experts=2, n_group=1, topk_group=1,
        num_experts_per_tok=1, max_position_embeddings=int(8 * max(factor, 1)),
        rope_parameters=rope)
    theirs = transformers.DeepseekV3Model(config).layers[0].self_attn.scaling * 8 ** 0.5
    # and the formula (DeepSeek-V2's YaRN: m = 0.1 mscale_all_dim ln(factor) + 1 above factor 1)
    m = 0.1 * mscale_all_dim * math.log(factor) + 1 if mscale_all_dim and factor > 1 else 1.0
    assert _yarn_softmax_mscale(rope) == pytest.approx(theirs, rel=1e-14)
    assert _yarn_softmax_mscale(rope) == pytest.approx(m ** 2, rel=1e-14)


# OLMo 2's block, decoder_block's variant for its params (norms after the sublayers only)

@pytest.fixture(scope="module")
def olmo2_block():
    params, config = from_hf(_build("olmo2", torch.float64, **FAMILIES["olmo2"][1]))
    keywords = {k: config[k] for k in ("n_heads", "n_kv_heads", "d_k", "norm", "activation",
                                       "eps", "rope_base")}
    keywords["positions"] = np.arange(5)  # a rope_base without positions is refused
    x = np.random.default_rng(0).standard_normal((2, 5, params["token_embedding"].shape[1]))
    return params["layers"][0], keywords, x


def test_olmo2s_block_defaults_are_decoder_blocks(olmo2_block):
    layer, keywords, x = olmo2_block
    defaults = {k: p.default for k, p in inspect.signature(ma.decoder_block).parameters.items()
                if k in ("eps", "norm", "activation")}
    given = {k: v for k, v in keywords.items() if k not in defaults}
    assert defaults == {"eps": None, "norm": "layer_norm", "activation": "relu"}
    gated = {"activation": keywords["activation"]}  # the params are SwiGLU's
    rms_eps = inspect.signature(ma.rms_norm).parameters["eps"].default  # eps None: the norm's
    np.testing.assert_array_equal(
        ma.decoder_block(layer, x, norm_first=True, norm="rms_norm", **gated, **given),
        ma.decoder_block(layer, x, norm_first=True, norm="rms_norm", eps=rms_eps,
                         **gated, **given))


def test_olmo2s_block_refuses_memory_it_has_no_cross_attention_for(olmo2_block):
    layer, keywords, x = olmo2_block
    with pytest.raises(ValueError, match=r"^params is missing key 'cross_attention'"):
        ma.decoder_block(layer, x, norm_first=True, memory=x, **keywords)
    with pytest.raises(ValueError, match=r"^memory_mask is given without memory"):
        ma.decoder_block(layer, x, norm_first=True, memory_mask=np.ones((5, 5), bool), **keywords)


def test_olmo2s_block_checks_its_keywords_before_refusing_memory(olmo2_block):
    # with a cross-attention sublayer the block's checks pass the memory, which OLMo 2's block
    # then refuses in full; a wrong n_kv_heads (one that does not divide n_heads) is refused
    # first, by the block's own check of the caller's keywords
    layer, keywords, x = olmo2_block
    D, H = x.shape[-1], keywords["n_heads"]
    with_cross = {**layer, "cross_attention": ma.init_multi_head_attention(
        np.random.default_rng(1), D, H), "cross_attention_norm": {"gamma": np.ones(D)}}
    with pytest.raises(ValueError) as error:
        ma.decoder_block(with_cross, x, norm_first=True, memory=x, **keywords)
    assert str(error.value) == ("memory (cross-attention to an encoder's output) is not "
                                "supported by OLMo 2's block (norms after the sublayers only)")
    with pytest.raises(ValueError, match=rf"^n_kv_heads={H + 1} must divide n_heads={H} "):
        ma.decoder_block(with_cross, x, norm_first=True, memory=x,
                         **{**keywords, "n_kv_heads": H + 1})



def test_gemmas_activation_other_than_tanh_gelu_is_refused_naming_hidden_activation():
    model = _build("gemma2", torch.float64, **FAMILIES["gemma2"][1])
    model.config.hidden_activation = "gelu"
    assert refusal(model) == ("hidden_activation='gelu' is not supported (minattn's GEGLU uses "
                              "the tanh GELU)")


@pytest.mark.parametrize("family", ["gemma2", "gemma3"])
def test_gemmas_embedding_scale_is_the_models_own_buffer_rounded_to_float32(family):
    # transformers builds embed_scale = sqrt(D) as a float32 buffer: the value its forward uses
    model = _build(family, torch.float64, **FAMILIES[family][1])
    own = float(model.model.embed_tokens.embed_scale)
    assert own == float(np.float32(model.config.hidden_size ** 0.5))
    assert own != model.config.hidden_size ** 0.5  # (so that sqrt(D) in float64 would differ)
    assert from_hf(model)[1]["embedding_scale"] == own


# GPT-NeoX's parallel block, decoder_block's variant for parallel=True

@pytest.fixture(scope="module")
def parallel_block():
    rng = np.random.default_rng(1)
    params = ma.init_decoder_block(rng, 16, 4, 24, n_kv_heads=2, norm="rms_norm",
                                   activation="swiglu", qk_norm=True)
    for sublayer in ("self_attention_norm", "feed_forward_norm"):
        params[sublayer] = {"gamma": rng.uniform(0.5, 1.5, 16)}
    for key in ("q_norm", "k_norm"):
        params["self_attention"][key] = {"gamma": rng.uniform(0.5, 1.5, 4)}
    keywords = {"n_heads": 4, "n_kv_heads": 2, "norm": "rms_norm", "activation": "swiglu"}
    return params, keywords, rng.standard_normal((2, 5, 16))


def test_the_parallel_block_is_both_sublayers_on_the_normalised_input(parallel_block):
    from minattn.transformer_decoder import position_wise

    params, keywords, x = parallel_block
    eps = 0.25  # large enough to show in the norms and in the QK-norm inside the attention
    attended, _ = ma.self_attention(params["self_attention"],
                                    ma.rms_norm(x, params["self_attention_norm"]["gamma"], eps),
                                    n_heads=4, n_kv_heads=2, eps=eps)
    fed = position_wise(params["feed_forward"],
                        ma.rms_norm(x, params["feed_forward_norm"]["gamma"], eps), "swiglu")
    np.testing.assert_allclose(
        ma.decoder_block(params, x, parallel=True, norm_first=True, eps=eps, **keywords),
        x + attended + fed, rtol=0, atol=1e-12)


def test_the_parallel_block_is_refused_without_norm_first_as_decoder_blocks_default(
        parallel_block):
    params, keywords, x = parallel_block
    assert inspect.signature(ma.decoder_block).parameters["norm_first"].default is False
    with pytest.raises(ValueError, match=r"^parallel=True \(both sublayers read the block's "
                                         r"input\) needs norm_first=True .* got norm_first=False"):
        ma.decoder_block(params, x, parallel=True, **keywords)


def test_the_parallel_block_refuses_a_memory_mask_without_memory(parallel_block):
    params, keywords, x = parallel_block
    with pytest.raises(ValueError, match=r"^memory_mask is given without memory"):
        ma.decoder_block(params, x, parallel=True, norm_first=True,
                         memory_mask=np.ones((5, 5), bool), **keywords)


def test_an_activation_without_a_minattn_name_is_refused_listing_those_read():
    model = _gpt2(torch.float64)
    model.config.activation_function = "tanh"
    assert refusal(model) == ("activation_function='tanh' is not supported (minattn has 'gelu', "
                              "'gelu_new', 'gelu_pytorch_tanh', 'relu')")


# Gemma 2 and 3's sandwich block, decoder_block's variant for params with post-norms

@pytest.fixture(scope="module")
def sandwich():
    rng = np.random.default_rng(2)
    params = ma.init_decoder_block(rng, 16, 4, 24, norm="rms_norm", activation="swiglu")
    for name in ("self_attention_norm", "feed_forward_norm", "post_self_attention_norm",
                 "post_feed_forward_norm"):
        params[name] = {"gamma": rng.uniform(0.5, 1.5, 16)}
    keywords = {"n_heads": 4, "norm": "rms_norm", "activation": "swiglu"}
    return params, keywords, rng.standard_normal((2, 5, 16))


def sandwich_reference(params, x, eps):
    # x + post_norm(sublayer(norm(x))) for each sublayer, a norm the params lack left out
    from minattn.transformer_decoder import position_wise

    def norm(h, name):
        return ma.rms_norm(h, params[name]["gamma"], eps) if name in params else h

    out, _ = ma.self_attention(params["self_attention"], norm(x, "self_attention_norm"),
                               n_heads=4, eps=eps)
    x = x + norm(out, "post_self_attention_norm")
    out = position_wise(params["feed_forward"], norm(x, "feed_forward_norm"), "swiglu")
    return x + norm(out, "post_feed_forward_norm")


@pytest.mark.parametrize("without", [None, "self_attention_norm", "feed_forward_norm"])
def test_the_sandwich_block_normalises_each_sublayers_output_and_leaves_out_a_missing_norm(
        sandwich, without):
    params, keywords, x = sandwich
    params = {k: v for k, v in params.items() if k != without}
    np.testing.assert_allclose(ma.decoder_block(params, x, norm_first=True, eps=0.25, **keywords),
                               sandwich_reference(params, x, 0.25), rtol=0, atol=1e-12)


def test_the_sandwich_blocks_default_eps_is_decoder_blocks(sandwich):
    # decoder_block's default, None: each norm its own, rms_norm's here (QK-norm's too)
    params, keywords, x = sandwich
    assert inspect.signature(ma.decoder_block).parameters["eps"].default is None
    eps = inspect.signature(ma.rms_norm).parameters["eps"].default
    np.testing.assert_allclose(ma.decoder_block(params, x, norm_first=True, **keywords),
                               sandwich_reference(params, x, eps), rtol=0, atol=1e-12)


def test_the_sandwich_block_refuses_memory_without_cross_attention_and_a_lone_memory_mask(
        sandwich):
    params, keywords, x = sandwich
    with pytest.raises(ValueError, match=r"^params is missing key 'cross_attention'"):
        ma.decoder_block(params, x, norm_first=True, memory=x, **keywords)
    with pytest.raises(ValueError, match=r"^memory_mask is given without memory"):
        ma.decoder_block(params, x, norm_first=True, memory_mask=np.ones((5, 5), bool),
                         **keywords)


def test_partial_rope_follows_a_linear_schedule_given_with_it(parallel_block):
    # linear scaling by 2 rotates position 2p as default RoPE rotates p
    params, _, x = parallel_block
    attention = params["self_attention"]
    config = {"n_heads": 4, "n_kv_heads": 2, "partial_rotary_factor": 0.5}
    positions = np.arange(x.shape[-2])
    scaled, _ = ma.self_attention(attention, x, positions=2 * positions,
                                  rope_scaling={"rope_type": "linear", "factor": 2.0}, **config)
    plain, _ = ma.self_attention(attention, x, positions=positions, **config)
    unscaled, _ = ma.self_attention(attention, x, positions=2 * positions, **config)
    np.testing.assert_allclose(scaled, plain, rtol=0, atol=1e-12)
    assert not np.allclose(scaled, unscaled)


def test_a_layer_norm_over_more_than_the_last_dim_is_refused_by_shape():
    with pytest.raises(ValueError) as error:
        hf.layer_norm(torch.nn.LayerNorm((3, 4)))
    assert str(error.value) == ("LayerNorm over normalized_shape=(3, 4) is not supported: "
                                "minattn normalizes the last dim only")


def test_a_layer_norm_without_parameters_is_refused_saying_why():
    with pytest.raises(ValueError) as error:
        hf.layer_norm(torch.nn.LayerNorm(4, elementwise_affine=False))
    assert str(error.value) == ("LayerNorm with elementwise_affine=False is not supported (it "
                                "has no parameters to copy, so no dtype to give gamma and beta)")


def test_a_layer_norm_without_bias_has_a_zero_beta_of_gammas_shape_and_dtype():
    norm = torch.nn.LayerNorm(4, bias=False, eps=1e-3).to(torch.float32)
    params, config = hf.layer_norm(norm)
    np.testing.assert_array_equal(params["gamma"], np.ones(4, np.float32))
    assert params["beta"].shape == (4,) and params["beta"].dtype == np.float32
    assert not params["beta"].any() and config == {"eps": 1e-3}


@pytest.mark.parametrize("family", ["gemma2", "olmo2"])
def test_a_feed_forward_with_biases_is_refused_by_name_where_no_layout_check_comes_first(family):
    # (a Llama is refused by llama_layout's check of every tensor, naming them: below; Gemma's
    # and OLMo's converters read their sublayers directly)
    model = _build(family, torch.float64, **FAMILIES[family][1])
    gate = model.model.layers[0].mlp.gate_proj
    gate.bias = torch.nn.Parameter(torch.zeros(gate.out_features, dtype=torch.float64))
    assert refusal(model) == "mlp_bias=True is not supported: minattn's SwiGLU has no biases"


def qwen3_next_config(**changes):
    # what _check_supported reads of a Qwen3NextConfig: a dense, default-RoPE model
    return SimpleNamespace(**{
        "num_hidden_layers": 4, "mlp_only_layers": [], "num_experts": 0,
        "decoder_sparse_step": 1, "hidden_act": "silu", "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                            "partial_rotary_factor": 0.25},
        "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                        "full_attention"], **changes})


@pytest.mark.parametrize("changes, message", [
    ({"num_experts": 1, "decoder_sparse_step": 3},  # transformers: experts where num_experts > 0
     "Qwen3-Next with mixture of experts layers ([2] of 4; num_experts=1, "  # layer i: (i + 1) % 3
     "decoder_sparse_step=3, mlp_only_layers=[]) is not supported: minattn has no experts layer "
     "(num_experts=0 or every layer in mlp_only_layers is)"),
    ({"num_experts": 2, "mlp_only_layers": [0, 2]},
     "Qwen3-Next with mixture of experts layers ([1, 3] of 4; num_experts=2, "
     "decoder_sparse_step=1, mlp_only_layers=[0, 2]) is not supported: minattn has no experts "
     "layer (num_experts=0 or every layer in mlp_only_layers is)"),
    ({"hidden_act": "gelu"}, "hidden_act='gelu' is not supported (SwiGLU and the convolution's "
                             "activation use 'silu')"),
    ({"attention_bias": True}, "attention_bias=True is not supported for Qwen3-Next"),
    ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0}},
     "rope_parameters with rope_type 'linear' are not supported for Qwen3-Next (default RoPE "
     "only, partial or not)"),
    ({"layer_types": ["linear_attention", "sliding_attention", "linear_attention",
                      "full_attention"]},
     "layer_types ['sliding_attention'] are not supported (Qwen3-Next has 'linear_attention' and "
     "'full_attention')")])
def test_qwen3_nexts_unsupported_settings_are_refused_in_full(changes, message):
    from minattn.families.qwen3_next import _check_supported

    with pytest.raises(ValueError) as error:
        _check_supported(qwen3_next_config(**changes))
    assert str(error.value) == message


@pytest.mark.parametrize("changes", [{}, {"num_experts": 2, "mlp_only_layers": [0, 1, 2, 3]},
                                     {"rope_parameters": {"rope_theta": 1e4}}])
def test_qwen3_next_dense_with_default_rope_is_read(changes):
    from minattn.families.qwen3_next import _check_supported

    assert _check_supported(qwen3_next_config(**changes)) is None


# hf's readers of a config's RoPE, on configs in transformers 5's form and 4.x's

YARN = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
        "original_max_position_embeddings": 16}


@pytest.mark.parametrize("truncate", [False, True, None])
def test_a_yarn_layer_type_reads_truncate_from_the_top_of_rope_parameters(truncate):
    # transformers' YaRN reads config.rope_parameters.get("truncate", True), never a layer's
    rope = {"full_attention": dict(YARN), "sliding_attention": {"rope_type": "default",
                                                                 "rope_theta": 10.0}}
    if truncate is not None:
        rope["truncate"] = truncate
    config = SimpleNamespace(rope_parameters=rope, max_position_embeddings=64)
    base, scaling = hf.rope_settings(config, "full_attention")
    assert base == 1e4 and scaling["truncate"] is (truncate is not False)
    assert hf.rope_settings(config, "sliding_attention") == (10.0, None)


@pytest.mark.parametrize("config, factor", [
    (SimpleNamespace(partial_rotary_factor=0.5), 0.5),  # transformers 4.x
    (SimpleNamespace(rope_parameters={"rope_theta": 1.0}, partial_rotary_factor=0.25), 0.25),
    (SimpleNamespace(rope_parameters={"rope_theta": 1.0, "partial_rotary_factor": 0.5},
                     partial_rotary_factor=0.25), 0.5),  # transformers 5's wins
    (SimpleNamespace(), 1.0)])
def test_the_partial_rotary_factor_is_read_from_either_transformers_form(config, factor):
    assert hf.partial_rotary_factor(config) == factor


def test_a_config_without_layer_types_has_every_layer_full_attention_and_one_rope():
    nested = SimpleNamespace(max_position_embeddings=64, rope_parameters={
        "full_attention": dict(YARN), "sliding_attention": {"rope_type": "default",
                                                            "rope_theta": 10.0}})
    base, scaling = hf.per_layer_rope(nested, 3)
    assert base == 1e4 and scaling["rope_type"] == "yarn" and scaling["factor"] == 4.0
    flat = SimpleNamespace(rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    assert hf.per_layer_rope(flat, 3) == (500.0, None)  # one value, not a list of three


def test_layer_types_with_their_own_rope_give_one_entry_per_layer():
    config = SimpleNamespace(max_position_embeddings=64,
                             layer_types=["sliding_attention", "full_attention"],
                             rope_parameters={"full_attention": dict(YARN), "sliding_attention": {
                                 "rope_type": "default", "rope_theta": 10.0}})
    bases, scalings = hf.per_layer_rope(config, 2)
    assert bases == [10.0, 1e4] and scalings[0] is None and scalings[1]["rope_type"] == "yarn"


# hf.windows: what each family's transformers 5.24 forward reads of sliding_window and
# layer_types

def window_config(model_type, **keys):
    return SimpleNamespace(model_type=model_type, **keys)


@pytest.mark.parametrize("model_type", ["llama", "gemma", "granite", "cohere", "olmo2"])
def test_a_family_whose_forward_has_no_window_reads_none_whatever_the_config_says(model_type):
    config = window_config(model_type, sliding_window=4,
                           layer_types=["sliding_attention", "full_attention"])
    assert hf.windows(config, 2) is None


@pytest.mark.parametrize("model_type", ["mistral", "phi3"])
def test_mistral_and_phi3_with_layer_types_are_refused_in_full(model_type):
    config = window_config(model_type, sliding_window=4, layer_types=["full_attention"] * 2)
    with pytest.raises(ValueError) as error:
        hf.windows(config, 2)
    assert str(error.value) == (
        f"layer_types=['full_attention', 'full_attention'] on a {model_type} config: its "
        "transformers forward ignores them and applies sliding_window to every layer; refused "
        "rather than picking one")


@pytest.mark.parametrize("keys, message", [
    ({"model_type": "smollm3", "use_sliding_window": False},
     "layer_types names sliding_attention layers but use_sliding_window is False: transformers' "
     "SmolLM3 masks those layers by the window under sdpa and eager but not under flash "
     "attention; refused rather than picking one"),
    ({"model_type": "qwen2", "layer_types": ["chunked_attention", "sliding_attention"]},
     "layer_types ['chunked_attention'] are not supported (minattn has 'full_attention' and "
     "'sliding_attention')"),
    ({"model_type": "qwen3", "sliding_window": None},
     "layer_types names sliding_attention layers but sliding_window is None")])
def test_layer_types_minattn_cannot_follow_are_refused_in_full(keys, message):
    config = window_config(**{"sliding_window": 4,
                              "layer_types": ["sliding_attention", "full_attention"], **keys})
    with pytest.raises(ValueError) as error:
        hf.windows(config, 2)
    assert str(error.value) == message


def test_layer_types_give_each_sliding_layer_the_window():
    config = window_config("qwen3", sliding_window=4,
                           layer_types=["sliding_attention", "full_attention"])
    assert hf.windows(config, 2) == [4, None]
    assert hf.windows(window_config("qwen3", sliding_window=None), 2) is None


def test_a_parameter_not_in_float16_32_or_64_is_refused_saying_how_to_convert():
    with pytest.raises(TypeError) as error:
        hf.array(torch.ones(2, dtype=torch.bfloat16))
    assert str(error.value) == ("parameters must be float16, float32 or float64, got "
                                "torch.bfloat16 (convert the module first, e.g. module.float())")
    half = hf.array(torch.ones(2, dtype=torch.float16))
    assert half.dtype == np.float16


def test_the_sandwich_block_puts_cross_attention_between_its_sublayers_sandwiched_too():
    from minattn.transformer_decoder import position_wise

    rng = np.random.default_rng(3)
    params = ma.init_decoder_block(rng, 16, 4, 24, norm="rms_norm", activation="swiglu",
                                   cross_attention=True)
    for name in ("self_attention", "cross_attention", "feed_forward"):
        params[f"{name}_norm"] = {"gamma": rng.uniform(0.5, 1.5, 16)}
        params[f"post_{name}_norm"] = {"gamma": rng.uniform(0.5, 1.5, 16)}
    x, memory = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 3, 16))
    memory_mask = np.array([True, False, True])
    eps = 0.25
    norm = lambda h, name: ma.rms_norm(h, params[name]["gamma"], eps)  # noqa: E731
    out, _ = ma.self_attention(params["self_attention"], norm(x, "self_attention_norm"),
                               n_heads=4, eps=eps)
    h = x + norm(out, "post_self_attention_norm")
    crossed = norm(h, "cross_attention_norm")
    out = ma.multi_head_attention(params["cross_attention"], crossed, memory, memory,
                                  memory_mask, n_heads=4)[0]
    h = h + norm(out, "post_cross_attention_norm")
    out = position_wise(params["feed_forward"], norm(h, "feed_forward_norm"), "swiglu")
    expected = h + norm(out, "post_feed_forward_norm")
    np.testing.assert_allclose(
        ma.decoder_block(params, x, n_heads=4, norm_first=True, norm="rms_norm",
                         activation="swiglu", eps=eps, memory=memory, memory_mask=memory_mask),
        expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("post", ["post_self_attention_norm", "post_feed_forward_norm"])
def test_one_post_norm_alone_makes_the_block_gemmas(sandwich, post):
    params, keywords, x = sandwich
    other = {"post_self_attention_norm": "post_feed_forward_norm",
             "post_feed_forward_norm": "post_self_attention_norm"}[post]
    params = {k: v for k, v in params.items() if k != other}
    np.testing.assert_allclose(ma.decoder_block(params, x, norm_first=True, eps=0.25, **keywords),
                               sandwich_reference(params, x, 0.25), rtol=0, atol=1e-12)


def test_gemma3s_local_base_of_transformers_4_rotates_the_sliding_layers_only():
    # transformers 4.x's Gemma 3 config: rope_theta, rope_scaling and rope_local_base_freq
    config = SimpleNamespace(rope_theta=1e6, rope_scaling=None, rope_local_base_freq=1e4)
    assert hf.rope_settings(config, "sliding_attention") == (1e4, None)
    assert hf.rope_settings(config, "full_attention") == (1e6, None)
    assert hf.rope_settings(SimpleNamespace(rope_theta=1e6), "sliding_attention") == (1e6, None)


class GemmaLikeConfig(SimpleNamespace):
    """A config class of its own name: the refusals below name it."""


def test_a_config_without_rope_settings_is_refused_naming_its_class():
    with pytest.raises(ValueError) as error:
        hf.rope_settings(GemmaLikeConfig(max_position_embeddings=8))
    assert str(error.value) == ("cannot read the RoPE settings of GemmaLikeConfig: it has neither "
                                "rope_parameters (transformers 5) nor rope_theta (4.x)")


def test_a_partial_rotary_factor_the_family_does_not_apply_is_refused_naming_the_class():
    config = GemmaLikeConfig(rope_parameters={"rope_type": "default", "rope_theta": 1.0,
                                              "partial_rotary_factor": 0.5})
    with pytest.raises(ValueError) as error:
        hf.rope_settings(config)
    assert str(error.value) == ("GemmaLikeConfig: partial_rotary_factor != 1 (RoPE on part of each "
                                "head) is not supported by this family's converter")
    assert hf.rope_settings(config, partial_rotary_factor=0.5) == (1.0, None)


LLAMA3 = {"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0}
LONGROPE = {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0, 1.0],
            "long_factor": [2.0, 2.0], "factor": 4.0}


@pytest.mark.parametrize("rope", [LLAMA3, dict(YARN, original_max_position_embeddings=None),
                                  LONGROPE])
def test_an_original_context_beside_rope_parameters_is_read_as_4x_phi3_kept_it(rope):
    rope = {k: v for k, v in rope.items() if v is not None}
    config = SimpleNamespace(rope_parameters=rope, original_max_position_embeddings=16,
                             max_position_embeddings=64)
    _, scaling = hf.rope_settings(config)
    assert scaling["original_max_position_embeddings"] == 16


@pytest.mark.parametrize("rope_type", ["yarn", "longrope"])
def test_yarns_and_longropes_factor_defaults_to_the_context_over_the_original(rope_type):
    # transformers: factor = max_position_embeddings / original_max_position_embeddings
    rope = {k: v for k, v in {**(YARN if rope_type == "yarn" else LONGROPE),
                               "original_max_position_embeddings": 16}.items() if k != "factor"}
    config = SimpleNamespace(rope_parameters=rope, max_position_embeddings=64)
    _, scaling = hf.rope_settings(config)
    assert scaling["factor"] == 4.0


def test_a_llama_with_tensors_outside_its_layout_is_refused_naming_the_first_four():
    assert refusal(_build("llama", torch.float64, mlp_bias=True)) == (
        "LlamaForCausalLM has tensors outside the Llama layout: model.layers.0.mlp.down_proj.bias, "
        "model.layers.0.mlp.gate_proj.bias, model.layers.0.mlp.up_proj.bias, "
        "model.layers.1.mlp.down_proj.bias ... (mlp_bias=True is not supported: minattn's SwiGLU "
        "has no biases)")


@pytest.mark.parametrize("extra, listed", [
    (1, "extra0, model.layers.0.mlp.down_proj.bias, model.layers.0.mlp.gate_proj.bias, "
        "model.layers.0.mlp.up_proj.bias"),  # four: all named, no ellipsis
    (2, "extra0, extra1, model.layers.0.mlp.down_proj.bias, model.layers.0.mlp.gate_proj.bias "
        "..."),  # five: the first four, then the ellipsis
])
def test_a_llamas_tensors_outside_its_layout_are_named_four_at_most(extra, listed):
    model = _build("llama", torch.float64, mlp_bias=True, num_hidden_layers=1)
    for i in range(extra):  # tensors of no layout at all, sorted before the model's own
        model.register_parameter(f"extra{i}", torch.nn.Parameter(torch.zeros(1)))
    assert refusal(model) == (
        f"LlamaForCausalLM has tensors outside the Llama layout: {listed} (mlp_bias=True is not "
        "supported: minattn's SwiGLU has no biases)")


def test_gemmas_gelu_new_is_read_as_the_tanh_gelu_it_is():
    # transformers' "gelu_new" is the tanh approximation, as "gelu_pytorch_tanh"
    model = _build("gemma2", torch.float64,
                   **{**FAMILIES["gemma2"][1], "hidden_activation": "gelu_new"})
    params, config = from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **config), _hf_logits(model, tokens),
                               rtol=0, atol=1e-5)


def test_deepseek_v3s_latent_norms_take_the_models_own_eps():
    model = _deepseek(torch.float64)
    for layer in model.model.layers:  # transformers' default is 1e-6, latent_attention's too
        layer.self_attn.kv_a_layernorm.variance_epsilon = 1e-3
        layer.self_attn.q_a_layernorm.variance_epsilon = 1e-3
    assert from_hf(model)[1]["attention"].keywords["latent_eps"] == 1e-3


def test_deepseek_v3s_default_rope_scales_no_query_whatever_yarn_keys_it_carries():
    # transformers scales the softmax by YaRN's mscale only for a scaled RoPE; a default one's
    # mscale_all_dim and factor are ignored (it logs them as unrecognized): the weights as read
    stray = {"rope_type": "default", "rope_theta": 10000.0, "mscale_all_dim": 1.0, "factor": 4.0}
    plain, _ = from_hf(_deepseek(torch.float64))
    params, kwargs = from_hf(_deepseek(torch.float64, rope_parameters=stray))
    assert kwargs["rope_scaling"] is None
    for layer, reference in zip(params["layers"], plain["layers"]):
        np.testing.assert_array_equal(layer["self_attention"]["w_q_b"],
                                      reference["self_attention"]["w_q_b"])


def test_partial_rope_keeps_the_schedule_of_a_rope_plugged_in_before_it(parallel_block):
    # a variant that plugs in its rope (rope=, self_attention's hook) before partial RoPE runs:
    # the schedule's keywords travel on; linear scaling by 2 at 2p is default RoPE at p
    import functools

    from minattn.rope import apply_rope

    params, _, x = parallel_block
    config = {"n_heads": 4, "n_kv_heads": 2, "partial_rotary_factor": 0.5}
    positions = np.arange(x.shape[-2])
    rope = functools.partial(apply_rope, scaling={"rope_type": "linear", "factor": 2.0})
    plugged, _ = ma.self_attention(params["self_attention"], x, positions=2 * positions,
                                   rope=rope, **config)
    plain, _ = ma.self_attention(params["self_attention"], x, positions=positions, **config)
    np.testing.assert_allclose(plugged, plain, rtol=0, atol=1e-12)


def test_a_schedule_minattn_does_not_have_is_refused_listing_those_it_has():
    config = GemmaLikeConfig(rope_parameters={"rope_type": "ntk", "rope_theta": 1.0})
    with pytest.raises(ValueError) as error:
        hf.rope_settings(config)
    assert str(error.value) == ("RoPE type 'ntk' is not supported (minattn has 'default', "
                                "'linear', 'dynamic', 'yarn', 'llama3', 'longrope')")


def test_a_bad_schedule_setting_is_refused_naming_the_config_class():
    config = GemmaLikeConfig(rope_parameters={"rope_type": "linear", "rope_theta": 1.0,
                                              "factor": -2.0})
    with pytest.raises(ValueError, match=r"^GemmaLikeConfig's RoPE scaling\['factor'\]"):
        hf.rope_settings(config)


def test_one_layer_with_a_window_reads_that_window():
    config = window_config("qwen3", sliding_window=4, layer_types=["sliding_attention"])
    assert hf.windows(config, 1) == 4


def test_a_family_without_partial_rope_refuses_a_partial_rotary_factor():
    # transformers' Llama rotates whole heads: its config's partial factor would break its forward
    config = GemmaLikeConfig(model_type="llama", num_attention_heads=4, num_key_value_heads=2,
                             hidden_size=16, rms_norm_eps=1e-6, hidden_act="silu",
                             rope_parameters={"rope_type": "default", "rope_theta": 1.0,
                                              "partial_rotary_factor": 0.5})
    from minattn.families import llama

    with pytest.raises(ValueError, match=r"^GemmaLikeConfig: partial_rotary_factor != 1"):
        llama.config_from_hf(config, 2)


def test_a_partial_rotary_factor_out_of_range_is_refused_by_self_attention(parallel_block):
    params, _, x = parallel_block
    with pytest.raises(ValueError) as error:
        ma.self_attention(params["self_attention"], x, n_heads=4, n_kv_heads=2,
                          positions=np.arange(x.shape[-2]), partial_rotary_factor=1.5)
    assert str(error.value) == (
        "partial_rotary_factor must be in (0, 1] and rotate an even number >= 2 of the 4 "
        "features of a head, got partial_rotary_factor=1.5: int(4 * 1.5) = 6")


def test_olmo2_params_without_norm_first_are_refused_as_the_post_norm_block_reads_them(
        olmo2_block):
    # decoder_block's default is norm_first=False, the post-norm block, whose norms OLMo lacks
    layer, keywords, x = olmo2_block
    with pytest.raises(ValueError, match=r"^params is missing key 'self_attention_norm'"):
        ma.decoder_block(layer, x, **keywords)


def test_olmo2s_block_defaults_norm_and_activation_as_decoder_block(olmo2_block):
    # a block of LayerNorms and a ReLU feed-forward, the defaults, with OLMo's norms after
    _, _, x = olmo2_block
    rng = np.random.default_rng(5)
    params = ma.init_decoder_block(rng, x.shape[-1], 4, 24)
    params["post_self_attention_norm"] = params.pop("self_attention_norm")
    params["post_feed_forward_norm"] = params.pop("feed_forward_norm")
    defaults = inspect.signature(ma.decoder_block).parameters
    assert (defaults["norm"].default, defaults["activation"].default) == ("layer_norm", "relu")
    np.testing.assert_array_equal(
        ma.decoder_block(params, x, n_heads=4, norm_first=True),
        ma.decoder_block(params, x, n_heads=4, norm_first=True, norm="layer_norm",
                         activation="relu"))
