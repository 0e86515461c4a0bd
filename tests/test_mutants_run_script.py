"""tests/run_mutants.sh on a red baseline: when a test fails without any mutant, mutmut has nothing
to measure and stops before the first mutant ("failed to collect stats"). The script must then
stop loudly: a non-zero exit, the failing test named on stderr, and no score printed. Run on a
toy project (one module, two tests, one of them failing) laid out as minattn's, with the real
script, policies wrapper and score table copied in; a green toy project is scored, so the check
is not merely "the script always fails". Needs mutmut 3.8.1 (the pinned version the wrapper
patches) and bash; it takes a few seconds (mutmut runs the toy's tests a few times)."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

mutmut = pytest.importorskip("mutmut")
if mutmut.__version__ != "3.8.1" or shutil.which("bash") is None:
    pytest.skip("tests/mutmut_policies.py patches mutmut 3.8.1 and the script needs bash",
                allow_module_level=True)

TESTS = Path(__file__).parent

SETUP_CFG = """\
[mutmut]
source_paths = minattn/
only_mutate =
    minattn/toy.py
pytest_add_cli_args =
    -p no:cacheprovider
pytest_add_cli_args_test_selection =
    tests/
"""

TOY = """\
def add(a, b):
    return a + b
"""

GREEN = """\
from minattn.toy import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-2, 3) == 1
"""

RED = GREEN + """

def test_add_wrongly_stated():
    assert add(2, 2) == 5
"""


def _project(root, tests):
    (root / "minattn").mkdir()
    (root / "minattn" / "__init__.py").write_text("")
    (root / "minattn" / "toy.py").write_text(TOY)
    (root / "tests").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_toy.py").write_text(textwrap.dedent(tests))
    for name in ("run_mutants.sh", "mutmut_policies.py", "mutant_scores.py"):
        shutil.copy(TESTS / name, root / "tests" / name)
    (root / "setup.cfg").write_text(SETUP_CFG)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MUTANT_UNDER_TEST", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return subprocess.run(["bash", "tests/run_mutants.sh", "toy"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_failing_test_stops_the_run_loudly(tmp_path):
    run = _project(tmp_path, RED)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "MUTATION RUN STOPPED" in run.stderr, run.stderr
    assert "tests/test_toy.py::test_add_wrongly_stated" in run.stderr, run.stderr
    assert "score" not in run.stdout, run.stdout  # the score table's header never printed


def test_a_green_project_is_scored(tmp_path):
    run = _project(tmp_path, GREEN)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "MUTATION RUN STOPPED" not in run.stderr
    rows = [line.split() for line in run.stdout.splitlines() if line.startswith("minattn/toy.py")]
    assert len(rows) == 1, run.stdout
    killed, survived = int(rows[0][1]), int(rows[0][3])
    assert killed >= 1 and killed + survived >= 1, run.stdout
