"""capped_attention with a batch axis and a mask per query head: each query head h, in a loop,
reads kv head h // (H / H_kv) under its own mask, with its scores soft-capped (Gemma 2)."""
import numpy as np
import pytest

from minattn.softcap import capped_attention


def _head(q, k, v, keep, scale, cap):  # one head: the formula, in plain NumPy
    scores = q @ k.T * scale
    if cap is not None:
        scores = cap * np.tanh(scores / cap)
    scores = np.where(keep, scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


@pytest.mark.parametrize("h_kv", [1, 2, 4])
@pytest.mark.parametrize("cap", [None, 1.5])
def test_batched_grouped_attention_with_a_mask_per_head_is_a_loop_over_heads(h_kv, cap):
    rng = np.random.default_rng(h_kv)
    b, h, l_q, l_k, d = 2, 4, 3, 5, 6
    q = rng.normal(size=(b, h, l_q, d))
    k, v = rng.normal(size=(2, b, h_kv, l_k, d))
    keep = rng.random(size=(b, h, l_q, l_k)) < 0.7
    keep[..., 0] = True  # every query sees a key
    out, weights = capped_attention(q, k, v, keep, scale=0.4, cap=cap)
    assert out.shape == (b, h, l_q, d) and weights.shape == (b, h, l_q, l_k)
    for i in range(b):
        for j in range(h):
            w = _head(q[i, j], k[i, j * h_kv // h], v[i, j * h_kv // h], keep[i, j], 0.4, cap)
            np.testing.assert_allclose(weights[i, j], w, rtol=0, atol=1e-13)
            np.testing.assert_allclose(out[i, j], w @ v[i, j * h_kv // h], rtol=0, atol=1e-13)
