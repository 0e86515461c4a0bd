"""minattn/models/checkpoints/: the torch-free, name-based converters give exactly the (params,
config) that interop.from_hf gives for the same transformers model, for every configuration of
tests/test_hf_families.py whose family they read: from the model's own tensors by name and the
config.json that save_pretrained writes, and through load_language_model from the saved folder
(float32, float16 and bfloat16 safetensors, one file or shards)."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the reference is from_hf on a torch model")
transformers = pytest.importorskip("transformers", reason="the reference needs transformers")
for _module in ("tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

from minattn.interop import from_hf  # noqa: E402
from minattn.models import checkpoints  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

from .test_hf_families import FAMILIES, _build  # noqa: E402
from .test_hf_parity import V  # noqa: E402

READ = {name: spec for name, spec in FAMILIES.items()
        if {"gemma3": "gemma3_text"}.get(spec[0], spec[0]) in checkpoints.BY_MODEL_TYPE}


def assert_same_tree(ours, theirs, where="params"):
    assert type(ours) is type(theirs) or (isinstance(ours, np.ndarray) and
                                           isinstance(theirs, np.ndarray)), where
    if isinstance(theirs, dict):
        assert sorted(ours) == sorted(theirs), where
        for key in theirs:
            assert_same_tree(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_tree(a, b, f"{where}[{i}]")
    else:
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        np.testing.assert_array_equal(ours, theirs, err_msg=where)


def build(name, dtype=torch.float64):
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # Gemma's embed_scale buffer: sqrt(D) exactly
    try:
        return _build(READ[name][0], dtype, **READ[name][1])
    finally:
        torch.set_default_dtype(default)


def save(model, folder, **kwargs):
    """model.save_pretrained(folder) with a byte-level BPE tokenizer.json of V tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    model.save_pretrained(folder, **kwargs)
    vocab = {chr(ord("!") + i): i for i in range(V)}
    backend = Tokenizer(models.BPE(vocab, []))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.parametrize("name", READ)
def test_by_name_equals_from_hf(name, tmp_path):
    model = build(name)
    params, config = from_hf(model)
    hf = json.loads((save(model, tmp_path) / "config.json").read_text())
    family = checkpoints.BY_MODEL_TYPE[hf["model_type"]]
    tensors = {k: v.numpy() for k, v in model.state_dict().items()}
    assert family.config(hf) == config
    assert_same_tree(family.params(tensors.get, hf), params)


@pytest.mark.parametrize("name", READ)
def test_a_saved_folder_loads_as_from_hf_converts_it(name, tmp_path):
    model = build(name)
    params, config = from_hf(model)
    loaded = load_language_model(save(model, tmp_path), dtype=np.float64)
    assert loaded.config == config
    assert_same_tree(loaded.params, params)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shards", [False, True])
def test_half_precision_and_sharded_safetensors_load_exactly(dtype, shards, tmp_path):
    model = build("qwen3_head_dim", dtype=torch.float64).to(dtype)
    save(model, tmp_path, **({"max_shard_size": "8KB"} if shards else {}))
    assert (tmp_path / "model.safetensors.index.json").is_file() == shards
    params, config = from_hf(model.to(torch.float64))  # every half value is a float64 exactly
    loaded = load_language_model(tmp_path, dtype=np.float64)
    assert loaded.config == config
    assert_same_tree(loaded.params, params)


def test_bfloat16_is_widened_exactly():
    from minattn.models.chat_model import _bfloat16
    from safetensors.torch import save_file

    import tempfile
    from pathlib import Path

    values = torch.tensor([[1.0, -2.5, 3.0e38, 1.0e-38], [0.0, -0.0, 65504.0, 1 / 3]])
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "w.safetensors"
        save_file({"a": torch.ones(3), "w": values.bfloat16()}, str(file))
        np.testing.assert_array_equal(_bfloat16(file, "w"), values.bfloat16().float().numpy())
