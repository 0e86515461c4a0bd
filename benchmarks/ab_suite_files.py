"""The README's suite command on a few test files, the old checkout's tests against this one's,
alternating round by round: CPU seconds (user + system of pytest and its xdist workers, from
os.wait4) and wall seconds per run, medians (IQR) and the per-round ratios new / old.

    python benchmarks/ab_suite_files.py OLD_CHECKOUT NEW_CHECKOUT [tests/test_train.py ...] \
        [--rounds 3] [--busy 0]

(the files before the options; without files, test_induction.py and test_char_gpt.py)

Each run is `python -m pytest -n 2 --dist loadfile -q -p no:cacheprovider FILES` on that
checkout's files (its setup.cfg, conftest.py files and, by PYTHONPATH, its minattn), from an empty
temporary folder, with PYTHONDONTWRITEBYTECODE=1 (nothing is written into either checkout: no
.hypothesis folder, no __pycache__) and CI=1 (the hypothesis CI profile). A failing run stops
the benchmark. docs/benchmarks.md, "The suite's CPU time".
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _harness import busy, footer, header  # noqa: E402

DEFAULT_FILES = ["tests/test_induction.py", "tests/test_char_gpt.py"]


def run(checkout, files):
    """-> (CPU seconds of the pytest process tree, wall seconds)."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "PYTHONDONTWRITEBYTECODE": "1",
           "CI": "1"}
    paths = [os.path.join(os.path.abspath(checkout), f) for f in files]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile",
                             "-q", "-p", "no:cacheprovider", *paths],
                            cwd=tempfile.mkdtemp(), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{checkout}: pytest exited {proc.returncode}\n{out.decode()[-3000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def summary(values):
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return f"{median:.1f} s (IQR {q1:.1f}-{q3:.1f})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    header(args.busy)
    print("files:", " ".join(args.files))
    cpu, wall = ([], []), ([], [])
    with busy(args.busy):
        for rnd in range(args.rounds):
            for i in ((0, 1) if rnd % 2 else (1, 0)):
                c, w = run((args.old, args.new)[i], args.files)
                cpu[i].append(c)
                wall[i].append(w)
                print(f"round {rnd} {'old' if i == 0 else 'new'}: CPU {c:.1f} s, wall {w:.1f} s",
                      flush=True)
    for name, (o, n) in (("CPU", cpu), ("wall", wall)):
        r = np.asarray(n) / np.asarray(o)
        q1, median, q3 = np.percentile(r, [25, 50, 75])
        print(f"{name}: old {summary(o)}, new {summary(n)}, new/old {median:.2f} "
              f"(IQR {q1:.2f}-{q3:.2f})")
    footer()


if __name__ == "__main__":
    main()
