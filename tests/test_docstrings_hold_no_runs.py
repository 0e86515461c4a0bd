"""Docstrings document, they do not log (STYLE.md, "Numbers live in docs/benchmarks.md with their
run"): no docstring or comment under minattn/ holds a date, a load average or an issue number.
A measurement goes to docs/benchmarks.md with its run (machine, load, date), and the docstring
names the benchmark in one line; the history of how the code got there is in git."""
import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "minattn"

# What a log holds and a docstring does not: a date (2026-11-25), a load average, an issue number.
LOG = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\bload av(?:erage|g)\b|\bissues? \d+", re.IGNORECASE)

# Pending: files that other work of issue 66 is rewriting now; their runs move to
# docs/benchmarks.md with that work, and each leaves this list then.
PENDING = set()


def documentation(source):
    """(line, text) of every docstring (module, class, function) and comment in source."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if ast.get_docstring(node, clean=False) is not None:
                yield node.body[0].lineno, ast.get_docstring(node, clean=False)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def logs_in(path):
    return [f"{path.relative_to(PACKAGE)}:{line + text.count(chr(10), 0, match.start())}: "
            f"{match.group()!r}"
            for line, text in documentation(path.read_text(encoding="utf-8"))
            for match in LOG.finditer(text)]


def test_no_docstring_or_comment_under_minattn_holds_a_date_a_load_average_or_an_issue():
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).as_posix()
             not in PENDING]
    found = [log for path in files for log in logs_in(path)]
    assert found == [], "docstrings and comments that hold a run (move it to docs/benchmarks.md " \
        "and name the section there in one line):\n" + "\n".join(found)


def test_the_rule_sees_dates_load_averages_and_issues_in_docstrings_and_comments(tmp_path):
    path = tmp_path / "module.py"
    path.write_text('"""Measured on 2026-11-25."""\n\n\ndef f():\n    """Load average 9."""\n'
                    '    return 1  # as issue 43 found\n\n\nNOT_A_DOCSTRING = "2026-11-25"\n')
    found = [text for _, text in documentation(path.read_text())
             for _ in LOG.finditer(text)]
    assert found == ['Measured on 2026-11-25.', 'Load average 9.', '# as issue 43 found']


def test_the_pending_files_exist():
    # a pending file that moved or was split: the list names it where it is now
    assert all((PACKAGE / name).is_file() for name in PENDING)


def test_each_run_a_docstring_names_is_in_docs_benchmarks():
    # `docs/benchmarks.md, "Section"`: a heading that starts so, or a paragraph led in bold
    page = (PACKAGE.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    headings = [line.lstrip("#").strip() for line in page.splitlines() if line.startswith("#")]
    named = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = re.sub(r"\n\s*#?\s*", " ", path.read_text(encoding="utf-8"))  # lines joined
        for quotes in re.findall(r'docs/benchmarks\.md[,:;]? *((?:"[^"]+"(?:, (?:and )?)?)+)',
                                 text):
            named += [(path.name, name) for name in re.findall(r'"([^"]+)"', quotes)]
    assert len(named) >= 10  # the rule below reads the docstrings it should
    missing = [(file, name) for file, name in named
               if not any(h.startswith(name) for h in headings) and f"**{name}" not in page]
    assert missing == []
