"""Runs the tests that print or bound numbers a second time, with NumPy, OpenBLAS and torch forced
onto another code path than this CPU's own, so that a printed digit or a bound that holds on one
instruction set only fails here, not on the next machine (issue 44). CI runs it after the suite.

    python tests/forced_paths.py              # detect, force, run the numerical tests
    python tests/forced_paths.py --dry-run    # only say which path it would force
    python tests/forced_paths.py -x tests/test_softmax.py   # other tests (and pytest options)

The other path, from what this CPU has:
- AVX-512: NumPy's AVX-512 targets off (NPY_DISABLE_CPU_FEATURES), OPENBLAS_CORETYPE=Haswell,
  torch's kernels at AVX2: the code an AVX2 machine runs.
- AVX2, no AVX-512: every NumPy target above its baseline off, OPENBLAS_CORETYPE=Sandybridge,
  torch's at its default: the AVX (no FMA) path.
- anything else (an older x86, ARM): NumPy's targets above its baseline off, and OpenBLAS one
  kernel down where this script knows one (Nehalem under Sandybridge, ARMV8 under a newer ARM).
The forced run also uses one BLAS thread (the suite's own run uses the default count).

A child process then reports the path it got (threadpoolctl's OpenBLAS kernel, NumPy's targets,
torch's capability), since OpenBLAS ignores a CORETYPE it does not know. Where nothing could be
moved, the script says so and exits 0 without running: the suite's own run has covered the only
path this machine has. Otherwise it exits with pytest's status.
"""
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The tests that print or bound numbers: the documents' examples, the torch/transformers parity
# tests, the float32 GELU bound, the attention core's unread blocks' rounding bound and the
# training runs with a bound on what they learn.
NUMERICAL_TESTS = [
    "walkthrough.md", "README.md",
    "tests/test_torch_parity.py", "tests/test_torch_decoder_parity.py", "tests/test_hf_parity.py",
    "tests/test_vjps.py", "tests/test_train.py", "tests/test_train_lm.py", "tests/test_induction.py",
    "tests/test_finetune_optimizer.py", "tests/test_finetune_loop.py", "tests/test_finetune_cli.py",
    "tests/test_char_gpt.py", "tests/test_shakespeare_cli.py", "tests/test_blockwise.py",
    "tests/test_plain_core.py",
]

# One step down from each OpenBLAS kernel (the names OPENBLAS_CORETYPE takes), and torch's.
OPENBLAS_STEP_DOWN = {"SkylakeX": "Haswell", "Cooperlake": "Haswell", "SapphireRapids": "Haswell",
                      "Haswell": "Sandybridge", "Zen": "Sandybridge", "Sandybridge": "Nehalem"}
ARM_GENERIC = "ARMV8"  # every ARM64 OpenBLAS kernel falls back to the generic ARMv8 one
TORCH_STEP_DOWN = {"AVX512": "avx2", "AVX2": "default"}  # ATEN_CPU_CAPABILITY's names
MKL_STEP_DOWN = {"AVX512": "AVX2", "AVX2": "AVX"}  # torch's BLAS on x86 (MKL_ENABLE_INSTRUCTIONS)


def this_path():
    """What this process runs on: NumPy's targets, OpenBLAS's kernel, torch's capability."""
    import numpy

    try:
        from numpy._core import _multiarray_umath as umath  # NumPy 2
    except ImportError:
        from numpy.core import _multiarray_umath as umath  # NumPy 1
    features = umath.__cpu_features__
    targets = [t for t in umath.__cpu_dispatch__ if features.get(t)]  # those not disabled
    path = {"machine": platform.machine(), "numpy_targets": targets,
            "avx512": any(t.startswith("AVX512") or t == "X86_V4" for t in targets),
            "openblas": None, "torch": None, "numpy": numpy.__version__}
    try:
        from threadpoolctl import threadpool_info

        blas = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
        path["openblas"] = blas[0].get("architecture") if blas else None
    except ImportError:
        pass
    if os.environ.get("FORCED_PATHS_TORCH", "1") == "1":
        try:
            import torch

            path["torch"] = torch.backends.cpu.get_cpu_capability()
        except ImportError:
            pass
    return path


def other_path(native):
    """The environment that moves this CPU onto another path, and a line saying which."""
    env, said = {"OPENBLAS_NUM_THREADS": "1"}, []
    targets = native["numpy_targets"]
    if native["avx512"]:  # off with AVX-512 only, onto what an AVX2 machine runs
        targets = [t for t in targets if t.startswith("AVX512") or t == "X86_V4"]
    if targets:
        preset = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(dict.fromkeys(preset + targets))
        said.append(f"NumPy without {' '.join(targets)}")
    kernel = native["openblas"]
    arm = native["machine"].lower() in ("aarch64", "arm64")
    coretype = (ARM_GENERIC if arm and kernel not in (None, ARM_GENERIC)
                else OPENBLAS_STEP_DOWN.get(kernel))
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
        said.append(f"OpenBLAS {kernel} -> {coretype}")
    torch_level = TORCH_STEP_DOWN.get(native["torch"])
    if torch_level:
        env["ATEN_CPU_CAPABILITY"] = torch_level
        env["MKL_ENABLE_INSTRUCTIONS"] = MKL_STEP_DOWN[native["torch"]]  # not reported back
        said.append(f"torch {native['torch']} -> {torch_level}")
    return env, said


def probe(env):
    """this_path() as a child process with env sees it."""
    out = subprocess.run([sys.executable, __file__, "--probe"], env={**os.environ, **env},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def main(argv):
    if argv[:1] == ["--probe"]:
        print(json.dumps(this_path()))
        return 0
    dry_run = "--dry-run" in argv
    options = [a for a in argv if a.startswith("-") and a != "--dry-run"]  # passed to pytest
    tests = [a for a in argv if not a.startswith("-")] or NUMERICAL_TESTS
    native = probe({})  # as a child too, so that both sides import the same way
    env, said = other_path(native)
    forced = probe(env)
    moved = [name for name in ("numpy_targets", "openblas", "torch") if forced[name] != native[name]]
    print(f"forced paths: this CPU: {native['machine']}, NumPy {native['numpy']} targets "
          f"{' '.join(native['numpy_targets']) or '(baseline only)'}, OpenBLAS {native['openblas']}, "
          f"torch {native['torch']}")
    if not moved:
        print("forced paths: skipped: this machine has no other code path that this script "
              f"knows how to force ({'; '.join(said) or 'no fallback known'}; the child reported "
              "the same path), and the suite's own run covered the one it has")
        return 0
    print(f"forced paths: running on {', '.join(said)}, 1 BLAS thread; the child reports NumPy "
          f"targets {' '.join(forced['numpy_targets']) or '(baseline only)'}, OpenBLAS "
          f"{forced['openblas']}, torch {forced['torch']}")
    print("forced paths: to reproduce: " + " ".join(f'{k}="{v}"' for k, v in env.items())
          + " python -m pytest -q " + " ".join(tests), flush=True)
    if dry_run:
        return 0
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *options, *tests], cwd=ROOT,
                          env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
