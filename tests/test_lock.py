"""The test environment's lock (tests/lock.py): the README's command installs by it, its table
says what it holds, and what is installed is what it holds."""
import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path

import pytest

from . import lock

ROOT = Path(__file__).resolve().parent.parent


def _test_command():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("<!-- test-command -->", 1)[1].split("```bash\n", 1)[1].split("\n", 1)[0]


def test_the_readme_test_command_installs_every_package_by_the_lock():
    installs = [part.strip() for part in _test_command().split("&&") if " install " in part]
    assert installs and all("-c tests/lock.txt" in part for part in installs)  # torch's too
    torch = re.search(r"torch==([\d.]+)", _test_command()).group(1)
    assert lock.read((ROOT / "tests" / "lock.txt").read_text(encoding="utf-8"))["torch"] == torch


def test_the_readme_table_is_the_locks():
    pins = lock.read((ROOT / "tests" / "lock.txt").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert lock.readme_table(readme) == lock.table(pins), "run: python tests/lock.py table"
    assert all(f"| {name} |" in lock.table(pins) for name in lock.PEERS)


def test_the_lock_holds_every_test_peer_of_setup_cfg():
    # every package the test extra names is pinned exactly
    text = (ROOT / "setup.cfg").read_text(encoding="utf-8")
    extra = text.split("\ntest =\n", 1)[1].split("\n\n", 1)[0]
    names = {lock._name(line.strip()) for line in extra.splitlines()
             if line.strip() and not line.strip().startswith("#")}
    pins = lock.read((ROOT / "tests" / "lock.txt").read_text(encoding="utf-8"))
    assert names and names <= set(pins), sorted(names - set(pins))


@pytest.mark.skipif(os.environ.get("MINATTN_NEWEST_PEERS") == "1",
                    reason="python tests/lock.py newest/refresh: the newest releases, on purpose")
def test_what_is_installed_is_what_the_lock_holds():
    # under the README's command (as in CI) the peers are the locked ones; a venv made by hand
    # with other versions is named here, not by a parity test failing for a reason it can't say
    pins = lock.read((ROOT / "tests" / "lock.txt").read_text(encoding="utf-8"))
    missing = [name for name in lock.PEERS if importlib.util.find_spec(
        {"transformer-lens": "transformer_lens", "sentence-transformers":
         "sentence_transformers"}.get(name, name)) is None]
    if missing:  # not the README's test environment (the core alone, say): nothing to compare
        pytest.skip(f"not installed: {', '.join(missing)}")
    installed = {name: importlib.metadata.version(name).split("+")[0] for name in lock.PEERS}
    assert {n: v for n, v in installed.items() if v != pins[n]} == {}


def test_moved_names_each_changed_package_once():
    assert lock.moved({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "2.1", "d": "4"}) == [
        "b: 2 -> 2.1", "d: - -> 4"]


def test_read_normalises_names_and_drops_local_labels_and_comments():
    assert lock.read("# a comment\nTransformer_Lens==4.3.0\ntorch==2.13.0+cpu  # CPU\n-e .\n") \
        == {"transformer-lens": "4.3.0", "torch": "2.13.0"}


def test_the_parity_tests_are_the_files_that_reach_a_peer():
    files = lock.parity_tests()
    assert "tests/test_hf_parity.py" in files and "tests/test_lora_peft.py" in files
    assert "tests/test_softmax.py" not in files


def test_a_peer_name_that_moved_fails_in_one_line_naming_the_peer_its_version_and_the_name():
    from .peers import undocumented

    version = importlib.metadata.version("pytest")
    with pytest.raises(pytest.fail.Exception, match=rf"^pytest {version}: pytest.no_such_name "
                                                    r"is gone \(the test reads it outside"):
        undocumented(pytest, "no_such_name")
    with pytest.raises(pytest.fail.Exception, match=rf"^pytest {version}: pytest.no_such_module "
                                                    r"is gone"):
        undocumented("pytest.no_such_module", "x")
    assert undocumented("importlib.metadata", "version") is importlib.metadata.version
