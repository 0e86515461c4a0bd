"""Differential attention (minattn.differential) against the paper's equations written head by
head, with transformers' pairing of heads (tests/test_variants_hf.py checks DiffLlama itself)."""
import math

import numpy as np
import pytest
from autograd.test_util import check_grads

import minattn as ma
from minattn.differential import differential_attention, init_differential_attention, lambda_init


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _paper_reference(params, x, n_heads, n_kv_heads, eps=1e-5):
    # Differential head j: Q1 = query head j, Q2 = query head j + H/2, K1 and K2 = kv heads g and
    # g + H_kv/2, V = [v_g, v_{g + H_kv/2}] (2d wide), g = j // (H / H_kv); causal, no RoPE.
    d = x.shape[-1] // n_heads
    q, k, v = (x @ params[f"w_{p}"] for p in "qkv")
    head = lambda a, h: a[..., h * d:(h + 1) * d]
    lam = (math.exp(params["lambda_q1"] @ params["lambda_k1"])
           - math.exp(params["lambda_q2"] @ params["lambda_k2"]) + params["lambda_init"])
    causal = np.tril(np.ones((x.shape[1], x.shape[1]), dtype=bool))
    attend = lambda q_h, k_h: _softmax(np.where(causal, q_h @ np.swapaxes(k_h, -1, -2) / math.sqrt(d),
                                                -np.inf))
    outs = []
    for j in range(n_heads // 2):
        g, half = j // (n_heads // n_kv_heads), n_kv_heads // 2
        p1 = attend(head(q, j), head(k, g))
        p2 = attend(head(q, j + n_heads // 2), head(k, g + half))
        o = (p1 - lam * p2) @ np.concatenate([head(v, g), head(v, g + half)], -1)
        o = o / np.sqrt(np.mean(o * o, -1, keepdims=True) + eps)
        outs.append((1 - params["lambda_init"]) * o)
    return np.concatenate(outs, -1) @ params["w_o"]


@pytest.mark.parametrize("n_heads, n_kv_heads", [(4, 4), (4, 2), (8, 2), (2, 2)])
def test_equals_the_paper_head_by_head(n_heads, n_kv_heads):
    rng = np.random.default_rng(n_heads + n_kv_heads)
    params = init_differential_attention(rng, 16, n_heads, n_kv_heads=n_kv_heads, layer_index=2,
                                         lambda_std=0.5)
    x = rng.normal(size=(2, 6, 16))
    out, _ = differential_attention(params, x, ma.causal_mask(6), n_heads=n_heads,
                                    n_kv_heads=n_kv_heads)
    np.testing.assert_allclose(out, _paper_reference(params, x, n_heads, n_kv_heads),
                               rtol=0, atol=1e-12)


def test_lambda_init_schedule():
    # 0.8 - 0.6 exp(-0.3 (l - 1)) for layers l = 1, 2, ...: 0.2 at the first layer, -> 0.8.
    assert lambda_init(0) == pytest.approx(0.2, abs=1e-15)
    assert lambda_init(1) == pytest.approx(0.8 - 0.6 * math.exp(-0.3), abs=1e-15)
    assert lambda_init(100) == pytest.approx(0.8, abs=1e-12)


def test_cached_decoding_equals_the_full_pass_and_gradients():
    rng = np.random.default_rng(0)
    params = init_differential_attention(rng, 8, 2, n_kv_heads=2, layer_index=0)
    x = rng.normal(size=(1, 5, 8))
    positions = np.arange(5)
    full, _ = differential_attention(params, x, ma.causal_mask(5), n_heads=2, positions=positions)
    cache, outs = {"k": np.zeros((1, 2, 0, 4)), "v": np.zeros((1, 2, 0, 4))}, []
    for t in range(5):
        out, cache = differential_attention(params, x[:, t:t + 1], None, n_heads=2,
                                            positions=positions[t:t + 1], cache=cache)
        outs.append(out)
    np.testing.assert_allclose(np.concatenate(outs, 1), full, rtol=0, atol=1e-12)
    loss = lambda params, x: np.sum(np.sin(differential_attention(
        params, x, ma.causal_mask(5), n_heads=2, positions=positions)[0]))
    check_grads(loss, argnum=0, modes=["rev"], order=1)(params, x)


def test_odd_head_counts_are_refused():
    rng = np.random.default_rng(1)
    params = init_differential_attention(rng, 12, 3, layer_index=0)
    with pytest.raises(ValueError, match="n_heads=3 and n_kv_heads=3 must both be even"):
        differential_attention(params, rng.normal(size=(1, 2, 12)), n_heads=3)
