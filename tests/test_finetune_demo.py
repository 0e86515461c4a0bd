"""docs/finetune_demo.py writes two tracked files (docs/data/agreement/RESULTS.md and
docs/figures/finetune_loss.png) only once its run has finished and left its curve: without
matplotlib it is refused before it starts, naming the extra; a run that fails or leaves no curve
writes neither. The run itself (two minutes) is replaced here by a command that does what the
case needs, in a copy of the folders the demo writes to."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "docs" / "finetune_demo.py"


def test_without_matplotlib_the_demo_is_refused_before_it_starts_naming_the_extra():
    hidden = ("import runpy, sys; sys.modules['matplotlib'] = None; "  # `import matplotlib` fails
              f"sys.argv = [{str(DEMO)!r}, '--out', 'runs/never']; "
              f"runpy.run_path({str(DEMO)!r}, run_name='__main__')")
    before = {p: p.read_bytes() for p in (ROOT / "docs/data/agreement/RESULTS.md",
                                          ROOT / "docs/figures/finetune_loss.png")}
    result = subprocess.run([sys.executable, "-c", hidden], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "needs matplotlib" in result.stderr and "pip install '.[plot]'" in result.stderr
    assert result.stdout == "" and not (ROOT / "runs" / "never").exists()
    assert {p: p.read_bytes() for p in before} == before


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """The demo's module, writing under tmp_path, its run replaced by `python -c CODE`."""
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("finetune_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / module.DATA).mkdir(parents=True)
    (tmp_path / "docs" / "figures").mkdir(parents=True)
    monkeypatch.setattr(module, "ROOT", tmp_path)

    def run(code):
        monkeypatch.setattr(module, "COMMAND", [sys.executable, "-c", code])
        return module.main(["--out", "runs/demo"])
    return run, tmp_path / module.DATA / "RESULTS.md", tmp_path / "docs/figures/finetune_loss.png"


SCORES = "print('held out, before: loss 6.0'); print('held out, after:  loss 0.1')"


def test_a_run_that_fails_writes_nothing_tracked(demo, capsys):
    run, results, figure = demo
    assert run(SCORES + "; raise SystemExit(1)") == 1
    assert not results.exists() and not figure.exists()


def test_a_run_that_leaves_no_curve_writes_nothing_tracked(demo, capsys):
    run, results, figure = demo
    assert run(SCORES) == 1
    assert "wrote no" in capsys.readouterr().err
    assert not results.exists() and not figure.exists()


def test_a_finished_run_writes_its_results_and_its_curve(demo, capsys):
    run, results, figure = demo
    curve = "import pathlib, sys; p = pathlib.Path(sys.argv[-1]); p.mkdir(parents=True); " \
            "(p / 'loss.png').write_bytes(b'PNG')"
    assert run(SCORES + "\n" + curve) == 0
    assert figure.read_bytes() == b"PNG"
    text = results.read_text()
    assert "held out, before: loss 6.0" in text and "held out, after:  loss 0.1" in text
