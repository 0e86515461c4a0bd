"""Zero-length sequences return what torch returns (empty arrays, or zero outputs for queries
with no keys), gradients included; a softmax row holding a NaN is all NaN, as torch's; only a
row whose every entry is masked is "empty" (all zeros)."""
import numpy as np
import pytest
from autograd import grad

import minattn as ma

from .strategies import perturbed

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("shape, axis", [((0,), -1), ((3, 0), -1), ((0, 4), 0), ((2, 0, 3), 1),
                                         ((0, 3), -1)])
def test_softmax_over_an_empty_axis_is_empty(shape, axis):
    x = np.ones(shape)
    got = ma.softmax(x, axis=axis)
    assert got.shape == torch.softmax(torch.ones(shape), dim=axis).shape
    assert grad(lambda x: np.sum(ma.softmax(x, axis=axis)))(x).shape == shape


@pytest.mark.parametrize("l_q, l_k", [(3, 0), (0, 4), (0, 0)])
def test_attention_with_no_queries_or_no_keys_matches_torch(l_q, l_k):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, l_q, 4)), rng.normal(size=(2, l_k, 4)), rng.normal(size=(2, l_k, 5))
    out, weights = ma.scaled_dot_product_attention(q, k, v)
    expected = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v))).numpy()
    assert weights.shape == (2, l_q, l_k)
    np.testing.assert_array_equal(out, expected)  # zeros where a query has no key
    g = grad(lambda q: np.sum(ma.scaled_dot_product_attention(q, k, v)[0]))(q)
    assert g.shape == q.shape and np.all(g == 0)


@pytest.mark.parametrize("l_q, l_k", [(0, 0), (3, 0), (0, 3)])
def test_multi_head_attention_with_empty_sequences(l_q, l_k):
    rng = np.random.default_rng(0)
    params = perturbed(ma.init_multi_head_attention(rng, 4, 2), 1)
    query, memory = rng.normal(size=(2, l_q, 4)), rng.normal(size=(2, l_k, 4))
    out, weights = ma.multi_head_attention(params, query, memory, memory, n_heads=2)
    assert out.shape == (2, l_q, 4) and weights.shape == (2, 2, l_q, l_k)
    # no keys: attention contributes nothing, so only the output projection's bias is left
    np.testing.assert_allclose(out, np.broadcast_to(params["b_o"], out.shape), atol=1e-15)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_with_empty_sequences(norm_first):
    rng = np.random.default_rng(0)
    params = ma.init_encoder(rng, 2, 4, 2, 8)
    x = np.zeros((3, 0, 4))
    y = ma.encoder(params, x, n_heads=2, norm_first=norm_first)
    assert y.shape == (3, 0, 4)
    assert grad(lambda p: np.sum(ma.encoder(p, x, n_heads=2)))(params)["layers"][0]["self_attention_norm"]["gamma"].shape == (4,)


@pytest.mark.parametrize("row", [[np.nan, 1.0], [1.0, np.inf], [np.nan, np.nan, 0.0],
                                 [-np.inf, np.nan]])
def test_softmax_row_with_nan_or_inf_is_all_nan_as_torch(row):
    x = np.array([row, [0.0] * len(row)])
    got = ma.softmax(x)
    expected = torch.softmax(torch.tensor(x), dim=-1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], expected[1])


def test_only_a_fully_masked_row_is_empty():
    x = np.array([[np.nan, 1.0], [np.nan, 1.0], [2.0, 1.0]])
    mask = np.array([[False, False], [True, True], [False, True]])
    got = ma.softmax(x, mask=mask)
    np.testing.assert_array_equal(got[0], [0.0, 0.0])  # nothing left: zeros, by convention
    assert np.isnan(got[1]).all()  # the NaN is attended to: the row is NaN
    np.testing.assert_array_equal(got[2], [0.0, 1.0])  # the masked NaN-free entry is dropped
