"""dtype promises: float32 in -> float32 out, for values and for gradients, with single-argument
autograd.grad on every public function and every differentiable argument (accumulating
several arguments at once, grad(f, (0, 1)), can hide a float64 term); float16 computed in
float32 where float16 would overflow, and returned as float16."""
import numpy as np
import pytest
from autograd import grad

import minattn as ma

from .strategies import cast_params, perturbed, tree_map

F32 = np.float32


def _x(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(F32)


def _params(init, *args):
    return cast_params(perturbed(init(np.random.default_rng(0), *args), 1), F32)


def _leaves(tree):
    out = []
    tree_map(out.append, tree)
    return out


MASK = ma.causal_mask(5)
ADDITIVE = np.where(MASK, 0.0, -np.inf).astype(F32)
DROP = {"dropout": 0.3, "rng": 7}  # rng built fresh per call below, so every call is the same


def _kw(kw):
    return {**kw, "rng": np.random.default_rng(kw["rng"])} if "rng" in kw else kw


def _sdpa_cases():
    for i, name in enumerate("qkv"):
        for label, kw in (("no mask", {}), ("bool mask", {"mask": MASK}),
                          ("additive mask", {"mask": ADDITIVE}), ("dropout", DROP)):
            yield f"sdpa d{name} {label}", i, kw


def _call_sdpa(i, kw):
    args = [_x(2, 5, 8), _x(2, 5, 8, seed=1), _x(2, 5, 3, seed=2)]
    return args[i], lambda a: ma.scaled_dot_product_attention(
        *(a if j == i else args[j] for j in range(3)), **_kw(kw))


def _call_mha(i, kw, cross=True):
    p = _params(ma.init_multi_head_attention, 8, 2)
    lk = 7 if cross else 5
    args = [p, _x(2, 5, 8), _x(2, lk, 8, seed=1), _x(2, lk, 8, seed=2)]
    return args[i], lambda a: ma.multi_head_attention(
        *(a if j == i else args[j] for j in range(4)), n_heads=2, **_kw(kw))


def _cases():
    yield "softmax", lambda: (_x(2, 5, 5), lambda a: ma.softmax(a))
    yield "softmax masked", lambda: (_x(2, 5, 5), lambda a: ma.softmax(a, mask=MASK))
    for label, i, kw in _sdpa_cases():
        yield label, (lambda i=i, kw=kw: _call_sdpa(i, kw))
    for i, name in enumerate(["params", "query", "key", "value"]):
        for label, kw in (("", {}), (" average_weights", {"average_weights": True}),
                          (" dropout", DROP)):
            yield f"mha d{name}{label}", (lambda i=i, kw=kw: _call_mha(i, kw))
    g, b = _x(8, seed=3), _x(8, seed=4)
    yield "layer_norm dx", lambda: (_x(2, 5, 8), lambda a: ma.layer_norm(a, g, b))
    yield "layer_norm dgamma", lambda: (g, lambda a: ma.layer_norm(_x(2, 5, 8), a, b))
    yield "layer_norm dbeta", lambda: (b, lambda a: ma.layer_norm(_x(2, 5, 8), g, a))
    yield "rms_norm dx", lambda: (_x(2, 5, 8), lambda a: ma.rms_norm(a, g))
    yield "rms_norm dgamma", lambda: (g, lambda a: ma.rms_norm(_x(2, 5, 8), a))
    for act in ("relu", "gelu", "gelu_tanh"):
        pf = _params(ma.init_feed_forward, 8, 16)
        yield f"feed_forward dx {act}", (lambda act=act, pf=pf: (
            _x(2, 5, 8), lambda a: ma.feed_forward(pf, a, activation=act)))
        yield f"feed_forward dparams {act}", (lambda act=act, pf=pf: (
            pf, lambda a: ma.feed_forward(a, _x(2, 5, 8), activation=act)))
    pe = _params(ma.init_encoder, 2, 8, 2, 16)
    for label, kw in (("post-norm", {}), ("pre-norm", {"norm_first": True}),
                      ("gelu", {"activation": "gelu"}), ("dropout", DROP)):
        yield f"encoder_block dx {label}", (lambda kw=kw: (
            _x(2, 5, 8), lambda a: ma.encoder_block(pe["layers"][0], a, MASK, n_heads=2, **_kw(kw))))
        yield f"encoder_block dparams {label}", (lambda kw=kw: (
            pe["layers"][0], lambda a: ma.encoder_block(a, _x(2, 5, 8), MASK, n_heads=2, **_kw(kw))))
        yield f"encoder dx {label}", (lambda kw=kw: (
            _x(2, 5, 8), lambda a: ma.encoder(pe, a, MASK, n_heads=2, **_kw(kw))))
        yield f"encoder dparams {label}", (lambda kw=kw: (
            pe, lambda a: ma.encoder(a, _x(2, 5, 8), MASK, n_heads=2, **_kw(kw))))
    yield "split_heads", lambda: (_x(2, 5, 8), lambda a: ma.split_heads(a, 2))
    yield "merge_heads", lambda: (_x(2, 2, 5, 4), lambda a: ma.merge_heads(a))
    for i, name in enumerate("qkv"):
        def blockwise(i=i):
            args = [_x(2, 9, 4, seed=s) for s in range(3)]
            return args[i], lambda a: ma.blockwise_attention(
                *(a if j == i else args[j] for j in range(3)), causal=True, block_size=4)
        yield f"blockwise d{name}", blockwise


def _decoder_cases():
    positions = np.arange(5)
    yield "apply_rope dx", lambda: (_x(2, 2, 5, 4), lambda a: ma.apply_rope(a, positions))
    pg = _params(ma.init_gated_feed_forward, 8, 16)
    yield "gated_feed_forward dx", lambda: (_x(2, 5, 8), lambda a: ma.gated_feed_forward(pg, a))
    yield "gated_feed_forward dparams", lambda: (pg, lambda a: ma.gated_feed_forward(a, _x(2, 5, 8)))
    pa = cast_params(perturbed(ma.init_multi_head_attention(np.random.default_rng(0), 8, 4,
                                                            n_kv_heads=2, bias=False), 1), F32)
    attend = lambda p, x: ma.self_attention(p, x, MASK, n_heads=4, n_kv_heads=2,
                                            positions=positions)[0]
    yield "self_attention dx", lambda: (_x(2, 5, 8), lambda a: attend(pa, a))
    yield "self_attention dparams", lambda: (pa, lambda a: attend(a, _x(2, 5, 8)))
    pb = cast_params(perturbed(ma.init_decoder_block(np.random.default_rng(0), 8, 2, 16,
                                                     cross_attention=True), 1), F32)
    memory = _x(2, 3, 8, seed=5)
    block = lambda p, x: ma.decoder_block(p, x, MASK, memory=memory, n_heads=2)
    yield "decoder_block dx", lambda: (_x(2, 5, 8), lambda a: block(pb, a))
    yield "decoder_block dparams", lambda: (pb, lambda a: block(a, _x(2, 5, 8)))
    llama = dict(n_kv_heads=2, norm="rms_norm", activation="swiglu", bias=False)
    pd = cast_params(perturbed(ma.init_decoder(np.random.default_rng(0), 2, 8, 4, 16,
                                               final_norm=True, **llama), 1), F32)
    stack = lambda p, x: ma.decoder(p, x, MASK, n_heads=4, n_kv_heads=2, norm="rms_norm",
                                    activation="swiglu", norm_first=True, positions=positions)
    yield "decoder dx", lambda: (_x(2, 5, 8), lambda a: stack(pd, a))
    yield "decoder dparams", lambda: (pd, lambda a: stack(a, _x(2, 5, 8)))
    tokens = np.random.default_rng(0).integers(0, 11, size=(2, 5))
    for style, init, config in (
            ("gpt2", {}, {"n_heads": 2}),
            ("llama", dict(llama, position="rope", tied=False),
             dict(n_heads=4, n_kv_heads=2, norm="rms_norm", activation="swiglu",
                  position="rope"))):
        lm = cast_params(perturbed(ma.init_causal_lm(np.random.default_rng(0), 11, 2, 8,
                                                     config["n_heads"], 16, n_positions=8,
                                                     **init)[0], 1), F32)
        yield f"causal_lm dparams {style}", (lambda lm=lm, config=config: (
            lm, lambda a: ma.causal_lm(a, tokens, **config)))


CASES = dict(_cases())
CASES.update(_decoder_cases())
CASES["cross_entropy dlogits"] = lambda: (
    _x(2, 5, 7), lambda a: ma.cross_entropy(a, np.arange(10).reshape(2, 5) % 7))

# attention and recurrence: each differentiable argument of the delta rule, both forms
_UNIT = ma.l2_normalize(_x(2, 5, 3, seed=1))
_DELTA = {"q": _x(2, 5, 3, seed=2), "k": _UNIT, "v": _x(2, 5, 4, seed=3),
          "beta": np.full((2, 5), 0.5, F32), "g": np.full((2, 5), -0.1, F32),
          "initial_state": _x(2, 3, 4, seed=4)}
for _name in _DELTA:
    for _chunks in (None, 2):
        CASES[f"delta_rule d{_name} chunk_size={_chunks}"] = (
            lambda name=_name, chunks=_chunks: (_DELTA[name], lambda a: ma.delta_rule(
                **{**_DELTA, name: a}, chunk_size=chunks, return_state=True)))
for _chunks in (None, 2):
    CASES[f"linear_attention dq chunk_size={_chunks}"] = lambda chunks=_chunks: (
        _x(2, 5, 3), lambda a: ma.linear_attention(a, _UNIT, _x(2, 5, 4), chunk_size=chunks))
CASES["l2_normalize dx"] = lambda: (_x(2, 5, 3), ma.l2_normalize)
_GQA = [_x(2, 4, 5, 3), _x(2, 2, 5, 3, seed=1), _x(2, 2, 5, 3, seed=2)]  # 4 query, 2 kv heads
for _i, _name in enumerate("qkv"):
    CASES[f"grouped_attention d{_name}"] = lambda i=_i: (_GQA[i], lambda a: ma.grouped_attention(
        *(a if j == i else _GQA[j] for j in range(3)), MASK))


def _scalar(out):
    # every output (and the weights, where returned) feeds the loss, each through a fixed direction
    outs = out if isinstance(out, tuple) else (out,)
    total = 0.0
    for o in outs:
        r = np.random.default_rng(o.ndim).normal(size=o.shape).astype(F32)
        total = total + (o * r).sum()
    return total


def test_every_public_differentiable_function_is_covered():
    covered = {label.split()[0] for label in CASES} | {"causal_mask", "padding_mask",
                                                       "positional_encoding"}
    covered |= {"scaled_dot_product_attention", "multi_head_attention", "blockwise_attention"}
    covered |= {"generate"}  # int tokens in, int tokens out: nothing to differentiate
    public = {n for n in ma.__all__ if not n.startswith("init_")}
    assert public <= covered, sorted(public - covered)


@pytest.mark.parametrize("label", list(CASES))
def test_float32_gradient_stays_float32(label):
    arg, f = CASES[label]()
    g = grad(lambda a: _scalar(f(a)))(arg)
    dtypes = {leaf.dtype for leaf in _leaves(g)}
    assert dtypes == {np.dtype(F32)}, f"{label}: gradient dtypes {dtypes}"


@pytest.mark.parametrize("label", list(CASES))
def test_float32_output_stays_float32(label):
    arg, f = CASES[label]()
    out = f(arg)
    for o in out if isinstance(out, tuple) else (out,):
        assert o.dtype == F32, label


def test_float16_attention_does_not_overflow_where_torch_does_not():
    torch = pytest.importorskip("torch")
    # Activations of 1e4: q kᵀ is ~1e8 * d_k, far above float16's 65504.
    rng = np.random.default_rng(0)
    q = (1e4 * rng.uniform(0.5, 1.0, size=(2, 4, 8))).astype(np.float16)
    k = (1e4 * rng.uniform(0.5, 1.0, size=(2, 6, 8))).astype(np.float16)
    v = rng.normal(size=(2, 6, 8)).astype(np.float16)
    out, weights = ma.scaled_dot_product_attention(q, k, v)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v))).numpy()
    assert out.dtype == weights.dtype == np.float16
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), atol=2e-2, rtol=2e-2)


def test_float16_softmax_is_computed_in_float32():
    x = np.array([[60000.0, 59990.0, -60000.0]], np.float16)  # exp of the unshifted row overflows
    expected = np.exp(x.astype(np.float64) - 60000.0)
    expected /= expected.sum()
    got = ma.softmax(x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), expected, atol=1e-3)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_feed_forward_keeps_the_dtype(activation, dtype):
    p = cast_params(ma.init_feed_forward(np.random.default_rng(0), 4, 8), dtype)
    x = np.random.default_rng(1).normal(size=(3, 4)).astype(dtype)
    assert ma.feed_forward(p, x, activation=activation).dtype == dtype


def test_float16_layer_norm_does_not_overflow_where_torch_does_not():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = (1e3 * rng.normal(size=(3, 8))).astype(np.float16)  # (x - mean)² ~ 1e6 > 65504
    gamma, beta = rng.normal(size=8).astype(np.float16), rng.normal(size=8).astype(np.float16)
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(gamma),
                                              torch.from_numpy(beta)).numpy()
    got = ma.layer_norm(x, gamma, beta)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), atol=2e-2, rtol=2e-2)
    rms = ma.rms_norm(x, gamma)
    reference = x.astype(np.float64) / np.sqrt(np.mean(x.astype(np.float64) ** 2, -1, keepdims=True) + 1e-6) * gamma
    assert rms.dtype == np.float16 and np.isfinite(rms).all()
    np.testing.assert_allclose(rms.astype(np.float64), reference, atol=2e-2, rtol=2e-2)
