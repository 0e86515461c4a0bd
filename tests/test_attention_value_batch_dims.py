"""scaled_dot_product_attention's mask and sinks broadcast to [..., L_q, L_k] and [..., L_q], where
`...` is the broadcast of q's, k's AND v's leading dims: a batch dim that only v has (values per
batch row over shared queries and keys) may carry a mask or sinks per batch row, boolean or
additive, with the same result and gradients as the formula computed row by row."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
Q, K = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))  # no batch dim
V = rng.normal(size=(2, 5, 3))  # [B, L_k, d_v]
KEEP = np.array([[True, False, True, True, False], [False, True, True, True, True]])  # [B, L_k]
SINKS = np.array([[0.5, -1.0, 2.0], [0.0, 1.0, -0.5]])  # [B, L_q]
W = rng.normal(size=(2, 3, 3))  # weights of the output in the loss


def reference(q, k, v, b, keep=None, sinks=None):
    # batch row b by the formula, with autograd.numpy so that it can be differentiated
    scores = q @ k.T / 2.0  # scale 1/sqrt(d_k) = 1/2
    if keep is not None:
        scores = anp.where(keep[b], scores, -anp.inf)
    columns = [scores] if sinks is None else [scores, sinks[b][:, None]]
    e = anp.exp(anp.concatenate(columns, axis=-1))
    weights = (e / anp.sum(e, axis=-1, keepdims=True))[:, :scores.shape[-1]]
    return weights @ v[b]


CASES = {
    "boolean mask": (dict(mask=KEEP[:, None, :]), dict(keep=KEEP)),
    "additive mask": (dict(mask=np.where(KEEP, 0.0, -np.inf)[:, None, :]), dict(keep=KEEP)),
    "sinks": (dict(sinks=SINKS), dict(sinks=SINKS)),
}


@pytest.mark.parametrize("case", CASES)
def test_a_mask_or_sinks_over_a_batch_dim_only_v_has_applies_row_by_row(case):
    given, ref = CASES[case]

    def loss(q, k, v):
        return anp.sum(ma.scaled_dot_product_attention(q, k, v, **given)[0] * W)

    def loss_ref(q, k, v):
        return sum(anp.sum(reference(q, k, v, b, **ref) * W[b]) for b in range(2))

    out, weights = ma.scaled_dot_product_attention(Q, K, V, **given)
    assert out.shape == (2, 3, 3) and weights.shape == (2, 3, 5)
    np.testing.assert_allclose(out, np.stack([reference(Q, K, V, b, **ref) for b in range(2)]),
                               rtol=1e-12, atol=1e-12)
    for i in range(3):
        np.testing.assert_allclose(autograd.grad(loss, i)(Q, K, V),
                                   autograd.grad(loss_ref, i)(Q, K, V), rtol=1e-10, atol=1e-12)


def test_queries_without_batch_dims_whose_shape_looks_like_the_batch():
    # q [L_q, d_k] = [2, 3], k [5, 3] and v with batch dims (2, 3): q's own dims equal the
    # batch dims in value, yet q has no batch dim; a mask per batch row still applies, as to q
    # broadcast to them.
    r = np.random.default_rng(1)
    q, k, v = r.normal(size=(2, 3)), r.normal(size=(5, 3)), r.normal(size=(2, 3, 5, 3))
    keep = r.random((2, 3, 2, 5)) < 0.7
    keep[..., 0] = True  # no query without a key
    got = ma.scaled_dot_product_attention(q, k, v, keep)[0]
    want = ma.scaled_dot_product_attention(np.broadcast_to(q, (2, 3, 2, 3)), k, v, keep)[0]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
