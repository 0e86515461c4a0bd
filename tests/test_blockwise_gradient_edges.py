"""blockwise_attention's gradient (FlashAttention-2's backward) at two edges its docstring names,
against autograd of the plain scaled_dot_product_attention in float64:
- causal: key blocks wholly after a query block are skipped, not masked, in the backward as in
  the forward: a NaN in such a key or value leaves that query block's output and gradient
  exactly those computed with the later keys cut off (masking it would give 0 * NaN = NaN);
- a query with no key left (here: every score -inf) gets zero weights, so it adds nothing to
  the gradient of the values, as in scaled_dot_product_attention."""
import autograd
import autograd.numpy as anp
import numpy as np

import minattn as ma

rng = np.random.default_rng(0)


def test_causal_a_nan_in_a_later_key_block_does_not_reach_an_earlier_query_block():
    q, k, v = rng.normal(size=(2, 8, 4)), rng.normal(size=(2, 8, 4)), rng.normal(size=(2, 8, 3))
    k[:, 6], v[:, 6] = np.nan, np.nan  # key 6: in the second block of 4 keys
    w = rng.normal(size=(2, 4, 3))

    def loss(q):  # the first query block's outputs only
        out = ma.blockwise_attention(q, k, v, causal=True, block_size=4)
        return anp.sum(out[:, :4] * w)

    def loss_cut(q):  # the same queries, the keys after them cut off
        out, _ = ma.scaled_dot_product_attention(q[:, :4], k[:, :4], v[:, :4],
                                                 ma.causal_mask(4))
        return anp.sum(out * w)

    out = ma.blockwise_attention(q, k, v, causal=True, block_size=4)
    expected, _ = ma.scaled_dot_product_attention(q[:, :4], k[:, :4], v[:, :4], ma.causal_mask(4))
    np.testing.assert_allclose(out[:, :4], expected, rtol=1e-12, atol=1e-14)
    d_q, d_q_cut = autograd.grad(loss)(q), autograd.grad(loss_cut)(q)
    assert np.isfinite(d_q[:, :4]).all()
    np.testing.assert_allclose(d_q[:, :4], d_q_cut[:, :4], rtol=1e-10, atol=1e-14)


def test_a_query_whose_every_score_is_minus_inf_adds_nothing_to_the_values_gradient():
    q, k = rng.normal(size=(6, 3)), rng.uniform(0.5, 1.0, size=(7, 3))
    v, w = rng.normal(size=(7, 2)), rng.normal(size=(6, 2))
    q[2, 0] = -np.inf  # every key has k[:, 0] > 0: query 2's scores are all -inf

    def loss(v, attend):
        return anp.sum(attend(v) * w)

    blockwise = lambda v: ma.blockwise_attention(q, k, v, block_size=4)  # noqa: E731
    plain = lambda v: ma.scaled_dot_product_attention(q, k, v)[0]  # noqa: E731
    np.testing.assert_allclose(blockwise(v), plain(v), rtol=1e-12, atol=1e-14)
    assert (blockwise(v)[2] == 0).all()
    # the backward forms every gradient at once: dK = scale · dSᵀ Q (not asked for) is 0 · -inf
    # there, NaN, as sdpa's dK would be
    with np.errstate(invalid="ignore"):
        d_v = autograd.grad(loss)(v, blockwise)
    np.testing.assert_allclose(d_v, autograd.grad(loss)(v, plain), rtol=1e-10, atol=1e-14)
