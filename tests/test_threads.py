"""Work split into pieces gives the same results as the work done in one piece: blockwise
attention's query blocks on worker threads (minattn/engine/threads.py), the float32 GELU in chunks.
Small inputs never reach the threads, so the tests force the split (2 to 4 workers, chunks of a
few elements) and compare with independent references."""
import contextlib
import math
import os
import sys
import threading
import time
from unittest import mock

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
import minattn.blockwise as blockwise
import minattn.position_wise as position_wise
from minattn.engine import threads as _threads

from . import reference
from .array_double import DeviceArray
from .strategies import bool_masks, float_arrays, tolerance


@contextlib.contextmanager
def forced_workers(n):
    """Every split in minattn uses n workers, however small the work."""
    with mock.patch.object(blockwise, "n_workers", lambda x, work: n):
        yield


def test_in_threads_returns_results_in_order_from_worker_threads():
    main = threading.get_ident()
    results = _threads.in_threads(lambda i: (i * i, threading.get_ident()), range(7), 3)
    assert [r for r, _ in results] == [i * i for i in range(7)]
    assert all(ident != main for _, ident in results)
    inline = _threads.in_threads(lambda i: (i, threading.get_ident()), range(3), 1)
    assert inline == [(0, main), (1, main), (2, main)]
    assert _threads.in_threads(lambda i: i, [], 4) == []


def test_spread_deals_items_by_cost_to_workers_with_one_blas_thread_each():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    main = threading.current_thread().name
    ran = []  # (item, thread name, BLAS threads)
    f = lambda item: ran.append((item, threading.current_thread().name,  # noqa: E731
                                 _threads._blas_threads()))
    # costs 1, 2, 3, 4: the costliest first to the least loaded worker: {3, 0} and {2, 1}
    in_threads, shares = _threads.in_threads, []
    with mock.patch.object(_threads, "in_threads", lambda g, items, n: (
            shares.append((list(items), n)), in_threads(g, items, n))[1]):
        _threads.spread(f, "abcd", [1, 2, 3, 4], 2)
    assert shares == [([[3, 0], [2, 1]], 2)]
    assert sorted(item for item, _, _ in ran) == list("abcd")
    assert all(name.startswith("minattn-worker") and blas == 1 for _, name, blas in ran)
    order = [item for item, _, _ in ran]  # each share's items in their order
    assert order.index("a") < order.index("d") and order.index("b") < order.index("c")
    for n_threads, items in ((1, "abcd"), (2, "a"), (4, "")):  # in order, here
        ran.clear()
        with threadpoolctl.threadpool_limits(1, user_api="blas"):
            _threads.spread(f, items, [1] * len(items), n_threads)
        assert [(item, name) for item, name, _ in ran] == [(item, main) for item in items]
    ran.clear()  # on a worker already: there, in order (no split inside a split)
    _threads.in_threads(lambda _: _threads.spread(f, "ab", [1, 1], 2), range(2), 2)
    by_thread = {}
    for item, name, _ in ran:
        by_thread.setdefault(name, []).append(item)
    assert all(name.startswith("minattn-worker") for name in by_thread)
    assert sum(by_thread.values(), []).count("a") == 2
    assert all(items in (["a", "b"], ["a", "b", "a", "b"]) for items in by_thread.values())


def test_spread_raises_what_an_item_raises_once_every_worker_is_done():
    done = []

    def f(item):
        time.sleep(0.02 * (item != 0))
        if item == 0:
            raise ValueError("item 0")
        done.append(item)

    # shares: {0, 3} and {1, 2}; item 0 fails first, the other worker's items finish before
    # spread raises (nothing of a split runs on after it)
    with pytest.raises(ValueError, match="item 0"):
        _threads.spread(f, range(4), [4, 3, 2, 1], 2)
    assert sorted(done) == [1, 2]


def test_in_threads_raises_what_a_worker_raises():
    def f(i):
        if i == 2:
            raise ValueError("item 2")
        return i

    with pytest.raises(ValueError, match="item 2"):
        _threads.in_threads(f, range(5), 2)


def test_n_workers_splits_only_large_host_work_and_follows_the_blas_limit():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    x = np.zeros(3)
    assert _threads.n_workers(DeviceArray(x), 2 ** 40) == 1  # a GPU array: one piece
    q = np.ones((1, 512, 4))  # 512 x 512 scores: work for 4 threads
    with mock.patch.object(blockwise, "in_threads", wraps=_threads.in_threads) as spy:
        with threadpoolctl.threadpool_limits(1, user_api="blas"):  # the user asks for one thread
            assert _threads.n_workers(x, 2 ** 40) == 1
            ma.blockwise_attention(q, q, q, block_size=64)
            assert spy.call_args.args[2] == 1  # so blockwise runs its blocks on one thread too
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            if _threads.n_workers(x, 2 ** 40) < 2:
                pytest.skip("BLAS runs one thread at most here: nothing to split over")
            assert _threads.n_workers(x, 2 ** 40) == 2  # never more than BLAS may use
            assert _threads.n_workers(x, 2 ** 16) == 1  # too small to be worth a thread
            assert _threads.n_workers(x, 2 * 2 ** 16) == 2
            ma.blockwise_attention(q, q, q, block_size=64)
            assert spy.call_args.args[2] == 2


def test_the_blas_limit_is_restored_after_a_threaded_call():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 64, 8))
    with forced_workers(3):
        ma.blockwise_attention(q, q, q, block_size=16)
    after = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    assert after == before


def _reference_attention(q, k, v, keep):
    # [B, L_q, d], [B, L_k, d], [B, L_k, d_v], keep [B, L_q, L_k] or None -> float64 loops
    outs, weights = zip(*(reference.attention(q[b], k[b], v[b], None if keep is None else keep[b])
                          for b in range(q.shape[0])))
    return np.stack(outs), np.stack(weights)


@st.composite
def blockwise_cases(draw):
    """q, k, v [B, L, d] with L_q != L_k allowed, causal or not, a key mask or none, a block size
    that need not divide the lengths."""
    b, l_q, l_k = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    q = draw(float_arrays((b, l_q, 3)))
    k, v = draw(float_arrays((b, l_k, 3))), draw(float_arrays((b, l_k, 2)))
    key_mask = draw(st.none() | bool_masks((b, l_k)))
    return q, k, v, draw(st.booleans()), key_mask, draw(st.integers(1, 4))


@given(blockwise_cases(), st.integers(2, 4))
def test_blockwise_split_by_query_blocks_equals_the_loop_reference(case, workers):
    q, k, v, causal, key_mask, block_size = case
    with forced_workers(workers):
        out = ma.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask,
                                     block_size=block_size)
    b, l_q, l_k = q.shape[0], q.shape[1], k.shape[1]
    keep = np.ones((b, l_q, l_k), bool)
    if causal:
        keep &= np.arange(l_q)[:, None] >= np.arange(l_k)[None, :]
    if key_mask is not None:
        keep &= key_mask[:, None, :]
    np.testing.assert_allclose(out, _reference_attention(q, k, v, keep)[0], **tolerance(q.dtype))


@given(blockwise_cases())
def test_blockwise_gradient_after_a_split_forward_equals_the_unsplit_one(case):
    # The backward pass recomputes every tile from the output and log-sum-exp that the worker
    # threads stacked: a block stacked out of place would show here.
    q, k, v, causal, key_mask, block_size = case
    r = np.random.default_rng(0).standard_normal(q.shape[:2] + (v.shape[-1],))

    def loss(q, k, v):
        out = ma.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask,
                                     block_size=block_size)
        return anp.sum(out * r)

    def full_loss(q, k, v):  # the reference: the whole softmax, the same visibility as a mask
        keep = np.ones((q.shape[0], q.shape[1], k.shape[1]), bool)
        if causal:
            keep &= np.arange(q.shape[1])[:, None] >= np.arange(k.shape[1])[None, :]
        if key_mask is not None:
            keep &= key_mask[:, None, :]
        return anp.sum(ma.scaled_dot_product_attention(q, k, v, keep)[0] * r)

    expected = autograd.grad(full_loss, (0, 1, 2))(q, k, v)
    with forced_workers(3):
        got = autograd.grad(loss, (0, 1, 2))(q, k, v)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("shape", [(0,), (1,), (5, 7), (3, 4, 11)])
def test_gelu_in_chunks_is_the_same_as_in_one_piece(shape):
    from scipy.special import erf

    x = np.random.default_rng(1).uniform(-6, 6, size=shape).astype(np.float32)
    whole = position_wise.gelu(x)
    with mock.patch.object(position_wise, "_CHUNK", 4):
        chunked = position_wise.gelu(x)
        transposed = position_wise.gelu(x.T)  # not contiguous: flattened in its own order
    np.testing.assert_array_equal(chunked, whole)  # elementwise: the chunks change no bit
    np.testing.assert_array_equal(transposed, whole.T)
    exact = 0.5 * x.astype(np.float64) * (1 + erf(x.astype(np.float64) / math.sqrt(2)))
    # within the error documented in position_wise.py on every CPU (tests/test_vjps.py)
    bound = 2.2e-7 + 2.0 ** -21 * np.maximum(np.abs(x.astype(np.float64)), 1.0)
    assert chunked.dtype == np.float32 and np.all(np.abs(chunked - exact) <= bound)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("size", [0, 1, 5, 9, 23])
def test_gelu_chunks_on_worker_threads_are_the_same_as_in_one_piece(n, size):
    # The float32 GELU's chunks in contiguous pieces on n worker threads (forced: small inputs
    # stay on one), pieces of whole chunks and empty ones included: the same bits as one piece,
    # forward and derivative, huge |x| without a warning (each worker sets its own errstate).
    x = np.random.default_rng(size).uniform(-6, 6, size=size).astype(np.float32)
    x[::4] = np.float32(3e38) * np.sign(x[::4])
    whole = position_wise._gelu_float32_and_derivative(("x",), x)
    used, calls = set(), []
    in_threads = _threads.in_threads

    def spy(f, items, n_threads):
        items = list(items)
        calls.append((len(items), n_threads))
        return in_threads(lambda item: (used.add(threading.get_ident()), f(item))[1], items,
                          n_threads)

    with mock.patch.object(position_wise, "_CHUNK", 2), \
            mock.patch.object(_threads, "n_workers", lambda x, work, per_thread: n), \
            mock.patch.object(_threads, "in_threads", spy):
        forward = position_wise._gelu_float32(x)
        split = position_wise._gelu_float32_and_derivative(("x",), x)
    np.testing.assert_array_equal(forward, whole[0])
    np.testing.assert_array_equal(split[0], whole[0])
    np.testing.assert_array_equal(split[1]["x"], whole[1]["x"])
    assert calls == [(n, n)] * 2 and used and threading.get_ident() not in used


@pytest.mark.parametrize("worker_pass", [64, 120, 128])
def test_a_row_splits_workers_pass_over_a_small_array_at_once_with_the_same_bits(worker_pass):
    # On a worker of on_workers or rows_on_workers (a model's step beside other workers), an
    # elementwise primitive's array of at most WORKER_PASS elements goes in one pass per
    # operation (fewer NumPy calls, each of which hands the GIL over); a larger one, and any
    # array elsewhere, in cache-sized chunks; the float32 GELU's value and derivative, and
    # SwiGLU's, the same bits either way; the flag ends with the item, also when it raises.
    rng = np.random.default_rng(3)
    x = rng.uniform(-6, 6, size=(3, 40)).astype(np.float32)  # 120 elements
    gate, up = (rng.uniform(-8, 8, size=(3, 40)).astype(np.float32) for _ in range(2))
    passes = []

    def counted(f):
        def chunk(x, *rest):
            passes.append(x.size)
            return f(x, *rest)
        return chunk

    def compute(_=None):
        return (_threads.beside_other_workers(), _threads.elements_per_pass(8, 120),
                position_wise._gelu_float32_and_derivative(("x",), x),
                position_wise._swiglu_float32_and_derivatives(("gate", "up"), gate, up))

    with mock.patch.object(position_wise, "_CHUNK", 8), \
            mock.patch.object(_threads, "WORKER_PASS", worker_pass), \
            mock.patch.object(position_wise, "_gelu_and_derivative_chunk",
                              counted(position_wise._gelu_and_derivative_chunk)):
        here = compute()
        here_passes, passes[:] = list(passes), []
        on = _threads.on_workers(compute, range(2))
        on_passes, passes[:] = list(passes), []
        with mock.patch.object(_threads, "n_workers", lambda x, work, per_thread=0: 2):
            rows = _threads.rows_on_workers(lambda r: np.array([compute()[:2]] * len(r)),
                                            list(range(4)), np.zeros((4, 2)))
    at_once = worker_pass >= 120
    assert here[:2] == (False, 8) and here_passes == [8] * 15
    assert all(o[:2] == (True, 120 if at_once else 8) for o in on)
    assert on_passes == ([120] * 2 if at_once else [8] * 30)
    assert rows.tolist() == [[True, 120 if at_once else 8]] * 4
    for o in on:
        np.testing.assert_array_equal(o[2][0], here[2][0])
        np.testing.assert_array_equal(o[2][1]["x"], here[2][1]["x"])
        np.testing.assert_array_equal(o[3][0], here[3][0])
        for name in ("gate", "up"):
            np.testing.assert_array_equal(o[3][1][name], here[3][1][name])

    def raises(i):
        raise ValueError(f"item {i}")

    with pytest.raises(ValueError, match="item"):
        _threads.on_workers(raises, range(2))
    assert _threads.in_threads(lambda i: _threads.beside_other_workers(), range(2), 2) == \
        [False, False]  # the pool's threads, after items that raised
    assert not _threads.beside_other_workers()
    with mock.patch.object(_threads._BESIDE, "others", True, create=True):
        assert _threads.elements_per_pass(8, 0) == 8  # never a chunk of 0


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("size", [0, 1, 5, 23])
def test_swiglu_chunks_on_worker_threads_are_the_same_as_in_one_piece(n, size):
    # The float32 SwiGLU's chunks of two inputs in pieces on n worker threads (forced): the
    # same bits as one piece's value and derivatives; the value (torch's form of silu) within
    # float32 rounding of the general primitive's, the derivatives' pass its bits.
    rng = np.random.default_rng(size)
    gate, up = (rng.uniform(-8, 8, size=(2, size)).astype(np.float32) for _ in range(2))
    whole = position_wise._swiglu_float32_and_derivatives(("gate", "up"), gate, up)
    with mock.patch.object(position_wise, "_CHUNK", 2), \
            mock.patch.object(_threads, "n_workers", lambda x, work, per_thread: n):
        forward = position_wise._swiglu_float32(gate, up)
        split = position_wise._swiglu_float32_and_derivatives(("gate", "up"), gate, up)
    with mock.patch.object(_threads, "n_workers", lambda x, work, per_thread: 1):
        one_piece = position_wise._swiglu_float32(gate, up)
    np.testing.assert_array_equal(forward, one_piece)
    np.testing.assert_array_equal(split[0], position_wise._swiglu(gate, up))
    g64 = gate.astype(np.float64)
    np.testing.assert_allclose(forward, g64 / (1 + np.exp(-g64)) * up, rtol=2e-6,
                               atol=1e-37)
    for name in ("gate", "up"):
        np.testing.assert_array_equal(split[1][name], whole[1][name])
    np.testing.assert_array_equal(whole[1]["up"], gate * position_wise.sigmoid(gate))


def test_n_workers_asks_no_threads_for_one_threads_work():
    x = np.zeros(1, np.float32)
    with mock.patch.object(_threads, "_blas_threads", mock.Mock(return_value=2)) as asked:
        assert _threads.n_workers(x, 2 ** 17 - 1, 2 ** 16) == 1
        assert not asked.called
        assert _threads.n_workers(x, 2 ** 17, 2 ** 16) == 2 and asked.called


def test_n_workers_asks_for_per_thread_elements_on_each_worker():
    x = np.zeros(1, np.float32)
    with mock.patch.object(_threads, "_blas_threads", lambda: 2):
        assert _threads.n_workers(x, 2 ** 17) == 2
        assert _threads.n_workers(x, 2 ** 17, 2 ** 17) == 1
        assert _threads.n_workers(x, 2 ** 18, 2 ** 17) == 2
    with mock.patch.object(_threads, "_blas_threads", lambda: 1):
        assert _threads.n_workers(x, 2 ** 30, 2 ** 17) == 1
    assert _threads.n_workers(DeviceArray(x), 2 ** 30) == 1


def test_large_inputs_reach_the_threads_and_match_a_float64_computation():
    # No forcing: at this size (2 x 4 x 128 x 128 scores) n_workers splits on a multi-core host,
    # at BLAS's default count, the cores (set here: under xdist the suite's conftest gives each
    # worker process its share of the cores, one on two cores).
    threadpoolctl = pytest.importorskip("threadpoolctl")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 4, 128, 16)).astype(np.float32) for _ in range(3))
    with mock.patch.object(blockwise, "in_threads", wraps=_threads.in_threads) as spy, \
            threadpoolctl.threadpool_limits(cores or 1, user_api="blas"):
        out = ma.blockwise_attention(q, k, v, causal=True, block_size=32)
    if spy.call_args.args[2] < 2:
        pytest.skip("one core or one BLAS thread here: the blocks ran on one thread")
    scores = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / 4.0
    s = np.where(np.tril(np.ones((128, 128), bool)), scores, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape_q, shape_k, d_v", [((2, 0), (3, 0), 2), ((0, 3), (4, 3), 2),
                                                 ((3, 2), (0, 2), 1), ((3, 2), (4, 2), 0)])
def test_blockwise_with_an_empty_axis_answers_as_full_attention(shape_q, shape_k, d_v):
    # Empty axes (no query, no key, d_k = 0 or d_v = 0) give what full attention gives, without
    # dividing by a zero width when sizing the work.
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal(shape_q), rng.standard_normal(shape_k)
    v = rng.standard_normal((shape_k[0], d_v))
    out = ma.blockwise_attention(q, k, v, block_size=2)
    expected = ma.scaled_dot_product_attention(q, k, v)[0]
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, atol=1e-12)



def test_tile_entries_fills_the_cache_on_the_host_and_takes_the_whole_batch_on_a_device():
    x = np.zeros((6, 2, 2), np.float32)
    assert _threads.tile_entries(x, 512 * 512 * 4) == _threads.TILE_BYTES // 2 ** 20
    assert _threads.tile_entries(x, 128 * 128 * 4) == _threads.TILE_BYTES // 2 ** 16
    assert _threads.tile_entries(x, 4 * _threads.TILE_BYTES) == 1  # at least one entry
    assert _threads.tile_entries(x, 0) == _threads.TILE_BYTES  # empty tiles: no division by 0
    assert _threads.tile_entries(DeviceArray(x), 1) == 6  # a GPU: the whole batch in a tile
    assert _threads.tile_entries(DeviceArray(x[:0]), 1) == 1


@st.composite
def batched_blockwise_cases(draw):
    """q [2, 3, L_q, 4] float32, k and v broadcast over the heads or the batch ([2, 1, ...] or
    [3, ...]), a key mask per sequence or none, causal or not, a block size that need not divide
    the lengths."""
    l_q, l_k = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    kv_batch = draw(st.sampled_from([(2, 3), (2, 1), (3,)]))
    q = draw(float_arrays((2, 3, l_q, 4), np.float32))
    k = draw(float_arrays(kv_batch + (l_k, 4), np.float32))
    v = draw(float_arrays(kv_batch + (l_k, 2), np.float32))
    key_mask = draw(st.none() | bool_masks((2, 1, l_k)))
    return q, k, v, draw(st.booleans()), key_mask, draw(st.integers(1, 4))


@given(batched_blockwise_cases(), st.integers(1, 6))
def test_blockwise_tiles_of_a_few_heads_equal_a_float64_reference_and_every_split(case, entries):
    # The batch (2 sequences x 3 heads) cut into tiles of `entries` heads (forced: small tiles
    # hold every head), k, v and the key mask broadcast: the output and the log-sum-exp equal a
    # float64 computation of the whole, and are the same bits on one worker and on three (each
    # piece computes the same tiles whichever thread takes it).
    q, k, v, causal, key_mask, block_size = case
    scale = 0.5

    def run(workers):
        with mock.patch.object(blockwise, "tile_entries", lambda x, entry_bytes: entries), \
                forced_workers(workers):
            return blockwise._flash(q, k, v, key_mask, scale, causal, block_size)

    (out, lse), (out_1, lse_1) = run(3), run(1)
    np.testing.assert_array_equal(out, out_1)
    np.testing.assert_array_equal(lse, lse_1)
    keep = np.ones((2, 3, q.shape[-2], k.shape[-2]), bool)
    if causal:
        keep &= np.tril(np.ones(keep.shape[-2:], bool))
    if key_mask is not None:
        keep &= key_mask[..., None, :]
    s = np.where(keep, scale * q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64),
                 -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    l = p.sum(-1, keepdims=True)
    expected = (p @ v.astype(np.float64)) / np.where(l > 0, l, 1.0)
    assert out.dtype == np.float32 and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, **tolerance(np.float32))
    with np.errstate(divide="ignore"):
        expected_lse = m + np.log(l)
    np.testing.assert_allclose(lse, expected_lse, **tolerance(np.float32))


def test_causal_query_blocks_go_to_the_workers_longest_first():
    # A causal query block's work grows with its start: the last block first, so that no worker
    # is left with the longest at the end. Each block's pieces (a tile of heads each) together.
    q = np.random.default_rng(3).standard_normal((2, 10, 3))
    calls = []
    in_threads = _threads.in_threads

    def spy(f, items, n_threads):
        items = list(items)
        calls.append(items)
        return in_threads(f, items, n_threads)

    with mock.patch.object(blockwise, "in_threads", spy), \
            mock.patch.object(blockwise, "tile_entries", lambda x, entry_bytes: 1):
        causal = ma.blockwise_attention(q, q, q, causal=True, block_size=4)
        ma.blockwise_attention(q, q, q, causal=False, block_size=4)
    assert calls == [[(0, 8), (1, 8), (0, 4), (1, 4), (0, 0), (1, 0)],
                     [(0, 0), (1, 0), (0, 4), (1, 4), (0, 8), (1, 8)]]
    np.testing.assert_allclose(causal, _reference_attention(
        q, q, q, np.broadcast_to(np.tril(np.ones((10, 10), bool)), (2, 10, 10)))[0], rtol=1e-12,
        atol=1e-12)

def test_in_threads_keeps_its_workers_from_call_to_call_and_splits_inside_a_worker():
    # The same worker threads serve the next call of as many threads (a pool kept per count);
    # a split asked for inside a worker (a nested in_threads) gets threads of its own and
    # finishes, where reusing the busy pool would wait forever; results in order throughout.
    barrier = threading.Barrier(2, timeout=10)

    def held(i):  # both items at once: two distinct workers
        barrier.wait()
        return i, threading.current_thread()  # the Thread itself (an ident may be reused)

    first = _threads.in_threads(held, range(2), 2)
    second = _threads.in_threads(held, range(2), 2)
    assert [i for i, _ in first] == [0, 1] and [i for i, _ in second] == [0, 1]
    assert {id(t) for _, t in first} == {id(t) for _, t in second}
    assert len({id(t) for _, t in first}) == 2
    assert threading.current_thread() not in [t for _, t in first]

    def outer(i):
        return [j * 10 + i for j in _threads.in_threads(lambda j: j, range(3), 2)]

    assert _threads.in_threads(outer, range(2), 2) == [[0, 10, 20], [1, 11, 21]]


def test_a_split_shortens_the_switch_interval_and_restores_it_nested_raising_and_overlapping():
    # While workers run, Python's switch interval is SPLIT_SWITCH_INTERVAL; after the split the
    # interval found before it, also when a worker raised, after a nested split (the inner
    # one's end does not restore it while the outer runs), and after two threads' overlapping
    # splits (restored by the last to end, to the first one's saved value).
    before = sys.getswitchinterval()
    short = _threads.SPLIT_SWITCH_INTERVAL
    try:
        sys.setswitchinterval(0.004)
        found = sys.getswitchinterval()
        seen = _threads.in_threads(lambda i: sys.getswitchinterval(), range(2), 2)
        assert seen == [pytest.approx(short, rel=1e-6)] * 2
        assert sys.getswitchinterval() == found

        def raises(i):
            assert sys.getswitchinterval() == pytest.approx(short, rel=1e-6)
            raise ValueError(f"item {i}")

        with pytest.raises(ValueError, match="item"):
            _threads.in_threads(raises, range(2), 2)
        assert sys.getswitchinterval() == found

        def outer(i):
            inner = _threads.in_threads(lambda j: sys.getswitchinterval(), range(2), 2)
            return inner + [sys.getswitchinterval()]  # after the inner split ended

        assert _threads.in_threads(outer, range(2), 2) == \
            [[pytest.approx(short, rel=1e-6)] * 3] * 2
        assert sys.getswitchinterval() == found

        finished = []

        def raises_or_finishes(i):  # the split raises only once the other item has finished
            if i == 0:
                raise ValueError("item 0")
            time.sleep(0.05)
            finished.append(i)

        with pytest.raises(ValueError, match="item 0"):
            _threads.in_threads(raises_or_finishes, range(2), 2)
        assert finished == [1] and sys.getswitchinterval() == found

        def nested_raises(i):
            return _threads.in_threads(raises, range(2), 2)

        with pytest.raises(ValueError, match="item"):
            _threads.in_threads(nested_raises, range(2), 2)
        assert sys.getswitchinterval() == found

        # two threads' splits overlapping: the first starts, the second starts, the first ends
        # (still short: the second runs), the second ends (restored)
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        seen = {}

        def first(i):
            if i == 0:
                first_in.set()
                assert second_in.wait(10)
            return i

        def second(i):
            if i == 0:
                second_in.set()
                assert first_out.wait(10)
                seen["after the first ended"] = sys.getswitchinterval()
            return i

        def run_first():
            try:
                _threads.in_threads(first, range(2), 2)
            finally:
                first_out.set()

        t1 = threading.Thread(target=run_first)
        t1.start()
        assert first_in.wait(10)
        t2 = threading.Thread(target=lambda: _threads.in_threads(second, range(2), 2))
        t2.start()
        t1.join(10)
        t2.join(10)
        assert not t1.is_alive() and not t2.is_alive()
        assert seen["after the first ended"] == pytest.approx(short, rel=1e-6)
        assert sys.getswitchinterval() == found

        # an interval set by someone during a split is theirs to keep; a shorter one is kept
        _threads.in_threads(lambda i: sys.setswitchinterval(0.003), range(2), 2)
        assert sys.getswitchinterval() == pytest.approx(0.003, rel=1e-6)
        sys.setswitchinterval(short / 2)
        tiny = sys.getswitchinterval()
        assert _threads.in_threads(lambda i: sys.getswitchinterval(), range(2), 2) == [tiny] * 2
        assert sys.getswitchinterval() == tiny
        # one item or one thread: no split, the interval as it is
        sys.setswitchinterval(0.004)
        assert _threads.in_threads(lambda i: sys.getswitchinterval(), range(1), 2) == [found]
        assert _threads.in_threads(lambda i: sys.getswitchinterval(), range(3), 1) == [found] * 3
    finally:
        sys.setswitchinterval(before)


def test_blockwise_on_a_device_waits_for_no_flag_and_equals_the_host():
    # On a GPU, a Python `if` on a device array copies it to the host and waits for the device
    # (CuPy's bool()): no tile may ask one. The test double counts its conversions to a host
    # bool.
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 3, 9, 4)).astype(np.float32) for _ in range(3))
    key_mask = rng.random((2, 1, 9)) < 0.8
    flags = []
    to_bool = DeviceArray.__bool__

    def counted(self):
        flags.append(1)
        return to_bool(self)

    with mock.patch.object(DeviceArray, "__bool__", counted):
        on_device = ma.blockwise_attention(DeviceArray(q), DeviceArray(k), DeviceArray(v),
                                           causal=True, key_mask=DeviceArray(key_mask),
                                           block_size=2)
    assert flags == []
    on_host = ma.blockwise_attention(q, k, v, causal=True, key_mask=key_mask, block_size=2)
    np.testing.assert_allclose(on_device.get(), on_host, **tolerance(np.float32))


def test_a_small_gpts_step_on_two_workers_has_the_same_bits_with_either_pass_length():
    # A float32 GPT's value and gradient with its rows on two workers (training/loop.py's
    # split): the worker's longer elementwise passes (and the switch interval) change no bit
    # of the loss or of any gradient; and the split is the one-thread computation of each half.
    from minattn.models import char_gpt
    from minattn.training import loop
    from minattn.engine.autograd_rules import value_and_grad_by_leaf
    from minattn.engine.trees import leaves

    params, config = char_gpt.init_char_gpt(np.random.default_rng(0), 11, n_layers=1,
                                            n_heads=2, d_model=16, context=8,
                                            dtype=np.float32)
    ids = np.random.default_rng(1).integers(11, size=200)
    batch = char_gpt.window_batch(ids, context=8, batch_size=4, seed=0, k=0)
    loss_and_grad = value_and_grad_by_leaf(char_gpt.loss_sum(config))
    halves = lambda x, n: [slice(0, n // 2), slice(n // 2, n)]  # noqa: E731

    def step(worker_pass):
        with mock.patch.object(loop, "row_pieces", halves), \
                mock.patch.object(position_wise, "_CHUNK", 16), \
                mock.patch.object(_threads, "WORKER_PASS", worker_pass):
            return loop.accumulated(loss_and_grad, params, [batch], [None])

    with mock.patch.object(position_wise, "_CHUNK", 16):
        by_half = [loss_and_grad(params, tuple(a[piece] for a in batch), None)
                   for piece in halves(None, 4)]
    count = int(batch[2].sum())
    for worker_pass in (16, 2 ** 18):  # chunks of 16 on the workers, or one pass
        loss, grads = step(worker_pass)
        assert loss == (float(by_half[0][0]) + float(by_half[1][0])) / count
        for g, g0, g1 in zip(leaves(grads), leaves(by_half[0][1]), leaves(by_half[1][1])):
            np.testing.assert_array_equal(g, (g0 + g1) / count)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("shape", [(3, 5), (7, 5), (2, 9, 5)])
def test_swiglu_and_gelu_of_views_go_in_whole_rows_with_the_same_bits(n, shape):
    # SwiGLU's gate and up as a fused product gives them (slices [..., :F] and [..., F:] of one
    # [..., 2F] array, each row contiguous, the arrays not): chunks of whole rows, on n worker
    # threads (forced), never a flat copy first; the same bits as the contiguous copies' value
    # and derivatives (elementwise: the chunks change no bit), float32; the GELU's of such a
    # view alike; the float64 primitive (no chunks) alike.
    rng = np.random.default_rng(sum(shape) + n)
    both = rng.uniform(-8, 8, size=shape[:-1] + (2 * shape[-1],)).astype(np.float32)
    both[..., ::3] = np.float32(3e38) * np.sign(both[..., ::3])
    gate, up = both[..., :shape[-1]], both[..., shape[-1]:]
    assert not gate.flags.c_contiguous and position_wise._rows_of_views(gate, up)
    whole = position_wise._swiglu_float32_and_derivatives(("gate", "up"), gate.copy(), up.copy())
    gelu_whole = position_wise._gelu_float32_and_derivative(("x",), gate.copy())
    value = position_wise._swiglu_float32(gate.copy(), up.copy())  # (torch's form of silu)
    seen = []

    def counted(f):
        def chunk(x, *rest):
            seen.append(x.shape)
            read.append(np.shares_memory(x, both) and np.shares_memory(rest[0], both))
            return f(x, *rest)
        return chunk

    read = []  # each chunk read from the views themselves: not copied first
    with mock.patch.object(position_wise, "_CHUNK", 2 * shape[-1]), \
            mock.patch.object(_threads, "n_workers", lambda x, work, per_thread: n), \
            mock.patch.object(position_wise, "_swiglu_chunk",
                              counted(position_wise._swiglu_chunk)):
        forward = position_wise._swiglu_float32(gate, up)
        split = position_wise._swiglu_float32_and_derivatives(("gate", "up"), gate, up)
        gelu = position_wise._gelu_float32_and_derivative(("x",), gate)
    rows = int(np.prod(shape[:-1]))
    assert seen and all(s[-1] == shape[-1] and len(s) == 2 for s in seen)  # whole rows
    assert sum(s[0] for s in seen) == rows  # every row once
    assert all(read)
    read[:], seen[:] = [], []
    with mock.patch.object(_threads, "WORKER_PASS", 10 ** 6), \
            mock.patch.object(_threads._BESIDE, "others", True, create=True), \
            mock.patch.object(position_wise, "_swiglu_chunk",
                              counted(position_wise._swiglu_chunk)):
        at_once = position_wise._swiglu_float32(gate, up)  # a worker's one pass: in place too
    np.testing.assert_array_equal(at_once, value)
    assert seen == [(rows, shape[-1])] and all(read)
    for got, expected in ((forward, value), (split[0], whole[0])):
        assert got.shape == shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)
    for name in ("gate", "up"):
        np.testing.assert_array_equal(split[1][name], whole[1][name])
    np.testing.assert_array_equal(gelu[0], gelu_whole[0])
    np.testing.assert_array_equal(gelu[1]["x"], gelu_whole[1]["x"])
    g64, u64 = gate.astype(np.float64), up.astype(np.float64)
    small = (np.abs(g64) < 100) & (np.abs(u64) < 100)  # (the huge entries overflow float32)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(forward[small], (g64 / (1 + np.exp(-g64)) * u64)[small],
                                   rtol=2e-6, atol=1e-37)
    wide = both.astype(np.float64)
    gate64, up64 = wide[..., :shape[-1]], wide[..., shape[-1]:]
    np.testing.assert_array_equal(position_wise.swiglu(gate64, up64),
                                  position_wise.swiglu(gate64.copy(), up64.copy()))


def test_rows_of_views_takes_only_arrays_whose_rows_are_contiguous():
    a = np.zeros((4, 6), np.float32)
    assert position_wise._rows_of_views(a[:, :3], a[:, 3:])
    assert not position_wise._rows_of_views(a, a)  # contiguous: flat chunks
    assert not position_wise._rows_of_views(a[:, ::2], a[:, 1::2])  # rows strided
    assert not position_wise._rows_of_views(a.T, a.T)  # flattened in its own order
    assert not position_wise._rows_of_views(a[0, :3])  # one axis
    assert not position_wise._rows_of_views(a[:, :0], a[:, :0])  # empty rows
