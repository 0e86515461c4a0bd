"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5)."""
import numbers

import numpy

from .engine.devices import arange


def positional_encoding(n_positions, d_model, *, dtype=numpy.float64, like=None):
    """Sinusoidal positional encodings (Vaswani et al. 2017, 3.5) -> [n_positions, d_model]:
    PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(the same angle); add them to the
    token embeddings. dtype= sets the result's dtype, like= the array library (e.g. CuPy).
    Raises TypeError unless n_positions is an int >= 0 (0: an empty table, as causal_mask(0))
    and d_model a positive int."""
    # -> [n_positions, d_model]; PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same).
    # Attention alone is permutation equivariant: adding these is what tells tokens apart by place.
    _check_positional_encoding(n_positions, d_model)
    position = arange(n_positions, like)[:, None]  # [L, 1]
    features = arange(d_model, like)  # [D]
    pair = features // 2  # feature 2i and 2i+1 share frequency i
    angle = position / 10000.0 ** (2.0 * pair / d_model)  # [L, D]
    return numpy.where(features % 2 == 0, numpy.sin(angle), numpy.cos(angle)).astype(dtype)


def _check_positional_encoding(n_positions, d_model):
    for name, n, least in (("n_positions", n_positions, 0), ("d_model", d_model, 1)):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < least:
            raise TypeError(f"{name} must be a {'non-negative' if least == 0 else 'positive'} "
                            f"int, got {n!r}")
