"""Work split across worker threads (minattn/_threads.py) gives the same results as the work
done in one piece: the attention core split by query rows, blockwise attention by query blocks,
the float32 GELU by chunks. Small inputs never reach the threads, so the tests force the split
(3 workers, chunks of a few elements) and compare with independent references."""
import contextlib
import math
import threading
from unittest import mock

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
import minattn.attention as attention
import minattn.blockwise as blockwise
import minattn.position_wise as position_wise
from minattn import _threads

from . import reference
from .array_double import DeviceArray
from .strategies import bool_masks, float_arrays, tolerance


@contextlib.contextmanager
def forced_workers(n):
    """Every split in minattn uses n workers, however small the work."""
    with mock.patch.object(attention, "n_workers", lambda x, work: n), \
            mock.patch.object(blockwise, "n_workers", lambda x, work: n), \
            mock.patch.object(position_wise, "n_workers", lambda x, work: n):
        yield


def test_in_threads_returns_results_in_order_from_worker_threads():
    main = threading.get_ident()
    results = _threads.in_threads(lambda i: (i * i, threading.get_ident()), range(7), 3)
    assert [r for r, _ in results] == [i * i for i in range(7)]
    assert all(ident != main for _, ident in results)
    inline = _threads.in_threads(lambda i: (i, threading.get_ident()), range(3), 1)
    assert inline == [(0, main), (1, main), (2, main)]
    assert _threads.in_threads(lambda i: i, [], 4) == []


def test_in_threads_raises_what_a_worker_raises():
    def f(i):
        if i == 2:
            raise ValueError("item 2")
        return i

    with pytest.raises(ValueError, match="item 2"):
        _threads.in_threads(f, range(5), 2)


def test_n_workers_splits_only_large_host_work():
    x = np.zeros(3)
    cores = len(_threads.os.sched_getaffinity(0))
    assert _threads.n_workers(x, 10) == 1  # too small to be worth a thread
    assert _threads.n_workers(x, 2 ** 40) == cores  # never more than the cores
    assert _threads.n_workers(x, 2 * 2 ** 16) == min(cores, 2)
    assert _threads.n_workers(DeviceArray(x), 2 ** 40) == 1  # a GPU array: one piece


def test_the_blas_limit_is_restored_after_a_threaded_call():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 64, 8))
    with forced_workers(3):
        ma.scaled_dot_product_attention(q, q, q)
        ma.blockwise_attention(q, q, q, block_size=16)
    after = [(i["internal_api"], i["num_threads"]) for i in threadpoolctl.threadpool_info()]
    assert after == before


def _reference_attention(q, k, v, keep):
    # [B, L_q, d], [B, L_k, d], [B, L_k, d_v], keep [B, L_q, L_k] or None -> float64 loops
    outs, weights = zip(*(reference.attention(q[b], k[b], v[b], None if keep is None else keep[b])
                          for b in range(q.shape[0])))
    return np.stack(outs), np.stack(weights)


@st.composite
def split_cases(draw, dtype):
    """q, k, v [B, L_q|L_k, d] and a mask of one of the shapes whose query axis the split must
    handle: none, a full one, one row for every query, a 1-D key mask, an additive float mask."""
    b, l_q, l_k = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 6))
    d, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    q, k = draw(float_arrays((b, l_q, d), dtype)), draw(float_arrays((b, l_k, d), dtype))
    v = draw(float_arrays((b, l_k, d_v), dtype))
    kind = draw(st.sampled_from(["none", "full", "one row", "keys", "additive"]))
    mask = {"none": lambda: None,
            "full": lambda: draw(bool_masks((b, l_q, l_k))),
            "one row": lambda: draw(bool_masks((b, 1, l_k))),
            "keys": lambda: draw(bool_masks((l_k,))),
            "additive": lambda: np.where(draw(bool_masks((l_q, l_k))), 0.0, -np.inf).astype(dtype),
            }[kind]()
    return q, k, v, mask


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@given(data=st.data(), workers=st.integers(2, 4))
def test_attention_split_by_query_rows_equals_the_loop_reference(dtype, data, workers):
    q, k, v, mask = data.draw(split_cases(dtype))
    keep = None
    if mask is not None:
        keep = np.broadcast_to(mask if mask.dtype == bool else mask == 0, (q.shape[0],) + (
            q.shape[1], k.shape[1]))
    with forced_workers(workers):
        out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    assert out.dtype == weights.dtype == dtype
    ref_out, ref_weights = _reference_attention(q, k, v, keep)
    np.testing.assert_allclose(weights, ref_weights, **tolerance(dtype))
    np.testing.assert_allclose(out, ref_out, **tolerance(dtype))


@given(data=st.data())
def test_gradient_through_the_split_attention_equals_the_unsplit_one(data):
    q, k, v, mask = data.draw(split_cases(np.float64))
    r = np.random.default_rng(0).standard_normal(q.shape[:2] + (v.shape[-1],))

    def loss(q, k, v):
        out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
        return anp.sum(out * r) + anp.sum(weights * weights)

    expected = autograd.grad(loss, (0, 1, 2))(q, k, v)
    with forced_workers(3):
        got = autograd.grad(loss, (0, 1, 2))(q, k, v)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


@given(data=st.data(), workers=st.integers(2, 4))
def test_blockwise_split_by_query_blocks_equals_the_loop_reference(data, workers):
    b, l_q, l_k = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 9)), data.draw(
        st.integers(1, 9))
    q = data.draw(float_arrays((b, l_q, 3)))
    k, v = data.draw(float_arrays((b, l_k, 3))), data.draw(float_arrays((b, l_k, 2)))
    causal = data.draw(st.booleans())
    block_size = data.draw(st.integers(1, 4))
    with forced_workers(workers):
        out = ma.blockwise_attention(q, k, v, causal=causal, block_size=block_size)
    keep = np.broadcast_to(np.arange(l_q)[:, None] >= np.arange(l_k)[None, :], (b, l_q, l_k)) \
        if causal else None
    np.testing.assert_allclose(out, _reference_attention(q, k, v, keep)[0], **tolerance(q.dtype))


@pytest.mark.parametrize("shape", [(0,), (1,), (5, 7), (3, 4, 11)])
def test_gelu_in_threaded_chunks_is_the_same_as_in_one_piece(shape):
    from scipy.special import erf

    x = np.random.default_rng(1).uniform(-6, 6, size=shape).astype(np.float32)
    whole = position_wise.gelu(x)
    with forced_workers(3), mock.patch.object(position_wise, "_CHUNK", 4):
        chunked = position_wise.gelu(x)
        transposed = position_wise.gelu(x.T)  # not contiguous: flattened in its own order
    np.testing.assert_array_equal(chunked, whole)  # elementwise: the chunks change no bit
    np.testing.assert_array_equal(transposed, whole.T)
    exact = 0.5 * x.astype(np.float64) * (1 + erf(x.astype(np.float64) / math.sqrt(2)))
    assert chunked.dtype == np.float32 and np.all(np.abs(chunked - exact) < 4.5e-7)


def test_large_inputs_reach_the_threads_and_match_a_float64_computation():
    # No forcing: at this size (2 x 4 x 128 x 128 scores) n_workers splits on a multi-core host.
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 4, 128, 16)).astype(np.float32) for _ in range(3))
    mask = rng.random((128, 128)) < 0.8
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    scores = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64)) / 4.0
    s = np.where(mask, scores, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights, p, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out, p @ v.astype(np.float64), rtol=1e-5, atol=1e-5)
    causal = ma.blockwise_attention(q, k, v, causal=True, block_size=32)
    s = np.where(np.tril(np.ones((128, 128), bool)), scores, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(causal, (p / p.sum(-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-5)
