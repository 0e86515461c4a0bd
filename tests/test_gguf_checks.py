"""What a GGUF or a folder says is checked before it is trusted: every tensor present with the
shape the metadata gives and no weight dequantized before that; NaN and inf refused as each
tensor is read; keys the format defaults used with a line on stderr; the special tokens in the
vocabulary; the declared pre-tokenizer honoured (held to llama.cpp's own regular expressions and
to tokenizers built from the model's own declaration), an unknown one refused; a cut
safetensors file called truncated. Every error names the file and the GGUF tensor or key."""
import json

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed: pip install '.[chat]'")
torch = pytest.importorskip("torch", reason="the files are written from a transformers model")
transformers = pytest.importorskip("transformers", reason="the files need transformers")
for _module in ("tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

from . import gguf_writer  # noqa: E402
from .float64_peers import float32_rounded  # noqa: E402
from .test_hf_families import _build, _hf_logits  # noqa: E402

V = len(gguf_writer.TOKENS)


def make_llama():
    model = _build("llama", torch.float64, vocab_size=V, attention_bias=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    with torch.no_grad():  # what a float32 file holds exactly
        for p in model.parameters():
            p.copy_(float32_rounded(p))
    return model


@pytest.fixture(scope="module")
def llama():
    return make_llama()


def write(tmp_path, model, name="m.gguf", **kwargs):
    return gguf_writer.write(tmp_path / name, model, **kwargs)


def tensor(model, name):
    return model.state_dict()[name].numpy()


def test_the_q_and_k_biases_are_put_back_in_transformers_order(llama, tmp_path):
    loaded = load_language_model(write(tmp_path, llama), dtype=np.float64)
    attention = loaded.params["layers"][1]["self_attention"]
    for p in "qkvo":
        np.testing.assert_array_equal(attention[f"b_{p}"],
                                      tensor(llama, f"model.layers.1.self_attn.{p}_proj.bias"))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_weight_that_is_not_finite_is_refused_naming_file_and_tensor(llama, tmp_path, bad):
    w = tensor(llama, "model.layers.1.mlp.up_proj.weight").astype(np.float32)
    w[3, 5] = bad
    path = write(tmp_path, llama, extra={"blk.1.ffn_up.weight": w})
    with pytest.raises(ValueError, match=r"m.gguf: tensor 'blk.1.ffn_up.weight' holds 1 NaN or "
                                         r"infinite values \(the first at index \(3, 5\)\)"):
        load_language_model(path)


def test_a_missing_rope_base_uses_the_gguf_default_and_says_so(tmp_path, capsys,
                                                                float64_islands):
    llama = make_llama()  # its RoPE tables in float64 (float64_islands)
    path = write(tmp_path, llama, skip=("rope.freq_base",))
    loaded = load_language_model(path, dtype=np.float64)
    assert "m.gguf has no llama.rope.freq_base: using 10000.0 (the GGUF default" in \
        capsys.readouterr().err
    ids = np.random.default_rng(0).integers(3, V, size=(1, 12))
    np.testing.assert_allclose(ma.causal_lm(loaded.params, ids, **loaded.config),
                               _hf_logits(llama, ids), rtol=0, atol=1e-10)


def test_a_missing_head_count_kv_is_named_beside_the_shape_it_contradicts(llama, tmp_path,
                                                                          capsys):
    path = write(tmp_path, llama, skip=("attention.head_count_kv",))  # 2 of 4 heads in the file
    with pytest.raises(ValueError, match=r"m.gguf: tensor 'blk.0.attn_k.weight' has shape "
                                         r"\(16, 32\), expected \(32, 32\) from the metadata of "
                                         r"llama: .*num_key_value_heads=4"):
        load_language_model(path)
    assert "no llama.attention.head_count_kv: using 4 (the GGUF default" in \
        capsys.readouterr().err


@pytest.mark.parametrize("key", ["block_count", "embedding_length", "feed_forward_length",
                                 "attention.head_count", "attention.layer_norm_rms_epsilon",
                                 "context_length"])
def test_a_missing_required_key_is_refused_by_name(llama, tmp_path, key):
    with pytest.raises(ValueError, match=f"m.gguf: metadata has no llama.{key} \\(required\\)"):
        load_language_model(write(tmp_path, llama, skip=(key,)))


@pytest.fixture
def no_dequantizing(monkeypatch):
    def refuse(*args):
        raise AssertionError("a weight was dequantized before the file was checked")
    monkeypatch.setattr(gguf.quants, "dequantize", refuse)


def test_a_wrongly_shaped_tensor_is_refused_before_any_weight_is_read(llama, tmp_path,
                                                                      no_dequantizing):
    path = write(tmp_path, llama, extra={"blk.1.ffn_down.weight": np.ones((32, 40), "f4")})
    with pytest.raises(ValueError, match=r"m.gguf: tensor 'blk.1.ffn_down.weight' has shape "
                                         r"\(32, 40\), expected \(32, 48\) from the metadata"):
        load_language_model(path)


def test_a_missing_tensor_of_the_last_layer_is_refused_before_any_weight_is_read(
        llama, tmp_path, no_dequantizing):
    path = tmp_path / "cut.gguf"
    reader_path = write(tmp_path, llama)
    reader = gguf.GGUFReader(reader_path)
    writer = gguf.GGUFWriter(str(path), "llama")
    for field in reader.fields.values():  # the metadata as it was
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(field.name, field.contents())
        else:
            writer.add_key_value(field.name, field.contents(), kind)
    for t in reader.tensors:
        if t.name != "blk.1.attn_v.weight":
            writer.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match=r"cut.gguf: has no tensor 'blk.1.attn_v.weight' "
                                         r"\(transformers: model.layers.1.self_attn.v_proj"):
        load_language_model(path)


@pytest.mark.parametrize("eos", [V, 10 ** 6])
def test_a_special_token_outside_the_vocabulary_is_refused(llama, tmp_path, eos):
    with pytest.raises(ValueError, match=f"m.gguf: tokenizer.ggml.eos_token_id is {eos}, outside "
                                         f"the vocabulary of {V} tokens"):
        load_language_model(write(tmp_path, llama, eos=eos))


def test_an_unknown_pre_tokenizer_is_refused_by_name(llama, tmp_path):
    with pytest.raises(ValueError, match="m.gguf: tokenizer.ggml.pre 'tekken' is not supported"):
        load_language_model(write(tmp_path, llama, pre="tekken"))


def test_no_declared_pre_tokenizer_splits_as_gpt2_and_says_so(llama, tmp_path, capsys):
    load_language_model(write(tmp_path, llama))
    assert "declares no pre-tokenizer (tokenizer.ggml.pre): splitting as GPT-2 does" in \
        capsys.readouterr().err


# -- pre-tokenizers -------------------------------------------------------------------------

TEXTS = ["def f(x):\n    return x**2  # 12345 squares\n\n\n\tdone",
         "The year 2024 had 366 days; 1,000,000 people paid $3.50.",
         "naïve café — 東京 😀 Ünïcödé's DON'T I'm you'RE they'LL",
         "   leading and trailing   \n\n  \r\n x", "x=1+2*3/4-5;//ok\n\t\t}", "a\u00a0b\u2003c"]
# llama.cpp's own regular expressions (src/llama-vocab.cpp, llm_tokenizer_bpe), applied one
# after the other, each to the pieces of the one before
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA_CPP = {
    "gpt-2": [GPT2],
    "smollm": [r"\p{N}", GPT2],
    "llama-bpe": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?"
                  r"\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "qwen2": [r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?"
              r"\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
}
LLAMA_CPP["dbrx"] = LLAMA_CPP["llama-bpe"]


def llama_cpp_split(text, regexes):
    regex = pytest.importorskip("regex")
    pieces = [text]
    for pattern in regexes:
        out = []
        for piece in pieces:
            start = 0
            for match in regex.finditer(pattern, piece):
                if match.start() > start:  # what the expression skips is a piece too
                    out.append(piece[start:match.start()])
                out.append(match.group())
                start = match.end()
            if start < len(piece):
                out.append(piece[start:])
        pieces = out
    return pieces


@pytest.fixture(scope="module")
def byte_spelling():
    from minattn.models.chat_model import _bytes_to_unicode

    spelling = _bytes_to_unicode()
    return lambda piece: "".join(spelling[b] for b in piece.encode())


@pytest.mark.parametrize("pre", LLAMA_CPP)
def test_the_declared_pre_tokenizer_splits_as_llama_cpp(pre, byte_spelling):
    from minattn.models.chat_model import pre_tokenizer

    ours = pre_tokenizer(pre, "f.gguf")
    for text in TEXTS:
        assert [p for p, _ in ours.pre_tokenize_str(text)] == \
            [byte_spelling(p) for p in llama_cpp_split(text, LLAMA_CPP[pre])], text


# the pre_tokenizer of each family's own tokenizer.json, as the hub's files declare it
DECLARED = {
    "gpt-2": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
              "use_regex": True},
    "smollm": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": True}]},
    **{pre: {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
         "use_regex": False}]} for pre, regex in (
        ("llama-bpe", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?"
                      r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
        ("qwen2", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?"
                  r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
        ("gpt-4o", r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
                   r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}"
                   r"\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?"
                   r"[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"))},
}


@pytest.mark.parametrize("pre", DECLARED)
def test_the_gguf_tokenizer_encodes_as_the_declared_tokenizer_json(pre, llama, tmp_path):
    from tokenizers import Tokenizer

    loaded = load_language_model(write(tmp_path, llama, pre=pre))
    declared = json.loads(loaded.tokenizer.backend.to_str())
    declared["pre_tokenizer"] = DECLARED[pre]
    theirs = Tokenizer.from_str(json.dumps(declared))
    for text in TEXTS + ["the the<|im_end|>the 42"]:
        assert loaded.tokenizer.encode(text) == theirs.encode(text).ids, text
        assert loaded.tokenizer.backend.pre_tokenizer.pre_tokenize_str(text) == \
            theirs.pre_tokenizer.pre_tokenize_str(text), text


# -- safetensors ----------------------------------------------------------------------------

def test_a_truncated_safetensors_file_is_called_truncated(llama, tmp_path):
    from .test_checkpoints import save

    folder = save(llama, tmp_path / "m")
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[:len(data) - 100])
    with pytest.raises(ValueError, match=r"model.safetensors cannot be read as safetensors "
                                         r"\(the file is truncated\)"):
        load_language_model(folder)


def test_a_non_finite_safetensors_weight_is_refused_naming_file_and_tensor(llama, tmp_path):
    from safetensors.numpy import load_file, save_file

    from .test_checkpoints import save

    folder = save(llama, tmp_path / "m")
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.norm.weight"][2] = np.nan
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"model.safetensors: tensor 'model.norm.weight' holds 1 "
                                         r"NaN or infinite values \(the first at index \(2,\)\)"):
        load_language_model(folder)


def test_a_mistral_written_as_llama_is_read_without_a_window_and_says_so(llama, tmp_path,
                                                                         capsys):
    path = write(tmp_path, llama, general={"general.basename": "Mistral-7B-v0.1"})
    load_language_model(path)
    assert "is a Mistral (general.basename) written as llama, which records no sliding window" \
        in capsys.readouterr().err


def test_more_tokens_than_embedding_rows_is_refused(llama, tmp_path):
    path = write(tmp_path, llama, tokens=gguf_writer.TOKENS + ["Ġx"])
    with pytest.raises(ValueError, match=f"m.gguf: tokenizer.ggml.tokens has {V + 1} tokens, "
                                         f"token_embd.weight only {V} rows"):
        load_language_model(path)


def test_a_folder_whose_eos_token_id_is_outside_the_vocabulary_is_refused(llama, tmp_path):
    from .test_checkpoints import save

    folder = save(llama, tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "eos_token_id": [2, 5000]}))
    with pytest.raises(ValueError, match=r"config.json: eos_token_id \[2, 5000\] is outside the "
                                         r"vocabulary of \d+ tokens \(tokenizer.json\)"):
        load_language_model(folder)


# A key config.json leaves out is read as transformers' config class reads it
# (tests/test_refusals_checkpoints.py): SmolLM3's no_rope_layers from no_rope_layer_interval,
# its use_sliding_window False; where that default contradicts the keys given, refused by name.
@pytest.mark.parametrize("config, key", [
    ({"model_type": "smollm3", "rope_theta": 1e4, "layer_types": ["sliding_attention"] * 2,
      "sliding_window": 4}, "use_sliding_window is False")])
def test_a_config_json_without_a_key_its_family_needs_is_refused_naming_it(tmp_path, config,
                                                                           key):
    (tmp_path / "config.json").write_text(json.dumps(
        {"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, **config}))
    with pytest.raises(ValueError, match=f"config.json: .*{key}"):
        load_language_model(tmp_path)


# -- SentencePiece (Llama 2, Mistral 7B, TinyLlama GGUFs) --------------------------------------

PIECES = ["ab", "▁", "▁▁", "▁▁▁▁", *"abcdefghijklmnopqrstuvwxyzT.,'", "▁t", "he", "▁the", "in", "▁in",
          "▁a", "an", "▁an", "er", "▁w", "or", "ld", "▁wor", "▁world", "▁T", "▁The", "ing",
          "▁th", "é", "▁é", "bc"]
SP_TOKENS = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + PIECES
SP_TYPES = [2, 3, 3] + [6] * 256 + [1] * len(PIECES)  # unknown, control, byte, normal
# scores: the longer, later pieces merge first in some places and last in others; "ab" is
# listed first but scored last, "bc" listed last but scored first (Gemma's merges follow the
# order, the others' the scores: "abc" is "ab c" for one, "a bc" for the others)
SP_SCORES = [0.0] * 259 + [{"ab": -20.0, "bc": 0.0}.get(p, -float(i % 7) - 0.5 * len(p))
                           for i, p in enumerate(PIECES)]
SP_TEXTS = ["the world", " The thing in an", "  two  spaces and\nnewline", "café é ñ 東",
            "three   spaces", "abc cab",
            "Theé.,'  the", "", "a</s>b<s>"]


SP_ARCHITECTURES = {"llama": "llama", "gemma2": "gemma2", "gemma3": "gemma3", "phi3": "phi3"}


@pytest.mark.parametrize("family", SP_ARCHITECTURES)
def test_a_sentencepiece_gguf_tokenizes_as_transformers_reads_it(family, tmp_path):
    tokens = SP_TOKENS + ["   "]  # Gemma's files write a token of spaces with spaces
    model = _build(family, torch.float64, vocab_size=len(tokens), pad_token_id=0,
                   attn_implementation="eager")
    path = gguf_writer.write(tmp_path / "sp.gguf", model, sentencepiece={
        "tokens": tokens, "scores": SP_SCORES + [-9.0], "types": SP_TYPES + [1]})
    ours = load_language_model(path).tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
    for text in SP_TEXTS:
        ids = ours.encode(text)
        assert ids == theirs(text)["input_ids"], text
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=False), text


def test_sentencepiece_merges_follow_the_scores():
    from minattn.models.chat_model import sentencepiece_merges

    vocab = {t: i for i, t in enumerate(["a", "b", "c", "ab", "bc", "abc"])}
    scores = {"a": 0.0, "b": 0.0, "c": 0.0, "ab": -3.0, "bc": -1.0, "abc": -2.0}
    # bc (-1) first; abc (-2) next, its longer left part (ab + c) before a + bc; ab (-3) last
    assert sentencepiece_merges(vocab, scores) == [("b", "c"), ("ab", "c"), ("a", "bc"),
                                                   ("a", "b")]


def test_a_sentencepiece_gguf_of_another_architecture_is_refused(tmp_path):  # its form unknown
    model = _build("qwen2", torch.float64, vocab_size=len(SP_TOKENS))
    path = gguf_writer.write(tmp_path / "q.gguf", model, sentencepiece={
        "tokens": SP_TOKENS, "scores": SP_SCORES, "types": SP_TYPES})
    with pytest.raises(ValueError, match="q.gguf: tokenizer.ggml.model 'llama' is not supported "
                                         "for qwen2"):
        load_language_model(path)


@pytest.mark.parametrize("n_kv", [0, 3, True])
def test_a_head_count_kv_that_cannot_group_the_heads_is_refused_by_name(n_kv):
    # head_count 4: a kv head count must be a positive int dividing it (0 divided by zero)
    from minattn.models.checkpoints.gguf_metadata import Metadata
    from minattn.models.checkpoints.llama import gguf_config

    fields = {"llama.attention.head_count": 4, "llama.attention.head_count_kv": n_kv,
              "llama.embedding_length": 32}
    meta = Metadata(fields, "llama", "m.gguf", {"token_embd.weight": (10, 32)}, None)
    with pytest.raises(ValueError, match=r"m.gguf: llama.attention.head_count_kv must be a "
                                         r"positive int dividing head_count=4"):
        gguf_config(meta)
