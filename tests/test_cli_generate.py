"""python -m minattn generate: trains the digit-sorting LM, then generates through the cache."""
from minattn.cli import main


def test_generate_sorts_the_given_digits(capsys):
    assert main(["generate", "--train-steps", "300", "--digits", "314159"]) == 0
    out = capsys.readouterr().out
    assert "314159 | 113459   right" in out and "held-out accuracy: " in out


def test_generate_refuses_bad_digits_before_training(capsys):
    assert main(["generate", "--digits", "12"]) == 1
    captured = capsys.readouterr()
    assert "--digits takes exactly 6 digits" in captured.err and "Training" not in captured.out
