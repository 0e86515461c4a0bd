"""Attention heatmaps as images with matplotlib (the optional extra `plot`: pip install '.[plot]')."""


def save_heatmaps(path, weights, row_labels, col_labels, titles=None, suptitle=None,
                  label="attention weight", annotate=False, vmax=1.0):
    """weights [n_maps, n_rows, n_cols] -> one PNG with a heatmap per map (e.g. per head);
    annotate=True writes each cell's value (2 decimals) in it; the colour scale runs from 0 to
    vmax (1 by default; smaller weights are easier to tell apart on a shorter scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "saving plots needs matplotlib: pip install matplotlib (or, in your minattn clone, "
            "pip install '.[plot]')"
        ) from None
    import numpy

    weights = numpy.asarray(weights, dtype=float)
    n = weights.shape[0]
    size = 0.35 * max(weights.shape[1:]) + 1.5
    fig, axes = plt.subplots(1, n, figsize=(size * n + 1, size + 0.5), squeeze=False)
    for i, ax in enumerate(axes[0]):
        image = ax.imshow(weights[i], vmin=0.0, vmax=vmax, cmap="viridis")
        if annotate:
            for (r, c), value in numpy.ndenumerate(weights[i]):
                ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=7 if
                        max(weights.shape[1:]) > 5 else 10,
                        color="black" if value > 0.5 * vmax else "white")
        ax.set_xticks(range(len(col_labels)), [str(c) for c in col_labels], rotation=90)
        ax.set_yticks(range(len(row_labels)), [str(r) for r in row_labels])
        ax.set_xlabel("key")
        ax.set_ylabel("query")
        if titles:
            ax.set_title(titles[i])
    fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label=label)
    if suptitle:
        fig.suptitle(suptitle)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
