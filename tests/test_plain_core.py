"""engine/plain_core.py: the attention core's forward on NumPy itself (in_query_blocks' plain
forms). What it promises: where the weights are returned (forward), the canonical core's output
and weights to the last bit, for every kind of mask, bias, dtype and corner (fully masked rows,
NaN and +inf scores, no keys); where a caller never reads them and the queries are split
(weights_unread: output_into), the output within float32 / float64 rounding of a float64
formula written here, with the canonical core's zeros and NaNs; the calls it does not take
(boxes, dropout, lists) left to the canonical core."""
import numpy as np
import pytest
from autograd import grad
from autograd.misc import flatten
from hypothesis import event, given, settings, strategies as st

import minattn as ma
from minattn import attention
from minattn.engine import plain_core, query_blocks
from minattn.masks import causal_mask
from minattn.multi_head import grouped_attention

from .strategies import tolerance


def canonical(f, *args, **kwargs):
    # f with the plain forms off: the concept's own code (softmax and all)
    token = query_blocks._PLAIN.set(False)
    try:
        return f(*args, **kwargs)
    finally:
        query_blocks._PLAIN.reset(token)


def reference(q, k, v, keep=None, bias=None, scale=None):
    # softmax(q kᵀ scale + bias, over keep) v in float64, rows with no key: zeros; NaN rows NaN
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("...qd,...kd->...qk", q, k) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - np.where(top == -np.inf, 0.0, np.where(top == np.inf, np.nan, top)))
        total = e.sum(-1, keepdims=True)
        p = e / np.where(total == 0, 1, total)
    return p @ v, p, s


def masks(kind, n_q, n_k, rng, batch=2):
    if kind == "none":
        return None
    if kind == "causal":
        return causal_mask(n_q, n_k, align="bottom_right")
    if kind == "window":
        return causal_mask(n_q, n_k, align="bottom_right", window=int(rng.integers(1, 60)))
    if kind == "padding":  # [B, 1, 1, L_q, L_k]: each row's first keys are padding
        pad = rng.integers(0, n_k // 2 + 1, size=batch)
        keys = np.arange(n_k)[None, :] >= pad[:, None]
        return (causal_mask(n_q, n_k, align="bottom_right") & keys[:, None, :])[:, None, None]
    return rng.random((n_q, n_k)) < 0.3  # random rows, some with no key at all


def inputs(rng, dtype, n_q, n_k, d=8, d_v=5):
    q = rng.normal(size=(2, 3, 2, n_q, d)).astype(dtype)  # grouped: 3 kv heads of 2 query heads
    k = rng.normal(size=(2, 3, 1, n_k, d)).astype(dtype)
    v = rng.normal(size=(2, 3, 1, n_k, d_v)).astype(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["none", "causal", "window", "padding", "random"])
@settings(max_examples=15, deadline=None)
@given(n_q=st.sampled_from([1, 3, 40, 64, 255, 300]), extra=st.integers(0, 40),
       seed=st.integers(0, 2 ** 16))
def test_forward_gives_the_canonical_cores_bits(dtype, kind, n_q, extra, seed):
    # weights returned: the same operations on the same numbers, whole or in blocks
    rng = np.random.default_rng(seed)
    n_k = n_q + extra
    q, k, v = inputs(rng, dtype, n_q, n_k)
    q[0, 0, 0, 0] *= 40  # large scores: the shift matters
    mask = masks(kind, n_q, n_k, rng)
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    want_out, want_weights = canonical(ma.scaled_dot_product_attention, q, k, v, mask)
    assert out.dtype == weights.dtype == dtype
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(weights, want_weights)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_with_a_bias_and_a_scale_gives_the_canonical_bits(dtype):
    rng = np.random.default_rng(3)
    q, k, v = inputs(rng, dtype, 70, 90)
    bias = rng.normal(size=(3, 1, 70, 90)).astype(dtype)  # ALiBi-like, per kv head
    bias[0, 0, 5] = -np.inf  # a row with no key: zeros
    bias[1, 0, 6, :10] = -np.inf
    for scale in (None, 0.0, 0.3):
        got = ma.scaled_dot_product_attention(q, k, v, bias, scale=scale)
        want = canonical(ma.scaled_dot_product_attention, q, k, v, bias, scale=scale)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert np.all(got[1][:, 0, :, 5] == 0) and np.all(got[0][:, 0, :, 5] == 0)


def test_forward_corners_give_the_canonical_bits():
    # NaN and +inf scores (their rows all NaN), fully masked rows (zeros), a NaN at a masked
    # key (no effect), no keys, no queries, float16 (computed in float32)
    rng = np.random.default_rng(5)
    q, k, v = inputs(rng, np.float32, 20, 30)
    mask = rng.random((20, 30)) < 0.5
    mask[3] = False
    q[0, 0, 0, 7, 2] = np.nan
    q[0, 1, 0, 8, 2] = np.inf
    k[1, 2, 0, 4, :] = np.nan  # key 4 of one head: NaN scores where unmasked
    cases = [(q, k, v, mask), (q, k, v, None), (q[..., :0, :], k, v, mask[:0]),
             (q, k[..., :0, :], v[..., :0, :], mask[:, :0]),
             tuple(a.astype(np.float16) for a in (q, k, v)) + (mask,)]
    for case in cases:
        with np.errstate(invalid="ignore"):
            got = ma.scaled_dot_product_attention(*case)
            want = canonical(ma.scaled_dot_product_attention, *case)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    assert np.all(weights[..., 3, :] == 0) and np.all(out[..., 3, :] == 0)
    assert np.all(np.isnan(out[0, 0, 0, 7])) and np.all(np.isnan(weights[0, 1, 0, 8]))


def _broadcasting(rng, shape, wider=False):
    # a shape that broadcasts to `shape`: each axis mostly whole, else 1; some leading axes
    # dropped, or (wider) one more leading axis of 2
    dims = tuple(n if rng.random() < 0.75 else 1 for n in shape)
    return (2,) + dims if wider else dims[rng.integers(0, len(dims) + 1):]


def _specials(rng, a, values, count):
    # `count` entries of a set to values drawn from `values` (none where a is empty)
    for _ in range(count if a.size else 0):
        a.flat[rng.integers(a.size)] = rng.choice(values)


def _quietly(f):
    # (f(), True) where f raises no floating-point flag; else (f() with the flags ignored, False)
    with np.errstate(all="raise"):
        try:
            return f(), True
        except FloatingPointError:
            pass
    with np.errstate(all="ignore"):
        return f(), False


@settings(max_examples=300, deadline=None)
@given(dtype=st.sampled_from([np.float32, np.float64]), n_q=st.sampled_from([0, 1, 3, 6]),
       n_k=st.sampled_from([0, 1, 2, 7, 64, 130, 200]), d=st.integers(1, 4),
       lead=st.lists(st.integers(1, 3), max_size=2),
       mask=st.sampled_from(["none", "0-d", "broadcasting", "broadcasting, a row masked"]),
       bias=st.sampled_from(["none", "same dtype", "same dtype, wider", "float16", "float64"]),
       specials=st.integers(0, 2), seed=st.integers(0, 2 ** 16))
def test_weights_are_the_concepts_bits(dtype, n_q, n_k, d, lead, mask, bias, specials, seed):
    # plain_core.weights (forward's weights, and the plain VJP's recomputed ones) against the
    # concept's attention._weights on the same inputs (autograd.numpy, attention.softmax): the
    # same dtype, shape and bits (the signs of zeros too), and no floating-point flag where the
    # concept raises none, over masks (none, 0-d, broadcasting, fully masked rows, rows of more
    # than 128 keys), biases (broadcasting, wider than the scores, of another dtype), +inf,
    # -inf and NaN scores, keys of zeros, no keys, no queries, float32 and float64
    rng = np.random.default_rng(seed)
    lead = tuple(lead)
    q = (rng.normal(size=lead + (n_q, d)) * rng.choice([1.0, 30.0])).astype(dtype)
    k = rng.normal(size=_broadcasting(rng, lead) + (n_k, d)).astype(dtype)
    for a in (q, k):  # infinite, NaN or zero entries
        _specials(rng, a, [np.inf, -np.inf, np.nan, 0.0], specials)
    if n_k and rng.random() < 0.5:
        k[..., rng.integers(n_k), :] = 0.0  # a key of zeros: its scores 0
    scores = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (n_q, n_k)
    b = None
    if bias != "none":
        b = rng.normal(size=_broadcasting(rng, scores, wider=bias.endswith("wider")))
        b = b.astype(bias if bias in ("float16", "float64") else dtype)
        _specials(rng, b, [np.inf, -np.inf, np.nan], specials)  # +inf, -inf, NaN scores
        scores = np.broadcast_shapes(scores, b.shape)
    keep = None
    if mask != "none":
        keep = rng.random(() if mask == "0-d" else _broadcasting(rng, scores)) < rng.choice(
            [0.0, 0.3, 0.9, 1.0])
        if mask.endswith("a row masked") and keep.ndim >= 2 and keep.shape[-2] > 1:
            keep[..., rng.integers(keep.shape[-2]), :] = False
    scale = float(rng.choice([1 / np.sqrt(d), 0.0, 0.5, 3.0]))  # (a Python float: q's dtype)
    want, concept_quiet = _quietly(lambda: attention._weights(q, k, keep, b, scale))
    got, quiet = _quietly(lambda: plain_core.weights(q, k, keep, b, scale))
    assert quiet or not concept_quiet
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    event(f"{got.dtype} weights, {n_k} keys, mask {mask}, bias {bias}")


def _float_bound(q, k, v, dtype):
    # |output - float64 formula| for float32 or float64 arithmetic: each score's rounding
    # (a dot product of d terms: d eps |q||k|) moves its weight by that much relatively, the
    # exp, sum, product and division a few eps more, times the values' size
    eps = np.finfo(dtype).eps
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    d = q.shape[-1]
    dots = np.linalg.norm(q, axis=-1).max() * np.linalg.norm(k, axis=-1).max() / np.sqrt(d)
    return 4 * eps * (d * dots + k.shape[-2] + 8) * np.abs(v).max()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["causal", "window", "padding", "random"])
@settings(max_examples=10, deadline=None)
@given(n_q=st.integers(256, 300), extra=st.integers(0, 40), seed=st.integers(0, 2 ** 16))
def test_unread_blocks_are_within_rounding_of_the_float64_formula(dtype, kind, n_q, extra,
                                                                  seed):
    rng = np.random.default_rng(seed)
    n_k = n_q + extra
    q, k, v = (a[:, :, 0] for a in inputs(rng, dtype, n_q, n_k))  # [B, H, L, d], kv: 3 heads
    q = np.concatenate([q, q[:, :, ::-1] * 3], axis=1)  # 6 query heads over 3 kv heads
    mask = masks(kind, n_q, n_k, rng)
    mask = mask[:, 0] if kind == "padding" else mask
    out, weights = query_blocks.weights_unread(grouped_attention)(q, k, v, mask)
    assert weights is None and out.dtype == dtype
    grouped = lambda t: np.repeat(t, 2, axis=1)  # noqa: E731
    want, _, _ = reference(q, grouped(k), grouped(v), mask)
    assert np.abs(out - want).max() <= _float_bound(q, k, v, dtype)
    # the canonical core's zeros: rows with no key
    canonical_out = canonical(query_blocks.weights_unread(grouped_attention), q, k, v, mask)[0]
    np.testing.assert_array_equal(out == 0, canonical_out == 0)


def test_a_prompts_unread_blocks_run_here_on_the_threads_in_force():
    # a prompt's blocks one after the other on the calling thread, on the core's BLAS threads:
    # one (its own policy), or two inside a prompt's block timed on two threads (not on worker
    # threads: OpenBLAS's idle thread, spinning after the q, k, v product, takes the core a
    # worker needs); the output within rounding of the one-thread output
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from unittest import mock
    import threading

    from minattn.engine import threads

    rng = np.random.default_rng(3)
    q, k, v = (a[:, :, 0] for a in inputs(rng, np.float32, 512, 512, d=64, d_v=64))
    q = np.concatenate([q, q[:, :, ::-1] * 3], axis=1)  # 6 query heads over 3 kv heads
    ran_on = []
    output_into = plain_core.output_into
    spy = lambda *args: (ran_on.append((threading.current_thread().name,  # noqa: E731
                                        threads._blas_threads())), output_into(*args))[1]
    core = query_blocks.weights_unread(grouped_attention)
    here = threading.current_thread().name
    with mock.patch.object(plain_core, "output_into", spy):
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            one = core(q, k, v, causal_mask(512))[0]  # (the core's policy: one BLAS thread)
        assert ran_on == [(here, 1)] * 4
        if threads._blas_threads() < 2 and threads.n_workers(q, 2 ** 40) < 2:
            pytest.skip("BLAS may use one thread here")
        ran_on.clear()
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            threads._TUNING.running = True  # as inside a prompt's block timed on two threads
            try:
                two = core(q, k, v, causal_mask(512))[0]
            finally:
                threads._TUNING.running = False
        assert ran_on == [(here, 2)] * 4
    grouped = lambda t: np.repeat(t, 2, axis=1)  # noqa: E731
    want, _, _ = reference(q, grouped(k), grouped(v), causal_mask(512))
    for out in (one, two):
        assert np.abs(out - want).max() <= _float_bound(q, k, v, np.float32)


def test_the_bound_can_fail():
    # the bound above (the worst case of the roundings, for these sizes 0.05 % of the values'
    # size) is met, and an error of 0.1 % in the normalisation breaks it
    rng = np.random.default_rng(1)
    q, k, v = (a[:, :, 0] for a in inputs(rng, np.float32, 300, 300))
    want, _, _ = reference(q, k, v, causal_mask(300))
    out = query_blocks.weights_unread(ma.scaled_dot_product_attention)(q, k, v, causal_mask(300))[0]
    bound = _float_bound(q, k, v, np.float32)
    assert np.abs(out - want).max() <= bound
    assert np.abs(out * (1 + 1e-3) - want).max() > bound


def test_unread_blocks_keep_the_cores_zeros_and_nans():
    # fully masked rows: zeros; a NaN or +inf among a row's visible scores: a NaN row; a NaN in
    # a masked position or in the values of keys no query of a block may see: nothing (where
    # the canonical core's are NaN, these are)
    rng = np.random.default_rng(7)
    q, k, v = (a[:, :, 0] for a in inputs(rng, np.float32, 300, 300))
    mask = causal_mask(300).copy()
    mask[10] = False
    q[0, 0, 20, 1] = np.nan
    q[1, 2, 200, 3] = np.inf
    k[0, 1, 150, :] = np.nan  # key 150: NaN scores for the queries that see it
    v[1, 0, 299, :] = np.nan  # seen by the last query alone
    with np.errstate(invalid="ignore"):
        out = query_blocks.weights_unread(ma.scaled_dot_product_attention)(q, k, v, mask)[0]
        want = canonical(query_blocks.weights_unread(ma.scaled_dot_product_attention),
                         q, k, v, mask)[0]
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    assert np.all(out[:, :, 10] == 0)
    assert np.all(np.isnan(out[0, 0, 20])) and np.all(np.isnan(out[1, 2, 200]))
    assert np.all(np.isnan(out[0, 1, 150:])) and not np.isnan(out[0, 1, :150]).any()
    # (the last block's queries, 256 on, multiply it by their weight 0: NaN, as the whole
    # computation; the blocks before never see key 299)
    assert np.all(np.isnan(out[1, 0, 299])) and not np.isnan(out[1, 0, :256]).any()
    with np.errstate(invalid="ignore"):  # elsewhere within rounding of the float64 formula
        formula, _, _ = reference(q, k, v, mask)
    # (the whole formula spreads the NaN value of key 299 to queries no block of which sees
    # it, as the blocks do not: compared where both are finite)
    finite = np.isfinite(want) & np.isfinite(formula)
    assert finite.sum() > 0.7 * finite.size
    clean = tuple(np.where(np.isfinite(a), a, 0) for a in (q, k, v))  # (for the bound)
    assert np.abs(out[finite] - formula[finite]).max() <= _float_bound(*clean, np.float32)


def test_the_scratch_tiles_fit_the_cache(monkeypatch):
    # SmolLM2's shapes: each tile the 3 query heads of one kv head (0.8 MB of scores at 512
    # keys), not the 9 heads of a block (2.4 MB); the output as in one tile
    rng = np.random.default_rng(2)
    q = rng.normal(size=(1, 9, 512, 64)).astype(np.float32)
    k, v = (rng.normal(size=(1, 3, 512, 64)).astype(np.float32) for _ in range(2))
    tiles = []
    scores_into = plain_core._scores_into
    monkeypatch.setattr(plain_core, "_scores_into",
                        lambda s, *a: (tiles.append(s.shape), scores_into(s, *a))[1])
    out = query_blocks.weights_unread(grouped_attention)(q, k, v, causal_mask(512))[0]
    # (the first block's 9 heads over 128 keys: 0.6 MB, one tile)
    assert sorted(tiles) == sorted([(1, 3, 3, 128, 128)] +
                                   [(3, 128, n) for n in (256, 384, 512) for _ in range(3)])
    monkeypatch.setattr(plain_core, "TILE_BYTES", 2 ** 40)
    tiles.clear()
    whole = query_blocks.weights_unread(grouped_attention)(q, k, v, causal_mask(512))[0]
    assert sorted(tiles) == [(1, 3, 3, 128, n) for n in (128, 256, 384, 512)]
    want, _, _ = reference(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1), causal_mask(512))
    for got in (out, whole):
        assert np.abs(got - want).max() <= _float_bound(q, k, v, np.float32)


@pytest.mark.parametrize("case", ["dropout", "subclass"])
def test_calls_it_does_not_take_run_the_canonical_core(case, monkeypatch):
    calls = []
    for name in ("forward", "output_into"):
        monkeypatch.setattr(plain_core, name, lambda *a: calls.append(1))
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(2, 300, 4)) for _ in range(3))
    mask = causal_mask(300)
    if case == "dropout":  # its draws are the whole matrix's (and boxes reach the core here)
        ma.scaled_dot_product_attention(q, k, v, mask, dropout=0.5, rng=rng)
        grad(lambda q: np.sum(ma.scaled_dot_product_attention(
            q, k, v, mask, dropout=0.5, rng=np.random.default_rng(0))[0]))(q)
    else:
        class Sub(np.ndarray):
            pass
        ma.scaled_dot_product_attention(q.view(Sub), k, v, mask)
        ma.scaled_dot_product_attention(q[:, :3].view(Sub), k, v)
    assert calls == []


def test_plain_says_which_arguments_it_takes():
    a = np.zeros((2, 3), np.float32)
    assert plain_core.plain(a, a, a, None, None)
    assert plain_core.plain(a, a, a, np.ones((2, 2), bool), None)
    assert plain_core.plain(a, a, a, None, np.zeros((2, 2), np.float32))
    assert not plain_core.plain(a, a, a.astype(np.float64), None, None)
    assert not plain_core.plain(a.astype(np.float16), a.astype(np.float16),
                                a.astype(np.float16), None, None)
    assert not plain_core.plain(a, a, a, np.ones((2, 2), np.float32), None)
    assert not plain_core.plain(a, a, a, None, np.zeros((2, 2), np.float64))
    assert not plain_core.plain(a.view(np.matrix), a, a, None, None)


def test_a_small_gpts_gradient_is_the_canonical_cores_to_the_last_bit():
    # the training step's core returns its weights (forward: the canonical bits), so a model's
    # loss and gradient are the same with the plain forms and without
    from minattn.models import char_gpt as gpt
    from minattn.engine.autograd_rules import value_and_grad_by_leaf
    params, config = gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=np.float32)
    ids = np.random.default_rng(0).integers(65, size=5_000)
    batch = tuple(a[:4] for a in gpt.window_batch(ids, context=64, batch_size=4, seed=0, k=0))
    step = value_and_grad_by_leaf(gpt.loss_sum(config))
    loss, grads = step(params, batch, None)
    want_loss, want_grads = canonical(step, params, batch, None)
    assert loss == want_loss
    np.testing.assert_array_equal(flatten(grads)[0], flatten(want_grads)[0])


@pytest.mark.parametrize("unread", [False, True])
@pytest.mark.parametrize("shape", ["rows", "keys", "1-d keys", "per batch entry"])
@pytest.mark.parametrize("n", [40, 300])  # short rows (one call of the mask), long ones
def test_masks_broadcast_along_an_axis_give_the_canonical_cores_numbers(unread, shape, n):
    # a mask of one entry for every key of a row ([L_q, 1]), or for every query ([1, L_k],
    # [L_k], [B, 1, 1, 1, L_k]): the plain forms write -inf where the concept's `where` does
    rng = np.random.default_rng(n)
    q, k, v = inputs(rng, np.float32, n, n + 9)
    mask = {"rows": (np.arange(n) % 3 != 0)[:, None],
            "keys": (np.arange(n + 9) % 4 != 1)[None, :],
            "1-d keys": np.arange(n + 9) % 5 != 2,
            "per batch entry": (np.arange(n + 9)[None, :] >= np.array([[0], [n // 2]]))[
                :, None, None, None, :]}[shape]
    core = query_blocks.weights_unread(ma.scaled_dot_product_attention) if unread else \
        ma.scaled_dot_product_attention
    got, want = core(q, k, v, mask), canonical(core, q, k, v, mask)
    # (none has a query axis to split along: each runs whole, the concept's bits)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    if shape == "rows":
        assert np.all(got[0][..., ::3, :] == 0)


@pytest.mark.parametrize("n", [10, 300])
def test_a_swapped_softmax_runs_inside_the_attention(n):
    # minattn.swap (the course's grader: a student's softmax) reaches the core's body: the plain
    # forms step aside while a function the body calls is not the one it was written with
    calls, reference = [], ma.softmax

    def mine(x, axis=-1, mask=None):
        calls.append(np.shape(x))
        return reference(x, axis=axis, mask=mask)

    rng = np.random.default_rng(n)
    q, k, v = (rng.normal(size=(2, n, 4)) for _ in range(3))
    with ma.swap(softmax=mine):
        ma.scaled_dot_product_attention(q, k, v, causal_mask(n))
        query_blocks.weights_unread(ma.scaled_dot_product_attention)(q, k, v, causal_mask(n))
    assert len(calls) == (2 if n < 256 else 6)  # whole, or in 3 blocks of queries each time
    calls.clear()
    ma.scaled_dot_product_attention(q, k, v, causal_mask(n))  # restored: the plain forms again
    assert calls == []


def _scores_near(centre, dtype, n, rng, d_v=4):
    # q, k with every score (scale 1) in [centre - 1, centre], exactly: q = e_0, k_0 the score;
    # 2 batch entries of 2 heads
    q = np.zeros((2, 2, n, 3), dtype)
    q[..., 0] = 1.0
    k = np.zeros((2, 2, n, 3), dtype)
    k[..., 0] = centre + rng.uniform(-1.0, 0.0, (2, 2, n))
    unit = rng.uniform(0.5, 1.5, (2, 2, n, d_v)) * rng.choice([-1.0, 1.0], (2, 2, n, d_v))
    return q, k, unit


@pytest.mark.parametrize("dtype, magnitudes", [
    (np.float32, [1e-35, 1e-30, 1e-22, 1e-12, 1.0, 1e12, 1e20, 1e30, 1e35]),
    (np.float64, [1e-290, 1e-250, 1e-200, 1e-100, 1.0, 1e100, 1e180, 1e250, 1e290])])
@pytest.mark.parametrize("where", ["far below", "-window", "0", "+window", "far above"])
def test_unread_blocks_at_the_windows_edges(dtype, magnitudes, where):
    # output_into takes a tile's exps unshifted, with no row max, where the sums show every
    # row's max within exp_window; elsewhere it shifts. Every score near the window's edges or
    # far past them (every exp underflowing, or overflowing, unshifted), v at each magnitude
    # (exp_window narrows the window: products that would overflow, terms that would leave the
    # normal floats): the output is v's scale times that of v at magnitude 1, within the dtype's
    # rounding of the float64 formula, with no floating-point warning
    edge = plain_core.EXP_WINDOW[np.dtype(dtype)] - 1.0
    far = 2.5 * plain_core.EXP_WINDOW[np.dtype(dtype)]  # float32: 100; float64: 750
    centre = {"far below": -far, "-window": -edge, "0": 0.0, "+window": edge,
              "far above": far}[where]
    rng = np.random.default_rng(12)
    n = 300  # blocks of 128, 128 and 44 queries
    q, k, unit = _scores_near(centre, dtype, n, rng)
    want, _, _ = reference(q, k, unit, causal_mask(n), scale=1.0)
    core = query_blocks.weights_unread(ma.scaled_dot_product_attention)
    for magnitude in magnitudes:
        v = (unit * magnitude).astype(dtype)
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            out = core(q, k, v, causal_mask(n), scale=1.0)[0]
        assert out.dtype == dtype and np.isfinite(out).all(), magnitude
        np.testing.assert_allclose(out.astype(np.float64) / magnitude, want,
                                   err_msg=f"|v| ~ {magnitude:g}", **tolerance(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unread_blocks_shift_only_where_the_sums_say_a_max_left_the_window(dtype, monkeypatch):
    # which tiles output_into shifts (_row_max: the shifted form's row max), and how often it
    # makes a tile's scores (_scores_into): scores within the window, none shifted, each tile
    # made once; one row's max past it (in the second block), that block's tile made again and
    # shifted; a row with every key masked (in the first block), that block shifted from the
    # start; v holding a NaN, every block shifted from the start; a row's scores all just
    # below -window, though their sum is above e^-window, shifted
    rng = np.random.default_rng(13)
    n, window = 300, plain_core.EXP_WINDOW[np.dtype(dtype)]
    q, k, v = _scores_near(0.0, dtype, n, rng)
    v = v.astype(dtype)
    made, shifted = [], []
    scores_into, row_max = plain_core._scores_into, plain_core._row_max
    monkeypatch.setattr(plain_core, "_scores_into",
                        lambda s, *a: (made.append(1), scores_into(s, *a))[1])
    monkeypatch.setattr(plain_core, "_row_max",
                        lambda s: (shifted.append(1), row_max(s))[1])
    core = query_blocks.weights_unread(ma.scaled_dot_product_attention)

    def paths(q, k, v, mask):
        made.clear(), shifted.clear()
        with np.errstate(invalid="ignore"):
            out = core(q, k, v, mask, scale=1.0)[0]
        return len(made), len(shifted), out

    mask = causal_mask(n)
    assert paths(q, k, v, mask)[:2] == (3, 0)  # 3 blocks, 1 tile each (2 x 2 heads fit)
    far = q.copy()
    far[1, 0, 200, 0] = -window - 2.0  # one row's scores up to about window + 2
    got = paths(far, k, v, mask)
    assert got[:2] == (4, 1)
    want, _, _ = reference(far, k, v, mask, scale=1.0)
    np.testing.assert_allclose(got[2], want, **tolerance(dtype))
    hidden = mask.copy()
    hidden[5] = False
    got = paths(q, k, v, hidden)
    assert got[:2] == (3, 1) and np.all(got[2][..., 5, :] == 0)
    nan = v.copy()
    nan[0, 0, 0, 0] = np.nan
    assert paths(q, k, nan, mask)[:2] == (3, 3)
    low = k.copy()
    low[..., 0] = -window - 1.5 + rng.uniform(-0.25, 0.25, low.shape[:-1])
    assert np.exp(-window - 1.75) * 128 > np.exp(-window)  # the sums alone would pass
    got = paths(q, low, v, mask)
    assert got[:2] == (6, 3)  # each block's tile made twice (a block's own choice: the
    # same bits whichever worker thread runs it after whichever block)
    want, _, _ = reference(q, low, v, mask, scale=1.0)
    np.testing.assert_allclose(got[2], want, **tolerance(dtype))


def test_unread_blocks_keep_nans_and_infinities_in_the_unshifted_tiles():
    # v finite (a window), q holding a NaN and an infinity, k a NaN key: the tiles that meet
    # them leave the unshifted form, made again and shifted; their NaN rows the canonical
    # core's, every other row within rounding of the float64 formula
    rng = np.random.default_rng(14)
    q, k, v = (a[:, :, 0] for a in inputs(rng, np.float32, 300, 300))
    q[0, 0, 20, 1] = np.nan
    q[1, 2, 200, 3] = np.inf
    k[0, 1, 150, :] = np.nan  # key 150: NaN scores for the queries that see it
    mask = causal_mask(300)
    with np.errstate(invalid="ignore"):
        out = query_blocks.weights_unread(ma.scaled_dot_product_attention)(q, k, v, mask)[0]
        want = canonical(query_blocks.weights_unread(ma.scaled_dot_product_attention),
                         q, k, v, mask)[0]
        formula, _, _ = reference(q, k, v, mask)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    assert np.all(np.isnan(out[0, 0, 20])) and np.all(np.isnan(out[1, 2, 200]))
    assert np.all(np.isnan(out[0, 1, 150:])) and not np.isnan(out[0, 1, :150]).any()
    finite = np.isfinite(want)
    assert finite.sum() > 0.7 * finite.size
    clean = tuple(np.where(np.isfinite(a), a, 0) for a in (q, k, v))  # (for the bound)
    assert np.abs(out[finite] - formula[finite]).max() <= _float_bound(*clean, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_window_is_its_formula(dtype):
    # exp_window from v's largest and smallest nonzero |entry|, written out here over a sorted
    # list of them: v with and without zeros, tiny and huge entries, all zeros, NaN, infinity
    info, top = np.finfo(dtype), plain_core.EXP_WINDOW[np.dtype(dtype)]

    def formula(v, block):
        sizes = sorted(abs(float(x)) for x in v.ravel())
        if any(np.isnan(x) or np.isinf(x) for x in sizes):
            return -1.0
        nonzero = [x for x in sizes if x > 0]
        if not nonzero:
            return top
        window = min(top, np.log(float(info.max)) - np.log(block) - np.log(nonzero[-1]) - 1.0,
                     np.log(nonzero[0]) + np.log(float(info.eps) / float(info.tiny)) - 1.0)
        return window if window > 0 else -1.0

    rng = np.random.default_rng(15)
    base = rng.standard_normal((2, 30, 4)).astype(dtype)
    tiny = float(info.tiny) / float(info.eps) * np.exp(top / 2)  # narrows the window to ~half
    cases = {"plain": base, "zeros": np.where(rng.random(base.shape) < 0.3, 0, base),
             "zeros and a tiny one": np.where(rng.random(base.shape) < 0.3, 0, base),
             "huge": base * dtype(float(info.max) ** 0.5), "all zeros": np.zeros_like(base),
             "nan": base.copy(), "inf": base.copy()}
    cases["zeros and a tiny one"][0, 3, 1] = tiny
    # the dtype's smallest subnormal, and an entry near the largest float over the block's keys
    # (a product of the two factors leaves the floats: no window, not a math domain error)
    cases["subnormal"], cases["near the largest"] = base.copy(), base.copy()
    cases["subnormal"][1, 1, 1] = np.nextafter(dtype(0), dtype(1))
    cases["near the largest"][1, 1, 1] = dtype(float(info.max) / 16)
    cases["nan"][1, 2, 3] = np.nan
    cases["inf"][0, 0, 0] = -np.inf
    for name, v in cases.items():
        got = plain_core.exp_window(v.astype(dtype), 64)
        assert np.isclose(got, formula(v, 64), rtol=1e-12), name
    assert 0 < plain_core.exp_window(cases["zeros and a tiny one"], 64) < 0.6 * top


@pytest.mark.parametrize("entry", [5e-324, 1e306])  # a float64 subnormal; near max / L_k
def test_unread_blocks_and_blockwise_take_v_at_the_floats_ends(entry):
    # exp_window's logs of v's extremes: a product of their factors underflowed to 0 or
    # overflowed (a math domain error on the prompt's path and blockwise's); such a v takes no
    # window, every tile shifted, the output within rounding of the weights-read path's
    from minattn.blockwise import blockwise_attention

    n = 256
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, 4)) for _ in range(3))
    v[0, 0, 3, 0] = entry
    mask = causal_mask(n)
    want = ma.scaled_dot_product_attention(q, k, v, mask)[0]
    got = query_blocks.weights_unread(ma.scaled_dot_product_attention)(q, k, v, mask)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(v).max())
    blocks = blockwise_attention(q, k, v, causal=True, block_size=64)
    np.testing.assert_allclose(blocks, want, rtol=1e-12, atol=1e-12 * np.abs(v).max())
