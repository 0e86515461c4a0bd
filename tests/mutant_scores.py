"""Print mutmut's results per module (read from mutants/**/*.meta with mutmut's own names for
its exit codes): killed, timeout, survived, no test, other, not run, and the score of those that
ran, (killed + timeout) / ran, as mutmut counts it. Run by tests/run_mutants.sh; tests/MUTANTS.md
quotes its table.
    python tests/mutant_scores.py                     the table
    python tests/mutant_scores.py --unchecked MODULE  the names of MODULE's mutants not run yet
                                                      (MODULE as minattn.engine.checks)
    python tests/mutant_scores.py --survivors MODULE  the names of MODULE's survivors
    python tests/mutant_scores.py --chunk MODULE I N  mutmut name patterns for the I-th of N
                                                      parts of MODULE (its functions, split into
                                                      N groups of about equal source lines)
    python tests/mutant_scores.py --minutes           per module: the mutants' recorded run
                                                      times, summed, in minutes (one worker)
    python tests/mutant_scores.py --markdown          the table as tests/MUTANTS.md shows it"""
import ast
import glob
import json
import sys
from collections import Counter

from mutmut.stats import status_by_exit_code

COLUMNS = ("killed", "timeout", "survived", "no tests", "other", "not checked")


def markdown():
    total = Counter()
    print("| module | killed | timeout | survived | no tests | not run | mutants | score |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for meta in sorted(glob.glob("mutants/minattn/**/*.py.meta", recursive=True)):
        codes = json.load(open(meta))["exit_code_by_key"].values()
        row = Counter(status_by_exit_code[c] for c in codes)
        row["mutants"] = len(codes)
        total += row
        _markdown_row(f"`{meta[len('mutants/minattn/'):-len('.meta')]}`", row)
    _markdown_row("**all**", total)


def _markdown_row(name, row):
    ran = row["killed"] + row["timeout"] + row["survived"] + row["no tests"]
    score = f"{100 * (row['killed'] + row['timeout']) / ran:.1f} %" if ran else "-"
    print(f"| {name} | {row['killed']} | {row['timeout']} | {row['survived']} | "
          f"{row['no tests']} | {row['not checked']} | {row['mutants']} | {score} |")


def main(paths=None):
    rows, total = [], Counter()
    for meta in sorted(paths or glob.glob("mutants/minattn/**/*.py.meta", recursive=True)):
        statuses = Counter(status_by_exit_code[code]
                           for code in json.load(open(meta))["exit_code_by_key"].values())
        row = Counter({c: statuses[c] for c in COLUMNS[:-2] + COLUMNS[-1:]})
        row["other"] = sum(statuses.values()) - sum(row.values())  # segfault, suspicious, ...
        rows.append((meta[len("mutants/"):-len(".meta")], row))
        total += row
    if not sum(total[c] for c in COLUMNS[:-1]):  # no result at all: no score to give
        print("no mutant has a result (mutants/minattn/**/*.meta): nothing to score", file=sys.stderr)
        return 1
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


def chunk(module, i, n):
    """Every function of MODULE, greedily split into n groups of about equal length (largest
    first); prints group i's patterns, as mutmut names its mutants (x_<function>__mutmut_*)."""
    tree = ast.parse(open(module.replace(".", "/") + ".py").read())
    functions = sorted(((f.end_lineno - f.lineno + 1, f.name) for f in tree.body
                        if isinstance(f, ast.FunctionDef)), reverse=True)
    groups = [[0, []] for _ in range(n)]
    for lines, name in functions:
        smallest = min(groups, key=lambda g: g[0])
        smallest[0] += lines
        smallest[1].append(name)
    for name in sorted(groups[i - 1][1]):
        print(f"{module}.x_{name}__mutmut_*")


def minutes():
    for meta in sorted(glob.glob("mutants/minattn/**/*.py.meta", recursive=True)):
        durations = json.load(open(meta)).get("durations_by_key", {})
        print(f"{meta[len('mutants/'):-len('.meta')]:32}{len(durations):8} run"
              f"{sum(durations.values()) / 60:8.1f} min")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--chunk"]:
        chunk(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1:2] == ["--markdown"]:
        markdown()
    elif sys.argv[1:2] == ["--minutes"]:
        minutes()
    elif sys.argv[1:2] == ["--unchecked"]:
        names(sys.argv[2], None)
    elif sys.argv[1:2] == ["--survivors"]:
        names(sys.argv[2], 0)  # exit code 0: the tests passed
    else:
        sys.exit(main(sys.argv[1:]))
