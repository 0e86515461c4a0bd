"""Regenerate the walkthrough's figures from the code: python docs/make_figures.py [--out DIR]

worked_example.png  the worked example's attention weights, with their values
saturation.png      how peaked softmax gets as d_k grows, with and without the 1/sqrt(d_k)
masks.png           causal, padding and combined masks of section 4's example
count_heads.png     the trained count model's four heads on one held-out sequence, with values
attention_head.png  one attention head: x -> q, k, v -> scores -> weights -> output (section 1)
attention_block.png one Transformer block: attention and feed-forward, residuals and norms
delta_chunks.png    the gated delta rule's chunked form: what each chunk computes, what the
                    state carries, and one chunk's triangular system
running_example.png, heads.png, language_model.png: the first reading's data flow
                    (docs/data_flow_figures.py; heads.png also shows two of SmolLM2's heads,
                    measured afresh into two_heads.json where SmolLM2 is installed)
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minattn as ma  # noqa: E402
from minattn.models import count_task as train  # noqa: E402
from minattn.display.plot import save_heatmaps  # noqa: E402
import data_flow_figures  # noqa: E402  (beside this file)


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
    attention_head(os.path.join(args.out, "attention_head.png"))
    attention_block(os.path.join(args.out, "attention_block.png"))
    delta_chunks(os.path.join(args.out, "delta_chunks.png"))
    data_flow_figures.main(["--out", args.out])  # the first reading's data flow, drawn

    masks(os.path.join(args.out, "masks.png"))

    params = train.train_count_model(seed=0, steps=args.steps)
    seq, _ = train.make_count_task(np.random.default_rng([0, 1]), 1, train.LENGTH, train.VOCAB_SIZE)
    _, w = train.count_model(params, seq, return_weights=True)
    labels = [train.ALPHABET[t] for t in seq[0]]
    heads = w[0][0]  # [H, L, L]
    # The weights are small (a row of 10 sums to 1): each cell prints its value, and the colour
    # scale stops at 0.5 rather than 1 (the few larger weights, up to 0.92, share its top colour).
    save_heatmaps(os.path.join(args.out, "count_heads.png"), heads, labels, labels,
                  titles=[f"head {h}" for h in range(train.N_HEADS)], annotate=True,
                  vmax=0.5, label="attention weight (colours stop at 0.5)",
                  suptitle="count task: who attends to whom (one held-out sequence)")
    print(f"wrote worked_example.png, saturation.png, masks.png, count_heads.png, "
          f"attention_head.png, attention_block.png, delta_chunks.png to {args.out}")
    return 0


def saturation(path):
    # The mean largest weight of a query over 10 keys, q and k with unit-variance entries: 0.1 is
    # uniform attention, 1 is one-hot. The draws of walkthrough.md's section 3 (100 queries, the
    # generator seeded with d_k), so that the figure shows the numbers printed there.
    import matplotlib.pyplot as plt

    widths = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    peak = {"unscaled: softmax(q k^T)": [], "scaled: softmax(q k^T / sqrt(d_k))": []}
    for d_k in widths:
        rng = np.random.default_rng(d_k)
        q, k = rng.normal(size=(100, d_k)), rng.normal(size=(10, d_k))
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


def masks(path):
    # walkthrough.md's section 4 example: two sentences of lengths 5 and 3, padded to 5; the
    # second one's masks. Booleans: two colours and a legend, no continuous colour scale.
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    causal = ma.causal_mask(5)
    padding = np.arange(5)[None, :] < np.array([5, 3])[:, None]  # as section 4 builds them
    mask = causal & padding[:, None, :]
    padding = np.broadcast_to(padding[1], (5, 5))
    combined = mask[1]
    colours = ListedColormap(["#eeeeee", "#2b6cb0"])
    fig, axes = plt.subplots(1, 3, figsize=(10, 4.4))
    for ax, mask, title in zip(axes, (causal, padding, combined),
                               ("causal_mask(5)",
                                "padding[1], the same for every\nquery (sentence 1, length 3)",
                                "mask[1]: causal & padding")):
        ax.imshow(mask, cmap=colours, vmin=0, vmax=1)
        for (i, j), value in np.ndenumerate(mask):
            ax.text(j, i, "1" if value else "0", ha="center", va="center", fontsize=9,
                    color="white" if value else "black")
        ax.set_xticks(range(5))
        ax.set_yticks(range(5))
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        ax.set_title(title, fontsize=10)
    fig.legend(handles=[Patch(color="#2b6cb0", label="True (1): may attend"),
                        Patch(color="#eeeeee", label="False (0): masked")],
               loc="lower center", ncol=2, fontsize=9, frameon=False, bbox_to_anchor=(0.5, -0.01))
    fig.suptitle("masks of two sentences of lengths 5 and 3, padded to 5: the second sentence's")
    fig.tight_layout(rect=(0, 0.09, 1, 0.93))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _box(ax, x, y, text, color="#dde8f6", width=None):
    ax.text(x, y, text, ha="center", va="center", fontsize=9, family="monospace",
            bbox=dict(boxstyle="round,pad=0.4", facecolor=color, edgecolor="#555555"))


def _arrow(ax, start, end, shrink=0):
    ax.annotate("", xy=end, xytext=start, arrowprops=dict(
        arrowstyle="-|>", color="#333333", lw=1.2, shrinkA=shrink, shrinkB=shrink))


def _matrix(a):
    return "\n".join("[" + " ".join(f"{v:5.2f}" for v in row) + "]" for row in a)


def attention_head(path):
    # One head on the worked example's three tokens. In a model Q = x W^Q, K = x W^K, V = x W^V;
    # the example takes Q = K = x (W^Q = W^K = identity) and V as given.
    import matplotlib.pyplot as plt

    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    v = np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 2.0]])
    scores = x @ x.T / np.sqrt(2)
    out, weights = ma.scaled_dot_product_attention(x, x, v)
    fig, ax = plt.subplots(figsize=(14, 5.6))
    ax.set_xlim(0, 14)
    ax.set_ylim(0, 5.6)
    ax.axis("off")
    _box(ax, 1.1, 2.8, "x: 3 tokens,\n2 features each\n\n" + _matrix(x), "#f3f3f3")
    _box(ax, 4.1, 4.7, "Q = x W^Q\n(what each token\nlooks for)\n" + _matrix(x))
    _box(ax, 4.1, 2.8, "K = x W^K\n(what each token\noffers)\n" + _matrix(x))
    _box(ax, 4.1, 0.9, "V (in a model, x W^V)\n(what each token\npasses on)\n" + _matrix(v))
    _box(ax, 7.4, 3.75, "scores = Q K^T / sqrt(d_k)\nrow i: query i . each key\n"
         + _matrix(scores), "#fdf0d5")
    _box(ax, 10.5, 3.75, "weights = softmax(scores)\neach row >= 0, sums to 1\n"
         + _matrix(weights), "#fdf0d5")
    _box(ax, 12.7, 0.9, "output = weights V\nrow i: a weighted\naverage of V's rows\n"
         + _matrix(out), "#dff3e0")
    for end in ((3.0, 4.7), (3.0, 2.8), (3.0, 0.9)):
        _arrow(ax, (2.1, 2.8), end)
    _arrow(ax, (5.2, 4.6), (5.8, 4.0))
    _arrow(ax, (5.2, 2.9), (5.8, 3.5))
    _arrow(ax, (8.85, 3.75), (9.15, 3.75))
    _arrow(ax, (11.5, 3.0), (12.3, 1.8))
    _arrow(ax, (5.2, 0.9), (11.6, 0.9))
    ax.set_title("one attention head, on the worked example of section 3 (Q = K = x, V given)")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def attention_block(path):
    # A post-norm encoder block (the 2017 paper): two sublayers, each wrapped in a residual
    # connection and a normalization; a model stacks N such blocks. Every arrow starts and ends
    # at a box's edge (half-heights below, in axis units: 1 unit = 1 inch), never on its text.
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 8.0))
    ax.set_xlim(0, 6.5)
    ax.set_ylim(0, 8.0)
    ax.axis("off")
    boxes = [  # (y, half-height, text, colour)
        (0.4, 0.15, "x: L tokens, D features each  [L, D]", "#f3f3f3"),
        (1.8, 0.33, "multi-head attention\nH heads side by side, concatenated, W^O\n"
                    "(tokens exchange information)", "#dde8f6"),
        (3.2, 0.15, "add & norm:  norm(x + attention(x))", "#fdf0d5"),
        (4.7, 0.40, "feed-forward network\na small two-layer network,\napplied to every token\n"
                    "(each token on its own)", "#dde8f6"),
        (6.2, 0.15, "add & norm:  norm(h + ffn(h))", "#fdf0d5"),
        (7.4, 0.15, "output  [L, D]: the next block's input", "#dff3e0"),
    ]
    for y, _, text, colour in boxes:
        _box(ax, 2.5, y, text, colour)
    for (y0, h0, *_), (y1, h1, *_) in zip(boxes, boxes[1:]):
        _arrow(ax, (2.5, y0 + h0 + 0.06), (2.5, y1 - h1 - 0.06))
    # The residual paths: the sublayer's input leaves the main path in the gap below the
    # sublayer, goes around it (right of the boxes) and is added back in the add & norm box.
    for below, norm in ((0, 2), (2, 4)):
        y_below, h_below = boxes[below][:2]
        y_sub, h_sub = boxes[below + 1][:2]
        y0 = (y_below + h_below + y_sub - h_sub) / 2  # halfway along the gap
        y1 = boxes[norm][0]
        ax.plot([2.5, 5.0, 5.0], [y0, y0, y1], color="#b03a2e", lw=1.2)
        ax.annotate("", xy=(4.45, y1), xytext=(5.0, y1),
                    arrowprops=dict(arrowstyle="-|>", color="#b03a2e", lw=1.2))
        ax.text(5.1, (y0 + y1) / 2, "residual:\nadd the\ninput back", fontsize=8, color="#b03a2e",
                va="center")
    ax.text(0.0, 3.8, "x N blocks", fontsize=10, rotation=90, va="center")
    ax.set_title("one Transformer (encoder) block, post-norm as in the 2017 paper")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def delta_chunks(path, length=24, chunk=6, d_k=4):
    # The delta rule's output is linear in the values: out = M v for an [L, L] lower-triangular M
    # fixed by q, k, β and g. M is read off by passing the identity as v (one value per token).
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    rng = np.random.default_rng(0)
    q, k = (ma.l2_normalize(rng.normal(size=(length, d_k))) for _ in range(2))
    beta, g = np.full(length, 0.8), np.full(length, -0.1)
    m = ma.delta_rule(q, k, np.eye(length), beta, g, chunk_size=chunk)  # [L, L]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.2), width_ratios=[1.6, 1])
    left.imshow(np.abs(m), cmap="Greys", vmin=0, vmax=np.abs(m).max())
    for c in range(0, length, chunk):  # each chunk's block on the diagonal: computed inside it
        left.add_patch(Rectangle((c - 0.5, c - 0.5), chunk, chunk, fill=False, lw=2,
                                 edgecolor="#1f6fb4"))
        if c:  # everything left of the block: the earlier chunks, read through the state
            left.add_patch(Rectangle((-0.5, c - 0.5), c, chunk, facecolor="#e8a33d", alpha=0.25,
                                     edgecolor="#b06d00", lw=1))
            left.text(c / 2 - 0.5, c + chunk / 2 - 0.5, f"S_{c // chunk}", ha="center",
                      va="center", fontsize=10, color="#7a4a00")
    left.set_xlabel("value of token s")
    left.set_ylabel("output of token t")
    left.set_title(f"|M|, out = M v (L = {length}, chunk_size = {chunk}, d_k = {d_k}):\n"
                   "blue: within a chunk, matrix products and one triangular solve;\n"
                   "orange: earlier chunks, only through the state S_c they left",
                   fontsize=9)
    a = np.tril((beta[:chunk, None] * k[:chunk]) @ k[:chunk].T
                * np.exp(np.cumsum(g[:chunk])[:, None] - np.cumsum(g[:chunk])[None, :]), -1)
    system = np.eye(chunk) + a
    right.imshow(system, cmap="RdBu_r", vmin=-2, vmax=2)
    for (i, j), value in np.ndenumerate(system):
        if j <= i:
            right.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
    right.set_title("one chunk's system I + A, A_ij = β_i (k_i · k_j) e^(G_i - G_j), j < i:\n"
                    "(I + A) U = β v and (I + A) W = β k e^G, solved by forward substitution",
                    fontsize=9)
    right.set_xticks(range(chunk))
    right.set_yticks(range(chunk))
    fig.suptitle("the gated delta rule, chunked (the WY / UT transform)", y=1.04)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
