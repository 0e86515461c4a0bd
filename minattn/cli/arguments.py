"""The argparse types of every command. Each raises ArgumentTypeError with a sentence, so a user
reads "must be a positive integer, got 'abc'" (argparse would show a ValueError as "invalid
<function name>"); a value is checked when the arguments are read, before any work."""
import argparse
import os
import sys
from pathlib import Path

from .common import _sibling

SORT_DIGITS = 6  # minattn.models.sorting_lm.N_DIGITS; here so that parsing imports no model
MODELS = ("minilm", "count", "sort", "induction", "smollm2")  # attention --model


def positive_int(text, least=1, what="a positive integer"):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
    return value


def non_negative_int(text):
    return positive_int(text, least=0, what="an integer >= 0")


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def fraction(text):
    value = non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1), got {text!r}")
    return value


def lora_targets(text):
    from ..lora import TARGETS

    names = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in names if name not in TARGETS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown target {', '.join(map(repr, unknown))} in "
                                         f"{text!r}: the valid ones are {', '.join(TARGETS)}")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"names a target twice, got {text!r}")
    return names


TEMPERATURE_MAX = 10.0  # chat --temperature


def temperature(text):
    # 0 (the most likely token) to TEMPERATURE_MAX. Beyond it sampling is noise, SmolLM2's
    # softmax near the uniform: docs/benchmarks.md, "Temperature's ceiling".
    value = non_negative_float(text)
    if value > TEMPERATURE_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {TEMPERATURE_MAX:g} (beyond it every "
                                         f"token is about as likely as any other), got {text!r}")
    return value


def positive_temperature(text):
    # (0, TEMPERATURE_MAX], a normal float (some CPUs read a subnormal as 0): a sampler without
    # a greedy path (shakespeare sample)
    said = f"must be a number > 0 and at most {TEMPERATURE_MAX:g}, got {text!r}"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(said) from None
    if not 0 < value <= TEMPERATURE_MAX:
        raise argparse.ArgumentTypeError(said)
    if value < sys.float_info.min:
        raise argparse.ArgumentTypeError(f"must be at least {sys.float_info.min!r} (the smallest "
                                         f"normal float), got {text!r}")
    return value


def probability(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}")
    return value


def model_path(text):
    if text and Path(text).exists():
        return text
    raise argparse.ArgumentTypeError(f"{text!r} does not exist (give a .gguf file or a model "
                                     "folder)")


MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")  # models.pretrained's


def model_directory(text):
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"model directory {text!r} does not exist")
    missing = [name for name in MODEL_FILES if not (Path(text) / name).is_file()]
    if missing:
        raise argparse.ArgumentTypeError(f"{text!r} is not a sentence-encoder directory: it has "
                                         f"no {', '.join(missing)} (needs {', '.join(MODEL_FILES)})")
    return text


def model_choice(text):
    if text in MODELS or Path(text).is_file():
        return text
    if Path(text).is_dir():  # a decoder's save_pretrained folder, or a sentence encoder's
        return text if _is_language_model(text) else model_directory(text)
    raise argparse.ArgumentTypeError(f"must be one of {', '.join(MODELS)}, a model directory or "
                                     f"a .gguf file, got {text!r}")


def _is_language_model(path):
    # A .gguf file, or a save_pretrained folder of a decoder (its config.json's model_type).
    import json

    path = Path(path)
    if path.is_file():
        return True
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    from ..models.chat_model import MODEL_TYPES

    return isinstance(config, dict) and config.get("model_type") in MODEL_TYPES


def utf8_text(text):
    # A command line that is not valid UTF-8 reaches Python as surrogate escapes, which the
    # tokenizer cannot encode: refused here, naming the bytes, instead of in its traceback.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogateescape")
        raise argparse.ArgumentTypeError(f"is not valid UTF-8 text, got {raw!r}") from None
    return text


def message_text(text):
    # A text to read (a message to the model, a sentence to attend over or compare): UTF-8 text
    # with something in it (an empty prompt would spend the whole --max-new-tokens answering
    # nothing; an empty sentence has no tokens to attend over).
    text = utf8_text(text)
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty (nor only spaces), got {text!r}")
    return text


def thread_count(text):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    value = positive_int(text)
    if value > cores:
        raise argparse.ArgumentTypeError(f"must be at most the {cores} cores this process may "
                                         f"use, got {value}")
    return value

def digit_string(text, option=None):
    # isdigit() alone accepts '²' and Arabic-Indic digits, which int() then reads or refuses
    if len(text) != SORT_DIGITS or not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{option + ' ' if option else ''}takes exactly "
                                         f"{SORT_DIGITS} digits (0-9), got {text!r}")
    return text


def induction_plot(text):
    # induction --plot FILE also writes FILE-curve.png: both are checked before training
    image_file(text)
    try:
        writable_file(_sibling(text, "-curve"))
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"{text!r} also writes the training curve: {error}") \
            from None
    return text


def _with_suffix(text, suffixes, what):
    # The suffix says the format: refused, not silently appended ("out/noext" would become
    # "out/noext.png" behind the user's back).
    writable_file(text)
    if not text.lower().endswith(suffixes):
        raise argparse.ArgumentTypeError(f"{what} must end in {' or '.join(suffixes)}, got "
                                         f"{text!r}")
    return text


def image_file(text):
    return _with_suffix(text, (".png", ".svg", ".pdf"), "an image file name")


def html_file(text):
    return _with_suffix(text, (".html", ".htm"), "a page's file name")


def json_file(text):
    return _with_suffix(text, (".json",), "a JSON file name")


def writable_file(text):
    # Checked when the arguments are read, not after a whole training run.
    path = Path(text)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory, not a file name")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return text


