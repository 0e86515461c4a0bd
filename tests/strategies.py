"""Shared hypothesis strategies and dtype-aware tolerances for the property tests."""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# (rtol, atol) per dtype: loose enough for rounding in that dtype, tight enough to catch a bug.
TOLERANCES = {
    np.dtype(np.float16): (2e-2, 2e-2),
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float64): (1e-10, 1e-12),
}


def tolerance(dtype):
    rtol, atol = TOLERANCES[np.dtype(dtype)]
    return {"rtol": rtol, "atol": atol}


def float_arrays(shape, dtype=np.float64, bound=3.0):
    """Arrays of bounded, finite floats (no NaN/inf, no subnormal surprises)."""
    width = np.dtype(dtype).itemsize * 8
    elements = st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=width,
                         allow_subnormal=False)
    return hnp.arrays(np.dtype(dtype), shape, elements=elements)


def additive_biases(shape, dtype=np.float64, bound=3.0):
    """Floating masks (added to the scores): bounded finite floats, never only 0s and 1s with a
    1 among them (a keep/drop mask written as floats, which minattn refuses by name)."""
    return float_arrays(shape, dtype, bound).filter(
        lambda b: not (np.all((b == 0) | (b == 1)) and np.any(b == 1)))


small = st.integers(1, 5)
lengths = st.integers(1, 6)


@st.composite
def attention_inputs(draw, dtype=np.float64, batch=True):
    """q [B, L_q, d_k], k [B, L_k, d_k], v [B, L_k, d_v] with independent sizes."""
    b = (draw(st.integers(1, 3)),) if batch else ()
    l_q, l_k, d_k, d_v = draw(lengths), draw(lengths), draw(small), draw(small)
    q = draw(float_arrays(b + (l_q, d_k), dtype))
    k = draw(float_arrays(b + (l_k, d_k), dtype))
    v = draw(float_arrays(b + (l_k, d_v), dtype))
    return q, k, v


@st.composite
def bool_masks(draw, shape):
    return draw(hnp.arrays(np.bool_, shape))


@st.composite
def model_sizes(draw, min_d_model=1):
    """(batch, length, d_model, n_heads, d_ff) with d_model divisible by n_heads."""
    n_heads = draw(st.integers(1, 3))
    least = -(-min_d_model // n_heads)  # ceil: the fewest features per head
    d_model = n_heads * draw(st.integers(least, max(3, least + 2)))
    return draw(st.integers(1, 3)), draw(lengths), d_model, n_heads, draw(st.integers(1, 8))


seeds = st.integers(0, 2**32 - 1)


def tree_map(f, tree):
    """Apply f to every array of nested dicts/lists of params."""
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tree_map(f, v) for v in tree]
    return f(tree)


def cast_params(tree, dtype):
    return tree_map(lambda a: a.astype(dtype), tree)


def perturbed(params, seed, scale=0.3):
    """Params plus seeded noise, so zero biases and unit gammas cannot hide a bug."""
    rng = np.random.default_rng(seed)
    return tree_map(lambda a: a + scale * rng.normal(size=a.shape), params)
