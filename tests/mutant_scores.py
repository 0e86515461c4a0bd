"""Print mutmut's results per module (read from mutants/**/*.meta with mutmut's own names for
its exit codes): killed, timeout, survived, no test, other, not run, and the score of those that
ran, (killed + timeout) / ran, as mutmut counts it. Run by tests/run_mutants.sh; tests/MUTANTS.md
quotes its table.
    python tests/mutant_scores.py                     the table
    python tests/mutant_scores.py --unchecked MODULE  the names of MODULE's mutants not run yet
                                                      (MODULE as minattn.engine.checks)
    python tests/mutant_scores.py --survivors MODULE  the names of MODULE's survivors"""
import glob
import json
import sys
from collections import Counter

from mutmut.stats import status_by_exit_code

COLUMNS = ("killed", "timeout", "survived", "no tests", "other", "not checked")


def main(paths=None):
    rows, total = [], Counter()
    for meta in sorted(paths or glob.glob("mutants/minattn/**/*.py.meta", recursive=True)):
        statuses = Counter(status_by_exit_code[code]
                           for code in json.load(open(meta))["exit_code_by_key"].values())
        row = Counter({c: statuses[c] for c in COLUMNS[:-2] + COLUMNS[-1:]})
        row["other"] = sum(statuses.values()) - sum(row.values())  # segfault, suspicious, ...
        rows.append((meta[len("mutants/"):-len(".meta")], row))
        total += row
    print(f"{'module':32}" + "".join(f"{c:>12}" for c in COLUMNS) + f"{'score':>9}")
    for name, row in rows + [("all", total)]:
        ran = sum(row[c] for c in COLUMNS[:-1])
        score = f"{100 * (row['killed'] + row['timeout']) / ran:8.1f}%" if ran else "        -"
        print(f"{name:32}" + "".join(f"{row[c]:12}" for c in COLUMNS) + score)


def names(module, wanted):
    meta = "mutants/" + module.replace(".", "/") + ".py.meta"
    try:
        codes = json.load(open(meta))["exit_code_by_key"]
    except FileNotFoundError:  # no mutants generated yet: all of them are unchecked
        codes = {module + ".*": None}
    for name, code in codes.items():
        if code == wanted:
            print(name)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--unchecked"]:
        names(sys.argv[2], None)
    elif sys.argv[1:2] == ["--survivors"]:
        names(sys.argv[2], 0)  # exit code 0: the tests passed
    else:
        main(sys.argv[1:])
