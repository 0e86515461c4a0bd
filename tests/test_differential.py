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


def _paper_reference(params, x, n_heads, n_kv_heads, eps=1e-6, positions=None,
                     base=10000.0):
    # Differential head j: Q1 = query head j, Q2 = query head j + H/2, K1 and K2 = kv heads g and
    # g + H_kv/2, V = [v_g, v_{g + H_kv/2}] (2d wide), g = j // (H / H_kv); causal; RoPE on every
    # query and key head where positions are given.
    d = x.shape[-1] // n_heads
    q, k, v = (x @ params[f"w_{p}"] for p in "qkv")
    rope = lambda a: a if positions is None else ma.apply_rope(a, positions, base=base)
    head = lambda a, h: a[..., h * d:(h + 1) * d]
    lam = (math.exp(params["lambda_q1"] @ params["lambda_k1"])
           - math.exp(params["lambda_q2"] @ params["lambda_k2"]) + params["lambda_init"])
    causal = np.tril(np.ones((x.shape[1], x.shape[1]), dtype=bool))
    attend = lambda q_h, k_h: _softmax(np.where(causal, q_h @ np.swapaxes(k_h, -1, -2) / math.sqrt(d),
                                                -np.inf))
    outs = []
    for j in range(n_heads // 2):
        g, half = j // (n_heads // n_kv_heads), n_kv_heads // 2
        p1 = attend(rope(head(q, j)), rope(head(k, g)))
        p2 = attend(rope(head(q, j + n_heads // 2)), rope(head(k, g + half)))
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


def _setup(seed, n_heads=4, n_kv_heads=2, length=5):
    rng = np.random.default_rng(seed)
    params = init_differential_attention(rng, 16, n_heads, n_kv_heads=n_kv_heads, layer_index=1,
                                         lambda_std=0.5)
    return params, rng.normal(size=(2, length, 16)), rng.integers(0, 50, size=length)


def test_rope_base_and_eps_are_passed_through():
    # A far-off base rotates the queries and the keys both; any positive base is allowed,
    # one close to 1 as well; eps=0 is allowed (a plain RMS).
    params, x, positions = _setup(0)
    for base, eps in ((500.0, 1e-5), (1.5, 1e-5), (10000.0, 0.0), (10000.0, 0.5)):
        out, _ = differential_attention(params, x, ma.causal_mask(5), n_heads=4, n_kv_heads=2,
                                        positions=positions, rope_base=base, eps=eps)
        np.testing.assert_allclose(out, _paper_reference(params, x, 4, 2, eps=eps,
                                                         positions=positions, base=base),
                                   rtol=0, atol=1e-12)


def test_defaults_are_the_documented_ones():
    # rope_base 10000 (transformers' default rope_theta), eps 1e-6 (rms_norm's, as every RMSNorm
    # of minattn: tests/test_one_eps_default.py; DiffLlama's model passes its rms_norm_eps),
    # n_kv_heads = n_heads, no positions: no RoPE.
    params, x, positions = _setup(1, n_kv_heads=4)
    call = lambda **kw: differential_attention(params, x, ma.causal_mask(5), n_heads=4, **kw)[0]
    default = call(positions=positions)
    np.testing.assert_array_equal(default, call(positions=positions, rope_base=10000.0, eps=1e-6,
                                                n_kv_heads=4))
    np.testing.assert_allclose(default, _paper_reference(params, x, 4, 4, eps=1e-6,
                                                         positions=positions, base=10000.0),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(call(), _paper_reference(params, x, 4, 4), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_heads, n_kv_heads", [(2, 2), (4, 2)])  # kv heads == batch rows, or not
def test_batched_positions_equal_one_call_per_row(n_heads, n_kv_heads):
    # positions [B, L]: row b of the batch rotates by positions[b] (a left-padded batch).
    params, x, _ = _setup(2, n_heads, n_kv_heads)
    positions = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    out, cache = differential_attention(params, x, ma.causal_mask(5), n_heads=n_heads,
                                        n_kv_heads=n_kv_heads, positions=positions)
    for b in range(2):
        row, row_cache = differential_attention(params, x[b:b + 1], ma.causal_mask(5),
                                                n_heads=n_heads, n_kv_heads=n_kv_heads,
                                                positions=positions[b])
        np.testing.assert_allclose(out[b:b + 1], row, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cache["k"][b:b + 1], row_cache["k"], rtol=0, atol=1e-12)


def test_unbatched_x_equals_a_batch_of_one():
    # x [L, D] (no batch axis), with a cache [H_kv, L_past, d] (L_past 2, d 4) and a mask over
    # L_past + L keys; positions as a list, taken as an array like every array argument.
    params, x, positions = _setup(3)
    mask = ma.causal_mask(3, 5, align="bottom_right")
    _, cache = differential_attention(params, x[:1, :2], n_heads=4, n_kv_heads=2,
                                      positions=positions[:2])
    batched, _ = differential_attention(params, x[:1, 2:], mask, n_heads=4, n_kv_heads=2,
                                        positions=positions[2:], cache=cache)
    single, new_cache = differential_attention(
        params, x[0, 2:], mask, n_heads=4, n_kv_heads=2, positions=positions[2:].tolist(),
        cache={key: a[0] for key, a in cache.items()})
    assert single.shape == (3, 16) and new_cache["k"].shape == (2, 5, 4)
    np.testing.assert_allclose(single, batched[0], rtol=0, atol=1e-12)
