"""What the mutation run of minattn/models/checkpoints/ showed untested (tests/MUTANTS.md): the
config.json a GGUF file's metadata stands for, key by key against the transformers model the file
was written from; tied embeddings in the families that untie by default (Phi-3, OLMo 2); a
config.json without tie_word_embeddings or num_key_value_heads read with transformers' defaults;
the GGUF keys the test files never write (Gemma's layer pattern and 27B query scale and local
base, YaRN's betas, Phi-3's LongRoPE settings, Llama's rope_freqs) and every refusal of a key in
full; a float32 load in float32 throughout; Gemma's local layers where config.json does not list
them (found by a mutant: the reader made every layer global there)."""
import json

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed: pip install '.[chat]'")
torch = pytest.importorskip("torch", reason="the reference is a transformers model")
transformers = pytest.importorskip("transformers", reason="the reference needs transformers")
for _module in ("tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

from minattn.interop import from_hf  # noqa: E402
from minattn.models import checkpoints  # noqa: E402
from minattn.models.checkpoints.gguf_metadata import Metadata  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

from . import gguf_writer  # noqa: E402
from .test_checkpoints import assert_same_tree, save  # noqa: E402
from .test_gguf_families import CASES, build  # noqa: E402
from .test_hf_families import _build  # noqa: E402

V = len(gguf_writer.TOKENS)


def read_metadata(path):
    """A GGUF file's metadata as the loader hands it to a family (gguf's own reader)."""
    reader = gguf.GGUFReader(path)
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("tokenizer.ggml.")}
    tensors = {t.name: t for t in reader.tensors}
    shapes = {name: tuple(int(n) for n in reversed(t.shape.tolist()))
              for name, t in tensors.items()}
    return Metadata(fields, fields["general.architecture"], path, shapes,
                    lambda name: gguf.quants.dequantize(tensors[name].data,
                                                        tensors[name].tensor_type))


def metadata(arch, keys, tensors=()):
    """Metadata of a small file of architecture arch: llama.cpp's required keys, then keys
    ({key without the "arch." prefix: value}); tensors: {name: values} besides token_embd."""
    fields = {"general.architecture": arch, **{f"{arch}.{k}": v for k, v in {
        "block_count": 2, "context_length": 64, "embedding_length": 16,
        "feed_forward_length": 24, "attention.head_count": 4, "attention.head_count_kv": 2,
        "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 10000.0, **keys}.items()
        if v is not None}}  # (a key given as None: left out)
    tensors = dict(tensors)
    shapes = {"token_embd.weight": (V, 16), **{n: np.shape(v) for n, v in tensors.items()}}
    return Metadata(fields, arch, "x.gguf", shapes, lambda name: tensors[name])


# The keys of config.json that llama.cpp's format carries (tests/test_gguf_families.py's CASES
# hold only what it can say), each equal in the config gguf_config rebuilds.
KEYS = ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
        "max_position_embeddings", "tie_word_embeddings", "attention_bias", "hidden_act",
        "hidden_activation", "use_sliding_window", "sliding_window", "layer_types",
        "no_rope_layers", "query_pre_attn_scalar", "attn_logit_softcapping",
        "final_logit_softcapping", "original_max_position_embeddings")


@pytest.mark.parametrize("name", CASES)
def test_a_ggufs_metadata_gives_the_config_json_it_was_written_from(name, tmp_path):
    model = build(name)
    path = gguf_writer.write(tmp_path / f"{name}.gguf", model)
    meta = read_metadata(path)
    hf = checkpoints.BY_GGUF_ARCHITECTURE[meta.arch].gguf_config(meta)
    config = model.config.to_dict()
    if name == "mistral":  # llama.cpp writes a Mistral as llama (and says so: test_gguf_checks)
        config["model_type"] = "llama"
    compared = [key for key in KEYS if key in hf and key in config]
    assert {"model_type", "hidden_size", "num_key_value_heads", "tie_word_embeddings"} <= set(
        compared)
    if meta.arch.startswith("gemma"):
        assert {"hidden_activation", "query_pre_attn_scalar", "layer_types"} <= set(compared)
    assert {key: hf[key] for key in compared} == {key: config[key] for key in compared}
    assert float(hf["rms_norm_eps"]) == pytest.approx(config["rms_norm_eps"], rel=1e-6)


@pytest.mark.parametrize("family", ["phi3", "olmo2"])
def test_tied_embeddings_of_a_family_that_unties_by_default_load_without_lm_head(family,
                                                                                tmp_path):
    model = _build(family, torch.float64, tie_word_embeddings=True)
    params, config = from_hf(model)
    assert "lm_head" not in params  # the reference: transformers' own tied model
    hf = json.loads((save(model, tmp_path) / "config.json").read_text())
    reader = checkpoints.BY_MODEL_TYPE[hf["model_type"]]
    assert "lm_head.weight" not in reader.tensor_shapes(hf)
    tensors = {k: v.numpy() for k, v in model.state_dict().items()}
    assert_same_tree(reader.params(tensors.get, hf), params)
    loaded = load_language_model(tmp_path, dtype=np.float64)
    assert_same_tree(loaded.params, params)


@pytest.mark.parametrize("family", ["phi3", "olmo2", "llama"])
def test_a_config_json_without_tie_word_embeddings_is_untied_as_transformers_reads_it(family,
                                                                                    tmp_path):
    model = _build(family, torch.float64)
    hf = json.loads((save(model, tmp_path) / "config.json").read_text())
    hf.pop("tie_word_embeddings", None)
    config_class = {"phi3": transformers.Phi3Config, "olmo2": transformers.Olmo2Config,
                    "llama": transformers.LlamaConfig}[family]
    assert config_class(**hf).tie_word_embeddings is False  # transformers' default
    reader = checkpoints.BY_MODEL_TYPE[family]
    assert "lm_head.weight" in reader.tensor_shapes(hf)
    tensors = {k: v.numpy() for k, v in model.state_dict().items()}
    np.testing.assert_array_equal(reader.params(tensors.get, hf)["lm_head"],
                                  tensors["lm_head.weight"].T)


def test_a_phi3_gguf_without_attn_factor_computes_transformers_default(tmp_path, float64_islands):
    from .test_gguf_families import tokens
    from .test_hf_families import _hf_logits
    import minattn as ma

    model = build("phi3_longrope")
    path = gguf_writer.write(tmp_path / "phi3.gguf", model, skip=("rope.scaling.attn_factor",))
    rope = checkpoints.phi3.gguf_config(read_metadata(path))["rope_parameters"]
    c = model.config
    assert rope["factor"] == c.max_position_embeddings / c.original_max_position_embeddings
    assert "attention_factor" not in rope
    loaded = load_language_model(path, dtype=np.float64)
    np.testing.assert_allclose(ma.causal_lm(loaded.params, tokens(), **loaded.config),
                               _hf_logits(model, tokens()), rtol=0, atol=1e-6)


def test_a_phi3_ggufs_attn_factor_is_longropes_attention_factor():
    factors = np.linspace(1.0, 2.0, 2, dtype=np.float32)
    meta = metadata("phi3", {"rope.scaling.type": "longrope", "rope.scaling.attn_factor": 0.75,
                             "rope.scaling.original_context_length": 16},
                    {"rope_factors_short.weight": factors, "rope_factors_long.weight": factors})
    hf = checkpoints.phi3.gguf_config(meta)
    assert hf["rope_parameters"]["attention_factor"] == 0.75
    assert hf["rope_parameters"]["factor"] == 64 / 16
    assert hf["original_max_position_embeddings"] == 16


@pytest.mark.parametrize("present, missing", [("rope_factors_short.weight",
                                               "rope_factors_long.weight"),
                                              ("rope_factors_long.weight",
                                               "rope_factors_short.weight")])
def test_a_phi3_gguf_with_one_longrope_factor_list_names_both(present, missing):
    # (without rope.scaling.type: with "longrope" and no long factors, the Llama reader before
    # it refuses the type, naming it)
    meta = metadata("phi3", {"rope.scaling.original_context_length": 16},
                    {present: np.ones(2, np.float32)})
    with pytest.raises(ValueError, match=rf"^x\.gguf: has {present} without {missing} "
                                         r"\(LongRoPE needs both\)$"):
        checkpoints.phi3.gguf_config(meta)


def test_an_olmo2_gguf_with_local_layers_is_refused_by_name():
    meta = metadata("olmo2", {"attention.sliding_window": 4})
    with pytest.raises(ValueError, match=r"^x\.gguf: olmo2\.attention\.sliding_window is set: "
                                         r"local layers \(OLMo 3\) are not supported in GGUF$"):
        checkpoints.olmo2.gguf_config(meta)
    assert checkpoints.olmo2.gguf_config(metadata("olmo2", {"attention.sliding_window": 0}))[
        "model_type"] == "olmo2"


def test_smollm3s_no_rope_layers_shorter_than_the_layers_is_refused_by_count():
    hf = {"model_type": "smollm3", "hidden_size": 16, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 24,
          "vocab_size": V, "no_rope_layers": [1, 1, 0], "rope_parameters": {
              "rope_type": "default", "rope_theta": 10000.0}}
    with pytest.raises(ValueError, match=r"^no_rope_layers has 3 entries for 4 layers$"):
        checkpoints.smollm3.config(hf)


@pytest.mark.parametrize("name", ["gemma2", "gemma3", "gemma3_capped"])
def test_a_gemma_config_json_without_layer_types_has_transformers_default_local_layers(
        name, tmp_path, float64_islands):
    from .test_checkpoints import build as build_hf
    from .test_hf_families import _hf_logits
    import minattn as ma

    folder = save(build_hf(name), tmp_path)
    hf = json.loads((folder / "config.json").read_text())
    del hf["layer_types"]  # as older transformers releases wrote it
    (folder / "config.json").write_text(json.dumps(hf))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    assert "sliding_attention" in theirs.config.layer_types  # transformers' default pattern
    loaded = load_language_model(folder, dtype=np.float64)
    tokens = np.random.default_rng(0).integers(0, hf["vocab_size"], size=(2, 3 * hf[
        "sliding_window"]))  # longer than the window: a local layer differs from a global one
    np.testing.assert_allclose(ma.causal_lm(loaded.params, tokens, **loaded.config),
                               _hf_logits(theirs, tokens), rtol=0, atol=1e-10)


def local_layers(hf):
    return [t == "sliding_attention" for t in hf["layer_types"]]


def test_a_gemma3_ggufs_sliding_window_pattern_sets_its_local_layers_as_transformers_does():
    hf = checkpoints.gemma.gguf_config(metadata("gemma3", {
        "block_count": 6, "attention.sliding_window": 4, "attention.sliding_window_pattern": 3}))
    theirs = transformers.Gemma3TextConfig(num_hidden_layers=6, sliding_window_pattern=3)
    assert hf["layer_types"] == theirs.layer_types
    assert local_layers(hf) == [True, True, False, True, True, False]
    assert hf["sliding_window"] == 4


def test_a_ggufs_sliding_window_pattern_given_per_layer_is_read_per_layer():
    hf = checkpoints.gemma.gguf_config(metadata("gemma3", {
        "block_count": 3, "attention.sliding_window": 4,
        "attention.sliding_window_pattern": [False, True, True]}))
    assert local_layers(hf) == [False, True, True]


@pytest.mark.parametrize("arch, keys", [("gemma3", {}), ("gemma3", {"attention.sliding_window": 0}),
                                        ("gemma2", {"attention.sliding_window": 0})])
def test_a_gemma_gguf_without_a_window_has_only_global_layers(arch, keys):
    hf = checkpoints.gemma.gguf_config(metadata(arch, keys))
    assert hf["layer_types"] == ["full_attention"] * 2 and hf["sliding_window"] is None


def test_a_gemma2_gguf_without_its_window_and_caps_takes_llama_cpps_and_gemma2configs(capsys):
    # llama.cpp (src/models/gemma2.cpp, llama_hparams): n_swa 4096 and caps 50 and 30 where the
    # file has none; transformers' Gemma2Config has the same defaults (the reference here)
    hf = checkpoints.gemma.gguf_config(metadata("gemma2", {}))
    theirs = transformers.Gemma2Config(num_hidden_layers=2)
    assert hf["sliding_window"] == theirs.sliding_window == 4096
    assert hf["layer_types"] == theirs.layer_types == ["sliding_attention", "full_attention"]
    assert hf["attn_logit_softcapping"] == theirs.attn_logit_softcapping == 50.0
    assert hf["final_logit_softcapping"] == theirs.final_logit_softcapping == 30.0
    err = capsys.readouterr().err
    for key, value in (("attention.sliding_window", "4096"), ("attn_logit_softcapping", "50.0"),
                       ("final_logit_softcapping", "30.0")):
        assert f"minattn: x.gguf has no gemma2.{key}: using {value} (Gemma 2's" in err, err
    hf = checkpoints.gemma.gguf_config(metadata("gemma2", {
        "attention.sliding_window": 3, "attn_logit_softcapping": 1.5,
        "final_logit_softcapping": 2.0}))
    assert (hf["sliding_window"], hf["attn_logit_softcapping"],
            hf["final_logit_softcapping"]) == (3, 1.5, 2.0)
    assert "has no gemma2." not in capsys.readouterr().err


@pytest.mark.parametrize("arch, n_layers", [("gemma2", 46), ("gemma3", 62)])
def test_a_27b_gemma_gguf_scales_queries_by_d_over_n_heads_as_llama_cpp_does(arch, n_layers,
                                                                              capsys):
    # llama.cpp: query_pre_attn_scalar = n_embd / n_head for the 27B models, else the head size
    keys = {"attention.key_length": 8, "attention.value_length": 8}
    if arch == "gemma2":  # (its window and caps: the test above)
        keys = {**keys, "attention.sliding_window": 3, "attn_logit_softcapping": 1.5,
                "final_logit_softcapping": 2.0}
    hf = checkpoints.gemma.gguf_config(metadata(arch, {**keys, "block_count": n_layers}))
    assert hf["query_pre_attn_scalar"] == 16 // 4 and type(hf["query_pre_attn_scalar"]) is int
    assert capsys.readouterr().err == (
        "minattn: x.gguf does not record query_pre_attn_scalar: using 4, as llama.cpp does "
        f"(D / n_heads for a 27B model)\n{GEMMA3_LOCAL_BASE if arch == 'gemma3' else ''}")
    hf = checkpoints.gemma.gguf_config(metadata(arch, {**keys, "block_count": n_layers - 1}))
    assert hf["query_pre_attn_scalar"] == 8
    assert capsys.readouterr().err.startswith(
        "minattn: x.gguf does not record query_pre_attn_scalar: using 8, as llama.cpp does "
        "(the head size)\n")


GEMMA3_LOCAL_BASE = ("minattn: x.gguf has no gemma3.rope.freq_base_swa: using 10000.0 (Gemma 3's "
                     "base for its local layers)\n")


@pytest.mark.parametrize("keys, base", [({"rope.freq_base_swa": 500.0}, 500.0), ({}, 10000.0)])
def test_gemma3s_local_layers_rotate_with_rope_freq_base_swa_or_its_default(keys, base, capsys):
    hf = checkpoints.gemma.gguf_config(metadata("gemma3", {"rope.freq_base": 1e6, **keys}))
    assert hf["rope_parameters"] == {
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": base}}
    assert capsys.readouterr().err.endswith("" if keys else GEMMA3_LOCAL_BASE)
    assert type(hf["rope_parameters"]["sliding_attention"]["rope_theta"]) is float


def test_a_gemma_config_with_another_activation_is_refused_naming_the_key():
    hf = checkpoints.gemma.gguf_config(metadata("gemma2", {}))
    checkpoints.gemma.config(hf)  # (as read)
    with pytest.raises(ValueError, match=r"^hidden_activation='gelu' is not supported"):
        checkpoints.gemma.config({**hf, "hidden_activation": "gelu"})


@pytest.mark.parametrize("name", ["gemma2", "llama_biases", "phi3_window_partial", "olmo2"])
def test_a_gguf_loaded_in_float32_has_every_weight_in_float32(name, tmp_path):
    path = gguf_writer.write(tmp_path / f"{name}.gguf", build(name))
    loaded = load_language_model(path, dtype=np.float32)

    def dtypes(tree):
        if isinstance(tree, dict):
            return set().union(*map(dtypes, tree.values()))
        if isinstance(tree, list):
            return set().union(*map(dtypes, tree))
        return {tree.dtype}

    assert dtypes(loaded.params) == {np.dtype(np.float32)}


def test_a_gguf_without_rope_freq_base_uses_the_formats_default_and_says_why(capsys):
    hf = checkpoints.llama.gguf_config(metadata("llama", {"rope.freq_base": None}))
    assert hf["rope_parameters"] == {"rope_type": "default", "rope_theta": 10000.0}
    assert capsys.readouterr().err == (
        "minattn: x.gguf has no llama.rope.freq_base: using 10000.0 (the GGUF default; a model "
        "trained with another base computes wrong logits)\n")


@pytest.mark.parametrize("scaling, shape", [(None, (3,)), ("linear", (2,)), ("yarn", (2,))])
def test_llama3s_rope_freqs_of_another_length_or_beside_another_scaling_is_refused(scaling, shape):
    # head size 16 / 4 = 4: two rotated pairs, so rope_freqs.weight holds two divisors; no
    # rope.scaling.type is named as the format's default, 'none'
    meta = metadata("llama", {"rope.scaling.type": scaling, "rope.scaling.factor": 2.0},
                    {"rope_freqs.weight": np.ones(shape, np.float32)})
    with pytest.raises(ValueError, match=(
            rf"^x\.gguf: rope_freqs\.weight of shape \({shape[0]},\) with rope\.scaling\.type "
            rf"{scaling or 'none'!r}: expected \(2,\) \(one divisor per rotated pair\) and no "
            r"other scaling$")):
        checkpoints.llama.gguf_config(meta)


def test_a_linear_scaling_is_read_as_linear_even_beside_longrope_factors():
    meta = metadata("llama", {"rope.scaling.type": "linear", "rope.scaling.factor": 2.0},
                    {"rope_factors_long.weight": np.ones(2, np.float32)})
    assert checkpoints.llama.gguf_rope(meta, 4) == {"rope_type": "linear", "rope_theta": 10000.0,
                                                    "factor": 2.0}


@pytest.mark.parametrize("scaling", ["linear", "yarn"])
def test_a_rope_scaling_factor_that_is_not_a_number_is_refused_by_name(scaling):
    meta = metadata("llama", {"rope.scaling.type": scaling, "rope.scaling.factor": "2",
                              "rope.scaling.original_context_length": 16})
    with pytest.raises(ValueError, match=r"^x\.gguf: llama\.rope\.scaling\.factor must be a "
                                         r"number, got '2'$"):
        checkpoints.llama.gguf_config(meta)


def test_yarns_gguf_keys_are_transformers_yarn_settings():
    meta = metadata("llama", {"rope.scaling.type": "yarn", "rope.scaling.factor": 4.0,
                              "rope.scaling.original_context_length": 16,
                              "rope.scaling.attn_factor": 0.5, "rope.scaling.yarn_beta_fast": 16.0,
                              "rope.scaling.yarn_beta_slow": 2.0})
    assert checkpoints.llama.gguf_config(meta)["rope_parameters"] == {
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 16, "attention_factor": 0.5, "beta_fast": 16.0,
        "beta_slow": 2.0}


def test_another_rope_scaling_type_is_refused_naming_what_is_read():
    with pytest.raises(ValueError, match=(
            r"^x\.gguf: llama\.rope\.scaling\.type 'dynamic' is not supported \(minattn reads "
            r"'none', 'linear', 'yarn' and Llama 3's rope_freqs\.weight\)$")):
        checkpoints.llama.gguf_config(metadata("llama", {"rope.scaling.type": "dynamic"}))


@pytest.mark.parametrize("value", [2.5, True, "2", 0])
def test_a_count_that_is_not_a_positive_int_is_refused_by_name(value):
    with pytest.raises(ValueError) as error:
        checkpoints.llama.gguf_config(metadata("llama", {"block_count": value}))
    assert str(error.value) == f"x.gguf: llama.block_count must be a positive int, got {value!r}"


def test_a_llama_config_json_without_num_key_value_heads_has_one_per_head(tmp_path):
    model = _build("llama", torch.float64, num_key_value_heads=None)
    assert model.config.num_key_value_heads == model.config.num_attention_heads  # transformers
    hf = json.loads((save(model, tmp_path) / "config.json").read_text())
    hf.pop("num_key_value_heads", None)
    assert checkpoints.llama.config(hf) == from_hf(model)[1]


def test_a_llamas_head_size_is_rope_dimension_count_where_key_length_is_absent():
    # transformers' GGUF reader (and llama.cpp) take a llama's head_dim from rope.dimension_count
    hf = checkpoints.llama.gguf_config(metadata("llama", {"rope.dimension_count": 8}))
    assert hf["head_dim"] == 8 and "partial_rotary_factor" not in hf["rope_parameters"]


def test_a_llama_gguf_rotating_part_of_each_head_is_refused_by_name():
    meta = metadata("llama", {"attention.key_length": 8, "rope.dimension_count": 4})
    with pytest.raises(ValueError, match=(
            r"^x\.gguf: llama\.rope\.dimension_count is 4, not the head size 8: RoPE on part of "
            r"each head is not supported for llama$")):
        checkpoints.llama.gguf_config(meta)


@pytest.mark.parametrize("n_layers, pattern", [(8, None), (6, 3), (4, 2)])
def test_a_gemma3_config_json_without_layer_types_follows_its_sliding_window_pattern(n_layers,
                                                                                     pattern):
    hf = {"model_type": "gemma3_text", "num_hidden_layers": n_layers}
    if pattern is not None:
        hf["sliding_window_pattern"] = pattern
    theirs = transformers.Gemma3TextConfig(num_hidden_layers=n_layers,
                                           **({"sliding_window_pattern": pattern} if pattern
                                              else {}))
    assert checkpoints.gemma.layer_types(hf) == theirs.layer_types


def test_a_gguf_without_head_count_kv_has_one_kv_head_per_head_and_says_so(capsys):
    hf = checkpoints.llama.gguf_config(metadata("llama", {"attention.head_count_kv": None}))
    assert hf["num_key_value_heads"] == 4
    assert capsys.readouterr().err == (
        "minattn: x.gguf has no llama.attention.head_count_kv: using 4 (the GGUF default: "
        "head_count, no grouped-query attention)\n")


def test_a_head_count_kv_per_layer_is_refused_in_full():
    with pytest.raises(ValueError) as error:
        checkpoints.llama.gguf_config(metadata("llama", {"attention.head_count_kv": [2, 2]}))
    assert str(error.value) == ("x.gguf: llama.attention.head_count_kv varies by layer ([2, 2]): "
                                "not supported")


def test_an_rms_epsilon_that_is_not_a_number_is_refused_by_name():
    with pytest.raises(ValueError) as error:
        checkpoints.llama.gguf_config(metadata("llama", {
            "attention.layer_norm_rms_epsilon": "1e-6"}))
    assert str(error.value) == ("x.gguf: llama.attention.layer_norm_rms_epsilon must be a number, "
                                "got '1e-6'")


def test_a_mistral_written_as_llama_is_said_to_lose_its_window_in_full(capsys):
    meta = metadata("llama", {})
    meta.fields["general.basename"] = "Mistral-7B-v0.1"
    checkpoints.llama.gguf_config(meta)
    assert capsys.readouterr().err == (
        "minattn: x.gguf is a Mistral (general.basename) written as llama, which records no "
        "sliding window: read without one (a Mistral 7B v0.1, window 4096, then differs beyond "
        "4096 tokens)\n")


# -- what the run of the refusals merge's source showed untested (2026-11-27 night) --------------

def test_a_gemma3_ggufs_final_logit_softcapping_is_read_and_its_absence_is_gemma3s_none(capsys):
    # transformers' Gemma 3 soft-caps its logits where its config says so (default None, no cap)
    theirs = transformers.Gemma3TextConfig(num_hidden_layers=2)
    hf = checkpoints.gemma.gguf_config(metadata("gemma3", {}))
    assert hf["final_logit_softcapping"] is theirs.final_logit_softcapping is None
    hf = checkpoints.gemma.gguf_config(metadata("gemma3", {"final_logit_softcapping": 2.0}))
    assert hf["final_logit_softcapping"] == 2.0
    assert checkpoints.gemma.config(hf)["final_logit_softcapping"] == 2.0


def test_a_phi3_longrope_gguf_without_either_factor_tensor_is_refused_in_full():
    meta = metadata("phi3", {"rope.scaling.type": "longrope",
                             "rope.scaling.original_context_length": 16})
    with pytest.raises(ValueError) as error:
        checkpoints.phi3.gguf_config(meta)
    assert str(error.value) == (
        "x.gguf: phi3.rope.scaling.type is 'longrope', but it has no tensor "
        "rope_factors_short.weight and no tensor rope_factors_long.weight (LongRoPE's short "
        "factors (within the original context) and long factors (beyond it), one per rotated "
        "pair): LongRoPE needs both the short and the long factors")


def test_a_config_key_a_family_needs_and_lacks_is_an_attribute_error_naming_it():
    from minattn.models.checkpoints.gguf_metadata import Config

    config = Config({"hidden_size": 8}, {"rms_norm_eps": 1e-6})
    assert (config.hidden_size, config.rms_norm_eps) == (8, 1e-6)
    with pytest.raises(AttributeError) as error:
        config.num_hidden_layers
    assert str(error.value) == "no key 'num_hidden_layers', which this family's config needs"


def window_per_layer(kwargs, n_layers):
    # causal_lm's window keyword as one entry per layer (None: global)
    window = kwargs["window"]
    return list(window) if isinstance(window, list) else [window] * n_layers


# config.json files whose windows come from use_sliding_window, sliding_window, max_window_layers
# and layer_types together (Qwen2Config's and SmolLM3Config's __post_init__ fold them)
WINDOW_KEYS = {
    "qwen2": [{"max_window_layers": 2},  # use_sliding_window left out: False, no window
              {"use_sliding_window": True, "sliding_window": 3,
               "layer_types": ["sliding_attention", "full_attention"] * 3}],
    "smollm3": [{"sliding_window": 3},  # use_sliding_window left out: False, no window
                {"use_sliding_window": True, "sliding_window": 3}],
}


@pytest.mark.parametrize("model_type, keys", [(model_type, keys) for model_type, cases in
                                              WINDOW_KEYS.items() for keys in cases])
def test_a_config_jsons_windows_are_the_layers_transformers_config_makes_sliding(model_type,
                                                                                 keys):
    from .test_refusals_checkpoints import SIZES

    theirs = transformers.AutoConfig.for_model(model_type, **SIZES, **keys)
    expected = [theirs.sliding_window if t == "sliding_attention" else None
                for t in theirs.layer_types]
    family = checkpoints.BY_MODEL_TYPE[model_type]
    kwargs = family.config({"model_type": model_type, **SIZES, **keys})
    assert window_per_layer(kwargs, SIZES["num_hidden_layers"]) == expected


def test_a_qwen_config_json_naming_sliding_layers_without_use_sliding_window_is_refused():
    # Qwen2Config drops sliding_window where use_sliding_window is false: its sliding layers
    # have no window to slide, which minattn refuses rather than guess
    from .test_refusals_checkpoints import SIZES

    keys = {"use_sliding_window": False, "sliding_window": 3,
            "layer_types": ["sliding_attention", "full_attention"] * 3}
    assert transformers.Qwen2Config(**SIZES, **keys).sliding_window is None
    with pytest.raises(ValueError, match=r"^layer_types names sliding_attention layers but "
                                         r"sliding_window is None$"):
        checkpoints.qwen.config({"model_type": "qwen2", **SIZES, **keys})
