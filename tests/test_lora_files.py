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
    lora = {"layers": [{t: {"A": p["A"], "B": rng.normal(size=p["B"].shape).astype(p["B"].dtype)}
                        for t, p in layer.items()} for layer in lora["layers"]]}
    L.save_adapter(tmp_path / "adapter", lora, alpha=4.0)
    return tmp_path / "adapter", lora


def test_a_model_loaded_with_an_adapter_computes_the_adapted_model(tiny, tmp_path):
    base = chat_model.load_language_model(tiny, dtype=np.float64)
    directory, lora = _adapter(tmp_path, base.params)
    model = chat_model.load_language_model(tiny, dtype=np.float64, adapter=directory)
    ids = np.random.default_rng(2).integers(0, len(TOKENS), size=(1, 9))
    adapted = ma.causal_lm(base.params, ids, lora=lora, lora_alpha=4.0, **base.config)
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
    with pytest.raises(ValueError, match=r"adapter: lora\['layers'\]\[0\]\['down'\]\['A'\] "
                                         r"has shape \(16, 2\), expected \(64, r\)"):
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
    merged = L.merge(model.params, lora, alpha=4.0)
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
