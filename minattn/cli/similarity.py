"""`python -m minattn similarity S1 S2 ...`: cosine similarities of sentences from a real
pretrained encoder (all-MiniLM-L6-v2)."""
import argparse

from .arguments import message_text, model_directory
from .common import UsageError, examples, model_file_refused


def add_command(commands):
    sim = commands.add_parser(
        "similarity", help="cosine similarities of sentences (all-MiniLM-L6-v2)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples('python -m minattn similarity "A man plays guitar." '
                        '"Someone plays a guitar." "The stock market fell."'))
    sim.add_argument("sentences", nargs="+", metavar="SENTENCE", type=message_text,
                     help="two or more sentences, each compared with every other")
    sim.add_argument("--model", metavar="DIR", type=model_directory,
                     help="model directory (default: the packaged model)")
    sim.set_defaults(run=run)


def run(args):
    from ..models.pretrained import load_sentence_encoder, similarity_matrix

    if len(args.sentences) < 2:
        raise UsageError(f"argument SENTENCE: give two or more sentences to compare, got "
                         f"{len(args.sentences)}")
    with model_file_refused():
        encoder = load_sentence_encoder(args.model)
    sims = similarity_matrix(encoder, args.sentences)
    short = [f"[{i}]" for i in range(len(args.sentences))]
    for i, s in enumerate(args.sentences):
        print(f"{short[i]:>4} {s}")
    print(" " * 5 + " ".join(f"{c:>6}" for c in short))
    for i, row in enumerate(sims):
        print(f"{short[i]:>4} " + " ".join(f"{x:6.3f}" for x in row))
    return 0

