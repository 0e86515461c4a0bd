"""`python -m minattn induction`: grow an induction head in a two-layer attention-only model
trained on repeated random blocks, with its scores, its ablation and its K-composition."""
import argparse
import time

import numpy as np

from .arguments import induction_plot, json_file, non_negative_int, positive_int
from .common import _check_plot_available, _sibling, _with_bar, examples

INDUCTION_STEPS = 1000  # minattn.models.induction.STEPS; here so that --help imports no model


def add_command(commands):
    ind = commands.add_parser("induction", help="grow an induction head: train a two-layer "
                                                "attention-only model on repeated random blocks",
                              formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=examples("python -m minattn induction --json run.json "
                                              "--plot heads.png", "python -m minattn induction "
                                              "--layers 1"))
    ind.add_argument("--steps", type=positive_int, default=INDUCTION_STEPS,
                     help=f"Adam steps (default {INDUCTION_STEPS})")
    ind.add_argument("--seed", type=non_negative_int, default=0,
                     help="seed of the training and the held-out data (default 0)")
    ind.add_argument("--layers", type=int, choices=(1, 2), default=2,
                     help="2 (default) grows an induction head; 1 shows that one layer does not")
    ind.add_argument("--json", metavar="FILE.json", type=json_file,
                     help="write the scores and losses as JSON")
    ind.add_argument("--plot", metavar="FILE.png", type=induction_plot,
                     help="save every head's attention on a held-out sequence (and the training "
                          "curve next to it, FILE-curve.png)")
    ind.set_defaults(run=run)


def run(args):
    from ..models import induction as task

    if args.plot:
        _check_plot_available("--plot")
    config = {**task.CONFIG, "n_layers": args.layers}
    n_heads = config["n_heads"]
    print(f"Training a {args.layers}-layer, attention-only causal transformer ({n_heads} heads a "
          f"layer, no feed-forward) on random blocks of {task.BLOCK_LENGTHS[0]} to "
          f"{task.BLOCK_LENGTHS[1]} distinct tokens repeated twice (seed {args.seed}):")
    losses = []
    start = time.perf_counter()
    params = _with_bar(args.steps, lambda callback, **kw: task.train_induction_model(
        seed=args.seed, callback=lambda step, loss: (losses.append(loss), callback(step, loss)),
        **config, **kw))
    seconds = time.perf_counter() - start
    report, tokens, weights = task.evaluate(params, seed=args.seed, n_heads=n_heads)
    first, second = report["loss_first_half"], report["loss_second_half"]
    print(f"\nheld-out sequences ({task.EVAL_BLOCK} tokens, then the same {task.EVAL_BLOCK}):")
    print(f"  loss on the first block  {first:.3f}   (a uniform guess: log {task.VOCAB_SIZE} = "
          f"{np.log(task.VOCAB_SIZE):.3f})")
    print(f"  loss on the repeat       {second:.3f}   ({second / first:.2f} of the first block)")
    print("\nper head: induction score (attention from a repeated token to the token after its "
          "previous occurrence) and previous-token score (attention to position i - 1):")
    for layer in range(args.layers):
        for head in range(n_heads):
            scores = (report["induction_scores"][layer][head],
                      report["previous_token_scores"][layer][head])
            print(f"  layer {layer} head {head}:  induction {scores[0]:.3f}   previous-token "
                  f"{scores[1]:.3f}")
    print("\n" + task.curve_text(losses))
    ablation = task.ablation_report(params, seed=args.seed, n_heads=n_heads)
    report["ablation"] = ablation
    print("\n" + task.ablation_text(ablation))
    if args.layers == 2:
        report["composition_scores"] = task.composition_scores(params, n_heads=n_heads)
        print("\nK-composition (how much a layer-1 head's keys read a layer-0 head's output; "
              f"random: about {task.CONFIG['d_model'] ** -0.5:.2f}):")
        print("              " + " ".join(f"L0 head {a}" for a in range(n_heads)))
        for b, row in enumerate(report["composition_scores"]["k"]):
            print(f"  L1 head {b}  " + " ".join(f"{x:9.3f}" for x in row))
    report.update(steps=args.steps, seconds=seconds,
                  training_loss=[round(loss, 4) for loss in losses])
    print(f"\ntrained {args.steps} steps in {seconds:.1f} s")
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
        print(f"saved the numbers to {args.json}")
    if args.plot:
        from ..display.plot import save_heatmaps, save_curve

        labels = [str(t) for t in tokens]
        maps = np.concatenate([np.asarray(w) for w in weights])  # [n_layers * H, L, L]
        titles = [f"layer {l} head {h}: ind {report['induction_scores'][l][h]:.2f}, "
                  f"prev {report['previous_token_scores'][l][h]:.2f}"
                  for l in range(args.layers) for h in range(n_heads)]
        save_heatmaps(args.plot, maps, labels, labels, titles=titles,
                      suptitle="attention on a held-out repeated block (token ids)")
        curve = _sibling(args.plot, "-curve")
        save_curve(curve, losses, title=f"training loss, {args.layers}-layer attention-only model")
        print(f"saved the heads to {args.plot} and the training curve to {curve}")
    return 0


