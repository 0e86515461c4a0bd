"""engine/fused_products.py's decorator, `@in_one_product()`, applied inside each test (a policy's
own code runs when it decorates, which for minattn.linears is at import, before mutmut picks a
mutant; tests/MUTANTS.md): which calls it answers with one product over the weights side by
side and which it leaves to the function as written, and that its answer is each x @ w + b.
The undecorated function here is a spy that records the weights it was given and returns the
products of a float64 einsum; the references are the same einsum, per weight."""
import numpy as np
import pytest
from autograd import grad
import autograd.numpy as anp

from minattn.engine import fused_products
from minattn.models.llama_layout import linear_weight, packed


def one_buffer(rng, d_in, d_outs):
    # [d_in, d_out_i] weights lying side by side in one buffer, as a loaded model's
    tree = {f"w{i}": linear_weight(rng.normal(size=(d_out, d_in))) for i, d_out in enumerate(d_outs)}
    packed(tree)
    ws = [tree[f"w{i}"] for i in range(len(d_outs))]
    assert fused_products.side_by_side(ws) is not None
    return ws


def spy():
    calls = []

    def products(x, ws, bs=None):
        calls.append(len(ws))
        bs = (None,) * len(ws) if bs is None else bs
        return tuple(np.einsum("...i,io->...o", x, w) + (0 if b is None else b)
                     for w, b in zip(ws, bs))

    return calls, products


def reference(x, ws, bs):
    return [np.einsum("...i,io->...o", np.asarray(x, np.float64), w) + (0 if b is None else b)
            for w, b in zip(ws, bs)]


@pytest.mark.parametrize("lead", [(1,), (4,), (2, 2), (1, 1, 3)])
@pytest.mark.parametrize("biases", [None, "first", "all"])
def test_a_few_tokens_take_one_product_split_into_each_result(lead, biases):
    rng = np.random.default_rng(0)
    d_outs = [16, 32, 16]
    ws = one_buffer(rng, 16, d_outs)
    bs = None if biases is None else [rng.normal(size=d) if biases == "all" or i == 0 else None
                                      for i, d in enumerate(d_outs)]
    calls, products = spy()
    f = fused_products.in_one_product()(products)
    x = rng.normal(size=lead + (16,))
    got = f(x, ws, bs) if bs is not None else f(x, ws)
    assert calls == [1]  # one product, over the one [16, 64] view
    assert isinstance(got, tuple) and len(got) == 3
    for g, want, w in zip(got, reference(x, ws, bs or [None] * 3), ws):
        assert g.shape == lead + (w.shape[1],)
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def test_more_tokens_than_few_weights_apart_or_boxes_run_as_written():
    rng = np.random.default_rng(1)
    ws = one_buffer(rng, 16, [16, 16])
    few = fused_products.FEW_TOKENS
    for x, weights, expected in [
            (rng.normal(size=(few, 16)), ws, [1]),  # at the limit: one product
            (rng.normal(size=(few + 1, 16)), ws, [2]),  # one token more: as written
            (rng.normal(size=(2, few // 2 + 1, 16)), ws, [2]),  # tokens over all leading dims
            (rng.normal(size=(1, 16)), [w.copy() for w in ws], [2]),  # not side by side
            (rng.normal(size=(1, 16)), ws[:1], [1])]:  # one weight: nothing to join
        calls, products = spy()
        got = fused_products.in_one_product()(products)(x, weights)
        assert calls == expected, (x.shape, expected)
        for g, want in zip(got, reference(x, weights, [None] * len(weights))):
            np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def test_a_scalar_x_is_left_to_the_function():
    ws = one_buffer(np.random.default_rng(2), 16, [16, 16])
    seen = []

    def products(x, ws, bs=None):
        seen.append((np.ndim(x), len(ws)))
        return ("as written",)

    assert fused_products.in_one_product()(products)(np.float64(2.0), ws) == ("as written",)
    assert seen == [(0, 2)]


@pytest.mark.parametrize("wrt", ["x", "b"])
def test_a_value_being_differentiated_runs_as_written(wrt):
    rng = np.random.default_rng(3)
    ws = one_buffer(rng, 16, [16, 32])
    x, b0 = rng.normal(size=(2, 16)), rng.normal(size=16)
    g = [rng.normal(size=(2, 16)), rng.normal(size=(2, 32))]
    calls = []

    def products(x, ws, bs=None):
        calls.append(len(ws))
        bs = (None,) * len(ws) if bs is None else bs
        return tuple(anp.dot(x, w) + (0 if b is None else b) for w, b in zip(ws, bs))

    f = fused_products.in_one_product()(products)

    def loss(x, b0):
        return sum(anp.sum(o * gi) for o, gi in zip(f(x, ws, [b0, None]), g))

    got = grad(loss, 0 if wrt == "x" else 1)(x, b0)
    want = g[0] @ ws[0].T + g[1] @ ws[1].T if wrt == "x" else g[0].sum(axis=0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert calls == [2]  # the box went to the function as written, every weight apart


def test_the_results_are_views_of_one_product_and_a_bias_keeps_the_shape():
    rng = np.random.default_rng(4)
    ws = one_buffer(rng, 16, [16, 16])
    calls, products = spy()
    f = fused_products.in_one_product()(products)
    x = rng.normal(size=(1, 16))
    a, b = f(x, ws)
    assert a.base is not None and a.base is b.base
    x, bias = x[0], rng.normal(size=(1, 16))  # x [d_in], a bias [1, d_out]: as linear, the
    a, b = f(x, ws, [bias, None])                # result is [d_out] (x's lead dims), not [1, d_out]
    assert calls == [1, 1] and a.shape == (16,) and b.shape == (16,)
    np.testing.assert_allclose(a, x @ ws[0] + bias[0], rtol=1e-12, atol=1e-12)


def test_weights_of_an_empty_input_are_never_joined():
    # d_in = 0. Two [0, 4] weights at one address, with the
    # column strides a side-by-side run would have, are no matrix to join (no read of memory
    # is needed, and none may divide by d_in).
    root = np.arange(64.0)
    ws = [np.ndarray((0, 4), np.float64, buffer=root, offset=0, strides=(8, 0)) for _ in range(2)]
    assert fused_products.side_by_side(ws) is None
