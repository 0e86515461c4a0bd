"""The hand VJPs' plain forms (engine/plain_vjps.py): linear's and the attention core's equal to
their differentiable VJPs to the last bit (a bias's gradient within the rounding of its sum),
called where the backward pass is not differentiated again and not where it is;
gradient_by_hand's unbroadcast on NumPy equal to autograd's; an autograd box's shape, ndim, size
and dtype read from its array (engine/autograd_rules.py).
(layer_norm's in-place VJP, which is not its formula's bits: tests/test_layer_norm.py.)"""
import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from autograd.tracer import new_box, trace_stack
from autograd.core import VJPNode

import minattn as ma
from minattn import attention, linear
from minattn.engine import autograd_rules, plain_vjps
from minattn.engine.autograd_rules import _numpy_stand_in

LINEAR_WANTED = [("x",), ("w",), ("b",), ("x", "w", "b"), ("w", "b")]


@pytest.mark.parametrize("wrt", LINEAR_WANTED)
@pytest.mark.parametrize("dtypes", [(np.float32,) * 3, (np.float64,) * 3,
                                    (np.float32, np.float64, np.float32)])
@pytest.mark.parametrize("lead", [(2, 5), (7,), (0, 3)])
def test_linears_plain_vjp_is_its_vjp_to_the_last_bit(wrt, dtypes, lead):
    rng = np.random.default_rng(len(lead) + len(wrt))
    x = rng.normal(size=(*lead, 6)).astype(dtypes[0])
    w = rng.normal(size=(6, 4)).astype(dtypes[1])
    b = rng.normal(size=4).astype(dtypes[2])
    g = rng.normal(size=(*lead, 4)).astype(np.result_type(*dtypes))
    want = linear.linear_vjp(wrt, g, None, x, w, b)
    got = plain_vjps.linear_vjp_plain(wrt, g, None, x, w, b)
    assert sorted(got) == sorted(want)
    for name in wrt:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        if name != "b":
            np.testing.assert_array_equal(got[name], want[name])
    if "b" in wrt:  # a product with a row of ones: the sum within its dtype's rounding
        _assert_column_sums(got["b"], g.reshape(-1, 4))


def _assert_column_sums(got, a):
    # got: a's sums over its rows, within the rounding of n additions in a's dtype
    a64 = a.astype(np.float64)
    bound = (len(a) + 2) * np.finfo(a.dtype).eps * np.abs(a64).sum(0)
    assert got.dtype == a.dtype and got.shape == a.shape[1:]
    assert np.all(np.abs(got - a64.sum(0)) <= bound)


@pytest.mark.parametrize("shape", [(384, 128), (5, 3), (0, 4), (7, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sums_are_the_sums_within_rounding(shape, dtype):
    rng = np.random.default_rng(shape[0])
    a = (rng.normal(size=shape) * 10.0 ** rng.uniform(-3, 3, size=shape)).astype(dtype)
    _assert_column_sums(plain_vjps.column_sums(a), a)
    if shape[0] >= 2 and shape[1]:
        with pytest.raises(AssertionError):  # the bound can fail: the sums less the first row
            _assert_column_sums(plain_vjps.column_sums(a[1:]), a)


ATTENTION_WANTED = [("q",), ("k",), ("v",), ("q", "k", "v"), ("q", "k", "v", "mask"),
                    ("q", "scale"), ("mask",)]


def _attention_case(dtype, mask_kind, seed=0):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)).astype(dtype) for _ in range(3))
    if mask_kind == "bool":
        mask = np.tril(np.ones((5, 5), dtype=bool))
    elif mask_kind == "float":
        mask = (rng.normal(size=(5, 5)) * 0.5).astype(dtype)  # an additive bias
    else:
        mask = None
    return q, k, v, mask


@pytest.mark.parametrize("wrt", ATTENTION_WANTED)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask_kind", ["bool", "float", None])
@pytest.mark.parametrize("weights_read", [False, True])
def test_the_attention_cores_plain_vjp_is_its_vjp_to_the_last_bit(wrt, dtype, mask_kind,
                                                                   weights_read):
    q, k, v, mask = _attention_case(dtype, mask_kind)
    if "mask" in wrt and mask_kind != "float":
        return  # only an additive mask has a gradient
    out, weights = attention.scaled_dot_product_attention(q, k, v, mask)
    rng = np.random.default_rng(1)
    d_out = rng.normal(size=out.shape).astype(dtype)
    d_weights = rng.normal(size=weights.shape).astype(dtype) if weights_read else \
        _numpy_stand_in(weights.shape, weights.dtype)  # the stand-in of an unread output
    args = dict(outputs=(out, weights), q=q, k=k, v=v, mask=mask, scale=None, dropout=0.0,
                rng=None)
    want = attention.attention_vjp(wrt, (d_out, d_weights), **args)
    got = plain_vjps.attention_core_plain(attention.attention_vjp)(wrt, (d_out, d_weights),
                                                                   **args)
    assert sorted(got) == sorted(want)
    for name in wrt:
        assert np.asarray(got[name]).dtype == np.asarray(want[name]).dtype
        np.testing.assert_array_equal(got[name], want[name])


def _unkept_case(dtype, mask_kind, seed):
    # grouped heads as a model's layer gives them (k and v broadcast over the group), the rows'
    # edge cases: a fully masked row, a row of huge scores (exp of the shift only), a +inf score
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(2, 3, 2, 6, 4)).astype(dtype)
    k, v = (rng.normal(size=(2, 3, 1, 6, 4)).astype(dtype) for _ in range(2))
    q[0, 0, 0, 1] *= 1e3 if dtype != np.float16 else 10
    mask = None
    if mask_kind in ("bool", "bool, a row masked", "bool, per head"):
        mask = np.tril(np.ones((6, 6), dtype=bool))
        if mask_kind == "bool, a row masked":
            mask[2] = False
        if mask_kind == "bool, per head":
            mask = np.broadcast_to(mask, (3, 2, 6, 6)) & (rng.random((3, 2, 6, 6)) < 0.8)
    elif mask_kind == "float":
        mask = (rng.normal(size=(6, 6)) * 0.5).astype(dtype)
    elif mask_kind == "float64 bias":
        mask = rng.normal(size=(6, 6)) * 0.5
    return q, k, v, mask


@pytest.mark.parametrize("wrt", [("q",), ("k",), ("v",), ("q", "k", "v")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask_kind", ["bool", "bool, a row masked", "bool, per head", "float",
                                       "float64 bias", None])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_attention_cores_plain_vjp_recomputes_unkept_weights_to_the_vjps_bits(
        wrt, dtype, mask_kind, seed):
    # Where the tape did not keep P (a stand-in), the plain form recomputes it as the
    # differentiable VJP does (plain_core.weights, tested against attention._weights in
    # tests/test_plain_core.py): the same bits, without calling the VJP.
    q, k, v, mask = _unkept_case(dtype, mask_kind, seed)
    if mask_kind == "bool, a row masked" and seed:
        k[1, 2, 0, 3] = np.inf  # a +inf score: softmax's NaN row, as the VJP's
    with np.errstate(invalid="ignore"):
        out, weights = attention.scaled_dot_product_attention(q, k, v, mask)
    rng = np.random.default_rng(seed + 7)
    g = (rng.normal(size=out.shape).astype(out.dtype),
         _numpy_stand_in(weights.shape, weights.dtype))
    stand_in = _numpy_stand_in(weights.shape, weights.dtype)
    calls = []

    def vjp(*args, **kwargs):
        calls.append(kwargs)
        return attention.attention_vjp(*args, **kwargs)

    args = dict(q=q, k=k, v=v, mask=mask, scale=None, dropout=0.0, rng=None)
    with np.errstate(invalid="ignore"):
        got = plain_vjps.attention_core_plain(vjp)(wrt, g, (out, stand_in), **args)
        want = attention.attention_vjp(wrt, g, (out, stand_in), **args)
    assert calls == []
    assert sorted(got) == sorted(want)
    for name in wrt:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_array_equal(got[name], want[name])


def test_the_attention_cores_plain_vjp_hands_unkept_float16_weights_to_the_vjp():
    # float16 (softmax computes it in float32): the differentiable VJP recomputes P itself
    q, k, v, mask = _unkept_case(np.float16, "bool", 0)
    out, weights = attention.scaled_dot_product_attention(q, k, v, mask)
    calls = []

    def vjp(*args, **kwargs):
        calls.append(kwargs)
        return attention.attention_vjp(*args, **kwargs)

    g = (np.ones_like(out), _numpy_stand_in(weights.shape, weights.dtype))
    stand_in = _numpy_stand_in(weights.shape, weights.dtype)
    got = plain_vjps.attention_core_plain(vjp)(("q",), g, (out, stand_in), q=q, k=k, v=v,
                                               mask=mask, scale=None, dropout=0.0, rng=None)
    assert len(calls) == 1
    np.testing.assert_array_equal(got["q"], attention.attention_vjp(
        ("q",), g, (out, stand_in), q=q, k=k, v=v, mask=mask, scale=None, dropout=0.0,
        rng=None)["q"])


def test_plain_forms_run_where_nothing_is_boxed_and_the_vjp_where_a_second_derivative_is_taken():
    calls = []

    def cube_vjp(wrt, g, y, x):
        calls.append("vjp")
        return {"x": g * 3 * x * x}

    def cube_vjp_plain(wrt, g, y, x):
        calls.append("plain")
        return {"x": g * 3 * x * x}

    autograd_rules.plain_form(cube_vjp_plain)(cube_vjp)

    @autograd_rules.gradient_by_hand(cube_vjp)
    def cube(x):
        return x * x * x

    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(grad(lambda a: anp.sum(cube(a)))(x), 3 * x * x)
    assert calls == ["plain"]
    calls.clear()
    second = grad(lambda a: anp.sum(grad(lambda b: anp.sum(cube(b)))(a)))(x)
    np.testing.assert_allclose(second, 6 * x, rtol=1e-12)
    assert "plain" not in calls and "vjp" in calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_models_gradient_with_the_plain_forms_is_the_same_to_the_last_bit(dtype, monkeypatch):
    # A small GPT's loss and gradient with linear's and the attention core's plain forms, and
    # with them taken away (their differentiable VJPs): equal to the last bit, but for the
    # biases of the linear maps (their sums over the tokens: column_sums, within rounding).
    rng = np.random.default_rng(0)
    params, config = ma.init_causal_lm(rng, 11, 2, 16, 2, 32, n_positions=8,
                                       activation="gelu", dtype=dtype)
    tokens = rng.integers(11, size=(2, 8))
    value_and_grad = autograd_rules.value_and_grad_by_leaf(
        lambda p: anp.sum(ma.causal_lm(p, tokens, **config) ** 2))
    calls = []
    for vjp in (linear.linear_vjp, attention.attention_vjp):
        def counted(*args, plain=vjp.plain, **kwargs):
            calls.append(plain)
            return plain(*args, **kwargs)
        monkeypatch.setattr(vjp, "plain", counted)
    value, grads = value_and_grad(params)
    assert len(calls) == 2 * (6 + 1) + 1  # each layer's q, k, v, o, up, down, core; logits
    for vjp in (linear.linear_vjp, attention.attention_vjp):
        monkeypatch.setattr(vjp, "plain", None)
    value_again, again = value_and_grad(params)
    assert len(calls) == 15 and value == value_again
    for layer, layer_again in zip(grads["layers"], again["layers"]):
        for (name, a), b in zip(_named_leaves(layer), (b for _, b in _named_leaves(layer_again))):
            assert a.dtype == b.dtype and a.shape == b.shape
            if not name.startswith("b_"):  # (a bias's: column_sums, tested above)
                np.testing.assert_array_equal(a, b)
    for name in ("token_embedding", "position_embedding"):
        np.testing.assert_array_equal(grads[name], again[name])


def _named_leaves(tree, name=""):
    if isinstance(tree, dict):
        return [leaf for key, value in tree.items() for leaf in _named_leaves(value, key)]
    return [(name, tree)]


@pytest.mark.parametrize("value_shape, grad_shape", [
    ((), (2, 3)), ((1, 4), (2, 3, 4)), ((3, 1, 4), (3, 5, 4)), ((4,), (4,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_unbroadcast_is_autograds_to_the_last_bit(value_shape, grad_shape, dtype):
    from autograd.numpy.numpy_vjps import unbroadcast_f

    rng = np.random.default_rng(0)
    value = np.asarray(rng.normal(size=value_shape)).astype(dtype)
    g = rng.normal(size=grad_shape).astype(dtype)
    got = autograd_rules._unbroadcast(value, g)
    want = unbroadcast_f(value, lambda _: g)(None)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("value", [np.arange(6.0, dtype=np.float32).reshape(2, 3), 2.5,
                                   np.float32(1.5), np.zeros((0, 4))])
def test_a_boxs_shape_ndim_size_and_dtype_are_its_values(value):
    with trace_stack.new_trace() as trace:
        box = new_box(value, trace, VJPNode.new_root())
        assert box.shape == np.shape(value) and box.ndim == np.ndim(value)
        assert box.size == np.size(value) and box.dtype == np.result_type(value)
        with trace_stack.new_trace() as inner:  # a box of a box: read through the inner one
            outer = new_box(box, inner, VJPNode.new_root())
            assert outer.shape == np.shape(value) and outer.dtype == np.result_type(value)
            assert outer.ndim == np.ndim(value) and outer.size == np.size(value)


@pytest.mark.parametrize("n", [4, 64])  # P kept by the tape (small), P recomputed (large)
def test_the_gradient_follows_a_swapped_softmax_where_p_is_recomputed(n):
    # minattn.swap(softmax=...): the forward runs the swapped softmax, and so must the VJP's
    # recomputation of P (the plain form on NumPy would compute the original's)
    import minattn
    from autograd import grad

    original = minattn.softmax

    def doubled(x, axis=-1, mask=None):
        return 2.0 * original(x, axis=axis, mask=mask)

    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.normal(size=(n, 4)) for _ in range(4))
    with minattn.swap(softmax=doubled):
        d_v = grad(lambda v: (minattn.scaled_dot_product_attention(q, k, v)[0] * d_out).sum())(v)
    s = q @ k.T / 2.0  # (d_k = 4: the scale 1/2)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(d_v, (2.0 * p).T @ d_out, rtol=1e-12, atol=1e-12)
