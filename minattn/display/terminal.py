"""Attention maps drawn in the terminal with Unicode shading: no plotting library needed.

The view is bounded: at most `width` columns (100 by default). Long labels are numbered: the
columns show the key's index and each row reads "index label"; when the keys still do not fit,
they are split into pages of columns, each page printed under the last with its key range.
"""
import numpy

SHADES = " ░▒▓█"  # weight 0 -> blank, weight 1 -> full block
LABEL_WIDTH = 14  # row labels are cut to this many characters (an ellipsis says so)


def heatmap_text(weights, row_labels, col_labels, title=None, width=100):
    # [n_rows, n_cols] weights in [0, 1] -> a string; rows are queries, columns are keys.
    weights = numpy.asarray(weights, dtype=float)
    if weights.ndim != 2 or weights.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"weights of shape {weights.shape} do not match {len(row_labels)} row "
                         f"labels and {len(col_labels)} column labels")
    cols = [str(c) for c in col_labels]
    numbered = max([len(c) for c in cols] + [0]) > 2  # long labels: columns show indices
    if numbered:
        cols = [str(j) for j in range(len(cols))]
    digits = len(str(len(row_labels) - 1))
    rows = [_cut(f"{i:>{digits}} {r}" if numbered else str(r)) for i, r in enumerate(row_labels)]
    label = max([len(r) for r in rows] + [1])
    cell = max([len(c) for c in cols] + [2])
    per_page = max(1, (width - label - 1) // (cell + 1))
    levels = numpy.clip(numpy.rint(weights * (len(SHADES) - 1)), 0, len(SHADES) - 1).astype(int)
    lines = [title] if title else []
    for start in range(0, max(len(cols), 1), per_page):
        stop = min(start + per_page, len(cols))
        if len(cols) > per_page:
            lines.append(f"keys {start} to {stop - 1} of {len(cols)}:")
        lines.append(" " * (label + 1) + " ".join(c.rjust(cell) for c in cols[start:stop]))
        for name, row in zip(rows, levels):
            lines.append(name.ljust(label) + " " + " ".join(SHADES[i] * cell
                                                            for i in row[start:stop]))
    lines.append(f"{'':>{min(label, 4)}} shading: " + "  ".join(
        f"{SHADES[i]}={i / (len(SHADES) - 1):.2f}" for i in range(len(SHADES))))
    return "\n".join(lines)


def _cut(text):
    return text if len(text) <= LABEL_WIDTH else text[:LABEL_WIDTH - 1] + "…"
