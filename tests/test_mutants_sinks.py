"""What the mutation run of the attention-sink variants (minattn/sinks.py, mutated since the
variants' decorators count as policies) and of causal_lm's body showed untested
(tests/MUTANTS.md): a scale given with sinks, dropout with sinks (plain and grouped), a mask per
head in grouped attention with sinks, and causal_lm's logits_to_keep. References: the sink's
softmax written out in a loop (one more logit per row, dropped after the softmax), dropout's
definition (each weight 0 or divided by 1 - p), and the whole model's logits."""
import numpy as np
import pytest

import minattn as ma
from minattn.multi_head import grouped_attention

B, H, H_KV, L_Q, L_K, D = 2, 4, 2, 3, 5, 6


def sink_attention_loop(q, k, v, sinks, scale, mask=None):
    # q [B, H, L_q, d], k, v [B, H, L_k, d] (one kv head per query head), sinks [H];
    # mask [H, L_q, L_k] of bools (True: may attend) or None
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    weights = np.zeros(q.shape[:-1] + (k.shape[-2],))
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            for i in range(q.shape[2]):
                logits = [scale * float(q[b, h, i] @ k[b, h, j]) if mask is None or mask[h, i, j]
                          else -np.inf for j in range(k.shape[2])] + [float(sinks[h])]
                e = np.exp(np.array(logits) - max(logits))
                w = e[:-1] / e.sum()
                weights[b, h, i] = w
                out[b, h, i] = w @ v[b, h]
    return out, weights


@pytest.fixture
def qkv():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((B, H, L_Q, D)), rng.standard_normal((B, H, L_K, D)),
            rng.standard_normal((B, H, L_K, D)), rng.standard_normal(H))


def test_attention_with_sinks_takes_the_scale_given(qkv):
    q, k, v, sinks = qkv
    out, weights = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None], scale=0.3)
    ref_out, ref_weights = sink_attention_loop(q, k, v, sinks, 0.3)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)


def dropped_as_defined(weights, kept_weights, rate):
    # every weight 0 or the weight without dropout over 1 - p, with about p of them 0
    zero = weights == 0.0
    np.testing.assert_allclose(weights[~zero], kept_weights[~zero] / (1.0 - rate), rtol=1e-12)
    assert 0.3 < zero.mean() < 0.7, zero.mean()  # p = 0.5 over 120 weights


def test_attention_with_sinks_drops_weights_with_the_callers_generator(qkv):
    q, k, v, sinks = qkv
    _, kept = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None])
    _, dropped = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None], dropout=0.5,
                                                 rng=np.random.default_rng(1))
    dropped_as_defined(dropped, kept, 0.5)


def test_grouped_attention_with_sinks_drops_weights_with_the_callers_generator(qkv):
    q, k, v, sinks = qkv
    k, v = k[:, :H_KV], v[:, :H_KV]
    _, kept = grouped_attention(q, k, v, sinks=sinks)
    _, dropped = grouped_attention(q, k, v, sinks=sinks, dropout=0.5,
                                      rng=np.random.default_rng(2))
    dropped_as_defined(dropped, kept, 0.5)


def test_grouped_attention_with_sinks_takes_a_mask_per_head(qkv):
    q, k, v, sinks = qkv
    k, v = k[:, :H_KV], v[:, :H_KV]
    mask = np.random.default_rng(3).random((H, L_Q, L_K)) < 0.6
    mask[..., 0] = True  # every query sees a key
    out, weights = grouped_attention(q, k, v, mask, sinks=sinks)
    group = H // H_KV  # query head h reads kv head h // G
    k_per_head, v_per_head = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    ref_out, ref_weights = sink_attention_loop(q, k_per_head, v_per_head, sinks,
                                               1 / np.sqrt(D), mask)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)


# causal_lm's logits_to_keep

@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(4)
    params, config = ma.init_causal_lm(rng, 19, 2, 16, 2, 24, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False, tied=False)
    return params, config, rng.integers(0, 19, size=(2, 7))


def test_logits_to_keep_gives_the_last_positions_logits(model):
    params, config, tokens = model
    whole = ma.causal_lm(params, tokens, **config)
    kept = ma.causal_lm(params, tokens, logits_to_keep=2, **config)
    assert kept.shape == (2, 2, 19)
    np.testing.assert_allclose(kept, whole[:, -2:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_a_logits_to_keep_that_is_not_a_positive_int_is_refused_by_name(model, bad, error):
    params, config, tokens = model
    with pytest.raises(error, match="^logits_to_keep"):
        ma.causal_lm(params, tokens, logits_to_keep=bad, **config)
