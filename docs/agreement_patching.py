"""Patching SmolLM2 on the agreement pairs of minattn/models/agreement.py: which heads and layers
carry the subject's number to the verb, over 48 pairs (walkthrough.md, "Patching: where
*plural* travels"), and the running example's figure.

    PYTHONPATH=. python docs/agreement_patching.py [--out docs/agreement_patching.json]
        [--figure docs/figures/patching_keys.png]

For every pair (clean, corrupted, answer, wrong): activation patching (each head, the
attention and MLP outputs by layer, the residual stream by layer and position) and attribution
patching, as `python -m minattn patch` runs them; written to --out as JSON with the machine,
the time and the load. Prints the tables the walkthrough quotes: the heads and sublayers with
the largest mean score, how many pairs each restores by 0.1 or more, and the residual stream at
the subject's position and at the last one, layer by layer.
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minattn.models.agreement import PAIRS  # noqa: E402
from minattn.models.chat_model import load_language_model  # noqa: E402
from minattn.models.patching import patching_report, top_heads  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/agreement_patching.json")
    parser.add_argument("--figure", default="docs/figures/patching_keys.png")
    parser.add_argument("--limit", type=int, default=len(PAIRS), help="the first N pairs only")
    parser.add_argument("--tables", action="store_true",
                        help="print the tables of the run in --out, run nothing")
    args = parser.parse_args(argv)
    if args.tables:
        with open(args.out, encoding="utf-8") as file:
            print(tables(json.load(file)))
        return
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = os.getloadavg()
    lm = load_language_model()
    # the running example first (its figure), then the rest in a fixed shuffled order, so that
    # the pairs done so far (written after each) mix constructions and attractors
    order = [0] + [1 + int(i) for i in np.random.default_rng(0).permutation(len(PAIRS) - 1)]
    runs = []
    for i in order[:args.limit]:
        clean, corrupted, answer, wrong, attractor, kind = PAIRS[i]
        start = time.perf_counter()
        report = patching_report(lm, clean, corrupted, answer, wrong)
        runs.append({"clean": clean, "corrupted": corrupted, "answer": answer, "wrong": wrong,
                     "attractor": attractor, "construction": kind,
                     "seconds": round(time.perf_counter() - start, 1),
                     "d_clean": report["clean"], "d_corrupted": report["corrupted"],
                     **{key: _listed(report[key]) for key in (
                         "heads", "attn_out", "mlp_out", "resid", "attribution",
                         "correlation")}})
        print(f"{len(runs)}/{args.limit} {clean!r}: d {report['clean']:+.2f} / "
              f"{report['corrupted']:+.2f}, {runs[-1]['seconds']} s", file=sys.stderr)
        if i == 0:
            _figure(args.figure, lm, clean, corrupted, answer, wrong, report)
        result = {"model": lm.path.name,
                  "command": "PYTHONPATH=. python docs/agreement_patching.py", "started": started,
                  "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared",
                  "load_average_before": load_before, "load_average_after": os.getloadavg(),
                  "pairs_in_the_set": len(PAIRS), "pairs": runs}
        with open(args.out, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=0)
    print(tables(result))


def _listed(value):
    return value.tolist() if isinstance(value, np.ndarray) else value


def _figure(path, lm, clean, corrupted, answer, wrong, report):
    from minattn.cli.patch import _save_png

    args = argparse.Namespace(png=path, clean=clean, corrupted=corrupted, answer=answer,
                              wrong=wrong)
    _save_png(args, lm, report)


def tables(result):
    """The JSON of a run -> the markdown the walkthrough quotes."""
    runs = result["pairs"]
    heads = np.array([r["heads"] for r in runs])  # [pairs, n_layers, H]
    attribution = np.array([r["attribution"] for r in runs])
    right = sum(r["d_clean"] > 0 for r in runs)
    lines = [f"{result['model']}, {len(runs)} of {result['pairs_in_the_set']} pairs, {result['started']} to {result['finished']}"
             f" ({result['machine']}; load average {result['load_average_before'][0]:.1f} "
             f"before, {result['load_average_after'][0]:.1f} after)",
             f"clean prompts answered right (d > 0): {right} of {len(runs)}; corrupted prompts "
             f"answered their own way (d < 0): {sum(r['d_corrupted'] < 0 for r in runs)}",
             "", "| head | mean score | lowest | highest | pairs >= 0.1 | mean attribution |",
             "|---|---|---|---|---|---|"]
    mean = heads.mean(0)
    for layer, head in top_heads(mean, 8):
        lines.append(f"| layer {layer} head {head} | {mean[layer, head]:+.2f} | "
                     f"{heads[:, layer, head].min():+.2f} | {heads[:, layer, head].max():+.2f} | "
                     f"{int((heads[:, layer, head] >= 0.1).sum())} | "
                     f"{attribution[:, layer, head].mean():+.2f} |")
    lines += ["", "| layer | attention (mean) | MLP (mean) |", "|---|---|---|"]
    attn = np.array([r["attn_out"] for r in runs]).mean(0)
    mlp = np.array([r["mlp_out"] for r in runs]).mean(0)
    for layer in range(len(attn)):
        if max(abs(attn[layer]), abs(mlp[layer])) >= 0.1:
            lines.append(f"| {layer} | {attn[layer]:+.2f} | {mlp[layer]:+.2f} |")
    subject = np.array([np.array(r["resid"])[:, 1] for r in runs]).mean(0)  # [n_layers]
    last = np.array([np.array(r["resid"])[:, -1] for r in runs]).mean(0)
    lines += ["", "residual stream entering each layer, mean score patched at the subject "
              "(position 1) / at the last position:",
              " ".join(f"{l}:{s:.2f}/{t:.2f}" for l, (s, t) in enumerate(zip(subject, last)))]
    attn_of = lambda chosen, layer: float(np.mean([runs[i]["attn_out"][layer]  # noqa: E731
                                                   for i in chosen]))
    correlations = [r["correlation"] for r in runs]
    lines.append(f"correlation of attribution with patching over the heads, per pair: median "
                 f"{np.median(correlations):.2f}, min {min(correlations):.2f}")
    groups = [("attractor", "singular"), ("attractor", "plural"), ("answer", " are"),
              ("answer", " is"), ("construction", "prepositional phrase"),
              ("construction", "relative clause")]
    for key, group in groups:
        chosen = [i for i, r in enumerate(runs) if r[key] == group]
        if not chosen:
            continue
        top = top_heads(heads[chosen].mean(0), 3)
        lines.append(f"{key} {group!r} ({len(chosen)} pairs): top heads " + ", ".join(
            f"layer {l} head {h} {heads[chosen].mean(0)[l, h]:+.2f}" for l, h in top) +
            f"; attention 26, 27: {attn_of(chosen, 26):+.2f}, {attn_of(chosen, 27):+.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
