"""Checkpoints read nothing silently wrong: a Phi-3 GGUF whose LongRoPE factors are incomplete
is refused naming the missing tensor and the file; a config.json without a key is read with the
default transformers' config class gives that key (the reference: transformers' own reading of
the same config.json), never another."""
import numpy as np
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
