"""A LoRA adapter on a model read from its file: load_language_model(..., adapter=DIR) and
`python -m minattn chat --adapter DIR`, on a small Llama GGUF written here (its Q and K rows in
llama.cpp's order: the adapter, in transformers' order as PEFT writes it, meets them put back)."""
import numpy as np
import pytest

for _module in ("gguf", "tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn import cli, lora as L  # noqa: E402
from minattn.engine.fused_products import side_by_side  # noqa: E402
from minattn.models import chat_model  # noqa: E402

from .test_language_model_files import TOKENS, llama_tensors, write_gguf  # noqa: E402


@pytest.fixture
def tiny(tmp_path):
    return write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))


def _adapter(tmp_path, params, targets=("q", "k", "v", "down")):
    lora = L.init_lora(np.random.default_rng(0), params, targets=targets, rank=2)
    rng = np.random.default_rng(1)
    lora = {"alpha": 4.0,
            "layers": [{t: {"A": p["A"], "B": rng.normal(size=p["B"].shape).astype(p["B"].dtype)}
                        for t, p in layer.items()} for layer in lora["layers"]]}
    L.save_adapter(tmp_path / "adapter", lora)
    return tmp_path / "adapter", lora


def test_a_model_loaded_with_an_adapter_computes_the_adapted_model(tiny, tmp_path):
    base = chat_model.load_language_model(tiny, dtype=np.float64)
    directory, lora = _adapter(tmp_path, base.params)
    model = chat_model.load_language_model(tiny, dtype=np.float64, adapter=directory)
    ids = np.random.default_rng(2).integers(0, len(TOKENS), size=(1, 9))
    adapted = ma.causal_lm(base.params, ids, lora=lora, **base.config)
    assert np.abs(adapted - ma.causal_lm(base.params, ids, **base.config)).max() > 1e-3
    np.testing.assert_allclose(ma.causal_lm(model.params, ids, **model.config), adapted,
                               rtol=0, atol=1e-10)
    attention = model.params["layers"][0]["self_attention"]
    # laid out as the loader lays a model out: q, k, v side by side, each in Fortran order
    assert side_by_side([attention["w_q"], attention["w_k"], attention["w_v"]]) is not None


def test_an_adapter_of_another_model_is_refused_naming_it(tiny, tmp_path):
    other, _ = ma.init_causal_lm(np.random.default_rng(0), 10, 2, 8, 2, 16, position="rope",
                                 norm="rms_norm", activation="swiglu", bias=False)
    directory, _ = _adapter(tmp_path, other)
    with pytest.raises(ValueError, match=r"adapter_model.safetensors: tensor 'base_model\.model"
                                         r"\.model\.layers\.0\.mlp\.down_proj\.lora_A\.weight' "
                                         r"has shape \[2, 16\], expected \[2 x 64\]"):
        chat_model.load_language_model(tiny, adapter=directory)


@pytest.fixture
def run(tiny, monkeypatch, capsys):
    model = chat_model.load_language_model(tiny)
    monkeypatch.setattr(chat_model, "load_language_model", lambda path=None: model)

    def run(*argv):
        code = cli.main(["chat", "--model", str(tiny), *argv])
        out, err = capsys.readouterr()
        return code, out, err
    return run, model


def test_chat_with_an_adapter_replies_as_the_adapted_model(run, tmp_path):
    run, model = run
    directory, lora = _adapter(tmp_path, model.params)
    code, out, err = run("--adapter", str(directory), "--prompt", "the", "--max-new-tokens", "6")
    assert code == 0, err
    ids = np.array([model.tokenizer.encode(model.chat_prompt([{"role": "user",
                                                               "content": "the"}]))])
    merged = L.merge(model.params, lora)
    new = ma.generate(merged, ids, 6, eos_token_id=model.eos_token_id, **model.config)
    new = new[0, ids.shape[1]:]
    assert out == model.tokenizer.decode(new[new != model.eos_token_id]) + "\n"


def test_chat_with_a_missing_adapter_says_so_in_one_line(run, tmp_path):
    run, _ = run
    code, out, err = run("--adapter", str(tmp_path / "none"), "--prompt", "the",
                         "--max-new-tokens", "4")
    assert code == 2 and out == ""
    message = err.splitlines()[-1]
    assert "none/adapter_config.json' does not exist" in message and "Traceback" not in err


def _loads_nothing(monkeypatch):
    def load(*args, **kwargs):
        raise AssertionError("the model was loaded before the adapter was refused")
    monkeypatch.setattr(chat_model, "load_language_model", load)


@pytest.fixture
def no_load(monkeypatch):
    """The checks made before the load: a load is a failure of the test."""
    _loads_nothing(monkeypatch)


def _other_model():
    return ma.init_causal_lm(np.random.default_rng(0), 10, 2, 8, 2, 16, position="rope",
                             norm="rms_norm", activation="swiglu", bias=False)[0]


def _chat(capsys, model, adapter):
    code = cli.main(["chat", "--model", str(model), "--adapter", str(adapter), "--prompt", "the",
                     "--max-new-tokens", "4"])
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and "loading" not in err, err
    return code, err.splitlines()[-1]


def test_chat_refuses_an_adapter_of_other_shapes_from_the_headers_naming_the_tensor(
        tiny, tmp_path, no_load, capsys):
    directory, _ = _adapter(tmp_path, _other_model())
    code, line = _chat(capsys, tiny, directory)
    assert code == 2 and line.startswith("error: ")
    assert "adapter/adapter_model.safetensors: tensor 'base_model.model.model.layers.0.mlp." \
           "down_proj.lora_A.weight' has shape [2, 16], expected [2 x 64]" in line, line


def test_chat_refuses_a_missing_adapter_folder_before_the_load(tiny, tmp_path, no_load, capsys):
    code, line = _chat(capsys, tiny, tmp_path / "none")
    assert code == 2 and "none/adapter_config.json' does not exist" in line


def test_chat_refuses_an_adapter_whose_rank_is_not_its_configs_before_the_load(
        tiny, tmp_path, monkeypatch, capsys):
    import json

    directory, _ = _adapter(tmp_path, chat_model.load_language_model(tiny).params)
    _loads_nothing(monkeypatch)
    config = directory / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "r": 3}))
    code, line = _chat(capsys, tiny, directory)
    assert code == 2 and "expected [3 x " in line and "(r=3 of adapter_config.json" in line, line


def test_an_adapter_of_a_folder_model_of_other_shapes_is_refused_from_the_headers(tmp_path,
                                                                                   no_load):
    from minattn.cli.model_file import check_adapter, model_limits

    from .test_language_model_files import hf_tensors, write_folder

    folder = tmp_path / "model"
    write_folder(folder, hf_tensors(np.random.default_rng(0)))
    directory, _ = _adapter(tmp_path, _other_model())
    with pytest.raises(ValueError, match=r"down_proj\.lora_A\.weight' has shape \[2, 16\], "
                                         r"expected \[2 x 64\]"):
        check_adapter(folder, directory, model_limits(folder))


def test_the_files_check_and_the_load_agree_on_a_fitting_adapter(tiny, tmp_path):
    from minattn.cli.model_file import check_adapter, model_limits

    model = chat_model.load_language_model(tiny)
    directory, _ = _adapter(tmp_path, model.params)
    check_adapter(tiny, directory, model_limits(tiny))  # no refusal
    L.load_adapter(directory, model.params, model.config)


def test_an_adapter_is_checked_by_what_the_file_names_where_the_model_says_nothing(tiny,
                                                                                   tmp_path):
    # a model file whose header tells neither its layers nor its shapes: the adapter's own
    # files are still checked (its config, its tensors' names and ranks), nothing refused
    # for want of the model's numbers
    model = chat_model.load_language_model(tiny)
    directory, _ = _adapter(tmp_path, model.params)
    settings = L.check_adapter_files(directory, None, lambda i, target: None)
    assert settings["r"] == 2
    (directory / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 3, '
                                                   '"lora_alpha": 4, "target_modules": '
                                                   '["q_proj", "k_proj", "v_proj", "down_proj"]}')
    with pytest.raises(ValueError, match=r"down_proj\.lora_A\.weight. has shape \[2, \d+\], "
                                         r"expected \[3 x \?\]"):
        L.check_adapter_files(directory, None, lambda i, target: None)


def _loads_no_weights(monkeypatch):
    # load_language_model's own readers of the weights: reaching one is a failure of the test
    def load(*args, **kwargs):
        raise AssertionError("the weights were loaded before the adapter was refused")
    monkeypatch.setattr(chat_model, "_load_gguf", load)
    monkeypatch.setattr(chat_model, "_load_folder", load)


def _misfits(tmp_path, params):
    # -> {what is wrong: (the adapter folder, the error's pattern)}, each written as PEFT would
    import json

    other, _ = _adapter(tmp_path / "other", _other_model())
    rank, _ = _adapter(tmp_path / "rank", params)
    config = rank / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "r": 3}))
    targets, _ = _adapter(tmp_path / "targets", params)
    config = targets / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()),
                                  "target_modules": ["q_proj", "o_proj"]}))
    return {
        "other shapes": (other, r"adapter_model\.safetensors: tensor 'base_model\.model\.model\."
                                r"layers\.\d+\.[\w.]+\.lora_[AB]\.weight' has shape"),
        "another rank": (rank, r"adapter_model\.safetensors: tensor '.*lora_A\.weight' has shape "
                               r"\[2, \d+\], expected \[3 x \d+\] \(r=3 of adapter_config\.json"),
        "other targets": (targets, r"adapter_model\.safetensors: layer 0 has LoRA weights for .*"
                                   r"target_modules of adapter_config\.json says"),
        "no folder": (tmp_path / "missing", r"adapter_config\.json' does not exist"),
    }


@pytest.mark.parametrize("what", ["other shapes", "another rank", "other targets", "no folder"])
@pytest.mark.parametrize("kind", ["gguf", "folder"])
def test_load_language_model_refuses_a_misfit_adapter_before_the_weights_load(
        tiny, tmp_path, monkeypatch, what, kind):
    from .test_language_model_files import hf_tensors, write_folder

    params = chat_model.load_language_model(tiny).params
    if kind == "folder":
        model = tmp_path / "model"
        write_folder(model, hf_tensors(np.random.default_rng(0)))
        params = chat_model.load_language_model(model).params
    else:
        model = tiny
    directory, pattern = _misfits(tmp_path, params)[what]
    _loads_no_weights(monkeypatch)
    with pytest.raises((ValueError, FileNotFoundError), match=pattern):
        chat_model.load_language_model(model, adapter=directory)


def test_python_and_the_command_line_refuse_with_the_one_check(tiny, tmp_path, monkeypatch):
    from minattn.cli.model_file import check_adapter, model_limits

    directory, pattern = _misfits(tmp_path, chat_model.load_language_model(tiny).params)[
        "other shapes"]
    with pytest.raises(ValueError) as from_python:
        chat_model.load_language_model(tiny, adapter=directory)
    with pytest.raises(ValueError) as from_the_command:
        check_adapter(tiny, directory, model_limits(tiny))
    assert str(from_python.value) == str(from_the_command.value)
