"""The first reading's data-flow figures (issue 56) are made by code from the running example:
docs/data_flow_figures.py draws them from the arrays walkthrough.md computes, and redraws the
committed PNGs."""
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("data_flow_figures",
                                                  ROOT / "docs" / "data_flow_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_running_example_drawn_is_the_walkthroughs():
    text = (ROOT / "walkthrough.md").read_text(encoding="utf-8")
    section = text[text.index("## 3. "):text.index("## 4. ")]
    shown = {name: eval(value, {"np": np})  # the walkthrough's own lines, as it runs them
             for name, value in re.findall(r"^>>> (X|W_[qkv]) = (np\.array\(.*?\))\s*(?:#.*)?$",
                                           section, re.M)}
    script = _script()
    assert set(shown) == {"X", "W_q", "W_k", "W_v"}
    for name, drawn in (("X", script.X), ("W_q", script.W_Q), ("W_k", script.W_K),
                        ("W_v", script.W_V)):
        np.testing.assert_array_equal(drawn, shown[name])
    # the weights drawn are attention's, computed by a loop here: row i is softmax of q_i . k_j
    a = script.running_example()
    for i in range(5):
        scores = np.array([a["Q"][i] @ a["K"][j] / np.sqrt(2) for j in range(5)])
        np.testing.assert_allclose(a["weights"][i], np.exp(scores) / np.exp(scores).sum())


def test_the_script_redraws_the_committed_figures(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    script = _script()
    for name, draw in script.DRAWINGS.items():
        draw(str(tmp_path / name))
        new, committed = imread(tmp_path / name), imread(ROOT / "docs" / "figures" / name)
        assert new.shape == committed.shape, f"{name}: {new.shape} against {committed.shape}"
        # the same drawing; a font or anti-aliasing of another matplotlib moves a few pixels
        assert np.mean(np.abs(new - committed)) < 0.02, f"{name} is not what the script draws"
