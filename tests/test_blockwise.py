"""blockwise_attention against scaled_dot_product_attention ("same expression, two engines"):
the same output for every block size, mask and shape, with the causal tiles above the diagonal
never computed."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
import minattn.blockwise as blockwise

from .strategies import bool_masks, float_arrays, small, tolerance


def full_attention(q, k, v, causal=False, key_mask=None):
    """The reference: the whole (L_q, L_k) softmax, with the equivalent boolean mask."""
    mask = ma.causal_mask(q.shape[-2], k.shape[-2]) if causal else None
    if key_mask is not None:
        mask = key_mask[..., None, :] if mask is None else mask & key_mask[..., None, :]
    return ma.scaled_dot_product_attention(q, k, v, mask)[0]


@st.composite
def blockwise_inputs(draw, dtype=np.float64):
    """q, k, v with L_q != L_k allowed, a block size that need not divide either, a causal flag
    and an optional key mask (which can leave whole rows with nothing to attend to)."""
    lead = draw(st.sampled_from([(), (1,), (2,), (2, 2)]))
    l_q, l_k = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    d_k, d_v = draw(small), draw(small)
    q = draw(float_arrays(lead + (l_q, d_k), dtype))
    k = draw(float_arrays(lead + (l_k, d_k), dtype))
    v = draw(float_arrays(lead + (l_k, d_v), dtype))
    key_mask = draw(st.none() | bool_masks(lead + (l_k,)))
    block_size = draw(st.integers(1, max(l_q, l_k) + 3))
    return q, k, v, draw(st.booleans()), key_mask, block_size


@given(blockwise_inputs())
def test_matches_full_attention(inputs):
    q, k, v, causal, key_mask, block_size = inputs
    out = ma.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask, block_size=block_size)
    np.testing.assert_allclose(out, full_attention(q, k, v, causal, key_mask),
                               **tolerance(np.float64))


@given(blockwise_inputs(dtype=np.float32))
def test_float32_stays_float32(inputs):
    q, k, v, causal, key_mask, block_size = inputs
    out = ma.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask, block_size=block_size)
    assert out.dtype == np.float32
    expected = full_attention(*(a.astype(np.float64) for a in (q, k, v)), causal, key_mask)
    np.testing.assert_allclose(out, expected, **tolerance(np.float32))


@pytest.mark.parametrize("block_size", [1, 2, 3, 5, 7, 8, 100])
def test_every_block_size_gives_the_same_output(block_size):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 8, 4)), rng.normal(size=(3, 8, 5))
    for causal in (False, True):
        out = ma.blockwise_attention(q, k, v, causal=causal, block_size=block_size)
        np.testing.assert_allclose(out, full_attention(q, k, v, causal), **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fully_masked_rows_give_zeros_without_warnings(dtype, recwarn):
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 6, 3)).astype(dtype) for _ in range(3))
    key_mask = np.ones((2, 6), dtype=bool)
    key_mask[0, :2] = False  # causal: queries 0 and 1 of batch 0 have no visible key left
    key_mask[1] = False  # batch 1: no key at all
    out = ma.blockwise_attention(q, k, v, causal=True, key_mask=key_mask, block_size=4)
    assert not recwarn.list
    assert out.dtype == dtype and np.isfinite(out).all()
    assert (out[0, :2] == 0).all() and (out[1] == 0).all()
    np.testing.assert_allclose(out[0, 2:].astype(np.float64),
                               full_attention(q, k, v, True, key_mask)[0, 2:].astype(np.float64),
                               **tolerance(dtype))


@pytest.mark.parametrize("n_queries, n_keys, block_size", [(10, 10, 3), (7, 12, 2), (12, 5, 4)])
def test_causal_tiles_above_the_diagonal_are_skipped(monkeypatch, n_queries, n_keys, block_size):
    computed = []
    tile_mask = blockwise._tile_mask  # called once for every tile of scores that is computed

    def recording_tile_mask(scores, key_mask, q_start, k_start, k_stop, causal):
        computed.append((q_start, k_start))
        return tile_mask(scores, key_mask, q_start, k_start, k_stop, causal)

    monkeypatch.setattr(blockwise, "_tile_mask", recording_tile_mask)
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(n_queries, 4)), rng.normal(size=(n_keys, 4))
    ma.blockwise_attention(q, k, k, causal=True, block_size=block_size)
    # Exactly the tiles holding at least one visible (query i, key j <= i) pair, each once.
    visible = {(qs, ks) for qs in range(0, n_queries, block_size)
               for ks in range(0, n_keys, block_size)
               if ks <= min(qs + block_size, n_queries) - 1}
    assert sorted(computed) == sorted(visible)
    assert len(visible) < len(range(0, n_queries, block_size)) * len(range(0, n_keys, block_size))


def test_nan_in_future_blocks_never_reaches_earlier_queries():
    # Keys and values from position 8 on are NaN. Queries 0..7 may not see them (causal), and
    # with block_size 4 the tiles holding them are skipped for those queries, so rows 0..7 stay
    # finite and exact. Masking alone would not do: 0 * NaN = NaN in weights @ v (shown below).
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 12, 4)), rng.normal(size=(2, 12, 4)), rng.normal(size=(2, 12, 3))
    future = np.arange(12)[:, None] >= 8
    k_nan, v_nan = np.where(future, np.nan, k), np.where(future, np.nan, v)
    out = ma.blockwise_attention(q, k_nan, v_nan, causal=True, block_size=4)
    assert np.isfinite(out[:, :8]).all() and np.isnan(out[:, 8:]).all()
    np.testing.assert_allclose(out[:, :8], full_attention(q, k, v, causal=True)[:, :8],
                               **tolerance(np.float64))
    with np.errstate(invalid="ignore"):
        masked_only, _ = ma.scaled_dot_product_attention(q, k_nan, v_nan, ma.causal_mask(12))
    assert np.isnan(masked_only[:, :8]).all()


def test_leading_dims_broadcast():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(2, 3, 5, 4))  # [B, H, L_q, d_k]
    k = rng.normal(size=(1, 3, 6, 4))  # shared across the batch
    v = rng.normal(size=(6, 7))  # shared everywhere, d_v != d_k
    key_mask = rng.random((2, 1, 6)) < 0.7  # [B, 1, L_k]: per sequence, shared by the heads
    out = ma.blockwise_attention(q, k, v, causal=True, key_mask=key_mask, block_size=2)
    assert out.shape == (2, 3, 5, 7)
    np.testing.assert_allclose(out, full_attention(q, k, v, True, key_mask),
                               **tolerance(np.float64))


def test_explicit_scale():
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    out = ma.blockwise_attention(q, k, v, scale=0.3, block_size=4)
    expected, _ = ma.scaled_dot_product_attention(q, k, v, scale=0.3)
    np.testing.assert_allclose(out, expected, **tolerance(np.float64))


def test_gradients_match_full_attention():
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 7, 3)), rng.normal(size=(2, 7, 4))
    key_mask = rng.random((2, 7)) < 0.6
    key_mask[1, :3] = False  # some rows of batch 1 see nothing: their gradient must be 0, not NaN
    cotangent = rng.normal(size=(2, 5, 4))
    mask = ma.causal_mask(5, 7) & key_mask[:, None, :]

    def loss_blockwise(q, k, v):
        return anp.sum(ma.blockwise_attention(q, k, v, causal=True, key_mask=key_mask,
                                              block_size=2) * cotangent)

    def loss_full(q, k, v):
        return anp.sum(ma.scaled_dot_product_attention(q, k, v, mask)[0] * cotangent)

    for argnum in range(3):
        got = autograd.grad(loss_blockwise, argnum)(q, k, v)
        want = autograd.grad(loss_full, argnum)(q, k, v)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, **tolerance(np.float64))


rng = np.random.default_rng(0)
x = rng.normal(size=(2, 3, 4))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ma.blockwise_attention(x.astype(int), x, x), TypeError,
     r"q must be a floating-point array, got dtype int64"),
    (lambda: ma.blockwise_attention(x, x[..., :3], x), ValueError,
     r"q and k must have the same feature size d_k: q \(2, 3, 4\), k \(2, 3, 3\)"),
    (lambda: ma.blockwise_attention(x, x, x[:, :2]), ValueError,
     r"k and v must have the same length L_k: k \(2, 3, 4\), v \(2, 2, 4\)"),
    (lambda: ma.blockwise_attention(x, x[:1].repeat(3, 0), x[:1]), ValueError,
     r"leading .* do not broadcast: q \(2,\), k \(3,\), v \(1,\)"),
    (lambda: ma.blockwise_attention(x[0, 0], x, x), ValueError,
     r"q must have shape \(\.\.\., L_q, d_k\), got shape \(4,\)"),
    (lambda: ma.blockwise_attention(x, x, x, key_mask=np.ones((2, 4), bool)), ValueError,
     r"key_mask of shape \(2, 4\) does not broadcast to the keys' shape "
     r"\(\.\.\., L_k\) = \(2, 3\)"),
    (lambda: ma.blockwise_attention(x, x, x, key_mask=np.ones((5, 2, 3), bool)), ValueError,
     r"key_mask of shape \(5, 2, 3\)"),
    (lambda: ma.blockwise_attention(x, x, x, key_mask=np.ones((2, 3))), TypeError,
     r"key_mask must be a boolean array .* got float64"),
    (lambda: ma.blockwise_attention(x, x, x, block_size=0), ValueError,
     r"block_size must be a positive int, got 0"),
    (lambda: ma.blockwise_attention(x, x, x, block_size=-3), ValueError,
     r"block_size must be a positive int, got -3"),
    (lambda: ma.blockwise_attention(x, x, x, block_size=2.0), TypeError,
     r"block_size must be a positive int, got 2\.0"),
    (lambda: ma.blockwise_attention(x, x, x, block_size=True), TypeError,
     r"block_size must be a positive int, got True"),
    (lambda: ma.blockwise_attention(x, x, x, causal="yes"), TypeError,
     r"causal must be True or False, got 'yes'"),
    (lambda: ma.blockwise_attention(x, x, x, causal=None), TypeError,
     r"causal must be True or False, got None"),
    (lambda: ma.blockwise_attention(x, x, x, causal=1), TypeError,
     r"causal must be True or False, got 1"),
])
def test_bad_input_is_named(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


@pytest.mark.parametrize("l_q, l_k", [(3, 0), (0, 3), (0, 0)])
def test_empty_sequences_give_what_full_attention_gives(l_q, l_k):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, l_q, 4)), rng.normal(size=(2, l_k, 4)), rng.normal(size=(2, l_k, 5))
    got = ma.blockwise_attention(q, k, v, causal=True, block_size=2)
    assert got.shape == (2, l_q, 5) and not got.any()


@pytest.mark.parametrize("causal", [False, True])
def test_flash_backward_equals_full_attentions_gradient(causal):
    from autograd import grad

    rng = np.random.default_rng(11)
    q, k, v = rng.normal(size=(2, 1, 7, 3)), rng.normal(size=(1, 2, 9, 3)), rng.normal(size=(2, 2, 9, 4))
    key_mask = rng.random((2, 1, 9)) < 0.7
    key_mask[1] = False  # a batch whose queries see no key at all
    mask = key_mask[..., None, :] & (ma.causal_mask(7, 9) if causal else True)
    r = rng.normal(size=(2, 2, 7, 4))
    blockwise = lambda q, k, v, s: np.sum(ma.blockwise_attention(
        q, k, v, causal=causal, key_mask=key_mask, scale=s, block_size=3) * r)
    full = lambda q, k, v, s: np.sum(ma.scaled_dot_product_attention(q, k, v, mask, scale=s)[0] * r)
    for i in range(4):
        got, expected = grad(blockwise, i)(q, k, v, 0.7), grad(full, i)(q, k, v, 0.7)
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=f"argument {i}")


def test_flash_backward_memory_grows_with_length_times_block_not_length_squared():
    import tracemalloc

    from autograd import grad

    n, block = 1024, 64
    rng = np.random.default_rng(12)
    q, k, v = (rng.normal(size=(1, n, 16)) for _ in range(3))
    loss = lambda q: np.sum(ma.blockwise_attention(q, k, v, causal=True, block_size=block))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    grad(loss)(q)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    weights = n * n * 8  # the full [L, L] float64 weights alone: 8 MiB
    assert peak < weights / 4, f"peak {peak / 2**20:.1f} MiB"


# --- scores of every size: each tile shifted by the running max itself, never overflowing ---

def _float64_attention(q, k, v, scale=None):
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) * scale
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


@pytest.mark.parametrize("dtype, rise", [(np.float32, 150.0), (np.float64, 900.0)])
def test_a_tile_scoring_far_above_the_last_is_folded_in_without_overflow(dtype, rise):
    # Keys 4..7 score `rise` above keys 0..3 for every query: exp(score - the first tile's max)
    # would overflow the dtype; the second tile's own max shifts it (no warning: they are errors
    # here), and the output is the float64 softmax's.
    rng = np.random.default_rng(7)
    q = rng.standard_normal((3, 8, 4)).astype(dtype)
    q[..., 0] = 1.0
    k = rng.standard_normal((3, 8, 4)).astype(dtype)
    k[:, 4:, 0] += rise * 2  # scale 1/sqrt(4): scores rise by `rise`
    v = rng.standard_normal((3, 8, 2)).astype(dtype)
    out = ma.blockwise_attention(q, k, v, block_size=4)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, _float64_attention(q, k, v), **tolerance(dtype))


@pytest.mark.parametrize("offset", [1e4, 1e6, 3e6])
def test_scores_far_from_zero_keep_the_weights_of_every_tile_in_proportion(offset):
    # Every score near `offset` (exact in float32), 60 keys 44 above the first 4, in tiles of 4:
    # the weights of later tiles against earlier ones are exp of differences of scores, exact
    # here, so the output is the float64 softmax's (16 of the 60 high keys have value 1: 16/60)
    # to float32 rounding, as scaled_dot_product_attention's.
    s = np.full(64, offset + 44.0)
    s[:4] = offset
    k = s.astype(np.float32).reshape(1, 64, 1)
    q = np.ones((1, 1, 1), np.float32)
    v = np.zeros((1, 64, 1), np.float32)
    v[0, 4:20] = 1.0
    out = ma.blockwise_attention(q, k, v, scale=1.0, block_size=4)
    np.testing.assert_allclose(out, _float64_attention(q, k, v, 1.0), rtol=1e-6)
    np.testing.assert_allclose(out, ma.scaled_dot_product_attention(q, k, v, scale=1.0)[0],
                               rtol=1e-6)


@pytest.mark.parametrize("dtype, size", [(np.float32, 3e4), (np.float16, 40.0)])
def test_scores_near_the_dtype_limit_give_what_the_attention_core_gives(dtype, size):
    # Scores in the billions (float32) or near float16's largest: the tiles' max subtracted
    # from the scores themselves keeps each tile's largest weight at 1, so no weight overflows
    # and no output is NaN; the output within the dtype's rounding of the attention core's (whose
    # float16 runs in float32: the scores' own rounding bounds both).
    rng = np.random.default_rng(10)
    q, k = ((rng.standard_normal((2, 64, 16)) * size).astype(dtype) for _ in range(2))
    v = rng.standard_normal((2, 64, 3)).astype(dtype)
    with np.errstate(over="ignore"):  # the float16 scores' own products may overflow: -> inf
        out = ma.blockwise_attention(q, k, v, scale=1.0, block_size=8)
        expected = ma.scaled_dot_product_attention(q, k, v, scale=1.0)[0]
    assert out.dtype == dtype
    finite = np.all(np.isfinite(expected), axis=-1)
    assert np.array_equal(np.all(np.isfinite(out), axis=-1), finite)
    # Compared where the float64 scores' top two differ by more than 1 % of the row's largest:
    # beyond any rounding of the scores (by the dtype, BLAS's summation order or the CPU's
    # instructions), so both sides' weights are the same near-one-hot ones on every machine.
    s = np.sort(q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64), axis=-1)
    clear = finite & (s[..., -1] - s[..., -2] > 0.01 * np.abs(s).max(-1))
    assert clear.sum() > clear.size // 2  # most rows: the test compares something
    np.testing.assert_allclose(out[clear].astype(np.float64), expected[clear], atol=0.05)


@pytest.mark.parametrize("dtype, k", [
    (np.float32, [[375425056.0, 710544320.0, 864396288.0, 685609216.0],
                  [737254400.0, 972266368.0, 458816384.0, 730589056.0]]),  # 2.64e9, 2.90e9
    (np.float16, [[-28304.0, -22544.0, 0.0, 0.0], [10240.0, 8832.0, 0.0, 0.0]])])  # -50848, 19072
def test_two_keys_whose_scores_differ_by_more_than_the_dtype_holds(dtype, k):
    # One query, a key per tile: the second scores far above the first (in float16, by more than
    # its largest float). Its weight is 1, the first's 0: the output is the second value, exactly.
    q = np.ones((1, 1, 4), dtype)
    out = ma.blockwise_attention(q, np.array([k], dtype), np.array([[[1.0], [2.0]]], dtype),
                                 scale=1.0, block_size=1)
    assert out.dtype == dtype and out.tolist() == [[[2.0]]]


def test_float32_queries_against_float64_keys_keep_float64_precision():
    # The shift subtracted inside q kᵀ is held in q's last column: in the scores' dtype
    # (float64 here), or a float32 shift would cost the output and log-sum-exp float32 rounding
    # times the scores' size. Large scores (m of a few hundred), causal, several tiles.
    rng = np.random.default_rng(9)
    q = (rng.standard_normal((2, 64, 8)) * 30).astype(np.float32)
    k, v = rng.standard_normal((2, 64, 8)) * 30, rng.standard_normal((2, 64, 3))
    out, lse = blockwise._flash(q, k, v, None, 0.5, True, 8)
    s = np.where(np.tril(np.ones((64, 64), bool)), 0.5 * q.astype(np.float64) @
                 np.swapaxes(k, -1, -2), -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, m + np.log(p.sum(-1, keepdims=True)), rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("window", ["default", "never"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_plain_tiles_are_within_rounding_of_the_formula_on_either_path(
        dtype, window, causal, monkeypatch):
    # NumPy float32 / float64 tiles go through engine/plain_core.flash_query_block: tiles whose
    # row maxima lie within EXP_WINDOW of 0 are not shifted (the running max rescales their
    # product), the others are, as _query_block's; either path, and the canonical tiles
    # (PLAIN_TILES off), within the dtype's rounding of the float64 formula, with its zeros
    # (rows with no key) and log-sum-exps
    from minattn.engine import plain_core
    if window == "never":  # every tile shifted
        monkeypatch.setitem(plain_core.EXP_WINDOW, np.dtype(dtype), -1.0)
    rng = np.random.default_rng(5)
    q, k = (rng.standard_normal((2, 3, 150, 8)).astype(dtype) for _ in range(2))
    q[0, 1, :64] *= 30  # scores past the default window in the first two query blocks' tiles
    v = rng.standard_normal((2, 3, 150, 5)).astype(dtype)
    key_mask = rng.random((2, 1, 150)) < 0.7
    key_mask[1, 0, :40] = False  # whole tiles with no key for some rows
    ours = ma.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask, block_size=32)
    monkeypatch.setattr(blockwise, "PLAIN_TILES", False)
    canonical = ma.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask, block_size=32)
    want = full_attention(*(a.astype(np.float64) for a in (q, k, v)), causal, key_mask)
    assert ours.dtype == dtype
    np.testing.assert_allclose(ours, want, **tolerance(dtype))
    np.testing.assert_allclose(canonical, want, **tolerance(dtype))
    np.testing.assert_array_equal(ours == 0, canonical == 0)
    monkeypatch.setattr(blockwise, "PLAIN_TILES", True)
    lse = blockwise._flash(q, k, v, key_mask, 1 / np.sqrt(8), causal, 32)[1]
    monkeypatch.setattr(blockwise, "PLAIN_TILES", False)
    lse_canonical = blockwise._flash(q, k, v, key_mask, 1 / np.sqrt(8), causal, 32)[1]
    np.testing.assert_allclose(lse, lse_canonical, **tolerance(dtype))


@pytest.mark.parametrize("dtype, magnitudes", [
    (np.float32, [1e-35, 1e-30, 1e-22, 1e-12, 1.0, 1e12, 1e20, 1e30, 1e35]),
    (np.float64, [1e-290, 1e-250, 1e-200, 1e-100, 1.0, 1e100, 1e180, 1e250, 1e290])])
@pytest.mark.parametrize("score", ["-window", "0", "+window"])
def test_the_plain_tiles_keep_softmax_free_of_the_values_scale(dtype, magnitudes, score):
    # The unshifted tiles form exp(scores) @ v on the unshifted scale (up to e^EXP_WINDOW): v's
    # entries very large or very small would overflow or leave the normal floats there, where
    # the shifted tiles do not. Every score near the window's edges, v at each magnitude: the
    # output is v's scale times that of v at magnitude 1, within the dtype's rounding of the
    # float64 formula, as _query_block's (a review found 0 and inf here before exp_window)
    from minattn.engine import plain_core
    edge = plain_core.EXP_WINDOW[np.dtype(dtype)] - 1.0
    centre = {"-window": -edge, "0": 0.0, "+window": edge}[score]
    rng = np.random.default_rng(11)
    n, block = 200, 64
    q = np.zeros((2, n, 3), dtype)
    q[..., 0] = 1.0
    k = np.zeros((2, n, 3), dtype)
    k[..., 0] = centre + rng.uniform(-1.0, 0.0, (2, n))  # every score in [centre - 1, centre]
    unit = rng.uniform(0.5, 1.5, (2, n, 4)) * rng.choice([-1.0, 1.0], (2, n, 4))
    scores = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)  # scale 1
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    want = (weights / weights.sum(-1, keepdims=True)) @ unit  # the formula, v at magnitude 1
    for magnitude in magnitudes:
        v = (unit * magnitude).astype(dtype)
        for plain in (True, False):
            blockwise.PLAIN_TILES = plain
            try:
                with np.errstate(over="raise", invalid="raise", divide="raise"):
                    out = ma.blockwise_attention(q, k, v, scale=1.0, block_size=block)
            finally:
                blockwise.PLAIN_TILES = True
            assert out.dtype == dtype and np.isfinite(out).all(), (magnitude, plain)
            np.testing.assert_allclose(out.astype(np.float64) / magnitude, want,
                                       err_msg=f"|v| ~ {magnitude:g}, plain tiles {plain}",
                                       **tolerance(dtype))
