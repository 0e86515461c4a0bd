"""`python -m minattn finetune` on a small GGUF written here (tests/test_language_model_files):
a run that trains, evaluates before and after and writes its adapter and curve; --resume after
Ctrl-C to the same numbers; and every kind of bad input refused in one line, exit code 2,
nothing written."""
import json

import numpy as np
import pytest

for _module in ("gguf", "tokenizers", "jinja2", "safetensors", "tqdm"):
    pytest.importorskip(_module)

from minattn import cli  # noqa: E402
from minattn.engine import trees  # noqa: E402
from minattn.training import checkpoints, losses, loop  # noqa: E402
from tests.test_language_model_files import llama_tensors, write_gguf  # noqa: E402

TARGETS = "q, k, v, o, gate, up, down"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finetune")
    model = write_gguf(folder / "tiny.gguf", llama_tensors(np.random.default_rng(0)))
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": f"Q{i % 5}?"},
        {"role": "assistant", "content": f"A{i % 5}!"}]}) + "\n" for i in range(12)))
    return model, data


def _run(capsys, *argv):
    code = cli.main(["finetune", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


OPTIONS = ("--steps", 6, "--rank", 2, "--batch-size", 3, "--lr", 0.05, "--every", 2)


def test_a_run_trains_evaluates_and_writes_its_adapter(files, tmp_path, capsys):
    model, data = files
    code, out, err = _run(capsys, model, data, "--out", tmp_path / "run", *OPTIONS)
    assert code == 0, err
    before, after = [float(line.split("loss ")[1].split()[0]) for line in out.splitlines()
                     if line.startswith("held out")]
    assert after < before  # the held-out example's reply, learned from its copies
    assert "held out: the last 1 of the 12 examples" in err and "tokens/s" in err
    losses = json.loads((tmp_path / "run" / "losses.json").read_text())
    assert len(losses) == 6 and losses == checkpoints.load_checkpoint(tmp_path / "run")["losses"]
    from minattn.lora import load_adapter
    from minattn.pretrained import load_language_model

    tiny = load_language_model(model)
    adapter = load_adapter(tmp_path / "run", tiny.params, tiny.config)
    trained = checkpoints.load_checkpoint(tmp_path / "run")["trainable"]
    assert adapter["alpha"] == 16
    saved = {tuple(path): a for path, a in trees.paths(adapter["layers"])}
    assert saved.keys() == {tuple(path) for path, _ in trees.paths(trained)}
    for path, b in trees.paths(trained):  # PEFT's files hold the trained weights
        np.testing.assert_array_equal(saved[tuple(path)], b, err_msg=str(path))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "run" / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_resumed_after_ctrl_c_ends_with_the_same_numbers(files, tmp_path, capsys,
                                                               monkeypatch):
    model, data = files
    assert _run(capsys, model, data, "--out", tmp_path / "whole", *OPTIONS)[0] == 0
    train = loop.train

    def interrupted(*args, callback, **kwargs):
        def stop(step, loss, n_tokens):
            callback(step, loss, n_tokens)
            if step == 3:
                raise KeyboardInterrupt
        return train(*args, callback=stop, **kwargs)

    monkeypatch.setattr(loop, "train", interrupted)
    code, _, err = _run(capsys, model, data, "--out", tmp_path / "cut", *OPTIONS)
    assert code == 130 and "the checkpoint of step 3" in err and "--resume" in err
    assert checkpoints.load_checkpoint(tmp_path / "cut")["step"] == 3
    monkeypatch.setattr(loop, "train", train)
    code, out, err = _run(capsys, model, data, "--out", tmp_path / "cut", *OPTIONS, "--resume")
    assert code == 0 and "resuming at step 3 of 6" in err
    whole = checkpoints.load_checkpoint(tmp_path / "whole")
    cut = checkpoints.load_checkpoint(tmp_path / "cut")
    assert whole["losses"] == cut["losses"]
    for (path, a), (_, b) in zip(trees.paths(whole["trainable"]),
                                 trees.paths(cut["trainable"])):
        np.testing.assert_array_equal(a, b, err_msg=str(path))


def _refused(capsys, argv, says, started=False, loaded=False):
    # started: refused during training (the held-out score before it is on stdout); loaded:
    # refused once the model is loaded (what needs its tokenizer). Otherwise the error is all
    # that is said: no message about the run it will not do comes before it.
    code, out, err = _run(capsys, *argv)
    assert code == 2 and (started or out == ""), (code, out, err)
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and says in lines[0], err
    if not (started or loaded):
        assert err == lines[0] + "\n", err
    return lines[0]


def _data(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


GOOD = json.dumps({"messages": [{"role": "user", "content": "Hi"},
                                {"role": "assistant", "content": "Yo"}]}) + "\n"


class TestBadData:
    @pytest.mark.parametrize("content, says", [
        ("", "is empty"),
        (GOOD + "not json\n", "line 2: not JSON"),
        (GOOD + '{"text": "Hi"}\n', 'line 2: no "messages"'),
        ('{"messages": [{"role": "assistant", "content": "Yo"}]}\n', "roles out of order"),
        (GOOD.encode() + b'{"messages": "\xff"}\n', "line 2: not valid UTF-8"),
    ])
    def test_refused_naming_the_line_and_nothing_written(self, files, tmp_path, capsys,
                                                          content, says):
        model, _ = files
        data = _data(tmp_path, content)
        line = _refused(capsys, [model, data, "--out", tmp_path / "run"], says)
        assert str(data) in line and not (tmp_path / "run").exists()

    @pytest.mark.parametrize("with_model", [True, False])  # without: the default model's
    def test_a_missing_data_file(self, files, tmp_path, capsys, with_model):
        _refused(capsys, [*files[:with_model], tmp_path / "none.jsonl", "--out", tmp_path / "r"],
                 "none.jsonl' does not exist")

    def test_a_bad_held_out_file(self, files, tmp_path, capsys):
        _refused(capsys, [*files, "--eval", _data(tmp_path, "[]\n"), "--out", tmp_path / "r"],
                 'bad.jsonl line 1: no "messages"')

    def test_an_example_longer_than_max_length_is_refused_not_cut(self, files, tmp_path, capsys):
        _refused(capsys, [*files, "--out", tmp_path / "run", "--max-length", 8],
                 "examples are longer than --max-length 8 tokens (the longest, line", loaded=True)
        assert not (tmp_path / "run").exists()


class TestBadOptions:
    @pytest.mark.parametrize("option, value, says", [
        ("--rank", 0, "argument --rank: must be a positive integer, got 0"),
        ("--rank", 17, "argument --rank: rank must be in [1, min(d_in, d_out)] = [1, 16]"),
        ("--alpha", 0, "argument --alpha: must be a finite number > 0, got '0'"),
        ("--alpha", -1, "argument --alpha: must be a finite number > 0, got '-1'"),
        ("--targets", "q,attn", f"unknown target 'attn' in 'q,attn': the valid ones are {TARGETS}"),
        ("--lr", "nan", "argument --lr"),
        ("--dropout", 1, "argument --dropout: must be a number in [0, 1)"),
    ])
    def test_refused_by_name(self, files, tmp_path, capsys, option, value, says):
        _refused(capsys, [*files, "--out", tmp_path / "run", option, value], says)
        assert not (tmp_path / "run").exists()

    def test_three_paths(self, files, tmp_path, capsys):
        _refused(capsys, [*files, files[1], "--out", tmp_path], "unrecognized arguments")

    def test_a_missing_model(self, files, tmp_path, capsys):
        _refused(capsys, [tmp_path / "no.gguf", files[1], "--out", tmp_path / "r"],
                 "argument MODEL")


class TestBadRuns:
    def test_an_out_folder_holding_a_run_is_not_overwritten(self, files, tmp_path, capsys):
        assert _run(capsys, *files, "--out", tmp_path, *OPTIONS)[0] == 0
        before = (tmp_path / checkpoints.CHECKPOINT).read_bytes()
        _refused(capsys, [*files, "--out", tmp_path, *OPTIONS], "--resume continues it")
        _refused(capsys, [*files, "--out", tmp_path, *OPTIONS, "--lr", 0.01, "--resume"],
                 "was started otherwise: lr 0.05 then, 0.01 now")
        assert (tmp_path / checkpoints.CHECKPOINT).read_bytes() == before

    def test_an_out_that_is_a_file_is_refused_before_anything_is_said(self, files, tmp_path,
                                                                      capsys):
        model, data = files
        (tmp_path / "file").write_text("mine")
        _refused(capsys, [model, data, "--out", tmp_path / "file"], "is a file, not a folder")
        assert (tmp_path / "file").read_text() == "mine"

    def test_resume_without_a_checkpoint(self, files, tmp_path, capsys):
        _refused(capsys, [*files, "--out", tmp_path, "--resume"], "holds no checkpoint.npz")

    def test_a_nan_loss_stops_at_its_step_keeping_the_last_good_checkpoint(
            self, files, tmp_path, capsys, monkeypatch):
        from minattn.training import optimizer

        update = optimizer.adamw_update
        steps = []

        def poisoned(params, grads, state, **kwargs):  # step 3's update poisons the weights
            steps.append(1)
            new, state = update(params, grads, state, **kwargs)
            return (trees.tree_map(lambda w: w * np.nan, new) if len(steps) == 3 else new), state

        monkeypatch.setattr(loop, "adamw_update", poisoned)
        code, _, err = _run(capsys, *files, "--out", tmp_path, *OPTIONS)
        lines = [line for line in err.splitlines() if line.startswith("error: ")]
        assert code == 1 and len(lines) == 1, err  # the work failed (EXIT_CODES), not refused
        assert "the loss became nan (gradient norm nan) at step 4: stopped; the last good " \
               "checkpoint, step 2, stays in" in lines[0]
        assert checkpoints.load_checkpoint(tmp_path)["step"] == 2


def test_without_matplotlib_the_curve_is_left_out_said_once_before_the_run(
        files, tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    code, out, err = _run(capsys, *files, "--out", tmp_path / "run", *OPTIONS)
    assert code == 0, err
    said = [line for line in err.splitlines() if "matplotlib" in line]
    assert len(said) == 1 and "no loss curve" in said[0] and "pip install '.[plot]'" in said[0]
    assert err.index("matplotlib") < err.index("loading")  # before the work
    assert "loss curve" not in out and "adapter in" in out
    assert not (tmp_path / "run" / "loss.png").exists()
    assert (tmp_path / "run" / "losses.json").is_file()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_the_files_a_run_writes_get_the_mode_the_umask_gives(files, tmp_path, capsys, umask):
    import os

    before = os.umask(umask)
    try:
        code, _, err = _run(capsys, *files, "--out", tmp_path / "run", *OPTIONS)
    finally:
        os.umask(before)
    assert code == 0, err
    written = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert {"adapter_model.safetensors", "adapter_config.json", checkpoints.CHECKPOINT,
            "losses.json"} <= set(written), written
    for name in written:
        assert (tmp_path / "run" / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
