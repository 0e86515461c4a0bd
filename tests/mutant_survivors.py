"""Print each surviving mutant of the given modules (default: all) as its changed lines, read
from mutmut's work directory (mutants/), without starting mutmut. Used to fill tests/MUTANTS.md:
    python tests/mutant_survivors.py minattn/engine/checks.py"""
import difflib
import glob
import json
import re
import sys


def _function(source, name):
    match = re.search(r"\ndef " + re.escape(name) + r"\(.*?\n(?=\S)", source, re.S)
    return match.group(0).splitlines() if match else []


def main(modules):
    for path in modules or sorted(glob.glob("minattn/**/*.py", recursive=True)):
        try:
            codes = json.load(open(f"mutants/{path}.meta"))["exit_code_by_key"]
        except FileNotFoundError:
            continue
        source = open(f"mutants/{path}").read()
        for key, code in codes.items():
            if code != 0:  # 0: the tests passed, the mutant survived
                continue
            name = key.rsplit(".", 1)[1]
            original = _function(source, re.sub(r"__mutmut_\d+$", "__mutmut_orig", name))
            diff = [line.strip() for line in difflib.unified_diff(
                original, _function(source, name), lineterm="", n=0)
                if line[:1] in "+-" and line[:3] not in ("+++", "---") and " def " not in line
                and not line[1:].startswith("def ")]
            print(f"{key}: {' | '.join(diff)[:300]}")


if __name__ == "__main__":
    main(sys.argv[1:])
