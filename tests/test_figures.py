import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_figure_command_writes_the_walkthroughs_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "make_figures.py"),
                             "--out", str(tmp_path), "--steps", "5"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in ("worked_example.png", "masks.png", "count_heads.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_walkthrough_figures_are_committed():
    import re

    for doc in ("walkthrough.md", "README.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        shown = re.findall(r"!\[[^\]]*\]\((docs/figures/[^)]+)\)", text)  # every picture shown
        assert doc == "README.md" or {"docs/figures/masks.png", "docs/figures/count_heads.png"} <= set(shown)
        for name in shown:
            assert (ROOT / name).is_file(), f"{doc} shows {name}, which is not committed"


def test_the_induction_sections_figures_and_numbers_are_committed():
    import json

    text = (ROOT / "walkthrough.md").read_text(encoding="utf-8")
    for name in ("induction_heads.png", "induction_heads-curve.png"):
        assert f"docs/figures/{name}" in text
        assert (ROOT / "docs" / "figures" / name).read_bytes()[:4] == b"\x89PNG"
    for name in ("induction.json", "induction_one_layer.json"):
        run = json.loads((ROOT / "docs" / "figures" / name).read_text(encoding="utf-8"))
        assert {"induction_scores", "previous_token_scores", "loss_first_half",
                "loss_second_half", "steps", "seconds"} <= set(run)
