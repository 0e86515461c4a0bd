"""engine/reductions: row_max, NumPy's max along rows, taken down a transposed copy's columns for
short rows (softmax and the losses shifted by it, their results unchanged to the last bit); and
row_dot, each row's dot product."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn as ma
from minattn.engine import reductions
from minattn.engine.reductions import SHORT_ROW, row_dot, row_max

SPECIAL = st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 6e4, -6e4])


@st.composite
def arrays_with_specials(draw, dtype=np.float32):
    # [.., n] with n on both sides of SHORT_ROW, some entries -inf, inf, NaN or signed zeros
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    shape = shape[:-1] + (draw(st.sampled_from([1, 2, 3, 16, 63, SHORT_ROW, SHORT_ROW + 1, 130])),)
    x = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1))).normal(size=shape).astype(dtype)
    for _ in range(draw(st.integers(0, 6))):
        x[tuple(draw(st.integers(0, s - 1)) for s in shape)] = draw(SPECIAL)
    return x


def _same_bits_but_the_sign_of_zero(a, b):
    # NaN where NaN, and equal elsewhere (a zero max of either sign, which no shift tells apart)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


@given(arrays_with_specials(), st.sampled_from([np.float32, np.float64, np.float16]))
def test_row_max_is_numpys_max_along_the_last_axis(x, dtype):
    x = x.astype(dtype)
    assert _same_bits_but_the_sign_of_zero(row_max(x), x.max(axis=-1, keepdims=True))
    assert _same_bits_but_the_sign_of_zero(row_max(x, x.ndim - 1), x.max(axis=-1, keepdims=True))


@pytest.mark.parametrize("n", [2, 16, 30, 32, 50, 63, SHORT_ROW])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("contiguous", [True, False])
def test_row_max_over_many_blocks_of_rows_is_numpys_max(n, dtype, contiguous):
    # scores of a batch of sequences, more rows than one block of BLOCK_BYTES holds (and a
    # last block of fewer), with specials in the first, a middle and the last row; a strided
    # view (every other key of wider rows) taken as it is
    rng = np.random.default_rng(n)
    rows = 3 * (reductions.BLOCK_BYTES // (n * np.dtype(dtype).itemsize)) + 7
    x = rng.normal(size=(rows // 7 + 1, 7, n if contiguous else 2 * n)).astype(dtype)
    x = x if contiguous else x[..., ::2]
    x[0, 0, 0], x[0, 0, -1], x[-1, -1, :] = np.nan, np.inf, -np.inf
    x[x.shape[0] // 2, 3, :] = -0.0
    assert x.reshape(-1, n).shape[0] > 3 * (reductions.BLOCK_BYTES // (n * x.itemsize))
    assert _same_bits_but_the_sign_of_zero(row_max(x), x.max(axis=-1, keepdims=True))


@given(arrays_with_specials())
def test_row_max_along_another_axis_is_numpys(x):
    assert np.array_equal(row_max(x, 0), x.max(axis=0, keepdims=True), equal_nan=True)


def _softmax_shifted_by_numpys_max(x, mask=None):
    # attention.softmax as it read before row_max: the same operations, x.max as the shift
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    x_max = x.max(axis=-1, keepdims=True)
    x_max[x_max == -np.inf] = 0.0
    x_max[x_max == np.inf] = np.nan
    e = np.exp(x - x_max)
    total = e.sum(axis=-1, keepdims=True)
    total[total == 0] = 1.0
    return e / total


@given(arrays_with_specials(), st.booleans(), st.integers(0, 2 ** 32 - 1))
def test_softmax_is_unchanged_to_the_last_bit(x, masked, seed):
    mask = np.random.default_rng(seed).random(x.shape) < 0.7 if masked else None
    with np.errstate(invalid="ignore", over="ignore"):
        expected = _softmax_shifted_by_numpys_max(x, mask)
    got = ma.softmax(x, mask=mask)
    assert got.dtype == expected.dtype
    # bit for bit, signed zeros included (a masked entry is +0 either way)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32)) or \
        np.array_equal(got, expected, equal_nan=True) and np.isnan(expected).any()


@pytest.mark.parametrize("width", [8, SHORT_ROW, 1000])
def test_log_sum_exp_and_the_fused_loss_are_unchanged_to_the_last_bit(width):
    from minattn.training import losses

    rng = np.random.default_rng(width)
    logits = rng.normal(size=(3, 5, width)).astype(np.float32) * 10
    top = logits.max(axis=-1, keepdims=True)
    expected = top + np.log(np.sum(np.exp(logits - top), axis=-1, keepdims=True))
    assert np.array_equal(losses._log_sum_exp(logits), expected)
    h = rng.normal(size=(2, 4, 6)).astype(np.float32)
    w = rng.normal(size=(6, width)).astype(np.float32)
    targets, counted = rng.integers(0, width, size=(2, 4)), rng.random((2, 4)) < 0.8
    value, grads = losses.unembedded_nll_and_gradient(("h",), h, w, None, targets, counted)
    picked = np.flatnonzero(counted)
    rows = (h.reshape(-1, 6)[picked] @ w)
    top = rows.max(axis=-1, keepdims=True)
    e = np.exp(rows - top)
    expected_total = float(np.sum(top + np.log(e.sum(-1, keepdims=True))
                                  - np.take_along_axis(rows, targets.reshape(-1)[picked, None], -1),
                                  dtype=np.float64))
    assert value == np.float32(expected_total)


@given(st.integers(0, 2 ** 32 - 1), st.integers(0, 300), st.sampled_from([np.float32, np.float64]))
def test_row_dot_is_the_sum_of_the_product_within_rounding(seed, n, dtype):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, 3, 1, n)).astype(dtype), rng.normal(size=(3, 4, n)).astype(dtype)
    got = row_dot(a, b)  # broadcasting as a * b does
    exact = (a.astype(np.float64) * b).sum(-1, keepdims=True)
    assert got.shape == (2, 3, 4, 1) and got.dtype == dtype
    bound = (np.abs(a.astype(np.float64)) * np.abs(b)).sum(-1, keepdims=True)
    assert np.all(np.abs(got - exact) <= 2 * max(n, 1) * np.finfo(dtype).eps * bound)


def test_row_dot_is_differentiable_twice():
    from autograd import grad
    import autograd.numpy as anp

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 5)), rng.normal(size=(2, 3, 5))
    f = lambda a: anp.sum(row_dot(a, b) ** 2)  # d/da = 2 (a·b) b; d²: 2 b bᵀ along each row
    np.testing.assert_allclose(grad(f)(a), 2 * (a * b).sum(-1, keepdims=True) * b, rtol=1e-12)
    second = grad(lambda a: anp.sum(grad(f)(a)))(a)
    np.testing.assert_allclose(second, 2 * b * b.sum(-1, keepdims=True), rtol=1e-12)


def test_row_max_of_a_masked_array_is_its_own_reduction():
    # a subclass of ndarray (a masked array) takes its own max, which honours the mask, on
    # every row length: the block path's copies would drop it
    from minattn.engine.reductions import row_max

    for n in (3, 16, 64):
        x = np.ma.array(np.arange(4.0 * n, dtype=np.float32).reshape(4, n))
        x[:, -1] = np.ma.masked
        np.testing.assert_array_equal(np.asarray(row_max(x)), np.asarray(x.max(-1, keepdims=True)))
        assert np.asarray(row_max(x))[0, 0] == n - 2


@pytest.mark.parametrize("shape, axis", [((4, SHORT_ROW + 1), -1), ((2, 3, 130), -1),
                                         ((7,), -1), ((5, 6), 0), ((5, 6), (0, 1))])
def test_row_max_beyond_the_short_rows_is_ndarrays_max_bit_for_bit(shape, axis):
    # a NumPy array outside the short rows (a decode step's scores of more than SHORT_ROW keys,
    # a 1-d x, another axis) takes the reduction ndarray.max calls: the same bits, the sign of a
    # zero max and NaN included; a masked array of those shapes keeps its own max (the mask)
    rng = np.random.default_rng(len(shape))
    for dtype in (np.float32, np.float64, np.float16):
        x = rng.normal(size=shape).astype(dtype)
        x.reshape(-1)[:3] = (-0.0, np.nan, -np.inf)
        if x.ndim > 1:
            x[-1] = -0.0  # a row whose max is -0.0
        got, want = row_max(x, axis), x.max(axis=axis, keepdims=True)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
        if dtype == np.float16:  # (a masked float16's max warns of its fill value's cast)
            continue
        masked = np.ma.array(np.abs(x), mask=np.zeros(shape, bool))
        masked[..., 0] = 1e4  # the largest entry of each row, then masked out
        masked[..., 0] = np.ma.masked
        assert type(row_max(masked, axis)) is np.ma.MaskedArray
        np.testing.assert_array_equal(np.ma.getdata(row_max(masked, axis)),
                                      np.ma.getdata(masked.max(axis=axis, keepdims=True)))
    with pytest.raises(ValueError, match="zero-size array"):  # an empty row: max's own error
        row_max(np.zeros((2, 0), np.float32))
