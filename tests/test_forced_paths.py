"""tests/forced_paths.py picks the code path one step down from this CPU's (CONTRIBUTING.md, "the
forced-path run"), and CI runs it: held here on the paths of machines this one is not."""
from pathlib import Path

import pytest

from tests import forced_paths

ROOT = Path(__file__).resolve().parent.parent


def _path(targets, openblas, torch=None, machine="x86_64"):
    return {"machine": machine, "numpy_targets": targets, "numpy": "2.4.6", "openblas": openblas,
            "torch": torch, "avx512": any(t.startswith("AVX512") or t == "X86_V4" for t in targets)}


@pytest.fixture(autouse=True)
def _no_preset(monkeypatch):
    monkeypatch.delenv("NPY_DISABLE_CPU_FEATURES", raising=False)


def test_an_avx512_machine_is_sent_to_what_an_avx2_machine_runs():
    env, _ = forced_paths.other_path(
        _path(["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"], "SkylakeX", "AVX512"))
    assert env["NPY_DISABLE_CPU_FEATURES"].split() == ["X86_V4", "AVX512_ICL", "AVX512_SPR"]
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["OPENBLAS_NUM_THREADS"] == "1"


def test_an_avx2_machine_is_sent_to_the_baseline_and_sandybridge():
    env, _ = forced_paths.other_path(_path(["X86_V3"], "Haswell", "AVX2"))
    assert env["NPY_DISABLE_CPU_FEATURES"].split() == ["X86_V3"]
    assert env["OPENBLAS_CORETYPE"] == "Sandybridge" and env["ATEN_CPU_CAPABILITY"] == "default"


def test_numpy_1_names_an_avx512_machine_by_its_features_too():
    env, _ = forced_paths.other_path(
        _path(["SSSE3", "AVX2", "FMA3", "AVX512F", "AVX512_SKX"], "SkylakeX"))
    assert env["NPY_DISABLE_CPU_FEATURES"].split() == ["AVX512F", "AVX512_SKX"]


def test_an_arm_machine_falls_back_to_the_generic_armv8_kernel():
    env, said = forced_paths.other_path(_path(["ASIMDHP", "ASIMDDP"], "NEOVERSEN1", machine="aarch64"))
    assert env["OPENBLAS_CORETYPE"] == "ARMV8"
    assert env["NPY_DISABLE_CPU_FEATURES"].split() == ["ASIMDHP", "ASIMDDP"] and said


def test_a_machine_with_no_path_below_its_own_forces_nothing():
    env, said = forced_paths.other_path(_path([], "Nehalem"))
    assert env == {"OPENBLAS_NUM_THREADS": "1"} and said == []


def test_a_preset_numpy_setting_is_kept(monkeypatch):
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "AVX512_SPR")
    env, _ = forced_paths.other_path(_path(["X86_V3", "X86_V4", "AVX512_SPR"], "SkylakeX"))
    assert env["NPY_DISABLE_CPU_FEATURES"].split() == ["AVX512_SPR", "X86_V4"]


def test_ci_runs_it_after_the_suite():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    command = lines[lines.index("<!-- test-command -->") + 2]
    assert command.endswith("&& python -m pytest -n 2 --dist loadfile && python tests/forced_paths.py")
