"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5)."""
import numbers

import numpy


def positional_encoding(n_positions, d_model, *, dtype=numpy.float64, like=None):
    """Sinusoidal positional encodings (Vaswani et al. 2017, 3.5) -> [n_positions, d_model]:
    PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(the same angle); add them to the
    token embeddings. dtype= sets the result's dtype, like= the array library (e.g. CuPy).
    Raises TypeError unless n_positions and d_model are positive ints."""
    # -> [n_positions, d_model]; PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same).
    # Attention alone is permutation equivariant: adding these is what tells tokens apart by place.
    # like= builds it with the array library of `like` (a CuPy array gives a CuPy table).
    for name, n in (("n_positions", n_positions), ("d_model", d_model)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise TypeError(f"{name} must be a positive int, got {n!r}")
    position = numpy.arange(n_positions, dtype=numpy.float64, like=like)[:, None]  # [L, 1]
    features = numpy.arange(d_model, like=like)
    pair = features // 2  # feature 2i and 2i+1 share frequency i
    angle = position / 10000.0 ** (2.0 * pair / d_model)  # [L, D]
    even = features % 2 == 0
    return numpy.where(even, numpy.sin(angle), numpy.cos(angle)).astype(dtype)
