"""Attention maps drawn in the terminal with Unicode shading: no plotting library needed."""
import numpy

SHADES = " ░▒▓█"  # weight 0 -> blank, weight 1 -> full block


def heatmap_text(weights, row_labels, col_labels, title=None):
    # [n_rows, n_cols] weights in [0, 1] -> a string; rows are queries, columns are keys.
    weights = numpy.asarray(weights, dtype=float)
    if weights.ndim != 2 or weights.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"weights of shape {weights.shape} do not match {len(row_labels)} row "
                         f"labels and {len(col_labels)} column labels")
    rows = [str(r) for r in row_labels]
    cols = [str(c) for c in col_labels]
    width = max([len(r) for r in rows] + [1])
    cell = max([len(c) for c in cols] + [2])
    levels = numpy.clip(numpy.rint(weights * (len(SHADES) - 1)), 0, len(SHADES) - 1).astype(int)
    lines = [title] if title else []
    lines.append(" " * (width + 1) + " ".join(c.rjust(cell) for c in cols))
    for label, row in zip(rows, levels):
        lines.append(label.rjust(width) + " " + " ".join(SHADES[i] * cell for i in row))
    lines.append(f"{'':>{width}} shading: " + "  ".join(
        f"{SHADES[i]}={i / (len(SHADES) - 1):.2f}" for i in range(len(SHADES))))
    return "\n".join(lines)
