"""GGUF files of every family minattn reads, written here as llama.cpp's convert_hf_to_gguf.py
writes them (tests/gguf_writer.py: its names, row orders, norm offsets and metadata keys) from a
random-weight transformers model, loaded by minattn and compared with transformers in float64:
with the model itself (its weights rounded to what the file holds), and with transformers'
own GGUF reader (from_pretrained(folder, gguf_file=...)) on the same file, for the
architectures it reads, in float and quantized types."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed: pip install '.[chat]'")
torch = pytest.importorskip("torch", reason="the reference is a transformers model")
transformers = pytest.importorskip("transformers", reason="the reference needs transformers")
for _module in ("tokenizers", "jinja2"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

from . import gguf_writer  # noqa: E402
from .float64_peers import float32_rounded  # noqa: E402
from .test_hf_families import FAMILIES, _build, _hf_logits  # noqa: E402

V = len(gguf_writer.TOKENS)
# What a GGUF holds of each family: the configurations of test_hf_families.py, changed only
# where llama.cpp's format cannot say it (a Mistral's window, Gemma's query_pre_attn_scalar
# other than the head size, Gemma 3's layer pattern other than five local to one global,
# SmolLM3's NoPE layers other than every fourth, Phi-3's LongRoPE attention factor other than
# its default).
CASES = {
    "llama_gqa": ("llama", {}),
    "llama_biases": ("llama", {"attention_bias": True}),
    "llama_tied": ("llama", {"tie_word_embeddings": True}),
    "llama_head_dim": ("llama", {"head_dim": 12}),
    "llama_linear": FAMILIES["llama_linear"],
    "llama_llama3": FAMILIES["llama_llama3"],
    "llama_yarn_attention_factor": FAMILIES["llama_yarn_attention_factor"],
    "qwen3_yarn_ramp": ("qwen3", {"head_dim": 12, "rope_parameters": FAMILIES[
        "qwen3_yarn_ramp"][1]["rope_parameters"]}),
    "mistral": ("mistral", {"sliding_window": None}),
    "qwen2_biases": ("qwen2", {}),
    "qwen3_head_dim": FAMILIES["qwen3_head_dim"],
    "gemma2": ("gemma2", {**FAMILIES["gemma2"][1], "query_pre_attn_scalar": 12}),
    "gemma3": ("gemma3", {**FAMILIES["gemma3"][1], "num_hidden_layers": 6, "layer_types": None,
                          "sliding_window_pattern": 6}),
    "phi3_window_partial": ("phi3", {"sliding_window": 3, "rope_parameters": {
        "rope_type": "default", "rope_theta": 100.0, "partial_rotary_factor": 0.5}}),
    "phi3_longrope": FAMILIES["phi3_longrope"],
    "phi3_partial_longrope": FAMILIES["phi3_partial_longrope"],
    "smollm3": ("smollm3", {"num_hidden_layers": 4, "no_rope_layer_interval": 4}),
    "olmo2": FAMILIES["olmo2"],
}


def build(name):
    family, overrides = CASES[name]
    model = _build(family, torch.float64, **{**overrides, "vocab_size": V})
    with torch.no_grad():  # the weights a float32 file holds exactly (Gemma's norms as 1 + w)
        for name, p in model.named_parameters():
            if family.startswith("gemma") and name.endswith("norm.weight"):
                p.copy_(float32_rounded(p + 1) - 1)
            else:
                p.copy_(float32_rounded(p))
    return model


def tokens(length=20):
    return np.random.default_rng(0).integers(3, V, size=(2, length))


@pytest.mark.parametrize("name", CASES)
def test_a_gguf_of_each_family_computes_what_the_model_computes(name, tmp_path, float64_islands):
    model = build(name)
    path = gguf_writer.write(tmp_path / f"{name}.gguf", model)
    loaded = load_language_model(path, dtype=np.float64)
    # Llama 3's and Phi-3's RoPE factors and YaRN's settings are in the file as float32:
    # float32's rounding of the angles
    atol = 1e-6 if name in ("llama_llama3", "phi3_longrope", "phi3_partial_longrope",
                            "llama_yarn_attention_factor", "qwen3_yarn_ramp") else 1e-10
    np.testing.assert_allclose(ma.causal_lm(loaded.params, tokens(), **loaded.config),
                               _hf_logits(model, tokens()), rtol=0, atol=atol)


def transformers_reads(path, **config):
    # transformers' own GGUF reader (gguf.quants for the bytes, its own name map and config)
    return transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float64, **config).eval()


# The keys transformers' GGUF reader (5.24) does not take from the file, given to it: the
# biases of a Llama or a Gemma, Qwen 3's head_dim, Gemma's soft-capping and
# query_pre_attn_scalar (the head size, as llama.cpp), Gemma 3's RoPE (scaling, local base),
# Phi-3's partial RoPE and window.
GEMMA = {"attention_bias": True, "query_pre_attn_scalar": 12}
THEIRS = {"llama_gqa": {}, "llama_biases": {"attention_bias": True}, "llama_tied": {},
          "qwen2_biases": {}, "qwen3_head_dim": {"attention_bias": True, "head_dim": 12},
          "gemma2": {**GEMMA, "attn_logit_softcapping": 1.5, "final_logit_softcapping": 2.0},
          "gemma3": {**GEMMA, "rope_parameters": FAMILIES["gemma3"][1]["rope_parameters"]},
          "phi3_window_partial": {**CASES["phi3_window_partial"][1], "pad_token_id": 0}}


@pytest.mark.parametrize("name", THEIRS)
def test_transformers_reads_the_same_file_the_same_way(name, tmp_path):
    path = gguf_writer.write(tmp_path / f"{name}.gguf", build(name))
    loaded = load_language_model(path, dtype=np.float64)
    theirs = transformers_reads(path, **THEIRS[name])
    # the stock model (float32 RMSNorm and rotary tables): float32's tolerance
    np.testing.assert_allclose(ma.causal_lm(loaded.params, tokens(), **loaded.config),
                               _hf_logits(theirs, tokens()), rtol=0, atol=2e-5)


# Every tensor type minattn reads (chat_model.TENSOR_TYPES, all that gguf.quants dequantizes):
# the types gguf.quants can quantize written from the weights, the others as random blocks whose
# bytes stay below 0x3c, so that every float16 scale in them is finite and below 1.
QUANTIZED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16", "F16", "TQ1_0", "TQ2_0", "MXFP4")


@pytest.fixture(scope="module")
def wide_llama():
    # K-quant blocks hold 256 weights: rows of 256
    return _build("llama", torch.float64, vocab_size=V, hidden_size=256, intermediate_size=256,
                  num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2)


def write_typed(path, model, kind):
    kind = gguf.GGMLQuantizationType[kind]
    if kind.name in QUANTIZED:
        return gguf_writer.write(path, model, quantize=kind)
    block, size = gguf.GGML_QUANT_SIZES[kind]
    rng = np.random.default_rng(7)

    def random_blocks(w):
        return rng.integers(0, 0x3c, size=(w.shape[0], w.shape[1] // block * size),
                            dtype=np.uint8)
    return gguf_writer.write(path, model, quantize=kind, blocks=random_blocks)


@pytest.mark.parametrize("kind", [t for t in __import__("minattn.models.chat_model", fromlist=[
    "TENSOR_TYPES"]).TENSOR_TYPES if t != "F32"])
def test_every_tensor_type_reads_as_transformers_reads_it(kind, wide_llama, tmp_path):
    path = write_typed(tmp_path / f"{kind}.gguf", wide_llama, kind)
    loaded = load_language_model(path, dtype=np.float64)
    reference = _hf_logits(transformers_reads(path), tokens(8))
    np.testing.assert_allclose(ma.causal_lm(loaded.params, tokens(8), **loaded.config),
                               reference, rtol=1e-5, atol=1e-5 * np.abs(reference).max())


def test_phi3_longrope_within_the_original_context_uses_the_short_factors(tmp_path,
                                                                         float64_islands):
    model = build("phi3_longrope")
    loaded = load_language_model(gguf_writer.write(tmp_path / "p.gguf", model), dtype=np.float64)
    assert loaded.config["rope_scaling"]["original_max_position_embeddings"] == 8
    short = tokens(8)  # positions 0..7: within the original context of 8
    np.testing.assert_allclose(ma.causal_lm(loaded.params, short, **loaded.config),
                               _hf_logits(model, short), rtol=0, atol=1e-6)
