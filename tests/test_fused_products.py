"""engine/fused_products.py: several weights of one input in one matrix product. What it
promises: where the weights are Fortran-ordered views lying side by side in one buffer (as
models/llama_layout.packed lays them), side_by_side is one read-only [d_in, sum d_out] view of
exactly them, and linears' results equal each x @ w + b (a float64 formula written here);
anywhere else (gaps, other orders, dtypes or widths, separate or non-NumPy arrays) no view,
and the same results; gradients unchanged; what it remembers is forgotten with the weights."""
import gc

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from hypothesis import given, strategies as st

from minattn.engine import fused_products
from minattn.engine.fused_products import side_by_side
from minattn.linear import linear, linears
from minattn.models.llama_layout import linear_weight, packed

from .array_double import DeviceArray


def weights(rng, d_in, d_outs, dtype=np.float64):
    # [d_in, d_out] each, in torch's memory order (the transpose of a row-major [d_out, d_in])
    return [linear_weight(rng.normal(size=(d_out, d_in)).astype(dtype)) for d_out in d_outs]


def side_by_side_weights(rng, d_in, d_outs, dtype=np.float64):
    # packed() rounds each array to 16 elements: sizes that are multiples of 16 lie end to end
    tree = {f"w{i}": w for i, w in enumerate(weights(rng, d_in, d_outs, dtype))}
    packed(tree)
    return [tree[f"w{i}"] for i in range(len(d_outs))]


def reference(x, ws, bs):
    return [np.einsum("...i,io->...o", x.astype(np.float64), w.astype(np.float64)) +
            (0 if b is None else b) for w, b in zip(ws, bs)]


def test_side_by_side_is_one_read_only_view_of_exactly_the_weights():
    ws = side_by_side_weights(np.random.default_rng(0), 16, [16, 4, 4])
    whole = side_by_side(ws)
    assert whole.shape == (16, 24) and not whole.flags.writeable
    np.testing.assert_array_equal(whole, np.concatenate(ws, axis=1))
    for w in ws:
        assert np.shares_memory(whole, w)
    assert side_by_side(ws) is whole  # remembered
    assert side_by_side(ws[1:]).shape == (16, 8)  # any run of neighbours
    np.testing.assert_array_equal(side_by_side(ws[1:]), np.concatenate(ws[1:], axis=1))


def in_buffer(root, start, d_in, d_out):
    # [d_in, d_out] in Fortran order, the items root[start:start + d_in * d_out]
    return root[start:start + d_in * d_out].reshape(d_out, d_in).T


def owners_side_by_side():
    # two arrays over adjacent bytes of one bytearray: contiguous memory, two owners
    memory = bytearray(np.random.default_rng(6).normal(size=64).tobytes())
    return [np.frombuffer(memory, np.float64, count=32, offset=256 * i).reshape(8, 4).T
            for i in range(2)]


def cases(case):
    rng = np.random.default_rng(1)
    root = rng.normal(size=256)
    ws = side_by_side_weights(rng, 16, [16, 16, 16])
    as_float64 = np.arange(1024, dtype=np.uint8).view(np.float64)
    return {
        "separate": weights(rng, 16, [16, 16]),
        "reversed": ws[::-1],
        "skipped": [ws[0], ws[2]],
        "gap": side_by_side_weights(rng, 3, [5, 5]),  # 15 elements, padded to 16
        "row_major": list(packed({"a": rng.normal(size=(16, 16)),
                                  "b": rng.normal(size=(16, 16))}).values()),
        # one buffer, adjacent, but the second read as another dtype
        "dtypes": [in_buffer(root, 0, 4, 4), in_buffer(root.view(np.int64), 16, 4, 4)],
        # one buffer, adjacent, the same column strides, but another d_in
        "widths": [in_buffer(root, 0, 4, 4),
                   np.ndarray((8, 2), np.float64, buffer=root, offset=16 * 8, strides=(8, 32))],
        # adjacent, but starting 4 bytes into root's items: no slice of root is them
        "misaligned": [np.ndarray((4, 4), np.float64, buffer=root, offset=4 + 128 * i,
                                  strides=(8, 32)) for i in range(2)],
        # adjacent float64 views of a uint8 buffer
        "bytes_owner": [in_buffer(as_float64, 16 * i, 4, 4) for i in range(2)],
        "two_owners": owners_side_by_side(),
        "two_d_owner": [in_buffer(matrix.ravel(), 16 * i, 4, 4)
                        for matrix in [rng.normal(size=(4, 16))] for i in range(2)],
        "same_twice": [ws[0], ws[0]],
        "one": ws[:1],
        "device": [DeviceArray(w) for w in ws]}[case]


@pytest.mark.parametrize("case", ["separate", "reversed", "skipped", "gap", "row_major",
                                  "dtypes", "widths", "misaligned", "bytes_owner", "two_owners",
                                  "two_d_owner", "same_twice", "one", "device"])
def test_no_view_where_the_weights_are_not_one_matrix(case):
    ws = cases(case)
    assert side_by_side(ws) is None
    if case in ("device", "widths", "dtypes"):
        return
    x = np.random.default_rng(2).normal(size=(2, ws[0].shape[0]))
    for got, want in zip(linears(x, ws), reference(x, ws, [None] * len(ws))):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_the_cases_above_are_one_check_away_from_a_view():
    # Each refusal above is for its own reason: the same weights, fixed in that one respect,
    # are one matrix (so a test of the case fails if its check is dropped).
    rng = np.random.default_rng(1)
    root = rng.normal(size=256)
    assert side_by_side([in_buffer(root, 0, 4, 4), in_buffer(root, 16, 4, 4)]) is not None
    aligned = [np.ndarray((4, 4), np.float64, buffer=root, offset=128 * i, strides=(8, 32))
               for i in range(2)]
    assert side_by_side(aligned) is not None
    np.testing.assert_array_equal(side_by_side(aligned), np.concatenate(aligned, axis=1))
    memory = np.frombuffer(bytearray(512), np.float64)
    assert side_by_side([in_buffer(memory, 16 * i, 4, 4) for i in range(2)]) is not None
    flat = rng.normal(size=64)
    assert side_by_side([in_buffer(flat, 16 * i, 4, 4) for i in range(2)]) is not None


def test_a_weight_reshaped_in_place_is_looked_at_anew():
    root = np.random.default_rng(7).normal(size=64)
    w1, w2 = in_buffer(root, 0, 4, 4), in_buffer(root, 16, 4, 4)
    assert side_by_side([w1, w2]) is not None
    w2.shape = (4, 2, 2)  # allowed in place: no longer a [d_in, d_out] weight
    assert side_by_side([w1, w2]) is None


@pytest.mark.parametrize("x_shape, bias_shape", [((2, 4), (3, 1, 4)), ((4,), (1, 4)),
                                                 ((1, 4), (4,)), ((), (4,)), ((1, 3), (4,))])
def test_errors_and_shapes_as_one_product_per_weight(x_shape, bias_shape):
    # the one product answers as linear, weight by weight, would: the same shapes, or the same
    # kind of error
    root = np.random.default_rng(8).normal(size=64)
    ws = [in_buffer(root, 0, 4, 4), in_buffer(root, 16, 4, 4)]
    x, bias = np.ones(x_shape), np.ones(bias_shape)

    def answer(f):
        try:
            return [o.shape for o in f()]
        except (TypeError, ValueError) as error:
            return type(error)

    one = answer(lambda: linears(x, ws, [bias, None]))
    per_weight = answer(lambda: [linear(x, w, b) for w, b in zip(ws, [bias, None])])
    assert one == per_weight


@given(d_in=st.sampled_from([16, 32]), d_outs=st.lists(st.sampled_from([16, 32, 48]), min_size=1,
                                                       max_size=4),
       lead=st.sampled_from([(1,), (3,), (2, 5), (1, 1, 4)]), biases=st.booleans(),
       together=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**32 - 1))
def test_linears_equals_each_product_with_its_bias(d_in, d_outs, lead, biases, together, dtype,
                                                   seed):
    rng = np.random.default_rng(seed)
    ws = (side_by_side_weights if together else weights)(rng, d_in, d_outs, dtype)
    assert (side_by_side(ws) is not None) == (together and len(ws) > 1)
    bs = [rng.normal(size=w.shape[1]).astype(dtype) if biases and i % 2 == 0 else None
          for i, w in enumerate(ws)]
    x = rng.uniform(-1, 1, size=lead + (d_in,)).astype(dtype)
    before = [w.copy() for w in ws], x.copy()
    got = linears(x, ws, bs)
    assert isinstance(got, tuple) and len(got) == len(ws)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for g, want, w in zip(got, reference(x, ws, bs), ws):
        assert g.dtype == dtype and g.shape == lead + (w.shape[1],)
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol * d_in)
    for w, b in zip(ws, before[0]):
        np.testing.assert_array_equal(w, b)  # nothing changed in place
    np.testing.assert_array_equal(x, before[1])


@pytest.mark.parametrize("wrt", [0, 1])
def test_gradients_through_linears_equal_the_formulas(wrt):
    rng = np.random.default_rng(2)
    ws = side_by_side_weights(rng, 16, [16, 32])
    bs = [rng.normal(size=16), None]
    x = rng.normal(size=(3, 16))
    g = [rng.normal(size=(3, 16)), rng.normal(size=(3, 32))]

    def loss(x, w0):
        outs = linears(x, [w0, ws[1]], bs)
        return sum(anp.sum(o * gi) for o, gi in zip(outs, g))

    got = grad(loss, wrt)(x, ws[0])
    want = (g[0] @ ws[0].T + g[1] @ ws[1].T) if wrt == 0 else x.T @ g[0]  # dL/dx, dL/dw0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_what_is_remembered_is_forgotten_with_the_weights():
    ws = side_by_side_weights(np.random.default_rng(3), 16, [16, 16])
    key = tuple(map(id, ws))
    buffer = ws[0].base
    while buffer.base is not None:
        buffer = buffer.base
    assert side_by_side(ws) is not None and key in fused_products._found
    whole_ref = __import__("weakref").ref(buffer)
    del ws, buffer
    gc.collect()
    assert key not in fused_products._found
    assert whole_ref() is None  # the buffer is not kept alive by the remembered view


def test_a_packed_decoder_step_equals_the_same_weights_apart():
    import minattn as ma
    rng = np.random.default_rng(4)
    params, config = ma.init_causal_lm(rng, 50, 2, 32, 4, 48, position="rope", tied=True,
                                       activation="swiglu", norm="rms_norm", bias=False,
                                       n_kv_heads=2)
    for layer in params["layers"]:
        for sublayer in ("self_attention", "feed_forward"):
            layer[sublayer] = {k: np.asfortranarray(w) for k, w in layer[sublayer].items()}
    apart = {**params, "layers": [{k: dict(v) for k, v in layer.items()}
                                  for layer in params["layers"]]}
    together = {**params, "layers": [packed({k: {n: w.copy(order="K") for n, w in v.items()}
                                             for k, v in layer.items()})
                                     for layer in params["layers"]]}
    layer = together["layers"][0]
    assert side_by_side([layer["self_attention"][k] for k in ("w_q", "w_k", "w_v")]) is not None
    assert side_by_side([layer["feed_forward"][k] for k in ("w_gate", "w_up")]) is not None
    tokens = rng.integers(0, 50, size=(2, 7))
    want, want_cache = ma.causal_lm(apart, tokens, return_cache=True, **config)
    got, cache = ma.causal_lm(together, tokens, return_cache=True, **config)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    step = rng.integers(0, 50, size=(2, 1))
    want, _ = ma.causal_lm(apart, step, cache=want_cache, return_cache=True, **config)
    got, _ = ma.causal_lm(together, step, cache=cache, return_cache=True, **config)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("lead", [(1,), (2, 2), (1, 1, 4), (5,), (2, 3), (1, 64)])
def test_one_product_for_a_few_tokens_only(lead):
    # Decoding (a token or a few) reads the weights once; many tokens are limited by arithmetic,
    # where separate, contiguous results were faster (the module docstring's measurements).
    rng = np.random.default_rng(5)
    ws = side_by_side_weights(rng, 16, [16, 32])
    x = rng.normal(size=lead + (16,))
    q, k = linears(x, ws)
    tokens = int(np.prod(lead))
    one_output = q.base is not None and q.base is k.base  # views of one product's result
    assert one_output == (tokens <= fused_products.FEW_TOKENS)
    for got, want in zip((q, k), reference(x, ws, [None, None])):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@given(lead=st.sampled_from([(0,), (1,), (3,), (2, 5)]),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       seed=st.integers(0, 2**32 - 1))
def test_linear_with_its_bias_in_place_is_the_formula_to_the_last_bit(lead, dtype, seed):
    # bias_in_place: where nothing is recorded, linear adds its bias into the product's own
    # array: the same additions as the formula's y + b, so the same bits; and within rounding of
    # a float64 reference. Nothing it was given changes; the result shares no memory with them.
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=lead + (16,)).astype(dtype)
    w, b = rng.normal(size=(16, 24)).astype(dtype), rng.normal(size=24).astype(dtype)
    before = x.copy(), w.copy(), b.copy()
    got = linear(x, w, b)
    formula = (x.reshape(-1, 16) @ w + b).reshape(lead + (24,))
    assert got.dtype == dtype and got.shape == lead + (24,)
    np.testing.assert_array_equal(got, formula)
    assert got.tobytes() == formula.tobytes()  # -0.0 and +0.0 told apart too
    tol = {np.float16: 2e-2, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(got, reference(x, [w], [b])[0], rtol=tol, atol=tol * 16)
    for given_array, copy in zip((x, w, b), before):
        np.testing.assert_array_equal(given_array, copy)
        assert not np.shares_memory(got, given_array)


@pytest.mark.parametrize("case", ["float64 bias", "one bias for all", "bias per token",
                                  "no bias", "device arrays"])
def test_linear_adds_a_bias_as_written_where_it_may_not_add_it_in_place(case):
    # a bias that would change the product's dtype or shape, no bias, or arrays that are not
    # NumPy's: the formula as written, the same numbers and dtype as y + b
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(3, 8)).astype(np.float32), rng.normal(size=(8, 4)).astype(np.float32)
    b = {"float64 bias": rng.normal(size=4), "one bias for all": np.float32([0.5]),
         "bias per token": rng.normal(size=(3, 4)).astype(np.float32), "no bias": None,
         "device arrays": rng.normal(size=4).astype(np.float32)}[case]
    want = x @ w + (0 if b is None else b)
    got = linear(DeviceArray(x), DeviceArray(w), DeviceArray(b)).get() \
        if case == "device arrays" else linear(x, w, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_bias_in_place_adds_the_bias_into_the_product_it_made():
    # the policy itself: the product without its bias, then the bias added into that very array
    calls, made = [], []

    def product(x, w, b=None):
        calls.append(b)
        made.append(x @ w + (0 if b is None else b))
        return made[-1]

    x, w, b = np.ones((2, 3)), np.full((3, 4), 2.0), np.arange(4.0)
    with_bias = fused_products.bias_in_place(product)
    got = with_bias(x, w, b)
    assert calls == [None] and got is made[0]  # one product, no bias, the bias added into it
    np.testing.assert_array_equal(got, np.broadcast_to(6.0 + b, (2, 4)))
    calls.clear()
    np.testing.assert_array_equal(with_bias(x, w, b.astype(np.float32)), got)
    assert calls == [None]  # a float32 bias keeps float64's dtype: in place too
    calls.clear()
    with_bias(x.astype(np.float32), w.astype(np.float32), b)  # a float64 bias: as written
    assert calls[0] is b
