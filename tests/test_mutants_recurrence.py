"""The recurrence's argument checks and edges that its mutants showed untested (tests/MUTANTS.md):
each refused call with its whole message, written from what the user passed; and the accepted
edges (an integer chunk size of NumPy's type, scale 0, masks of every documented form) against
references computed here (a slow loop, zeros, the same call with the padding cut out)."""
import numpy as np
import pytest

import minattn as ma
from minattn.gated_deltanet import causal_conv1d, gated_deltanet

from .strategies import tolerance

H_K, H_V, D_K, D_V, D, K = 2, 4, 3, 2, 6, 4
C = 2 * H_K * D_K + H_V * D_V  # 20 channels: q and k (2 heads of 3), v (4 heads of 2)


def _params(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"w_qkv": (D, C), "conv": (K, C), "w_z": (D, H_V * D_V), "w_b": (D, H_V),
              "w_a": (D, H_V), "dt_bias": (H_V,), "A_log": (H_V,), "gamma": (D_V,),
              "w_out": (H_V * D_V, D)}
    return {name: rng.normal(size=shape) for name, shape in shapes.items()}


P, X = _params(), np.ones((1, 3, D))
Q, KEYS, V, BETA = np.ones((2, 5, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 3)), np.ones((2, 5))
MASK = ("mask must be boolean [L, L_past + L] or [B, 1, L, L_past + L] (a causal LM's, True = "
        "may attend) with L = 3, got bool of shape ")


def _deltanet(*args, **kwargs):
    return gated_deltanet(*args, **{"n_key_heads": H_K, "n_value_heads": H_V, **kwargs})


BAD = [
    (lambda: ma.delta_rule(Q, KEYS, V, BETA, chunk_size=True), TypeError,
     "chunk_size must be None or a positive int, got True"),
    (lambda: ma.linear_attention(Q, KEYS, V, chunk_size=True), TypeError,
     "chunk_size must be None or a positive int, got True"),
    (lambda: ma.delta_rule(Q, KEYS, V, BETA, initial_state=np.zeros(3)), ValueError,
     "initial_state of shape (3,) does not broadcast to the state's shape (..., d_k, d_v) = "
     "(2, 4, 3)"),
    (lambda: ma.l2_normalize(np.ones((2, 3)), eps=-1.0), ValueError,
     "eps must be a non-negative, finite float, got -1.0"),
    (lambda: ma.delta_rule(Q, KEYS, V, BETA, initial_state=np.zeros((2, 4, 3), int)), TypeError,
     "initial_state must be a floating-point array, got dtype int64 (convert it with "
     "initial_state.astype(np.float32) or np.float64)"),
    (lambda: ma.l2_normalize(np.ones((2, 3), int)), TypeError,
     "x must be a floating-point array, got dtype int64 (convert it with x.astype(np.float32) "
     "or np.float64)"),
    (lambda: _deltanet(P, np.ones((1, 3, D), int)), TypeError,
     "x must be a floating-point array, got dtype int64 (convert it with x.astype(np.float32) "
     "or np.float64)"),
    (lambda: causal_conv1d(np.ones((4, 5)), np.ones((3, 5)), np.ones((2, 5), int)), TypeError,
     "state must be a floating-point array, got dtype int64 (convert it with "
     "state.astype(np.float32) or np.float64)"),
    (lambda: _deltanet(P, X, "causal"), TypeError, "mask must be an array, got str"),
    (lambda: _deltanet({k: v for k, v in P.items() if k != "gamma"}, X), ValueError,
     "params is missing key 'gamma' (expected keys: 'gamma', 'w_qkv', 'conv')"),
    (lambda: _deltanet([1], X), TypeError, "params must be a dict of arrays, got list"),
    (lambda: _deltanet({**P, "gamma": np.ones((2, 2))}, X), ValueError,
     "params['gamma'] has shape (2, 2), expected (d_v,)"),
    (lambda: _deltanet({**P, "conv": np.ones(20)}, X), ValueError,
     "params['conv'] has shape (20,), expected (K, C)"),
    (lambda: _deltanet({**P, "w_qkv": np.ones((5, 20))}, X), ValueError,
     "params['w_qkv'] has shape (5, 20), expected (6, C)"),
    (lambda: _deltanet({**P, "conv": np.ones((4, 19))}, X), ValueError,
     "params['conv'] has shape (4, 19), expected (K, 20)"),
    (lambda: _deltanet({**P, "w_z": np.ones((6, 7))}, X), ValueError,
     "params['w_z'] has shape (6, 7), expected (6, 8)"),
    (lambda: causal_conv1d(np.ones((4, 5)), np.ones((0, 5))), ValueError,
     "weight has shape (0, 5): the kernel needs K >= 1 taps"),
    (lambda: causal_conv1d(np.ones(5), np.ones((3, 5))), ValueError,
     "x must have shape (..., L, C), got shape (5,)"),
    (lambda: _deltanet(P, X, np.ones(3, bool)), ValueError, MASK + "(3,)"),
    (lambda: _deltanet(P, X, np.ones((2, 3), bool)), ValueError, MASK + "(2, 3)"),
    (lambda: _deltanet(P, X, np.ones((3, 2), bool)), ValueError, MASK + "(3, 2)"),
    (lambda: _deltanet(P, X, np.ones((1, 1, 1, 3, 3), bool)), ValueError,
     MASK + "(1, 1, 1, 3, 3)"),
    (lambda: _deltanet(P, X, cache=[1]), ValueError,
     "cache must be None, {} (a new sequence) or the {'conv', 'state'} a previous call "
     "returned, got list"),
    (lambda: _deltanet(P, X, cache={"conv": np.ones((1, 2, C)), "state": np.ones((1, 4, 3, 2))}),
     ValueError, "cache['conv'] has shape (1, 2, 20), expected (1, 3, 20)"),
    (lambda: _deltanet(P, X, n_key_heads=0), ValueError, "n_key_heads must be a positive int, got 0"),
    (lambda: _deltanet(P, X, n_value_heads=0), ValueError,
     "n_value_heads must be a positive int, got 0"),
    (lambda: _deltanet(P, X, eps=-1.0), ValueError,
     "eps must be a non-negative, finite float, got -1.0"),
    (lambda: _deltanet(P, X, chunk_size=0), ValueError,
     "chunk_size must be None or a positive int, got 0"),
    (lambda: _deltanet(P, np.ones(D)), ValueError,
     "x must have shape (..., L, d_model), got shape (6,)"),
    (lambda: _deltanet({**P, "w_qkv": np.ones((D, H_V * D_V)), "conv": np.ones((K, H_V * D_V))},
                       X), ValueError,
     "params['w_qkv'] has 8 columns, not 2 n_key_heads d_k + n_value_heads d_v with "
     "n_key_heads=2, n_value_heads=4, d_v=2 (params['gamma']) and an integer d_k >= 1"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_a_bad_call_raises_this_whole_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_linear_attention_of_an_empty_sequence_is_empty(chunk_size):
    q, k, v = np.ones((2, 0, 4)), np.ones((2, 0, 4)), np.ones((2, 0, 3))
    out = ma.linear_attention(q, k, v, chunk_size=chunk_size)
    assert out.shape == (2, 0, 3) and out.dtype == np.float64


def _gated_rms_norm_formula(x, gamma, gate, eps):
    # rms_norm(x) · gamma · silu(gate), float64, written out
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma * gate / (
        1 + np.exp(-gate))


@pytest.mark.parametrize("eps", [None, 0.5])
def test_gated_rms_norm_equals_its_formula_and_its_default_eps_is_1e_6(eps):
    from minattn.gated_deltanet import gated_rms_norm

    rng = np.random.default_rng(0)
    x = 1e-3 * rng.normal(size=(3, 5))  # small: the mean square is near eps, so eps shows
    gamma, gate = rng.normal(size=5), rng.normal(size=(3, 5))
    got = gated_rms_norm(x, gamma, gate) if eps is None else gated_rms_norm(x, gamma, gate, eps)
    want = _gated_rms_norm_formula(x, gamma, gate, 1e-6 if eps is None else eps)
    np.testing.assert_allclose(got, want, **tolerance(np.float64))


def test_gated_deltanets_defaults_are_eps_1e_6_and_chunks_of_64():
    # Qwen3-Next's rms_norm_eps and its chunk size (transformers' torch_chunk_gated_delta_rule):
    # the defaults give bit for bit what passing them gives, over more than one chunk
    x = 1e-2 * np.random.default_rng(1).normal(size=(1, 70, D))
    got, _ = _deltanet(P, x)
    want, _ = _deltanet(P, x, eps=1e-6, chunk_size=64)
    np.testing.assert_array_equal(got, want)


def test_a_bad_chunk_size_is_refused_before_anything_is_computed(monkeypatch):
    import minattn.gated_deltanet as module

    calls = []
    monkeypatch.setattr(module, "delta_rule", lambda *a, **k: calls.append(1))
    with pytest.raises(ValueError, match="chunk_size must be None or a positive int, got 0"):
        _deltanet(P, X, chunk_size=0)
    assert calls == []


@pytest.mark.parametrize("given", [{}, {"chunk_size": 5, "eps": 0.5}, {"chunk_size": None}])
def test_gated_deltanet_passes_its_chunk_size_and_eps_on(monkeypatch, given):
    import minattn.gated_deltanet as module

    seen = {}
    delta_rule, gated_rms_norm = module.delta_rule, module.gated_rms_norm

    def spy_delta_rule(*args, **kwargs):
        seen["chunk_size"] = kwargs.get("chunk_size", "not given")
        return delta_rule(*args, **kwargs)

    def spy_norm(x, gamma, gate, eps=1e-6):
        seen["eps"] = eps
        return gated_rms_norm(x, gamma, gate, eps)

    monkeypatch.setattr(module, "delta_rule", spy_delta_rule)
    monkeypatch.setattr(module, "gated_rms_norm", spy_norm)
    _deltanet(P, X, **given)
    assert seen == {"chunk_size": given.get("chunk_size", 64), "eps": given.get("eps", 1e-6)}


# ---- gated_attention: defaults, n_kv_heads omitted, arguments checked before computing ----

def _gated_params(h_kv=1, seed=0):
    rng = np.random.default_rng(seed)
    d, h, d_k = 8, 2, 4
    return {"w_q": rng.normal(size=(d, h * d_k)), "w_k": rng.normal(size=(d, h_kv * d_k)),
            "w_v": rng.normal(size=(d, h_kv * d_k)), "w_o": rng.normal(size=(h * d_k, d)),
            "w_gate": rng.normal(size=(d, h * d_k)), "q_norm": {"gamma": rng.normal(size=d_k)},
            "k_norm": {"gamma": rng.normal(size=d_k)}}


def test_gated_attentions_defaults_are_rope_base_10000_and_eps_1e_6():
    from minattn.gated_attention import gated_attention

    x = 1e-2 * np.random.default_rng(1).normal(size=(1, 5, 8))
    positions = np.arange(5)
    got, _ = gated_attention(_gated_params(), x, n_heads=2, n_kv_heads=1, positions=positions)
    want, _ = gated_attention(_gated_params(), x, n_heads=2, n_kv_heads=1, positions=positions,
                              rope_base=10000.0, eps=1e-6)
    np.testing.assert_array_equal(got, want)


def test_gated_attention_without_n_kv_heads_has_one_kv_head_per_head():
    from minattn.gated_attention import gated_attention

    x = np.random.default_rng(2).normal(size=(1, 5, 8))
    got, cache = gated_attention(_gated_params(h_kv=2), x, n_heads=2)
    want, _ = gated_attention(_gated_params(h_kv=2), x, n_heads=2, n_kv_heads=2)
    np.testing.assert_array_equal(got, want)
    assert cache["k"].shape == (1, 2, 5, 4)


@pytest.mark.parametrize("bad, error, message", [
    ({"d_k": 3}, ValueError, "params['w_q'] has shape (8, 8), expected (8, 6)"),
    ({"rope_scaling": {"rope_type": "bogus"}}, ValueError,
     "rope_scaling must be None or a dict with 'rope_type' one of 'linear', 'dynamic', 'yarn', "
     "'llama3', 'longrope', got 'bogus'"),
    ({"partial_rotary_factor": 1.5}, ValueError,
     "partial_rotary_factor must be in (0, 1] and rotate an even number >= 2 of the 4 features "
     "of a head, got partial_rotary_factor=1.5: int(4 * 1.5) = 6"),
])
def test_gated_attention_refuses_its_arguments_before_computing(monkeypatch, bad, error, message):
    import minattn.gated_attention as module

    calls = []
    monkeypatch.setattr(module, "_project", lambda *a: calls.append(1))
    with pytest.raises(error) as info:
        module.gated_attention(_gated_params(), np.ones((1, 3, 8)), n_heads=2, n_kv_heads=1,
                               positions=np.arange(3), **bad)
    assert str(info.value) == message and calls == []


def test_causal_conv1d_names_an_integer_x_and_keeps_xs_dtype():
    with pytest.raises(TypeError) as info:
        causal_conv1d(np.ones((4, 5), int), np.ones((3, 5)))
    assert str(info.value) == ("x must be a floating-point array, got dtype int64 (convert it "
                               "with x.astype(np.float32) or np.float64)")
    rng = np.random.default_rng(3)
    x, weight = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(3, 5))  # float64
    out, state = causal_conv1d(x, weight)
    assert out.dtype == np.float32 and state.dtype == np.float32
    want = sum(np.concatenate([np.zeros((2, 5)), x])[j:j + 4] * weight[j] for j in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_causal_conv1d_of_one_tap_and_a_state_in_another_dtype():
    rng = np.random.default_rng(4)
    x, weight = rng.normal(size=(2, 4, 5)), rng.normal(size=(1, 5))
    out, state = causal_conv1d(x, weight)  # K = 1: out_t = weight[0] x_t, no past inputs kept
    np.testing.assert_allclose(out, x * weight[0], **tolerance(np.float64))
    assert state.shape == (2, 0, 5)
    x32 = x.astype(np.float32)
    out, state = causal_conv1d(x32, rng.normal(size=(3, 5)).astype(np.float32),
                               rng.normal(size=(2, 2, 5)))  # a float64 state: taken in float32
    assert out.dtype == np.float32 and state.dtype == np.float32


def test_a_model_width_of_one_and_no_mask_means_every_token_is_real():
    rng = np.random.default_rng(5)
    c = 2 * 1 * 2 + 2 * 3  # one key head of 2, two value heads of 3
    params = {"w_qkv": rng.normal(size=(1, c)), "conv": rng.normal(size=(2, c)),
              "w_z": rng.normal(size=(1, 6)), "w_b": rng.normal(size=(1, 2)),
              "w_a": rng.normal(size=(1, 2)), "dt_bias": rng.normal(size=2),
              "A_log": rng.normal(size=2), "gamma": rng.normal(size=3),
              "w_out": rng.normal(size=(6, 1))}
    x = rng.normal(size=(1, 4, 1))  # d_model = 1
    got, _ = gated_deltanet(params, x, n_key_heads=1, n_value_heads=2)
    want, _ = gated_deltanet(params, x, np.tril(np.ones((4, 4), bool)), n_key_heads=1,
                             n_value_heads=2)
    assert got.shape == (1, 4, 1)
    np.testing.assert_array_equal(got, want)


def test_gated_deltanet_of_one_sequence_of_key_width_one_in_float32():
    rng = np.random.default_rng(6)
    got, cache = _deltanet(P, X[0])  # x [L, D]: no batch axis
    want, want_cache = _deltanet(P, X)
    np.testing.assert_array_equal(got, want[0])
    np.testing.assert_array_equal(cache["state"], want_cache["state"][0])
    narrow = {**P, "w_qkv": rng.normal(size=(D, 12)), "conv": rng.normal(size=(K, 12))}  # d_k = 1
    out, cache = _deltanet(narrow, X)
    assert out.shape == (1, 3, D) and cache["state"].shape == (1, H_V, 1, D_V)
    out32, cache32 = _deltanet(P, X.astype(np.float32))  # float64 params, taken in float32
    assert out32.dtype == np.float32 and cache32["state"].dtype == np.float32
    np.testing.assert_allclose(out32, want, rtol=1e-4, atol=1e-5)


def test_a_float64_cache_continues_a_float32_sequence_in_float32():
    _, cache = _deltanet(P, X)  # float64 cache {"conv", "state"}
    x32 = X.astype(np.float32)
    out, new = _deltanet(P, x32, cache=cache)
    assert out.dtype == np.float32
    assert new["conv"].dtype == np.float32 and new["state"].dtype == np.float32
    want, want_cache = _deltanet(P, X, cache=cache)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new["state"], want_cache["state"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bad, params, message", [
    ({"query_pre_attn_scalar": 2.0}, {},
     "gated_attention does not support query_pre_attn_scalar (got query_pre_attn_scalar=2.0)"),
    ({"eps": -1.0}, {}, "eps must be a non-negative, finite float, got -1.0"),
    ({}, {"w_gate": np.ones((8, 7))}, "params['w_gate'] has shape (8, 7), expected (8, 8)"),
])
def test_gated_attention_refuses_in_full(bad, params, message):
    from minattn.gated_attention import gated_attention

    with pytest.raises(ValueError) as info:
        gated_attention({**_gated_params(), **params}, np.ones((1, 3, 8)), n_heads=2,
                        n_kv_heads=1, **bad)
    assert str(info.value) == message


def test_gated_attention_takes_eps_zero_and_keeps_float32():
    from minattn.gated_attention import gated_attention

    x = np.random.default_rng(3).normal(size=(1, 3, 8))
    out, _ = gated_attention(_gated_params(), x, n_heads=2, n_kv_heads=1, eps=0.0)
    assert np.isfinite(out).all()
    out32, cache = gated_attention(_gated_params(), x.astype(np.float32), n_heads=2,
                                   n_kv_heads=1)  # float64 params, w_gate included
    assert out32.dtype == np.float32 and cache["k"].dtype == np.float32
    want, _ = gated_attention(_gated_params(), x, n_heads=2, n_kv_heads=1)
    np.testing.assert_allclose(out32, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_a_float64_decay_and_state_are_taken_in_the_inputs_float32(chunk_size):
    rng = np.random.default_rng(7)
    q, k = (ma.l2_normalize(rng.normal(size=(2, 5, 4))) for _ in range(2))
    v, beta = rng.normal(size=(2, 5, 3)), rng.uniform(0.1, 1.0, size=(2, 5))
    g, s0 = -rng.uniform(0.0, 1.0, size=(2, 5)), rng.normal(size=(2, 4, 3))  # float64
    f32 = [a.astype(np.float32) for a in (q, k, v, beta)]
    out, state = ma.delta_rule(*f32, g, initial_state=s0, chunk_size=chunk_size,
                               return_state=True)
    assert out.dtype == np.float32 and state.dtype == np.float32
    want, want_state = ma.delta_rule(q, k, v, beta, g, initial_state=s0, chunk_size=chunk_size,
                                     return_state=True)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


def test_l2_normalize_of_one_vector():
    x = np.array([3.0, 4.0])
    np.testing.assert_allclose(ma.l2_normalize(x, eps=0.0), [0.6, 0.8], rtol=1e-15)
    np.testing.assert_allclose(ma.l2_normalize(x), x / np.sqrt(25.0 + 1e-6), rtol=1e-15)
