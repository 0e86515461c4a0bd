"""Attention heatmaps as images with matplotlib (the optional extra `plot`: pip install '.[plot]').

Bounded: the maps sit in a grid of at most COLUMNS per row, each map at most MAX_TOKENS rows and
columns (refused beyond, with a message naming the limit), titles cut to TITLE_CHARS characters.
The colour map is viridis (readable in grey and with colour blindness); each cell's value is
printed in it when the cells are big enough to hold it.
"""
import math

COLUMNS = 4
MAX_TOKENS = 128
TITLE_CHARS = 80
SUFFIXES = (".png", ".svg", ".pdf")


def save_heatmaps(path, weights, row_labels, col_labels, titles=None, suptitle=None,
                  label="attention weight", annotate=None, vmax=1.0, axis_labels=("key", "query")):
    """weights [n_maps, n_rows, n_cols] -> one image (PNG, SVG or PDF, by path's suffix) with a
    heatmap per map (e.g. per head) in a grid; annotate=None prints the values when there are at
    most 16 rows and columns (True: always, False: never). The colour scale runs from 0 to vmax
    (1 by default; smaller weights are easier to tell apart on a shorter scale). axis_labels: the
    (x, y) axis labels."""
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
    _check_heatmaps(path, weights, row_labels, col_labels)
    n, size = weights.shape[0], max(weights.shape[1:])
    annotate = size <= 16 if annotate is None else annotate
    columns = min(n, COLUMNS)
    grid_rows = math.ceil(n / columns)
    inches = min(0.2 * size + 1.5, 6.0)  # one map; the grid stays under 4 x 6 inches wide
    fig, axes = plt.subplots(grid_rows, columns, squeeze=False, constrained_layout=True,
                             figsize=(inches * columns + 1.5, inches * grid_rows))
    font = max(4.0, min(9.0, 72 * inches / (size + 4) * 0.55))
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.axis("off")
            continue
        image = ax.imshow(weights[i], vmin=0.0, vmax=vmax, cmap="viridis")
        if annotate:
            for (r, c), value in numpy.ndenumerate(weights[i]):
                ax.text(c, r, f"{value:.2f}"[1:] if value < 1 else "1", ha="center", va="center",
                        fontsize=font * 0.8, color="black" if value > 0.55 * vmax else "white")
        ax.set_xticks(range(len(col_labels)), [_cut(c, 12) for c in col_labels], rotation=90,
                      fontsize=font)
        ax.set_yticks(range(len(row_labels)), [_cut(r, 12) for r in row_labels], fontsize=font)
        ax.set_xlabel(axis_labels[0])
        ax.set_ylabel(axis_labels[1])
        if titles:
            ax.set_title(_cut(titles[i], TITLE_CHARS))
    fig.colorbar(image, ax=axes, shrink=0.6, label=label)
    if suptitle:
        fig.suptitle(_cut(suptitle, TITLE_CHARS))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def save_score_grids(path, grids, titles, suptitle=None, label="score"):
    """grids [n_maps, n_layers, H] (scores in [0, 1]) -> one image with a layer x head grid per
    map, side by side, each cell's value printed in it (two decimals)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy

    grids = numpy.asarray(grids, dtype=float)
    if not str(path).lower().endswith(SUFFIXES):
        raise ValueError(f"the image file must end in {', '.join(SUFFIXES)}, got {str(path)!r}")
    if grids.ndim != 3 or len(titles) != grids.shape[0]:
        raise ValueError(f"grids must be [n_maps, n_layers, H] with a title each, got shape "
                         f"{grids.shape} and {len(titles)} titles")
    n, n_layers, n_heads = grids.shape
    fig, axes = plt.subplots(1, n, squeeze=False, constrained_layout=True,
                             figsize=(n * (0.42 * n_heads + 0.9) + 1.2, 0.27 * n_layers + 1.3))
    for ax, grid, title in zip(axes.flat, grids, titles):
        image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        for (r, c), value in numpy.ndenumerate(grid):
            ax.text(c, r, f"{value:.2f}"[1:] if value < 1 else "1", ha="center", va="center",
                    fontsize=6, color="black" if value > 0.55 else "white")
        ax.set_xticks(range(n_heads), range(n_heads), fontsize=7)
        ax.set_yticks(range(n_layers), range(n_layers), fontsize=7)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(_cut(title, TITLE_CHARS), fontsize=10)
    return _finish(fig, axes, image, label, suptitle, path)


def _finish(fig, axes, image, label, suptitle, path):
    # a grid figure's colour bar and title, written to path and closed -> path
    import matplotlib.pyplot as plt

    fig.colorbar(image, ax=axes, shrink=0.6, label=label)
    if suptitle:
        fig.suptitle(_cut(suptitle, TITLE_CHARS), fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _cut(text, n):
    text = str(text)
    return text if len(text) <= n else text[:n - 1] + "…"


def _check_heatmaps(path, weights, row_labels, col_labels):
    if not str(path).lower().endswith(SUFFIXES):
        raise ValueError(f"the image file must end in {', '.join(SUFFIXES)}, got {str(path)!r}")
    if weights.ndim != 3 or weights.shape[1:] != (len(row_labels), len(col_labels)):
        raise ValueError(f"weights must be [n_maps, {len(row_labels)}, {len(col_labels)}] for "
                         f"the labels given, got shape {weights.shape}")
    if max(weights.shape[1:]) > MAX_TOKENS:
        raise ValueError(f"a heatmap shows at most {MAX_TOKENS} rows and columns, got "
                         f"{weights.shape[1]} x {weights.shape[2]}: shorten the text")


def save_curve(path, values, title=None, xlabel="step", ylabel="training loss"):
    """values [n] -> one image of the curve (a line per step)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not str(path).lower().endswith(SUFFIXES):
        raise ValueError(f"the image file must end in {', '.join(SUFFIXES)}, got {str(path)!r}")
    fig, ax = plt.subplots(figsize=(6, 3.5), constrained_layout=True)
    ax.plot(range(len(values)), values, lw=1, color="#0072B2")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(_cut(title, TITLE_CHARS))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def save_signed_grids(path, grids, titles, columns, suptitle=None, label="score", ylabel="layer"):
    """grids: a list of [n_layers, n_cols] signed scores (a patching experiment's: 0 nothing,
    1 all of the effect), each with its title and its column labels (columns: a list of
    lists) -> one image, the grids side by side on one diverging colour scale centred on 0
    (red positive, blue negative), each cell's value printed where it is 0.1 or more away
    from 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy

    if not str(path).lower().endswith(SUFFIXES):
        raise ValueError(f"the image file must end in {', '.join(SUFFIXES)}, got {str(path)!r}")
    grids = [numpy.asarray(g, dtype=float) for g in grids]
    if len(titles) != len(grids) or len(columns) != len(grids) or any(
            g.ndim != 2 or g.shape[1] != len(c) for g, c in zip(grids, columns)):
        raise ValueError(f"each grid must be [n_layers, n_cols] with a title and n_cols column "
                         f"labels, got shapes {[g.shape for g in grids]}, {len(titles)} titles")
    scale = max(1.0, max(float(numpy.abs(g).max()) for g in grids))
    widths = [max(g.shape[1], 2) for g in grids]
    fig, axes = plt.subplots(1, len(grids), squeeze=False, constrained_layout=True,
                             gridspec_kw={"width_ratios": widths},
                             figsize=(0.42 * sum(widths) + 1.0 * len(grids) + 1.2,
                                      0.24 * max(g.shape[0] for g in grids) + 1.5))
    for ax, grid, title, cols in zip(axes.flat, grids, titles, columns):
        image = ax.imshow(grid, vmin=-scale, vmax=scale, cmap="RdBu_r", aspect="auto")
        for (r, c), value in numpy.ndenumerate(grid):
            if abs(value) >= 0.1:
                ax.text(c, r, f"{value:.1f}", ha="center", va="center", fontsize=6,
                        color="white" if abs(value) > 0.6 * scale else "black")
        ax.set_xticks(range(len(cols)), [_cut(c, 10) for c in cols], fontsize=7, rotation=90)
        ax.set_yticks(range(grid.shape[0]), range(grid.shape[0]), fontsize=6)
        ax.set_ylabel(ylabel)
        ax.set_title(_cut(title, TITLE_CHARS), fontsize=9)
    return _finish(fig, axes, image, label, suptitle, path)
