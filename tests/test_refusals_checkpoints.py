"""Checkpoints read nothing silently wrong: a Phi-3 GGUF whose LongRoPE factors are incomplete
is refused naming the missing tensor and the file; a config.json without a key is read with the
default transformers' config class gives that key (the reference: transformers' own reading of
the same config.json), never another."""
import dataclasses

import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed: pip install '.[chat]'")
torch = pytest.importorskip("torch", reason="the files are written from a transformers model")
transformers = pytest.importorskip("transformers", reason="the reference is transformers")
for _module in ("tokenizers", "jinja2"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

from minattn.models import checkpoints  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

from . import gguf_writer  # noqa: E402
from .test_gguf_families import build  # noqa: E402

LONG, SHORT = "rope_factors_long.weight", "rope_factors_short.weight"


@pytest.fixture(scope="module")
def phi3_longrope():
    return build("phi3_longrope")


@pytest.mark.parametrize("dropped, kind", [((LONG,), "long factors"),
                                           ((SHORT,), "short factors")])
def test_a_phi3_longrope_gguf_missing_a_factor_tensor_names_it_and_the_file(
        phi3_longrope, tmp_path, dropped, kind):
    path = gguf_writer.write(tmp_path / "phi3.gguf", phi3_longrope, drop=dropped)
    with pytest.raises(ValueError) as error:
        load_language_model(path)
    message = str(error.value)
    assert str(path) in message and "phi3.rope.scaling.type is 'longrope'" in message
    assert f"no tensor {dropped[0]}" in message and kind in message, message


def test_a_phi3_longrope_gguf_without_either_factor_tensor_names_both(phi3_longrope, tmp_path):
    path = gguf_writer.write(tmp_path / "phi3.gguf", phi3_longrope, drop=(LONG, SHORT))
    with pytest.raises(ValueError, match=rf"no tensor {SHORT} and no tensor {LONG}"):
        load_language_model(path)


# -- a config.json without a key: read as transformers reads it ------------------------------

SIZES = {"hidden_size": 32, "num_hidden_layers": 6, "num_attention_heads": 4,
         "intermediate_size": 64, "vocab_size": 100}
# config.json files that leave keys out (older transformers releases, hand-written ones):
# the sizes alone, then with the keys whose defaults derive others.
LEFT_OUT = {
    "sizes only": {},
    "4.x RoPE base": {"rope_theta": 500.0},
    "null kv heads": {"num_key_value_heads": None},
    "window on": {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 2},
    "window pattern": {"sliding_window_pattern": 3},
    "NoPE interval": {"no_rope_layer_interval": 2},
}


def transformers_config(model_type, hf):
    # what transformers' config class makes of the same config.json
    full = transformers.AutoConfig.for_model(model_type, **hf).to_dict()
    return {**full, "model_type": model_type}


# (MistralConfig, Gemma2Config and Gemma3TextConfig refuse a null num_key_value_heads)
REFUSED_BY_TRANSFORMERS = {("mistral", "null kv heads"), ("gemma2", "null kv heads"),
                           ("gemma3_text", "null kv heads")}


@pytest.mark.parametrize("model_type, case", [
    (model_type, case) for model_type in checkpoints.BY_MODEL_TYPE for case in LEFT_OUT
    if (model_type, case) not in REFUSED_BY_TRANSFORMERS])
def test_a_key_config_json_leaves_out_is_read_as_transformers_reads_it(model_type, case,
                                                                       recwarn):
    family = checkpoints.BY_MODEL_TYPE[model_type]
    hf = {"model_type": model_type, **SIZES, **LEFT_OUT[case]}
    theirs = transformers_config(model_type, {k: v for k, v in hf.items() if k != "model_type"})
    assert family.config(hf) == family.config(theirs)
    assert family.tensor_shapes(hf) == family.tensor_shapes(theirs)


@pytest.mark.parametrize("model_type", list(checkpoints.BY_MODEL_TYPE))
def test_every_default_a_reader_assumes_is_its_transformers_config_class_default(model_type):
    # the table itself, key by key, against the config class's fields' defaults (what a key
    # config.json leaves out becomes, before __post_init__ derives others from it: the test
    # above); rope_theta: the base of its default rope_parameters
    theirs = transformers.AutoConfig.for_model(model_type)
    fields = {f.name: f.default for f in dataclasses.fields(type(theirs))}
    defaults = checkpoints.BY_MODEL_TYPE[model_type].DEFAULTS[model_type]
    rope = theirs.rope_parameters
    for key, value in defaults.items():
        if key == "rope_theta":
            expected = rope.get("full_attention", rope)["rope_theta"]
        elif key == "rope_local_base_freq":
            expected = rope["sliding_attention"]["rope_theta"]
        elif key in ("head_dim", "num_key_value_heads") and value is None:
            continue  # None: computed from the sizes, as the config classes do (test above)
        elif key not in fields:
            continue  # a key this class does not have (Mistral's attention_bias): never read
        else:
            expected = fields[key]
        assert value == expected, (model_type, key)


def test_a_gemma2_config_json_without_soft_capping_keys_caps_as_transformers():
    # Gemma2Config: attn_logit_softcapping=50.0, final_logit_softcapping=30.0
    hf = {"model_type": "gemma2", **SIZES}
    config = checkpoints.BY_MODEL_TYPE["gemma2"].config(hf)
    theirs = transformers.Gemma2Config(**SIZES)
    assert config["attn_logit_softcapping"] == theirs.attn_logit_softcapping
    assert config["final_logit_softcapping"] == theirs.final_logit_softcapping


def refused_values():
    # every value that from_hf refuses, by family (tests/test_hf_config_keys.py's table)
    from .test_hf_config_keys import ANY_FAMILY, KEYS

    for model_type in checkpoints.BY_MODEL_TYPE:
        keys = {**ANY_FAMILY, **KEYS[model_type][1]}
        for key, (kind, *value) in keys.items():
            if kind == "refused":
                yield model_type, key, value[0]


@pytest.mark.parametrize("model_type, key, value", list(refused_values()))
def test_a_value_from_hf_refuses_is_refused_by_the_checkpoint_reader_too(model_type, key,
                                                                         value):
    family = checkpoints.BY_MODEL_TYPE[model_type]
    hf = {"model_type": model_type, **SIZES, "rope_theta": 10000.0, key: value}
    with pytest.raises(ValueError, match=key):
        family.config(hf)
        family.tensor_shapes(hf)


def test_a_longrope_gguf_of_another_architecture_is_refused_naming_phi3():
    # (LongRoPE's factors are tensors that only Phi-3's reader reads)
    from minattn.models.checkpoints.gguf_metadata import Metadata

    fields = {f"llama.{key}": value for key, value in {
        "attention.head_count": 2, "embedding_length": 8, "block_count": 1,
        "feed_forward_length": 16, "attention.layer_norm_rms_epsilon": 1e-6,
        "context_length": 32, "rope.freq_base": 1e4, "rope.scaling.type": "longrope"}.items()}
    meta = Metadata(fields, "llama", "x.gguf", {"token_embd.weight": (10, 8),
                                                 LONG: (2,), SHORT: (2,)}, None)
    with pytest.raises(ValueError, match=r"^x\.gguf: llama\.rope\.scaling\.type 'longrope' is "
                                         r"read for phi3 only"):
        checkpoints.llama.gguf_config(meta)


def families_with_layer_types():
    # every checkpoint family whose transformers config class has layer_types (and checks them)
    for model_type in checkpoints.BY_MODEL_TYPE:
        if hasattr(transformers.AutoConfig.for_model(model_type), "layer_types"):
            yield model_type


@pytest.mark.parametrize("model_type", list(families_with_layer_types()))
@pytest.mark.parametrize("extra", [1, -1])
def test_layer_types_of_another_length_than_the_layers_are_refused_as_transformers_does(
        model_type, extra):
    n = SIZES["num_hidden_layers"] + extra
    hf = {"model_type": model_type, **SIZES, "rope_theta": 10000.0,
          "layer_types": ["full_attention"] * n}
    # transformers' own refusal (huggingface_hub's validation error wrapping its ValueError)
    with pytest.raises(Exception, match="must be equal to the number of `layer_types`"):
        transformers.AutoConfig.for_model(model_type, **{k: v for k, v in hf.items()
                                                         if k != "model_type"})
    with pytest.raises(ValueError, match=rf"layer_types has {n} entries but the model has "
                                         rf"{SIZES['num_hidden_layers']} layers"):
        checkpoints.BY_MODEL_TYPE[model_type].config(hf)
