"""python -m minattn generate: trains the digit-sorting LM, then generates through the cache."""
import pytest

from minattn.cli import main


def test_generate_sorts_the_given_digits(capsys):
    assert main(["generate", "--train-steps", "300", "--digits", "314159"]) == 0
    out = capsys.readouterr().out
    assert "314159 | 113459   right" in out and "held-out accuracy: " in out


@pytest.mark.parametrize("digits", ["12", "²²²²²²", "١٢٣٤٥٦", "12345x"])
def test_generate_refuses_bad_digits_before_training(digits, capsys):
    assert main(["generate", "--digits", digits]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"error: argument --digits: takes exactly 6 digits (0-9), got {digits!r}")
    assert out == "" and len(err.splitlines()) == 1


def test_the_sort_digits_the_command_line_checks_are_the_models():
    from minattn import cli
    from minattn.models import sorting_lm

    assert cli.arguments.SORT_DIGITS == sorting_lm.N_DIGITS
