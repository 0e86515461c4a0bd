"""Grouped-query attention with a mask per head, on an unbatched input (query [L, D], mask
[H, L, L]: the scores are [H, L, L], so the mask's first axis is the heads): every query head
gets its own mask row, exactly as multi-head attention whose K and V weights are the kv heads'
repeated (query head h reads kv head h // G), and as the batched call with a batch of one."""
import numpy as np
import pytest

import minattn as ma

D, H, L = 8, 4, 5


def _repeated_kv(params, n_kv_heads):
    # GQA params -> MHA params: the K, V columns of kv head h // G copied for every query head h
    d_k, group = D // H, H // n_kv_heads
    cols = np.concatenate([np.arange(d_k) + (h // group) * d_k for h in range(H)])
    full = dict(params)
    for p in "kv":
        full[f"w_{p}"] = params[f"w_{p}"][:, cols]
        full[f"b_{p}"] = params[f"b_{p}"][cols]
    return full


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_per_head_mask_unbatched(n_kv_heads):
    rng = np.random.default_rng(n_kv_heads)
    params = ma.init_multi_head_attention(rng, D, H, n_kv_heads=n_kv_heads)
    params = {k: v + rng.normal(size=v.shape) for k, v in params.items()}  # nonzero biases
    x = rng.normal(size=(L, D))
    mask = rng.random((H, L, L)) < 0.6
    mask[..., 0] = True  # every row keeps a key
    out, weights = ma.multi_head_attention(params, x, x, x, mask, n_heads=H,
                                           n_kv_heads=n_kv_heads)
    assert out.shape == (L, D) and weights.shape == (H, L, L)
    np.testing.assert_array_equal(weights[~mask], 0)  # each head's own mask
    ref_out, ref_weights = ma.multi_head_attention(_repeated_kv(params, n_kv_heads), x, x, x,
                                                   mask, n_heads=H)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-12)
    batched, _ = ma.multi_head_attention(params, x[None], x[None], x[None], mask[None],
                                         n_heads=H, n_kv_heads=n_kv_heads)
    np.testing.assert_allclose(out, batched[0], rtol=1e-12, atol=1e-12)
