"""Attention sinks (gpt-oss): one extra logit per query row that joins the softmax's denominator
and holds no value. References: transformers' gpt-oss eager attention, a formula, finite
differences; and StreamingLLM's cache policy (minattn.sinks.streaming_cache)."""
import types

import numpy as np
import pytest
from autograd.test_util import check_grads

import minattn as ma
from minattn.multi_head import grouped_attention
from minattn.sinks import streaming_cache

from .peers import undocumented


def _inputs(seed, b=2, h=4, h_kv=4, l_q=6, l_k=6, d=8):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(b, h, l_q, d))
    k, v = rng.normal(size=(2, b, h_kv, l_k, d))
    return q, k, v, rng.normal(size=h)


def _window_mask(n, window):
    # True where query i may see key j: a loop, independent of minattn.causal_mask.
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(n):
            mask[i, j] = j <= i and (window is None or i - j < window)
    return mask


@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("h_kv", [4, 2, 1])
def test_sinks_equal_gpt_oss_eager_attention(window, h_kv):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    gpt_oss = "transformers.models.gpt_oss.modeling_gpt_oss"
    q, k, v, sinks = _inputs(0, h_kv=h_kv)
    keep = _window_mask(q.shape[-2], window)
    module = types.SimpleNamespace(sinks=torch.from_numpy(sinks), num_key_value_groups=4 // h_kv,
                                   training=False)
    additive = torch.from_numpy(np.where(keep, 0.0, -np.inf))[None, None]  # HF's mask: 0 / -inf
    t = lambda a: torch.from_numpy(a)
    # GPT-OSS's attention core alone, with its weights: the model file's function (no public
    # entry point takes q, k, v), at the version the lock holds
    expected, expected_weights = undocumented(gpt_oss, "eager_attention_forward")(
        module, t(q), t(k), t(v), additive, scaling=8 ** -0.5)
    out, weights = grouped_attention(q, k, v, ma.causal_mask(6, window=window), sinks=sinks)
    np.testing.assert_allclose(out, expected.numpy().transpose(0, 2, 1, 3), rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, expected_weights.numpy(), rtol=0, atol=1e-12)


def test_sink_takes_its_share_of_the_softmax():
    # p_j = exp(s_j) / (Σ_i exp(s_i) + exp(sink)): the formula, row by row.
    q, k, v, _ = _inputs(1, b=1, h=1, h_kv=1)
    sink = np.array([[0.7]])  # [1, 1]: one logit for every row
    _, weights = ma.scaled_dot_product_attention(q, k, v, sinks=sink)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(8)
    expected = np.exp(scores) / (np.exp(scores).sum(-1, keepdims=True) + np.exp(0.7))
    np.testing.assert_allclose(weights, expected, rtol=1e-13, atol=0)
    assert np.all(weights.sum(-1) < 1)


def test_sink_of_minus_infinity_is_plain_attention():
    q, k, v, _ = _inputs(2)
    mask = ma.causal_mask(6)
    plain = ma.scaled_dot_product_attention(q, k, v, mask)
    sunk = ma.scaled_dot_product_attention(q, k, v, mask, sinks=np.full((4, 1), -np.inf))
    np.testing.assert_allclose(sunk[0], plain[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(sunk[1], plain[1], rtol=0, atol=1e-15)


def test_a_fully_masked_row_goes_to_the_sink():
    q, k, v, _ = _inputs(3, b=1, h=1, h_kv=1, l_q=2, l_k=3)
    mask = np.array([[True, True, False], [False, False, False]])
    out, weights = ma.scaled_dot_product_attention(q, k, v, mask, sinks=np.zeros(2))
    assert np.all(weights[..., 1, :] == 0) and np.all(out[..., 1, :] == 0)


@pytest.mark.parametrize("mask", ["bool", "additive", None])
def test_gradients_with_sinks_match_finite_differences(mask):
    q, k, v, sinks = _inputs(4, b=1, h=2, h_kv=2, l_q=3, l_k=4, d=3)
    sinks = sinks[:2, None]  # [H, 1]
    keep = np.array([[True, False, True, True], [True, True, False, False],
                     [False, True, True, True]])
    m = {"bool": keep, "additive": np.where(keep, 0.0, -np.inf), None: None}[mask]
    r = np.random.default_rng(5).normal(size=(1, 2, 3, 3))
    r_w = np.random.default_rng(6).normal(size=(1, 2, 3, 4))

    def loss(q, k, v, sinks):  # through the output and the weights both
        out, weights = ma.scaled_dot_product_attention(q, k, v, m, sinks=sinks)
        return np.sum(out * r) + np.sum(weights * r_w)

    for argnum in range(4):  # q, k, v, sinks
        check_grads(loss, argnum=argnum, modes=["rev"], order=1)(q, k, v, sinks)


def test_float32_sinks_stay_float32():
    q, k, v, sinks = (a.astype(np.float32) for a in _inputs(7))
    out, weights = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None])
    assert out.dtype == weights.dtype == np.float32
    out16, _ = ma.scaled_dot_product_attention(q.astype(np.float16), k.astype(np.float16),
                                               v.astype(np.float16), sinks=sinks[:, None])
    assert out16.dtype == np.float16
    np.testing.assert_allclose(out16, out, rtol=0, atol=1e-2)


def test_multi_head_attention_with_sinks_is_each_head_with_its_sink():
    rng = np.random.default_rng(8)
    params = ma.init_multi_head_attention(rng, 16, 4, n_kv_heads=2)
    params["sinks"] = rng.normal(size=4)
    x = rng.normal(size=(2, 5, 16))
    out, weights = ma.multi_head_attention(params, x, x, x, ma.causal_mask(5), n_heads=4,
                                           n_kv_heads=2)
    q = ma.split_heads(x @ params["w_q"] + params["b_q"], 4)
    k = ma.split_heads(x @ params["w_k"] + params["b_k"], 2)
    v = ma.split_heads(x @ params["w_v"] + params["b_v"], 2)
    for h in range(4):  # query head h reads kv head h // 2, with sink h
        _, w_h = ma.scaled_dot_product_attention(q[:, h], k[:, h // 2], v[:, h // 2],
                                                 ma.causal_mask(5), sinks=params["sinks"][h])
        np.testing.assert_allclose(weights[:, h], w_h, rtol=0, atol=1e-14)
    params["sinks"] = params["sinks"][:3]
    with pytest.raises(ValueError, match=r"params\['sinks'\] has shape \(3,\), expected \(4,\)"):
        ma.multi_head_attention(params, x, x, x, n_heads=4, n_kv_heads=2)


def test_sinks_that_do_not_broadcast_to_the_rows_are_refused():
    q, k, v, _ = _inputs(9)
    with pytest.raises(ValueError, match=r"sinks of shape \(3, 1\) does not broadcast"):
        ma.scaled_dot_product_attention(q, k, v, sinks=np.zeros((3, 1)))
    with pytest.raises(ValueError, match=r"sinks of shape \(3, 1, 1, 1\)"):  # adds an axis
        ma.scaled_dot_product_attention(q, k, v, sinks=np.zeros((3, 1, 1, 1)))
    with pytest.raises(TypeError, match="sinks must be a floating-point array"):
        ma.scaled_dot_product_attention(q, k, v, sinks=np.zeros((4, 1), dtype=int))


@pytest.mark.parametrize("n_sink", [0, 2])
def test_streaming_cache_decodes_as_the_kept_tokens_alone(n_sink):
    # One layer: a token's key and value depend on the token and its position only, so decoding
    # through the pruned, re-positioned cache equals a full pass over the kept tokens.
    rng = np.random.default_rng(10)
    config = {"n_heads": 4, "n_kv_heads": 2, "norm": "rms_norm", "activation": "swiglu",
              "position": "rope"}
    params, _ = ma.init_causal_lm(rng, 20, 1, 16, 4, 24, position="rope", norm="rms_norm",
                                  activation="swiglu", bias=False, tied=False, n_kv_heads=2)
    tokens = rng.integers(0, 20, size=(2, 12))
    _, cache = ma.causal_lm(params, tokens[:, :11], return_cache=True, **config)
    cache = streaming_cache(cache, n_sink=n_sink, window=4, rope_base=10000.0)
    assert cache[0]["k"].shape[-2] == n_sink + 4
    logits, _ = ma.causal_lm(params, tokens[:, 11:], cache=cache, **config)
    kept = np.concatenate([tokens[:, :n_sink], tokens[:, 7:]], axis=1)
    np.testing.assert_allclose(logits[:, -1], ma.causal_lm(params, kept, **config)[:, -1],
                               rtol=0, atol=1e-12)


def test_streaming_cache_leaves_a_short_cache_alone():
    cache = ({"k": np.ones((1, 2, 5, 4)), "v": np.ones((1, 2, 5, 4))},)
    assert streaming_cache(cache, n_sink=1, window=4)[0]["k"] is cache[0]["k"]
    with pytest.raises(ValueError, match="window must be an int >= 0"):
        streaming_cache(cache, n_sink=1, window=-1)


@pytest.mark.parametrize("window", [None, 4])
def test_self_attention_with_sinks_equals_gpt_oss_attention(window):
    # transformers' GptOssAttention (eager, float64): projections with biases, rotate-half RoPE,
    # GQA, a learned sink per head; cos and sin computed here in float64 at the default base.
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.GptOssConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                                       head_dim=8, attention_bias=True, sliding_window=window,
                                       attn_implementation="eager")
    torch.manual_seed(0)
    # one attention layer of GPT-OSS: the model file's class, at the version the lock holds
    module = undocumented("transformers.models.gpt_oss.modeling_gpt_oss",
                          "GptOssAttention")(config, 0).double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    rng = np.random.default_rng(11)
    x, length = rng.normal(size=(2, 7, 32)), 7
    positions = np.arange(length)
    angles = positions[:, None] * 10000.0 ** -(np.arange(0, 8, 2) / 8)  # [L, d/2]
    keep = _window_mask(length, window)
    with torch.no_grad():
        expected, _ = module(torch.from_numpy(x), (torch.from_numpy(np.cos(angles))[None],
                                                   torch.from_numpy(np.sin(angles))[None]),
                             torch.from_numpy(np.where(keep, 0.0, -np.inf))[None, None])
    params = {f"w_{p}": getattr(module, f"{p}_proj").weight.detach().numpy().T for p in "qkvo"}
    params.update({f"b_{p}": getattr(module, f"{p}_proj").bias.detach().numpy() for p in "qkvo"})
    params["sinks"] = module.sinks.detach().numpy()
    out, _ = ma.self_attention(params, x, ma.causal_mask(length, window=window), n_heads=4,
                               n_kv_heads=2, positions=positions)
    np.testing.assert_allclose(out, expected.numpy(), rtol=0, atol=1e-12)
