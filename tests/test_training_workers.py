"""A fine-tuning step's rows split over the cores (engine/threads.py: row_pieces, on_workers;
training/loop.py: accumulated): the pieces run on worker threads with one BLAS thread each, and
the step's loss and gradient are those of the whole batch (float64, against the batch computed
in one piece on one thread); dropout draws from each piece's own generator, the same for a
seed; the threads in force are restored."""
import threading

import numpy as np
import pytest
from autograd import value_and_grad

import minattn as ma
import minattn.lora  # noqa: F401  (causal_lm's lora= variant)
from minattn.engine import threads
from minattn.training import losses, loop
from minattn.training.chat_data import batch

threadpoolctl = pytest.importorskip("threadpoolctl")
V = 13


def _blas():
    return min(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")


@pytest.fixture
def two_threads():
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        if _blas() != 2:
            pytest.skip("this BLAS does not take two threads")
        yield


def _setup(lora_dropout=0.0):
    rng = np.random.default_rng(0)
    params, config = ma.init_causal_lm(rng, V, 2, 8, 2, 12, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False, n_kv_heads=1)
    lora = minattn.lora.init_lora(rng, params, rank=2, targets=("q", "v"))
    for layer in lora["layers"]:
        for pair in layer.values():
            pair["B"] = rng.normal(size=pair["B"].shape)  # every adapter's gradient non-zero
    seen = []

    def forward(trainable, tokens, rng, logits_to_keep=None, unembed=None):
        seen.append((threading.current_thread() is threading.main_thread(), _blas(), len(tokens)))
        return ma.causal_lm(params, tokens, lora={"alpha": 4.0, "layers": trainable},
                            lora_dropout=lora_dropout, rng=rng, logits_to_keep=logits_to_keep,
                            unembed=unembed, **config)

    rows = np.random.default_rng(1)
    parts = [batch([(list(rows.integers(1, V, size=n)), [False] + [True] * (n - 1))
                    for n in (5, 7, 4, 6, 3)], 0) for _ in range(2)]
    return value_and_grad(losses.lm_loss_sum(forward)), lora["layers"], parts, seen


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [tree]


def test_row_pieces_are_contiguous_one_per_blas_thread_at_most_one_per_row(two_threads):
    x = np.zeros((5, 3), int)
    assert threads.row_pieces(x, 5) == [slice(0, 2), slice(2, 5)]
    assert threads.row_pieces(x, 1) == [slice(0, 1)]
    assert threads.row_pieces([[0]], 5) == [slice(0, 5)]  # not NumPy: one piece
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert threads.row_pieces(x, 5) == [slice(0, 5)]


def test_a_step_split_over_two_workers_is_the_whole_batchs_step(two_threads):
    loss_and_grad, lora, parts, seen = _setup()
    split = loop.accumulated(loss_and_grad, lora, parts, [None, None])
    assert _blas() == 2  # restored
    pieces = [s for s in seen if not s[0]]
    assert len(pieces) == 4 and {blas for _, blas, _ in pieces} == {1}  # 2 parts x 2 halves
    assert sorted(n for _, _, n in pieces) == [2, 2, 3, 3]
    seen.clear()
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        whole = loop.accumulated(loss_and_grad, lora, parts, [None, None])
    assert [s[2] for s in seen] == [5, 5] and all(s[0] for s in seen)  # here, whole
    # the reference: the summed losses and gradients written out, part by part, in one piece
    count = sum(int(w.sum()) for _, _, w in parts)
    values = [loss_and_grad(lora, part, None) for part in parts]
    assert split[0] == pytest.approx(sum(float(v) for v, _ in values) / count, rel=1e-12)
    assert whole[0] == pytest.approx(split[0], rel=1e-12)
    for got, a, b in zip(_leaves(split[1]), *(_leaves(g) for _, g in values)):
        np.testing.assert_allclose(got, (a + b) / count, rtol=1e-10, atol=1e-13)


def test_dropout_draws_from_each_pieces_child_generator_the_same_for_a_seed(two_threads):
    loss_and_grad, lora, parts, _ = _setup(lora_dropout=0.5)
    runs = [loop.accumulated(loss_and_grad, lora, parts[:1], [np.random.default_rng(7)])
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(_leaves(runs[0][1]), _leaves(runs[1][1])):
        np.testing.assert_array_equal(a, b)
    rows, children = parts[0], np.random.default_rng(7).spawn(2)
    count = int(rows[2].sum())
    by_hand = [loss_and_grad(lora, tuple(a[s] for a in rows), child)
               for s, child in zip((slice(0, 2), slice(2, 5)), children)]
    assert runs[0][0] == pytest.approx(sum(float(v) for v, _ in by_hand) / count, rel=1e-12)


def _recorded(seen):
    # f(rows) -> rows squared (each row alone: no sum whose order could change), recording who
    # computed which rows, on how many BLAS threads
    def f(rows):
        seen.append((threading.current_thread() is threading.main_thread(), _blas(),
                     [int(r[0]) for r in rows]))
        return np.asarray(rows, dtype=np.float64) ** 2
    return f


def test_rows_per_piece_deals_pieces_in_order_to_the_workers(two_threads):
    # rows_on_workers(rows_per_piece=3): 7 rows in at least 3 pieces, 4 for the two workers
    # (1, 2, 2, 2 rows), each on a worker thread with one BLAS thread; the outputs joined in the
    # rows' order, to the last bit f(rows).
    rows, seen = np.arange(14.0).reshape(7, 2) + 0.1, []
    out = threads.rows_on_workers(_recorded(seen), rows, np.zeros(1), rows_per_piece=3)
    assert np.array_equal(out, rows ** 2)
    assert sorted(s[2] for s in seen) == [[0], [2, 4], [6, 8], [10, 12]]
    assert all(not main and blas == 1 for main, blas, _ in seen)
    assert _blas() == 2  # restored


def test_rows_per_piece_on_one_thread_runs_the_pieces_one_after_the_other():
    rows, seen = np.arange(10.0).reshape(5, 2), []
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        out = threads.rows_on_workers(_recorded(seen), rows, np.zeros(1), rows_per_piece=2)
    assert np.array_equal(out, rows ** 2)
    assert seen == [(True, 1, [0]), (True, 1, [2, 4]), (True, 1, [6, 8])]  # 3 pieces, even


def test_rows_per_piece_leaves_a_gpu_batch_whole_and_refuses_a_bad_count(two_threads):
    rows, seen = np.arange(10.0).reshape(5, 2), []
    out = threads.rows_on_workers(_recorded(seen), rows, [[0.0]], rows_per_piece=2)  # not NumPy
    assert np.array_equal(out, rows ** 2) and [s[2] for s in seen] == [[0, 2, 4, 6, 8]]
    for bad, error in ((0, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError),
                       ("3", TypeError)):
        with pytest.raises(error, match="rows_per_piece must be a positive int"):
            threads.rows_on_workers(_recorded([]), rows, np.zeros(1), rows_per_piece=bad)
    out = threads.rows_on_workers(_recorded([]), rows, np.zeros(1), rows_per_piece=np.int64(2))
    assert np.array_equal(out, rows ** 2)  # a NumPy integer is an int


def test_rows_per_piece_pieces_are_even_a_multiple_of_the_workers_and_never_empty():
    for n_rows in range(0, 40):
        for per_piece in (1, 2, 3, 7, 50):
            for workers in (1, 2, 3):
                pieces = threads._pieces_of(n_rows, per_piece, workers)
                sizes = [p.stop - p.start for p in pieces]
                assert [p.start for p in pieces[1:]] == [p.stop for p in pieces[:-1]]
                assert sum(sizes) == n_rows and all(0 < s <= per_piece for s in sizes)
                assert max(sizes, default=0) - min(sizes, default=0) <= 1
                assert len(pieces) % workers == 0 or len(pieces) == n_rows
