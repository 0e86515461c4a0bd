"""engine/query_blocks.py's edges that its mutants showed untested (tests/MUTANTS.md): a 3-D
mask [B, L_q, L_k] beside q [B, L_q, d] (no head axis: the batch axis is not a query axis), a
whole block of queries that may see no key, and the documented default of 128 queries a block
(10 of 16 tiles for a 512-token causal prompt). References: a float64 formula written here."""
import numpy as np

import minattn as ma
from minattn.engine import query_blocks
from minattn.masks import causal_mask


def formula(q, k, v, mask):
    # softmax(q kᵀ / sqrt(d) + (0 | -inf)) v in float64; a row with no key: zeros (minattn's rule)
    s = np.where(mask, np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1]), -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(-1, keepdims=True)
    p = e / np.where(total == 0, 1, total)
    return p @ v, p


def test_a_3d_mask_per_batch_entry_equals_the_formula():
    rng = np.random.default_rng(0)
    n = 300
    q, k, v = (rng.normal(size=(2, n, 4)) for _ in range(3))
    keep = np.arange(n)[None, :] >= np.array([[0], [150]])  # entry 1: its first 150 keys padding
    mask = causal_mask(n, n)[None] & keep[:, None, :]  # [2, L_q, L_k]
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    want_out, want_weights = formula(q, k, v, mask)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)


def test_a_block_of_queries_that_sees_no_key_gives_zeros():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(260, 4)) for _ in range(3))
    mask = causal_mask(260, 260).copy()
    mask[:128] = False  # the first block of 128 queries may see no key
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    want_out, want_weights = formula(q, k, v, mask)
    np.testing.assert_array_equal(out[:128], 0.0)
    np.testing.assert_array_equal(weights[:128], 0.0)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)


def test_the_default_block_is_128_queries():
    seen = []

    def spy(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None, sinks=None):
        seen.append((q.shape[-2], k.shape[-2]))
        return formula(q, k, v, mask)

    split = query_blocks.in_query_blocks(plain=False)(spy)  # f itself, not the plain forms
    x = np.random.default_rng(2).normal(size=(512, 4))
    split(x, x, x, causal_mask(512, 512))
    assert seen == [(128, 128), (128, 256), (128, 384), (128, 512)]  # 10 of 16 tiles of 128


def test_a_sliding_window_block_starts_at_its_first_visible_key():
    # window of 64: the block of queries 128..255 may see keys 65..255 only, and is given those
    seen = []

    def spy(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None, sinks=None):
        seen.append((q.shape[-2], k.shape[-2]))
        return formula(q, k, v, mask)

    split = query_blocks.in_query_blocks(rows=128, plain=False)(spy)
    x = np.random.default_rng(3).normal(size=(512, 4))
    mask = causal_mask(512, 512, window=64)
    rows = [np.flatnonzero(mask[i]) for i in (128, 255)]
    assert rows[0][0] == 65 and rows[1][-1] == 255  # (what a window of 64 means here)
    out, weights = split(x, x, x, mask)
    assert seen == [(128, 128), (128, 191), (128, 191), (128, 191)]
    want_out, want_weights = formula(x, x, x, mask)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)


def _spy_split(rows=128):
    seen = []

    def spy(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None, sinks=None):
        seen.append((q.shape[-2], k.shape[-2]))
        return formula(q, k, v, mask)

    return seen, query_blocks.in_query_blocks(rows=rows, plain=False)(spy)


def test_a_4d_mask_and_more_keys_than_queries_are_split_too():
    rng = np.random.default_rng(4)
    seen, split = _spy_split()
    q, k = rng.normal(size=(1, 1, 256, 4)), rng.normal(size=(1, 1, 300, 4))
    split(q, k, k, causal_mask(256, 300, align="bottom_right")[None, None])  # [1, 1, L_q, L_k]
    assert seen == [(128, 172), (128, 300)]  # keys 0..171 for queries 0..127 (44 past keys)


def test_a_mask_broadcast_along_the_keys_runs_whole_and_equals_the_formula():
    # a [L_q, 1] mask says nothing per key: no block can be given fewer keys
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(256, 4)) for _ in range(3))
    mask = (np.arange(256) % 3 != 0)[:, None]  # every third query sees nothing
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask)
    want_out, want_weights = formula(q, k, v, mask)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)


def test_the_blocks_keep_the_scale_and_the_inputs_dtype():
    rng = np.random.default_rng(6)
    q, k, v = (rng.normal(size=(300, 4)) for _ in range(3))
    mask = causal_mask(300, 300)
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask, scale=0.1)
    s = np.where(mask, q @ k.T * 0.1, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(weights, p, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, p @ v, rtol=1e-10, atol=1e-12)
    out32, weights32 = ma.scaled_dot_product_attention(*(a.astype(np.float32) for a in (q, k, v)),
                                                       mask, scale=0.1)
    assert out32.dtype == np.float32 and weights32.dtype == np.float32
    np.testing.assert_allclose(weights32, p, rtol=1e-4, atol=1e-6)


def test_keys_and_values_given_as_lists_equal_the_formula():
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(size=(256, 4)) for _ in range(3))
    mask = causal_mask(256, 256)
    out, weights = ma.scaled_dot_product_attention(q, k.tolist(), v.tolist(), mask)
    want_out, want_weights = formula(q, k, v, mask)
    np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights, want_weights, rtol=1e-10, atol=1e-12)


def test_a_value_being_differentiated_is_computed_whole():
    # the policy on a differentiable toy core: a box runs whole, so its gradient is recorded
    import autograd.numpy as anp
    from autograd import grad

    def core(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None, sinks=None):
        s = anp.where(mask, anp.einsum("...qd,...kd->...qk", q, k) / 2.0, -1e300)
        e = anp.where(mask, anp.exp(s - anp.max(s, axis=-1, keepdims=True)), 0.0)
        p = e / anp.sum(e, axis=-1, keepdims=True)
        return p @ v, p

    split = query_blocks.in_query_blocks(rows=128, plain=False)(core)
    rng = np.random.default_rng(8)
    q, k, v = (rng.normal(size=(260, 4)) for _ in range(3))
    mask = causal_mask(260, 260, window=50)
    for argnum in range(3):
        got = grad(lambda *a: anp.sum(split(*a, mask)[0]), argnum)(q, k, v)
        want = grad(lambda *a: anp.sum(core(*a, mask)[0]), argnum)(q, k, v)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)



def test_weights_unread_on_unbatched_heads_with_the_mask_by_keyword_equals_the_formula():
    # q [H, L_q, d] without a batch axis (the grouped weights then have no dims before the
    # heads), and the mask given by keyword: the core receives it, and the output is the
    # formula's over kv head h // 2 for query head h
    from minattn.multi_head import grouped_attention

    rng = np.random.default_rng(9)
    q = rng.normal(size=(6, 300, 8))  # 6 query heads over 3 kv heads
    k, v = rng.normal(size=(3, 307, 8)), rng.normal(size=(3, 307, 5))
    mask = causal_mask(300, 307, align="bottom_right")
    out, weights = query_blocks.weights_unread(grouped_attention)(q, k, v, mask=mask)
    assert weights is None
    want, _ = formula(q, np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0), mask)
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
