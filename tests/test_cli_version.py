import subprocess
import sys
from pathlib import Path

import minattn

ROOT = Path(__file__).resolve().parent.parent


def test_version_flag_prints_the_package_version():
    result = subprocess.run([sys.executable, "-m", "minattn", "--version"], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"minattn {minattn.__version__}"


def test_citation_cff_gives_the_package_version():
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert f"\nversion: {minattn.__version__}\n" in text
    assert text.startswith("cff-version: 1.2.0\n")
