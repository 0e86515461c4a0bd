"""The command line, one module per command:

    python -m minattn                      the tour: worked example, training, attention map
                                           (tour.py)
    python -m minattn similarity S1 S2 ... cosine similarities from a real pretrained encoder
                                           (similarity.py)
    python -m minattn attention "a sentence" --layer 0 --head 0 [--html FILE.html]
    python -m minattn attention "A B A C" --model count   (or sort, induction: trained first)
    python -m minattn attention "some text" --model smollm2 --html page.html   (or a .gguf)
                                           (attention.py)
    python -m minattn generate             a tiny LM trained to sort, generating (generate.py)
    python -m minattn induction            grow an induction head, with its scores
                                           (induction.py)
    python -m minattn heads                previous-token and induction heads of SmolLM2, ablated
                                           (heads.py)
    python -m minattn patch "CLEAN" "CORRUPTED" --answer " are" --wrong " is"
                                           activation patching of SmolLM2 (patch.py)
    python -m minattn exercises DIR        copy the exercise stubs into DIR
    python -m minattn check FILE.py        grade your functions by minattn's properties
                                           (several files, or a folder; --part 2 for Part II)
    python -m minattn check --pitfall NAME the worked example: a classic bug being caught
                                           (exercises and check: minattn/course/grader.py)
    python -m minattn chat [--prompt TEXT] talk with a real model (SmolLM2-135M-Instruct) on
                                           minattn, from its weights file (chat.py)
    python -m minattn finetune [MODEL] DATA.jsonl --out DIR
                                           LoRA on chat examples, on minattn (finetune.py)
    python -m minattn shakespeare          train nanoGPT's baby GPT on Shakespeare, character
                                           by character; `shakespeare sample --from DIR`
                                           continues a prompt (shakespeare.py)

Each command's module has add_command(commands), its parser, and run(args), its work; the
argparse types are in arguments.py, what the commands share in common.py.

One voice for every command (new subcommands get it from Parser and main, nothing to add):
a bad value is one line `error: ...` on stderr naming the option and the value, exit code 2,
before any training or loading. Progress bars go to stderr; stdout carries the results.
"""
import argparse
import sys

from . import (attention, chat, finetune, generate, heads, induction, patch, shakespeare,
               similarity, tour)
from .common import EXIT_CODES, Parser, UsageError, WorkFailed, examples, with_help

COMMANDS = (similarity, attention, generate, induction, heads, patch, chat,
            finetune, shakespeare)  # in --help's order


def build_parser():
    parser = Parser(
        prog="python -m minattn", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="minattn: attention in NumPy. With no command, runs the tour: the worked "
                    "example, training a tiny encoder, and its attention map.",
        epilog=examples("python -m minattn --steps 300 --seed 1",
                        "python -m minattn attention --help") + "\n\n" + EXIT_CODES)
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"minattn {__version__}")
    tour.add_options(parser)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.add_command(commands)
    from ..course import grader  # the `exercises` and `check` commands (hypothesis: when run)

    grader.add_commands(commands)
    return parser


def main(argv=None):
    """The command line -> its exit code (EXIT_CODES). The one place that turns an error into
    the line `error: ...` on stderr: UsageError (refused before any work; a model file that
    cannot be used becomes one in common.model_file_refused) exits 2; an ImportError (an
    optional package missing) exits 2 too; an OSError, ValueError, MemoryError or WorkFailed
    (a training loss that became NaN) during the work exits 1."""
    args = None
    try:
        args = build_parser().parse_args(argv)
        return args.run(args)
    except UsageError as error:
        print(f"error: {with_help(error, getattr(args, '_prog', 'python -m minattn'))}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except ImportError as error:  # an optional package missing: nothing could run
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError, WorkFailed) as error:  # a message for the user, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 1
    except MemoryError as error:  # NumPy's says what it could not allocate
        print(f"error: out of memory: {str(error) or 'an allocation failed'}", file=sys.stderr)
        return 1
