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


def test_the_notebook_holds_the_first_reading_and_runs_its_examples_as_code():
    import json

    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(cell["source"]) for cell in cells)
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    assert "## 14. SmolLM2: load, ask, look" in text
    assert "# Second reading" not in text and "## 15." not in text
    assert not any(">>>" in c or c.startswith("%%") for c in code)  # prompts gone, no shell
    assert any("lm_loss" in c and "adam_update" in c for c in code)  # the training loop runs
    # each section's answers, folded right after its questions, in one markdown cell each
    folded = [c for c in cells if c["cell_type"] == "markdown"
              and "<details><summary>Answers to" in "".join(c["source"])]
    assert len(folded) == 14 and all("</details>" in "".join(c["source"]) for c in folded)


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
    with client.setup_kernel(env=env):
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, index)  # raises CellExecutionError on any error
    outputs = [cell.outputs for cell in notebook.cells if cell.cell_type == "code"]
    assert all(output.get("output_type") != "error" for cell in outputs for output in cell)
    # the last cells hold SmolLM2's examples, shown as text where the model is optional: the
    # training cell of section 12, near the end, must have printed its results
    printed = [i for i, output in enumerate(outputs) if output]
    assert printed and printed[-1] > len(outputs) * 3 // 4, "the later cells printed nothing"
