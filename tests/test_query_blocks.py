"""engine/query_blocks.py: attention by query blocks, each over the keys its mask lets it see.
What it promises: the same output and weights as the whole [L_q, L_k] computation (compared with
a float64 formula written here), zeros where keys were left out, for every kind of boolean mask
(causal, windows, padding, random rows), batch and head layouts; each block over its own keys;
the calls it cannot split (dropout, sinks, additive masks, short inputs) untouched; gradients
unchanged."""
import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from hypothesis import given, strategies as st

import minattn as ma
from minattn.engine import query_blocks
from minattn.masks import causal_mask
from minattn.multi_head import grouped_attention


def reference(q, k, v, mask, scale=None):
    # softmax(q kᵀ scale + (0 | -inf)) v in float64, rows with no key: zeros
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("...qd,...kd->...qk", q, k) * scale
    s = np.where(mask, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total == 0, 1, total)
    return p @ v, p


def masks(kind, n_q, n_k, batch, rng):
    if kind == "causal":
        return causal_mask(n_q, n_k, align="bottom_right")
    if kind == "window":
        return causal_mask(n_q, n_k, align="bottom_right", window=int(rng.integers(1, 60)))
    if kind == "padding":  # [B, 1, L_q, L_k]: each row's first keys are padding
        pad = rng.integers(0, n_k // 2, size=batch)
        keys = np.arange(n_k)[None, :] >= pad[:, None]
        return (causal_mask(n_q, n_k, align="bottom_right") & keys[:, None, :])[:, None]
    return rng.random((n_q, n_k)) < 0.3  # random rows, some with no key at all


@pytest.mark.parametrize("kind", ["causal", "window", "padding", "random"])
@given(n_q=st.integers(256, 300), extra=st.integers(0, 40), seed=st.integers(0, 2 ** 16))
def test_blocks_equal_the_whole_computation(kind, n_q, extra, seed):
    rng = np.random.default_rng(seed)
    n_k, batch = n_q + extra, 2
    q = rng.normal(size=(batch, 3, 2, n_q, 8))  # grouped: 3 kv heads of 2 query heads
    k, v = rng.normal(size=(batch, 3, 1, n_k, 8)), rng.normal(size=(batch, 3, 1, n_k, 5))
    mask = masks(kind, n_q, n_k, batch, rng)
    mask = mask[:, None] if mask.ndim == 4 else mask
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    want_out, want_weights = reference(q, k, v, mask)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)
    assert np.all(weights[~np.broadcast_to(mask, weights.shape)] == 0)


def test_the_blocks_see_only_their_keys():
    seen = []
    # under the variants' dispatch, float16_in_float32 and gradient_by_hand
    inner = ma.scaled_dot_product_attention.__wrapped__.__wrapped__.__wrapped__

    def spy(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None):
        seen.append((q.shape[-2], k.shape[-2]))
        return inner.__wrapped__(q, k, v, mask, scale=scale, dropout=dropout, rng=rng)

    split = query_blocks.in_query_blocks(rows=128, plain=False)(spy)  # f itself, always
    rng = np.random.default_rng(0)
    q = k = v = rng.normal(size=(1, 512, 4))
    split(q, k, v, causal_mask(512, 512))
    assert seen == [(128, 128), (128, 256), (128, 384), (128, 512)]


@pytest.mark.parametrize("unread", [False, True])
def test_the_plain_blocks_see_only_their_keys(unread, monkeypatch):
    # the core on NumPy itself (engine/plain_core.py) splits as the canonical core's blocks do
    from minattn.engine import plain_core
    seen = []
    for name in ("forward", "output_into"):
        f = getattr(plain_core, name)
        monkeypatch.setattr(plain_core, name, lambda *a, f=f, name=name: (
            seen.append((name, a[0 if name == "forward" else 1].shape[-2],
                         a[1 if name == "forward" else 2].shape[-2])), f(*a))[1])
    rng = np.random.default_rng(0)
    q = k = v = rng.normal(size=(1, 512, 4))
    core = ma.scaled_dot_product_attention
    (query_blocks.weights_unread(core) if unread else core)(q, k, v, causal_mask(512, 512))
    name = "output_into" if unread else "forward"
    assert sorted(seen) == [(name, 128, 128), (name, 128, 256), (name, 128, 384),
                            (name, 128, 512)]


@pytest.mark.parametrize("case", ["dropout", "sinks", "additive", "short", "no query axis"])
def test_calls_it_cannot_split_run_whole(case, monkeypatch):
    calls = []
    monkeypatch.setattr(query_blocks, "_in_blocks", lambda *a: calls.append(1))
    rng = np.random.default_rng(1)
    n = 100 if case == "short" else 300
    q = k = v = rng.normal(size=(2, n, 4))
    mask, kwargs = causal_mask(n, n), {}
    if case == "dropout":
        kwargs = {"dropout": 0.1, "rng": np.random.default_rng(0)}
    elif case == "sinks":
        kwargs = {"sinks": np.zeros(1)}
    elif case == "additive":
        mask = np.where(mask, 0.0, -np.inf)
    elif case == "no query axis":
        mask = np.ones((1, n), bool)
    ma.scaled_dot_product_attention(q, k, v, mask, **kwargs)
    assert calls == []


def test_gradients_through_the_blocks_equal_the_formulas():
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(1, 260, 4)) for _ in range(3))
    mask = causal_mask(260, 260, window=50)

    def loss(q, k, v, f):
        return anp.sum(f(q, k, v, mask)[0] * np.arange(4.0))

    minattn_sdpa = ma.scaled_dot_product_attention
    formula = lambda q, k, v, m: _autograd_reference(q, k, v, m)  # noqa: E731
    for argnum in range(3):
        got = grad(loss, argnum)(q, k, v, minattn_sdpa)
        want = grad(loss, argnum)(q, k, v, formula)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


def _autograd_reference(q, k, v, mask):
    s = anp.einsum("...qd,...kd->...qk", q, k) / 2.0
    s = anp.where(mask, s, -1e300)
    s = s - anp.max(s, axis=-1, keepdims=True)
    e = anp.where(mask, anp.exp(s), 0.0)
    return e / anp.sum(e, axis=-1, keepdims=True) @ v, None


@pytest.mark.parametrize("bad, message", [
    (lambda q, m: (q, q, np.ones((300, 4)), m), "k and v must have the same length"),
    (lambda q, m: (q, np.ones((256, 3)), np.ones((256, 3)), m), "same feature size d_k"),
    (lambda q, m: (q, np.ones(4), np.ones(4), m[:, :4]), r"k must have shape \(\.\.\., L_k, d_k\)"),
    (lambda q, m: (q[None].repeat(2, 0), q, q, m[None].repeat(3, 0)),
     r"mask of shape \(3, 256, 256\) does not broadcast to the scores of shape \(2, 256, 256\)"),
    (lambda q, m: (q, q, q, m[:, :200]), r"mask of shape \(256, 200\) does not broadcast"),
])
def test_a_long_call_is_checked_whole_before_it_is_split(bad, message):
    # the errors of a call long enough to split name the caller's shapes, as a short call's do
    q, mask = np.ones((256, 4)), np.tril(np.ones((256, 256), bool))
    with pytest.raises(ValueError, match=message):
        ma.scaled_dot_product_attention(*bad(q, mask))


def test_a_nan_value_no_query_of_a_block_may_see_stays_out_of_that_block():
    # documented (engine/query_blocks.py): the whole computation gives NaN there (0 * NaN)
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(300, 4)) for _ in range(3))
    v[-1] = np.nan  # the last key: only the last query block may see it
    out, weights = ma.scaled_dot_product_attention(q, k, v, causal_mask(300, 300))
    assert np.isfinite(out[:256]).all() and np.isnan(out[-1]).all()
    want, _ = reference(q[:256], k[:256], v[:256], causal_mask(256, 256))
    np.testing.assert_allclose(out[:256], want, rtol=1e-10, atol=1e-12)


# weights_unread: the core for a caller that reads only the output (kv_cache.self_attention).

@pytest.mark.parametrize("kind", ["causal", "window", "padding", "random"])
@pytest.mark.parametrize("n_q", [40, 300])  # one block (not split), and split
def test_weights_unread_gives_the_same_output_and_no_weights(kind, n_q):
    rng = np.random.default_rng(n_q)
    n_k, batch = n_q + 7, 2
    q = rng.normal(size=(batch, 6, n_q, 8))  # 6 query heads over 3 kv heads
    k, v = rng.normal(size=(batch, 3, n_k, 8)), rng.normal(size=(batch, 3, n_k, 5))
    mask = masks(kind, n_q, n_k, batch, rng)
    out, weights = query_blocks.weights_unread(grouped_attention)(q, k, v, mask)
    assert weights is None
    grouped = lambda t: np.repeat(t, 2, axis=1)  # kv head h // 2 for query head h  # noqa: E731
    want, _ = reference(q, grouped(k), grouped(v), mask)
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
    # the same numbers as with the weights assembled where the call is one block; split, the
    # plain blocks divide the output by the sums, not the weights (plain_core.output_into):
    # other roundings, checked above against float64; the canonical core's blocks (the plain
    # forms off) give the assembled weights' numbers, the same sums
    whole = grouped_attention(q, k, v, mask)[0]
    if n_q < 256:
        assert np.array_equal(out, whole)
    token = query_blocks._PLAIN.set(False)
    try:
        canonical = query_blocks.weights_unread(grouped_attention)(q, k, v, mask)[0]
    finally:
        query_blocks._PLAIN.reset(token)
    assert np.array_equal(canonical, whole)


def test_after_weights_unread_the_core_assembles_its_weights_again_even_after_an_error():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 300, 8)) for _ in range(3))
    mask = causal_mask(300)

    def failing(q, k, v, mask):
        ma.scaled_dot_product_attention(q, k, v, mask)
        raise RuntimeError("a core that fails")

    with pytest.raises(RuntimeError, match="a core that fails"):
        query_blocks.weights_unread(failing)(q, k, v, mask)
    for _ in (0, 1):
        weights = ma.scaled_dot_product_attention(q, k, v, mask)[1]
        np.testing.assert_allclose(weights, reference(q, k, v, mask)[1], rtol=1e-10, atol=1e-12)
        query_blocks.weights_unread(grouped_attention)(q[:, None], k[:, None], v[:, None],
                                                          mask)


def test_a_prompts_self_attention_never_holds_its_weights_in_memory():
    # 8 heads, 1,024 tokens, float64: the weights would take 8 * 1024 * 1024 * 8 B = 64 MiB; the
    # self-attention's peak stays below half of that (q, k, v, the blocks' scores and the output)
    import tracemalloc
    rng = np.random.default_rng(2)
    n, d, heads = 1024, 64, 8
    params = ma.init_multi_head_attention(rng, d, heads)
    x = rng.normal(size=(1, n, d))
    mask = causal_mask(n)
    tracemalloc.start()
    try:
        out, _ = ma.self_attention(params, x, mask, n_heads=heads)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    weights_bytes = heads * n * n * 8
    assert peak < weights_bytes / 2, (peak, weights_bytes)
    # and the same output as multi_head_attention's, which returns its weights
    want, weights = ma.multi_head_attention(params, x, x, x, mask, n_heads=heads)
    assert weights.nbytes == weights_bytes
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
