"""The decisions the policies' wrappers make at each call (engine/fused_products.py's
in_one_product, engine/query_blocks.py's in_query_blocks, engine/dtypes.py's float16_in_float32,
engine/autograd_rules.py's gradient_by_hand), for the call forms their mutants showed untested
(tests/MUTANTS.md): arguments given as lists, by keyword, or as the only autograd box among the
keywords, and keywords kept where the call runs as written. Each policy is applied inside the
test (its wrapper is made when it decorates). References: float64 formulas written here."""
import autograd.numpy as anp
import numpy as np
from autograd import grad
from autograd.tracer import isbox

from minattn.engine import fused_products, query_blocks
from minattn.engine.autograd_rules import gradient_by_hand
from minattn.engine.dtypes import float16_in_float32
from minattn.masks import causal_mask
from minattn.models.llama_layout import linear_weight, packed


# ---- in_one_product: calls it leaves to the function as written ----

def _products(calls):
    def products(x, ws, bs=None):
        calls.append(len(ws))
        bs = (None,) * len(ws) if bs is None else bs
        return tuple(np.asarray(x, np.float64) @ w + (0 if b is None else b)
                     for w, b in zip(ws, bs))

    return products


def _side_by_side(rng, d_in, d_outs):
    tree = {f"w{i}": linear_weight(rng.normal(size=(d, d_in))) for i, d in enumerate(d_outs)}
    packed(tree)
    return [tree[f"w{i}"] for i in range(len(d_outs))]


def test_in_one_product_leaves_a_list_and_many_tokens_to_the_function_biases_included():
    rng = np.random.default_rng(0)
    ws = _side_by_side(rng, 16, [16, 16])
    bs = [rng.normal(size=16), rng.normal(size=16)]
    for x in ([[0.5] * 16], rng.normal(size=(fused_products.FEW_TOKENS + 1, 16))):
        calls = []
        got = fused_products.in_one_product()(_products(calls))(x, ws, bs)
        assert calls == [2]  # as written: one product per weight
        for g, w, b in zip(got, ws, bs):
            np.testing.assert_allclose(g, np.asarray(x) @ w + b, rtol=1e-12, atol=1e-12)


# ---- in_query_blocks: keyword calls, short calls, one query ----

def _formula(q, k, v, mask, scale=None):
    scale = 1 / np.sqrt(np.shape(q)[-1]) if scale is None else scale
    s = np.where(mask, np.einsum("...qd,...kd->...qk", q, k) * scale, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total == 0, 1, total)
    return p @ v, p


def _spy():
    seen = []

    def spy(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None, sinks=None):
        seen.append((np.shape(q)[-2], np.shape(k)[-2], scale))
        return _formula(np.asarray(q), np.asarray(k), np.asarray(v), mask, scale)

    return seen, query_blocks.in_query_blocks(rows=128, plain=False)(spy)  # f, not plain_core


def test_in_query_blocks_splits_a_call_by_keywords():
    x = np.random.default_rng(1).normal(size=(256, 4))
    seen, split = _spy()
    split(q=x, k=x, v=x, mask=causal_mask(256, 256))
    assert seen == [(128, 128, None), (128, 256, None)]


def test_in_query_blocks_runs_short_calls_and_one_query_whole_keywords_kept():
    rng = np.random.default_rng(2)
    k = v = rng.normal(size=(300, 4))
    for n_q in (1, 100):  # decoding, and fewer queries than two blocks
        q = rng.normal(size=(n_q, 4))
        mask = causal_mask(n_q, 300, align="bottom_right", window=10)  # sees only the last keys
        seen, split = _spy()
        out, _ = split(q, k, v, mask, scale=0.3)
        assert seen == [(n_q, 300, 0.3)]  # one call, every key, the scale passed on
        np.testing.assert_allclose(out, _formula(q, k, v, mask, 0.3)[0], rtol=1e-12, atol=1e-12)
    seen, split = _spy()
    q = rng.normal(size=(3, 4))
    split(q.tolist(), k, v, causal_mask(3, 300, align="bottom_right"))  # q as a list: whole
    assert seen == [(3, 300, None)]


# ---- float16_in_float32: deciding inputs without a dtype, keywords kept ----

def test_float16_policy_runs_lists_and_other_dtypes_as_written_keywords_kept():
    seen = []

    @float16_in_float32("x", "y")
    def toy(x, y, *, scale=1.0):
        seen.append(scale)
        return scale * np.asarray(x) * np.asarray(y)

    np.testing.assert_array_equal(toy([1.0, 2.0], np.float16([3.0, 4.0])), [3.0, 8.0])
    out = toy(np.float32([1.0, 2.0]), np.float32([3.0, 4.0]), scale=2.0)
    assert out.dtype == np.float32 and seen == [1.0, 2.0]
    np.testing.assert_array_equal(out, [6.0, 16.0])


# ---- gradient_by_hand: a box among the keywords only; keywords kept where it runs as written ----

def _square():
    seen = []

    def vjp(wrt, g, y, x, *, scale, dropout):
        grads = {"x": lambda: g * 2 * scale * x, "scale": lambda: anp.sum(g * x * x)}
        return {name: grads[name]() for name in wrt}

    @gradient_by_hand(vjp, unless="dropout")
    def square(x, *, scale=1.0, dropout=0.0):
        seen.append(isbox(x) or isbox(scale))
        return scale * x * x

    return seen, square


def test_a_box_given_by_keyword_only_takes_the_vjp_by_hand():
    seen, square = _square()
    x = np.array([1.0, -2.0])
    got = grad(lambda s: anp.sum(square(x, scale=s)))(1.5)
    assert got == 5.0 and seen == [False]  # the function ran on plain values: by hand


def test_the_unless_argument_runs_it_as_written_with_every_keyword():
    seen, square = _square()
    x = np.array([1.0, -2.0])
    got = grad(lambda x: anp.sum(square(x, scale=3.0, dropout=0.1)))(x)
    assert seen == [True]  # traced by autograd (the unless argument is truthy)
    np.testing.assert_allclose(got, 6.0 * x, rtol=1e-15)  # with scale 3, not the default 1


def test_in_query_blocks_passes_keywords_to_a_long_call_it_cannot_split():
    x = np.random.default_rng(3).normal(size=(256, 4))
    additive = np.where(causal_mask(256, 256), 0.0, -np.inf)  # not boolean: run whole
    seen, split = _spy()
    split(x, x, x, mask=additive, scale=0.3)
    assert seen == [(256, 256, 0.3)]


# ---- one_blas_thread(unless=...): the decision and the call both get every keyword ----

class _Library:
    def __init__(self, calls):
        self.num_threads, self.calls = 4, calls

    def set_num_threads(self, n):
        self.calls.append(n)


def test_one_blas_thread_unless_decides_and_calls_with_the_keywords(monkeypatch):
    from minattn.engine import threads

    switches = []
    monkeypatch.setattr(threads, "_blas_libraries", lambda: [_Library(switches)])

    @threads.one_blas_thread(unless=lambda x, *, scale=1.0: scale > 1.0)
    def toy(x, *, scale=1.0):
        return scale * x

    assert toy(np.ones(2), scale=2.0).tolist() == [2.0, 2.0] and switches == []  # as written
    assert toy(np.ones(2), scale=0.5).tolist() == [0.5, 0.5] and switches == [1, 4]  # one thread


def test_in_one_product_gives_weights_apart_their_biases():
    # a few tokens, but weights that are not side by side: one product per weight, biases kept
    rng = np.random.default_rng(10)
    ws = [linear_weight(rng.normal(size=(16, 16))) for _ in range(2)]  # two separate arrays
    bs = [rng.normal(size=16), rng.normal(size=16)]
    x = rng.normal(size=(1, 16))
    calls = []
    got = fused_products.in_one_product()(_products(calls))(x, ws, bs)
    assert calls == [2]
    for g, w, b in zip(got, ws, bs):
        np.testing.assert_allclose(g, x @ w + b, rtol=1e-12, atol=1e-12)
