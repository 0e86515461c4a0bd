"""README.md's shell commands are held to what the code accepts: every `python -m minattn ...`
line parses with the command line's own parser (an option renamed or removed fails here, not in
a newcomer's terminal), every extra a `pip install ".[...]"` names exists in setup.cfg, every
file of the repository a command reads exists, the fine-tuning section's command is the one
docs/finetune_demo.py runs and its printed lines are those of the run it names, and the patching
section's numbers are those of docs/agreement_patching.json."""
import configparser
import json
import re
import shlex
from pathlib import Path

import pytest

from minattn import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def shell_lines():
    """Every command of README.md's ```bash blocks: continuation lines joined, split at &&."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            lines += [part.strip() for part in line.split("&&") if part.strip()]
    return lines


def marked(name):
    """The commands of the ```bash block after <!-- readme-command: name -->."""
    block = re.search(rf"<!-- readme-command: {name} -->\n```bash\n(.*?)```", README, re.S)
    assert block, f"README.md has no block marked readme-command: {name}"
    return [line for line in block.group(1).splitlines() if line.strip()]


def minattn_argv(line):
    words = shlex.split(line, comments=True)
    return words[3:] if words[:3] == ["python", "-m", "minattn"] else None


COMMANDS = [line for line in shell_lines() if minattn_argv(line) is not None]


def test_the_sections_have_their_commands():
    assert {minattn_argv(line)[0] for line in marked("finetune")} == {"finetune", "chat"}
    assert [minattn_argv(line)[0] for line in marked("patch")] == ["patch"]
    assert all(line in COMMANDS for line in marked("finetune") + marked("patch"))


@pytest.mark.parametrize("line", COMMANDS)
def test_every_minattn_command_of_the_readme_parses(line, tmp_path, monkeypatch):
    # in a folder with the repository's docs/ and the exercise file an earlier line writes
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    if " check my_attention/" in line:
        (tmp_path / "my_attention").mkdir()
        (tmp_path / "my_attention" / "01_softmax.py").write_text("")
    monkeypatch.chdir(tmp_path)
    try:
        args = cli.build_parser().parse_args(minattn_argv(line))
    except cli.UsageError as error:
        pytest.fail(f"README.md's `{line}` is refused: {error}")
    for word in minattn_argv(line):  # the repository's files it reads are there
        if word.startswith("docs/") and not word.endswith((".png", ".html", ".json")):
            assert (ROOT / word).exists(), f"README.md's `{line}` names {word}, which is missing"
    assert callable(args.run)


def test_every_extra_the_readme_installs_exists():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = set(config["options.extras_require"])
    for line in shell_lines():
        for names in re.findall(r"pip install [\"']?\.\[([\w,]+)\]", line):
            assert set(names.split(",")) <= extras, (line, sorted(extras))


def test_the_finetune_command_is_the_demos_and_prints_the_runs_lines():
    import importlib.util

    spec = importlib.util.spec_from_file_location("finetune_demo", ROOT / "docs/finetune_demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    command = minattn_argv(marked("finetune")[0])
    assert command == demo.COMMAND[3:] + ["--out", "runs/agreement"]
    results = (ROOT / "docs/data/agreement/RESULTS.md").read_text(encoding="utf-8")
    recorded = [line.strip() for line in results.splitlines() if line.strip().startswith("held")]
    section = README[README.index("## Fine-tuning a real model"):]
    printed = re.search(r"```text\n(.*?)```", section, re.S).group(1).splitlines()
    assert printed == recorded
    when = re.search(r"on (\S+ \S+) UTC \(commit (\w+)\)", results).groups()
    assert f"{when[0]} UTC, commit {when[1]}" in section


def test_the_patching_numbers_are_those_of_the_run_it_names():
    run = json.loads((ROOT / "docs/agreement_patching.json").read_text())
    pair = run["pairs"][0]
    section = README[README.index("## Patching a real model"):]
    section = " ".join(section[:section.index("\n## ")].split())
    assert minattn_argv(marked("patch")[0])[1:3] == [pair["clean"], pair["corrupted"]]
    assert f"d is {pair['d_clean']:+.3f} clean and {pair['d_corrupted']:+.3f} corrupted" in section
    heads = sorted(((abs(s), layer, h, s) for layer, row in enumerate(pair["heads"])
                    for h, s in enumerate(row)), reverse=True)[:3]
    said = ", ".join(f"layer {layer} head {h} ({s:.3f})" for _, layer, h, s in heads)
    assert said.rsplit(", ", 1)[0] + " and " + said.rsplit(", ", 1)[1] in section, said
    assert f"at {pair['correlation']:.3f}" in section and f"{pair['seconds']} s" in section
    assert run["started"] in section
