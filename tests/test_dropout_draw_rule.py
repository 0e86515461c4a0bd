"""Dropout's rule for each entry: with u its uniform draw from rng.random (on [0, 1)), the entry
is dropped where u < rate and kept, scaled by 1 / (1 - rate), where u >= rate; so the chance of a
drop is exactly rate. A Generator-like rng (as CuPy's) whose draws lie on a grid k / n shows the
rule at its boundary: with rate = 4 / 16 exactly the draws 0, 1/16, 2/16, 3/16 drop."""
import numpy as np

import minattn as ma


class GridRng:
    """Generator-like: random(shape) gives 0, 1/n, ..., (n-1)/n in a shuffled order (n draws)."""

    def random(self, shape):
        n = int(np.prod(shape))
        return np.random.default_rng(0).permutation(np.arange(n) / n).reshape(shape)


def test_an_entry_drops_where_its_draw_is_below_rate_and_stays_where_it_equals_it():
    x = np.random.default_rng(1).normal(size=(4, 3))
    _, weights = ma.scaled_dot_product_attention(x, x, x)
    _, dropped = ma.scaled_dot_product_attention(x, x, x, dropout=0.25, rng=GridRng())
    u = GridRng().random((4, 4))
    np.testing.assert_array_equal(dropped == 0, u < 0.25)
    assert (dropped == 0).sum() == 4  # exactly rate · 16 entries
    np.testing.assert_allclose(dropped, np.where(u >= 0.25, weights / 0.75, 0.0), rtol=1e-15)
