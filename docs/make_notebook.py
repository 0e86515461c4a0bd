"""walkthrough.ipynb, the walkthrough's first reading as a Jupyter notebook, made from
walkthrough.md (never edit the notebook by hand: edit walkthrough.md, then run this):

    python docs/make_notebook.py [--out walkthrough.ipynb]

The first reading is walkthrough.md up to its "# Second reading" heading. Each ```python block
of doctests becomes code cells, one per statement whose output the text prints (the `>>> ` and
`... ` prompts removed, the printed output left for the notebook to compute); the source
excerpts (```py), shell commands (```bash, shown as text: never run) and the prose stay
markdown. The examples the text skips without optional packages (a `<!-- skip: ... -->`
marker: section 14's, which need the chat extra and the model's wheel) are code cells too, to
run once those are installed. The answers folded after each section's questions
(`<details>`) stay folded: their code is shown with what it prints, not run. jupytext turns the
result into a notebook; tests/test_notebook.py checks that the committed notebook is what this
script makes, and runs it.
"""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_READING_ENDS = "\n# Second reading\n"
BLOCK = re.compile(r"(<!-- skip:[^\n]*-->\n)?```python\n(.*?)```\n", re.S)
FOLDED = re.compile(r"^<details>.*?^</details>\n", re.S | re.M)
KERNEL = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
          "language_info": {"name": "python"}}


def statements(doctest):
    """The statements of a doctest block, as [(code, has_output)]: a statement is a `>>> ` line
    with its `... ` continuation lines; has_output when the text prints something after it."""
    out = []
    for line in doctest.splitlines():
        if line.startswith((">>> ", ">>>")) and not line.startswith("... "):
            out.append([line[4:], False])
        elif line.startswith(("... ", "...")) and out and line[:3] == "...":
            out[-1][0] += "\n" + line[4:]
        elif line.strip() and out:
            out[-1][1] = True
    return out


def cells_of(doctest):
    """Code cells (```python blocks, for jupytext) for one doctest block: consecutive statements
    share a cell, and a cell ends after each statement whose output the text shows. A block of
    plain code (no prompts) is one cell as it stands."""
    if not any(line.startswith(">>>") for line in doctest.splitlines()):
        return f"```python\n{doctest}```\n"
    cells, current = [], []
    for code, has_output in statements(doctest):
        current.append(code)
        if has_output:
            cells.append("\n".join(current))
            current = []
    if current:
        cells.append("\n".join(current))
    return "\n".join(f"```python\n{cell}\n```\n" for cell in cells)


def first_reading_markdown(text):
    """walkthrough.md's first reading, its doctests turned into plain code blocks."""
    text = text[:text.index(FIRST_READING_ENDS)]
    intro = ("*This notebook is made from walkthrough.md by `docs/make_notebook.py`: edit that "
             "file, not this one. It holds the first reading; the answers to each section's "
             "questions are folded after them (their code shown, with what it prints, not run); "
             "the second reading and the appendices are in walkthrough.md.*\n\n")
    title_end = text.index("\n") + 1
    text = text[:title_end] + "\n" + intro + text[title_end:].lstrip("\n")

    def convert(match):  # a skipped example (match[1]) too: it runs where its packages are
        return cells_of(match[2])

    # a folded block stays one markdown cell: its code is shown as text (```py), never run
    text = FOLDED.sub(lambda m: m[0].replace("```python\n", "```py\n"), text)
    text = BLOCK.sub(convert, text)
    return text.replace("```bash\n", "```text\n")  # shown, never run (jupytext would run it)


def make_notebook(markdown_path=ROOT / "walkthrough.md"):
    """-> the notebook's JSON text."""
    import jupytext

    notebook = jupytext.reads(first_reading_markdown(markdown_path.read_text(encoding="utf-8")),
                              fmt="md")
    notebook.metadata = dict(KERNEL)
    for cell in notebook.cells:
        cell.metadata = {}
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    for i, cell in enumerate(notebook.cells):
        cell["id"] = f"cell-{i}"  # stable ids: the same walkthrough gives the same file
    return json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "walkthrough.ipynb"))
    args = parser.parse_args(argv)
    Path(args.out).write_text(make_notebook(), encoding="utf-8")
    print(args.out)


if __name__ == "__main__":
    sys.exit(main())
