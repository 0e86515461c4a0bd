"""walkthrough.ipynb is the walkthrough's first reading as a notebook, made by
docs/make_notebook.py from walkthrough.md: the committed file must be what the script makes (so
it is never edited by hand, nor left behind when the walkthrough changes), and it must run."""
import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "walkthrough.ipynb"

pytest.importorskip("jupytext")


def _generator():
    spec = importlib.util.spec_from_file_location("make_notebook", ROOT / "docs" / "make_notebook.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_notebook_is_what_the_generator_makes():
    if NOTEBOOK.read_text(encoding="utf-8") != _generator().make_notebook():  # no 100 kB diff
        pytest.fail("walkthrough.ipynb is out of date: run python docs/make_notebook.py")


def test_every_skip_marker_stands_right_before_its_example():
    # sybil skips the next example wherever it is; the notebook shows as text only the block
    # right after the marker: text between them would make the notebook run a skipped example
    import re

    text = (ROOT / "walkthrough.md").read_text(encoding="utf-8")
    markers = re.findall(r"<!-- skip: next[^\n]*-->\n(.{0,9})", text)
    assert markers and all(m == "```python" for m in markers), markers


def test_the_notebook_holds_the_first_reading_and_runs_its_examples_as_code():
    import json

    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(cell["source"]) for cell in cells)
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    assert "## 14. SmolLM2: load, ask, look" in text
    assert "# Second reading" not in text and "## 15." not in text
    assert not any(">>>" in c or c.startswith("%%") for c in code)  # prompts gone, no shell
    assert any("lm_loss" in c and "adamw_update" in c for c in code)  # the training loop runs
    # each section's answers, folded right after its questions, in one markdown cell each
    markdown = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert sum(m.count("<details><summary>Answers to") for m in markdown) == 14
    assert all(m.count("<details>") == m.count("</details>") for m in markdown)  # none split


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jupyter_client / zmq on new Pythons
def test_the_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.reads(NOTEBOOK.read_text(encoding="utf-8"), as_version=4)
    # the kernel imports this checkout's minattn, as the tests do
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(ROOT)}})
    # Section 14's cells load SmolLM2 (half a minute on two busy cores): the suite runs the same
    # examples in walkthrough.md (sybil), so here the notebook runs up to section 14.
    smollm2 = next(i for i, cell in enumerate(notebook.cells)
                   if cell.cell_type == "markdown" and "## 14. SmolLM2" in cell.source)
    assert any(cell.cell_type == "code" and "load_language_model()" in cell.source
               for cell in notebook.cells[smollm2:]), "section 14's examples are not code cells"
    with client.setup_kernel(env=env):
        for index, cell in enumerate(notebook.cells[:smollm2]):
            if cell.cell_type == "code":
                client.execute_cell(cell, index)  # raises CellExecutionError on any error
    outputs = [cell.outputs for cell in notebook.cells[:smollm2] if cell.cell_type == "code"]
    assert all(output.get("output_type") != "error" for cell in outputs for output in cell)
    # the training cell of section 12, near the end of what ran, must have printed its results
    printed = [i for i, output in enumerate(outputs) if output]
    assert printed and printed[-1] > len(outputs) * 3 // 4, "the later cells printed nothing"


def test_the_walkthrough_finds_its_files_in_the_clone_not_through_a_modules_path():
    # A path built from ma.__file__ points into site-packages after a non-editable install, where
    # docs/ is not (issue 56): the text reads docs/ relative to the clone it is run in.
    code = [line for line in (ROOT / "walkthrough.md").read_text(encoding="utf-8").splitlines()
            if line.startswith(">>>") or line.startswith("...")]
    assert not [line for line in code if "__file__" in line]
