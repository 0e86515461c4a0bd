"""ma.grouped_attention, the public attention of heads already projected: equal to torch's
scaled_dot_product_attention with enable_gqa=True (query head h reads kv head h // (H / H_kv)),
with a boolean mask, a per-head additive bias and none; and a head count that does not divide
refused by name, not by a bare reshape error."""
import numpy as np
import pytest

import minattn as ma

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _heads(rng, batch, heads, length, d):
    return rng.normal(size=(batch, heads, length, d))


@pytest.mark.parametrize("n_heads, n_kv_heads", [(8, 2), (6, 3), (4, 4), (4, 1)])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "per-head bias"])
def test_grouped_attention_equals_torchs_sdpa_with_enable_gqa(n_heads, n_kv_heads, mask_kind):
    rng = np.random.default_rng(n_heads * 10 + n_kv_heads)
    q, k, v = _heads(rng, 2, n_heads, 5, 4), _heads(rng, 2, n_kv_heads, 7, 4), \
        _heads(rng, 2, n_kv_heads, 7, 3)
    mask = {"none": None, "causal": ma.causal_mask(5, 7, align="bottom_right"),
            "per-head bias": rng.normal(size=(n_heads, 5, 7))}[mask_kind]
    out, weights = ma.grouped_attention(q, k, v, mask)
    t = torch.from_numpy
    expected = F.scaled_dot_product_attention(t(q), t(k), t(v), None if mask is None else
                                              t(mask), enable_gqa=True).numpy()
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    assert weights.shape == (2, n_heads, 5, 7)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=0, atol=1e-12)


def test_query_head_h_reads_kv_head_h_over_the_group_size():
    rng = np.random.default_rng(0)
    q, k, v = _heads(rng, 1, 6, 3, 4), _heads(rng, 1, 2, 3, 4), _heads(rng, 1, 2, 3, 4)
    out, _ = ma.grouped_attention(q, k, v)
    for h in range(6):  # G = 3: heads 0-2 read kv head 0, heads 3-5 kv head 1
        one, _ = ma.scaled_dot_product_attention(q[:, h], k[:, h // 3], v[:, h // 3])
        np.testing.assert_allclose(out[:, h], one, rtol=0, atol=1e-14)


def test_a_head_count_that_does_not_divide_is_refused_naming_both():
    rng = np.random.default_rng(0)
    q, kv = _heads(rng, 2, 6, 4, 8), _heads(rng, 2, 4, 4, 8)
    with pytest.raises(ValueError, match=r"the key-value heads must divide the query heads: q "
                                         r"has H=6 heads and k, v H_kv=4 \(axis -3 of each"):
        ma.grouped_attention(q, kv, kv)


def test_heads_in_torchs_layout_must_be_moved_first():
    # [B, L, H, d] (flash-attn's layout) read as [B, H, L, d] is another computation: minattn's
    # heads sit on axis -3, so such tensors are transposed, as the README says
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 5, 4, 8)) for _ in range(3))  # [B, L, H, d]
    ours, _ = ma.grouped_attention(*(np.swapaxes(x, 1, 2) for x in (q, k, v)))
    t = lambda x: torch.from_numpy(np.swapaxes(x, 1, 2))
    expected = F.scaled_dot_product_attention(t(q), t(k), t(v)).numpy()
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
