"""The engine room's policies (minattn/engine/), each stated on a toy function, so that what a
label above a concept function promises is checked apart from any one concept."""
import inspect

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from autograd.test_util import check_grads

import minattn as ma
from minattn.engine.autograd_rules import gradient_by_hand, reads
from minattn.engine.dtypes import float16_in_float32
from minattn.engine.signatures import binder


def test_binder_fills_defaults_and_keywords_in_signature_order():
    def f(a, b=2, *, c=3, d=None):
        pass

    names, bind = binder(f)
    assert names == ("a", "b", "c", "d")
    assert bind((1,), {}) == [1, 2, 3, None]
    assert bind((1, 5), {"d": 7}) == [1, 5, 3, 7]
    assert bind((), {"a": 0, "c": 9}) == [0, 2, 9, None]


def test_binder_with_positional_only_and_more_positional_than_keyword_parameters():
    def f(a, /, b, c=3, *, d=4):
        pass

    names, bind = binder(f)
    assert names == ("a", "b", "c", "d")
    assert bind((1, 2), {}) == [1, 2, 3, 4]
    assert bind((1, 2, 5), {}) == [1, 2, 5, 4]
    assert bind((1,), {"b": 2, "d": 0}) == [1, 2, 3, 0]


@pytest.mark.parametrize("args, kwargs", [((), {}), ((1, 2, 3), {}), ((1,), {"e": 1}),
                                          ((1,), {"a": 1})])
def test_binder_leaves_a_wrong_call_to_pythons_own_type_error(args, kwargs):
    def f(a, b=2, *, c=3):
        pass

    with pytest.raises(TypeError):
        f(*args, **kwargs)  # the reference: Python refuses this call
    with pytest.raises(TypeError) as signature:
        inspect.signature(f).bind(*args, **kwargs)
    with pytest.raises(TypeError) as ours:
        binder(f)[1](args, kwargs)
    assert str(ours.value) == str(signature.value)  # inspect's words, not a comparison's


# Each toy is decorated inside the test (a fixture), not at import: the decorator's own code
# then runs under the test, so a mutation tester's change to it is seen (tests/MUTANTS.md).
@pytest.fixture
def toy():
    seen = []

    @float16_in_float32("x", "y")
    def toy(x, y, bias=None, *, scale=1.0):
        seen.append((x.dtype, y.dtype, None if bias is None else bias.dtype))
        out = scale * x * y
        return out if bias is None else (out + bias, bias)

    toy.seen = seen
    return toy


@pytest.mark.parametrize("call", [lambda f, x, y: f(x, y), lambda f, x, y: f(x, y=y),
                                  lambda f, x, y: f(y=y, x=x, scale=1.0)])
def test_float16_inputs_are_computed_in_float32_and_returned_as_float16(toy, call):
    x, y = np.float16([1.0, 2.0]), np.float16([3.0, 4.0])
    out = call(toy, x, y)
    assert toy.seen == [(np.float32, np.float32, None)]
    assert out.dtype == np.float16 and np.array_equal(out, np.float16([3.0, 8.0]))


def test_float16_policy_decides_by_the_named_inputs_only_and_keeps_other_results():
    @float16_in_float32("y")  # y decides, wherever it stands
    def f(x, y):
        return x * y, np.argmax(y), "label"

    product, index, label = f(np.float32([2.0]), np.float16([3.0]))
    assert product.dtype == np.float16 and product[0] == 6.0
    assert np.asarray(index).dtype.kind == "i" and label == "label"  # not floating: untouched
    product, _, _ = f(np.float16([2.0]), np.float32([3.0]))
    assert product.dtype == np.float32  # y is float32: no policy


def test_other_floating_arguments_are_taken_in_float16_first(toy):
    # A float64 -1e9 given with float16 inputs means -inf, as it would in float16.
    x, y = np.float16([1.0]), np.float16([1.0])
    out, bias = toy(x, y, np.array([-1e9]))
    assert bias.dtype == np.float16 and np.isneginf(bias[0]) and np.isneginf(out[0])
    out, bias = toy(x, y, np.array([0.1]))  # rounded to float16's 0.1
    assert float(bias[0]) == float(np.float16(0.1))


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float16, np.float32),
                                    (np.float64, np.float16)])
def test_other_dtypes_pass_through_untouched(toy, dtypes):
    x, y = np.ones(2, dtypes[0]), np.ones(2, dtypes[1])
    out = toy(x, y)
    assert toy.seen == [(np.dtype(dtypes[0]), np.dtype(dtypes[1]), None)]
    assert out.dtype == np.result_type(*dtypes)


def test_float16_policy_keeps_gradients_flowing(toy):
    x = np.float16([0.5, -1.5])
    g = grad(lambda x: anp.sum(toy(x, x)))(x)
    assert g.dtype == np.float16 and np.allclose(g.astype(float), 2 * x.astype(float))


def square_vjp(wrt, g, y, x, b, *, scale, dropout):
    grads = {"x": lambda: g * 2 * scale * x, "b": lambda: g,
             "scale": lambda: anp.sum(g * x * x)}
    return {name: grads[name]() for name in wrt}


@pytest.fixture
def square():
    calls = []

    @gradient_by_hand(square_vjp, unless="dropout")
    def square(x, b, *, scale=1.0, dropout=0.0):
        calls.append(type(x).__name__)
        return scale * x * x + b

    square.calls = calls
    return square


def test_gradient_by_hand_is_used_for_every_argument_keyword_ones_too(square):
    x, b = np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([0.25, -1.0])  # b broadcasts over rows
    f = lambda x, b, s: anp.sum(anp.sin(square(x, b, scale=s)))
    plain = lambda x, b, s: anp.sum(anp.sin(s * x * x + b))
    for i in range(3):
        got, expected = grad(f, i)(x, b, 1.5), grad(plain, i)(x, b, 1.5)
        assert np.shape(got) == np.shape(expected) and np.allclose(got, expected, atol=1e-12)
    check_grads(lambda x: f(x, b, 1.5), modes=["rev"], order=2)(x)  # the VJP is differentiable


def test_forward_runs_on_plain_arrays_unless_told_otherwise(square):
    x, b = np.array([1.0, 2.0]), np.array(0.5)
    grad(lambda x: anp.sum(square(x, b)))(x)
    assert square.calls == ["ndarray"]  # a primitive: autograd did not trace the inside
    square.calls.clear()
    g = grad(lambda x: anp.sum(square(x, b, dropout=0.1)))(x)
    assert square.calls == ["ArrayBox"] and np.allclose(g, 2 * x)  # traced by autograd instead
    square.calls.clear()
    g = grad(lambda x: anp.sum(square(x, b, dropout=0.0)))(x)  # falsy: the hand VJP again
    assert square.calls == ["ndarray"] and np.allclose(g, 2 * x)


def test_gradient_by_hand_returns_several_outputs_as_a_tuple_and_their_gradients():
    def both_vjp(wrt, g, outputs, x):
        return {"x": g[0] * 2 * x + g[1] * 3}

    @gradient_by_hand(both_vjp)
    def both(x):
        return x * x, 3 * x

    x = np.array([1.0, -2.0])
    assert isinstance(both(x), tuple)
    g = grad(lambda x: anp.sum(both(x)[0]) + anp.sum(both(x)[1]))(x)
    np.testing.assert_allclose(g, 2 * x + 3)

    def boxed(x):
        out = both(x)
        assert isinstance(out, tuple)  # also when autograd traces x
        return anp.sum(out[0] * out[1])

    np.testing.assert_allclose(grad(boxed)(x), 9 * x * x)


def test_a_wrong_call_to_a_policy_wrapped_function_is_pythons_type_error():
    with pytest.raises(TypeError, match="unexpected keyword"):
        ma.softmax(np.ones(3), axes=0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ma.scaled_dot_product_attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)),
                                        scael=1.0)


# The rule for additive masks, across the API: a floating mask is taken in the inputs' dtype.
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_an_additive_mask_is_taken_in_the_inputs_dtype(dtype):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 3, 4)).astype(dtype) for _ in range(3))
    mask = np.where(rng.random((3, 3)) < 0.4, -1e9, rng.normal(size=(3, 3)))
    mask[1] = -1e9  # a fully masked row
    for call in (lambda m: ma.scaled_dot_product_attention(q, k, v, m),
                 lambda m: ma.multi_head_attention(
                     ma.init_multi_head_attention(np.random.default_rng(1), 4, 2, dtype=dtype),
                     q, k, v, m, n_heads=2)):
        out, weights = call(mask)  # float64
        with np.errstate(over="ignore"):  # -1e9 is -inf in float16
            in_dtype = mask.astype(dtype)
        out_ref, weights_ref = call(in_dtype)
        assert out.dtype == dtype and weights.dtype == dtype
        np.testing.assert_array_equal(out, out_ref)
        np.testing.assert_array_equal(weights, weights_ref)
    if dtype == np.float16:  # -1e9 is -inf in float16: the fully masked row gets zero weights
        assert not np.any(weights[..., 1, :])


def test_the_vjp_gets_the_forwards_output():
    def exp_vjp(wrt, g, y, x):
        return {"x": g * y}  # d exp(x) = exp(x) dx: read from the output, not recomputed

    @gradient_by_hand(exp_vjp)
    def exp(x):
        return anp.exp(x)

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(grad(lambda x: anp.sum(exp(x) * x))(x),
                               grad(lambda x: anp.sum(anp.exp(x) * x))(x), rtol=1e-13)


# ---- @by_value (engine/memo.py): a table built once per value of its arguments ----

@pytest.fixture
def table():
    from minattn.engine.memo import by_value
    calls = []

    @by_value(maxsize=2)
    def f(positions, settings, scale=1.0):
        calls.append(1)
        return positions * scale, np.arange(3.0)

    return f, calls


def test_by_value_builds_once_per_value_and_returns_read_only_tables(table):
    f, calls = table
    first = f(np.array([1, 2]), {"a": [1, 2]})
    again = f(np.array([1, 2]), {"a": [1, 2]}, )  # equal values, other objects: remembered
    assert len(calls) == 1 and again[0] is first[0]
    assert not first[0].flags.writeable and not first[1].flags.writeable
    with pytest.raises(ValueError):
        first[0][0] = 7


@pytest.mark.parametrize("change", ["array in place", "dict in place", "dtype", "keyword",
                                    "int for float"])
def test_by_value_never_returns_a_stale_table(table, change):
    f, calls = table
    positions, settings = np.array([1, 2]), {"a": [1, 2]}
    f(positions, settings, **({"scale": 1.0} if change == "int for float" else {}))
    kwargs = {}
    if change == "array in place":
        positions[0] = 5
    elif change == "dict in place":
        settings["a"].append(3)
    elif change == "dtype":
        positions = positions.astype(np.int32)
    elif change == "keyword":
        kwargs = {"scale": 2.0}
    else:
        kwargs = {"scale": 1}
    got = f(positions, settings, **kwargs)
    assert len(calls) == 2
    np.testing.assert_array_equal(got[0], positions * kwargs.get("scale", 1.0))


def test_by_value_keeps_the_last_maxsize_and_passes_boxes_and_unhashables_through(table):
    f, calls = table
    for n in (1, 2, 3, 1):  # maxsize 2: 1 was dropped when 3 came
        f(np.array([n]), None)
    assert len(calls) == 4
    f(np.array([3]), None)
    assert len(calls) == 4
    f(np.array([3]), object.__new__(type("Unhashable", (), {"__hash__": None})))
    f(np.array([3]), object.__new__(type("Unhashable", (), {"__hash__": None})))
    assert len(calls) == 6
    d_scale = grad(lambda s: anp.sum(f(np.array([1.0, 2.0]), None, scale=s)[0]))(3.0)
    assert d_scale == 3.0 and len(calls) == 7  # differentiated: run as written, not remembered


def test_apply_rope_after_positions_change_in_place_rotates_by_the_new_ones():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 8))
    positions = np.array([0, 1, 2])
    ma.apply_rope(x, positions)
    positions[:] = [7, 8, 9]
    got = ma.apply_rope(x, positions)
    np.testing.assert_array_equal(got, ma.apply_rope(x, np.array([7, 8, 9])))
    half = 4
    angle = np.array([7, 8, 9])[:, None] * 10000.0 ** (-np.arange(half) / half)
    x1, x2 = x[..., :half], x[..., half:]
    reference = np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle),
                                x2 * np.cos(angle) + x1 * np.sin(angle)], axis=-1)
    np.testing.assert_allclose(got, reference, rtol=1e-12, atol=1e-12)


def test_gradient_by_hand_keeps_only_what_the_wanted_gradients_read():
    # @reads: x's gradient reads w, w's reads x, neither reads the output; what is not read
    # reaches the VJP as a stand-in of its shape and dtype holding no memory of its own.
    seen = {}

    def product_vjp(wrt, g, y, x, w):
        seen.update(x=x, w=w, y=y)
        grads = {"x": lambda: g * w, "w": lambda: g * x}
        return {name: grads[name]() for name in wrt}

    @gradient_by_hand(reads(x=("w",), w=("x",))(product_vjp))
    def product(x, w):
        return x * w

    x, w = np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([4.0, -1.0])
    np.testing.assert_allclose(grad(lambda w: anp.sum(product(x, w)))(w), x.sum(axis=0))
    assert seen["w"].shape == w.shape and seen["w"].strides == (0,)  # not kept: a stand-in
    assert seen["y"].shape == x.shape and seen["y"].strides == (0, 0)
    np.testing.assert_array_equal(seen["x"], x)  # read: the array itself
    np.testing.assert_allclose(grad(lambda x: anp.sum(product(x, w)))(x), np.tile(w, (2, 1)))
    assert seen["x"].shape == x.shape and seen["x"].dtype == x.dtype and seen["x"].strides == (0, 0)
    np.testing.assert_array_equal(seen["w"], w)


def _cube_with_an_in_place_vjp(calls):
    def cube_vjp(wrt, g, y, x):
        calls.append("vjp")
        return {"x": g * 3 * x * x}

    def cube_vjp_in_place(wrt, g, y, x):
        calls.append("in place")
        d = np.multiply(x, x)
        return {"x": np.multiply(g * 3, d, out=d)}

    @gradient_by_hand(cube_vjp, in_place=cube_vjp_in_place)
    def cube(x):
        return x * x * x

    return cube


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_in_place_vjp_is_called_where_g_and_the_arguments_are_plain_and_of_one_dtype(dtype):
    calls = []
    cube = _cube_with_an_in_place_vjp(calls)
    x = np.linspace(-1, 1, 7).astype(dtype)
    assert grad(lambda a: anp.sum(cube(a)))(x).dtype == dtype
    assert calls == ["in place"]


def test_mixed_dtypes_and_second_derivatives_go_through_the_differentiable_vjp():
    calls = []
    cube = _cube_with_an_in_place_vjp(calls)
    x = np.linspace(-1, 1, 7).astype(np.float32)
    grad(lambda a: anp.sum(cube(a) * np.float64(2.0) * np.ones(7)))(x)  # g is float64, x float32
    assert calls == ["vjp"]
    calls.clear()
    second = grad(lambda a: anp.sum(grad(lambda b: anp.sum(cube(b)))(a)))(x.astype(np.float64))
    np.testing.assert_allclose(second, 6 * x.astype(np.float64), rtol=1e-12)  # d²/dx² x³ = 6x
    assert calls == ["vjp"]  # x was a box of the outer differentiation
