"""mutmut runs the tests inside its own copy of the project (mutants/), which holds the sources,
tests/, setup.cfg and what `also_copy` names: a test that reads another file of the project
stops the mutation run before its first mutant ("failed to collect stats"). Every file or folder
of the project's top level that a test mutmut runs names must be in also_copy."""
import ast
import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED_ANYWAY = {"tests", "minattn", "setup.cfg"}


def _mutmut():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return config["mutmut"]


def _lines(value):
    return [line.strip() for line in value.splitlines() if line.strip()]


def _named_top_level_entries(path, top_level):
    """The project's top-level entries a test file names in a string (a path's first part)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            first = node.value.split("/", 1)[0]
            if first in top_level:
                names.add(first)
    return names


def test_every_project_file_a_mutated_test_reads_is_copied_for_mutmut():
    mutmut = _mutmut()
    ignored = {arg.split("=", 1)[1] for arg in _lines(mutmut["pytest_add_cli_args"])
               if arg.startswith("--ignore=")}
    copied = set(_lines(mutmut["also_copy"])) | COPIED_ANYWAY
    top_level = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    missing = {}
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if f"tests/{path.name}" not in ignored:
            lacking = _named_top_level_entries(path, top_level) - copied
            if lacking:
                missing[path.name] = sorted(lacking)
    assert missing == {}, "add these to [mutmut] also_copy in setup.cfg"


def test_the_check_sees_a_file_named_by_its_first_path_part(tmp_path):
    test = tmp_path / "test_x.py"
    test.write_text('ROOT / "docs" / "a.py"\nopen("walkthrough.md")\nx = "docs/b.py"\n"other"\n')
    assert _named_top_level_entries(test, {"docs", "walkthrough.md", "README.md"}) == {
        "docs", "walkthrough.md"}
