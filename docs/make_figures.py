"""Regenerate the walkthrough's figures from the code: python docs/make_figures.py [--out DIR]

worked_example.png  the worked example's attention weights, with their values
saturation.png      how peaked softmax gets as d_k grows, with and without the 1/sqrt(d_k)
masks.png           causal, padding and combined masks (True = may attend)
count_heads.png     the trained count model's four heads on one held-out sequence
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minattn as ma  # noqa: E402
from minattn.models import count_task as train  # noqa: E402
from minattn.display.plot import save_heatmaps  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures"))
    parser.add_argument("--steps", type=int, default=1000, help="training steps of the count model")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]])
    _, weights = ma.scaled_dot_product_attention(q, q, v)
    tokens = ["[1,0]", "[0,1]", "[1,1]"]
    save_heatmaps(os.path.join(args.out, "worked_example.png"), weights[None], tokens, tokens,
                  titles=["softmax(Q K^T / sqrt(2))"], annotate=True)
    saturation(os.path.join(args.out, "saturation.png"))

    causal = ma.causal_mask(6)
    padding = ma.padding_mask(np.array([4]), 6)[0, 0]  # [1, 6]
    maps = np.stack([causal, np.broadcast_to(padding, (6, 6)), causal & padding]).astype(float)
    save_heatmaps(os.path.join(args.out, "masks.png"), maps, range(6), range(6),
                  titles=["causal_mask(6)", "padding_mask([4], 6)", "causal & padding"],
                  suptitle="masks: 1 = may attend", label="mask value")

    params = train.train_count_model(seed=0, steps=args.steps)
    seq, _ = train.make_count_task(np.random.default_rng([0, 1]), 1, train.LENGTH, train.VOCAB_SIZE)
    _, w = train.count_model(params, seq, return_weights=True)
    labels = [train.ALPHABET[t] for t in seq[0]]
    save_heatmaps(os.path.join(args.out, "count_heads.png"), w[0][0], labels, labels,
                  titles=[f"head {h}" for h in range(train.N_HEADS)],
                  suptitle="count task: who attends to whom (one held-out sequence)")
    print(f"wrote worked_example.png, saturation.png, masks.png, count_heads.png to {args.out}")
    return 0


def saturation(path):
    # The mean largest weight of a query over 10 keys, q and k with unit-variance entries: 0.1 is
    # uniform attention, 1 is one-hot. The same measurement as walkthrough.md's section 4 table.
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    widths = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    peak = {"unscaled: softmax(q k^T)": [], "scaled: softmax(q k^T / sqrt(d_k))": []}
    for d_k in widths:
        q, k = rng.normal(size=(200, d_k)), rng.normal(size=(10, d_k))
        peak["unscaled: softmax(q k^T)"].append(ma.softmax(q @ k.T).max(axis=-1).mean())
        peak["scaled: softmax(q k^T / sqrt(d_k))"].append(
            ma.softmax(q @ k.T / np.sqrt(d_k)).max(axis=-1).mean())
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, values in peak.items():
        ax.plot(widths, values, marker="o", label=name)
    ax.axhline(0.1, color="gray", linestyle=":", label="uniform over 10 keys")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("d_k")
    ax.set_ylabel("mean largest weight")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("softmax saturates as d_k grows, unless the scores are scaled")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
