"""What the mutation run of the functions changed since their module's last run showed untested
(tests/MUTANTS.md, "2026-11-27 night (b)"). Each test names the module it is for; references
are formulas or loops written here, or the refusal's documented wording (the argument named as
the caller wrote it)."""
import numpy as np
import pytest

import minattn as ma

D, H, L = 8, 2, 5


@pytest.fixture
def sinks_params():
    rng = np.random.default_rng(0)
    params = dict(ma.init_multi_head_attention(rng, D, H))
    return {**params, "sinks": np.array([0.5, -1.0])}, rng.standard_normal((1, L, D))


# sinks.py: _split_sinks, the check self_attention and multi_head_attention run with params["sinks"]

@pytest.mark.parametrize("n_heads, error", [(0, ValueError), (2.0, TypeError)])
def test_attention_with_sinks_refuses_a_bad_n_heads_by_its_name(sinks_params, n_heads, error):
    params, x = sinks_params
    with pytest.raises(error, match=rf"^n_heads must be a positive int, got {n_heads!r}$"):
        ma.self_attention(params, x, n_heads=n_heads)
    with pytest.raises(error, match=rf"^n_heads must be a positive int, got {n_heads!r}$"):
        ma.multi_head_attention(params, x, x, x, n_heads=n_heads)


def test_attention_with_sinks_names_the_input_as_the_caller_calls_it(sinks_params):
    # The refusal of an integer input names the argument: self_attention's x, and
    # multi_head_attention's query (as it does without sinks).
    params, x = sinks_params
    integers = np.ones((1, L, D), dtype=np.int64)
    with pytest.raises(TypeError, match=r"^x must be a floating-point array, got dtype int64"):
        ma.self_attention(params, integers, n_heads=H)
    for p in (params, {k: v for k, v in params.items() if k != "sinks"}):
        with pytest.raises(TypeError,
                           match=r"^query must be a floating-point array, got dtype int64"):
            ma.multi_head_attention(p, integers, x, x, n_heads=H)


# gated_attention.py: a bad rope_base refused by gated_attention's own check, before any product

def _gated_params():
    rng = np.random.default_rng(0)
    d, h, d_k = 8, 2, 4
    return {"w_q": rng.normal(size=(d, h * d_k)), "w_k": rng.normal(size=(d, d_k)),
            "w_v": rng.normal(size=(d, d_k)), "w_o": rng.normal(size=(h * d_k, d)),
            "w_gate": rng.normal(size=(d, h * d_k)), "q_norm": {"gamma": rng.normal(size=d_k)},
            "k_norm": {"gamma": rng.normal(size=d_k)}}


@pytest.mark.parametrize("rope_base, error, message", [
    (-1.0, ValueError, "rope_base must be a positive float, got -1.0"),
    ("x", TypeError, "rope_base must be a positive float, got 'x' (str)"),
])
def test_gated_attention_refuses_a_bad_rope_base_before_computing(monkeypatch, rope_base, error,
                                                                   message):
    import minattn.gated_attention as module

    calls = []
    monkeypatch.setattr(module, "_project", lambda *a: calls.append(1))
    with pytest.raises(error) as info:
        module.gated_attention(_gated_params(), np.ones((1, 3, 8)), n_heads=2, n_kv_heads=1,
                               positions=np.arange(3), rope_base=rope_base)
    assert str(info.value) == message and calls == []


def _gated_attention_loop(p, x, n_heads, n_kv_heads, d_k, positions, base, eps, factor):
    # Qwen3-Next's gated attention written out head by head, in float64: QK-norm (RMSNorm over
    # each head's features, eps inside the root), RoPE on (x[i], x[i + d/2]) at positions /
    # factor (linear scaling), softmax(q kᵀ / sqrt(d_k)) v with no mask, each head's output
    # times sigmoid(x w_gate), the heads side by side, then w_o.
    def rms(a, gamma):
        return a / np.sqrt(np.mean(a * a) + eps) * gamma

    def rope(a, position):
        half = d_k // 2
        angle = position / factor * base ** (-2.0 * np.arange(half) / d_k)
        a1, a2 = a[:half], a[half:]
        return np.concatenate([a1 * np.cos(angle) - a2 * np.sin(angle),
                               a2 * np.cos(angle) + a1 * np.sin(angle)])

    out = np.zeros_like(x)
    for b in range(x.shape[0]):
        heads = []
        for h in range(n_heads):
            g = h // (n_heads // n_kv_heads)
            cols, kv_cols = slice(h * d_k, (h + 1) * d_k), slice(g * d_k, (g + 1) * d_k)
            q = [rope(rms(t @ p["w_q"][:, cols], p["q_norm"]["gamma"]), i)
                 for i, t in zip(positions, x[b])]
            k = [rope(rms(t @ p["w_k"][:, kv_cols], p["k_norm"]["gamma"]), i)
                 for i, t in zip(positions, x[b])]
            v = [t @ p["w_v"][:, kv_cols] for t in x[b]]
            rows = []
            for i, t in enumerate(x[b]):
                s = np.array([q[i] @ k[j] for j in range(len(k))]) / np.sqrt(d_k)
                w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                gate = 1 / (1 + np.exp(-(t @ p["w_gate"][:, cols])))
                rows.append(sum(w[j] * v[j] for j in range(len(v))) * gate)
            heads.append(np.array(rows))
        out[b] = np.concatenate(heads, axis=-1) @ p["w_o"]
    return out


def test_gated_attention_passes_its_head_width_schedule_and_eps_on():
    # A head width d_k = 2 that is not d_model / n_heads = 4, a linear RoPE schedule and an eps
    # far from the default: each reaches self-attention.
    from minattn.gated_attention import gated_attention

    rng = np.random.default_rng(1)
    d, h, h_kv, d_k, length = 8, 2, 1, 2, 5
    p = {"w_q": rng.normal(size=(d, h * d_k)), "w_k": rng.normal(size=(d, h_kv * d_k)),
         "w_v": rng.normal(size=(d, h_kv * d_k)), "w_o": rng.normal(size=(h * d_k, d)),
         "w_gate": rng.normal(size=(d, h * d_k)), "q_norm": {"gamma": rng.normal(size=d_k)},
         "k_norm": {"gamma": rng.normal(size=d_k)}}
    x = rng.normal(size=(2, length, d))
    positions = np.arange(length) + 3
    out, _ = gated_attention(p, x, n_heads=h, n_kv_heads=h_kv, d_k=d_k, positions=positions,
                             rope_base=50.0, rope_scaling={"rope_type": "linear",
                                                          "factor": 4.0}, eps=0.3)
    want = _gated_attention_loop(p, x, h, h_kv, d_k, positions, 50.0, 0.3, 4.0)
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)


# softcap.py: capped_attention's default scale, d^-1/2 of the head width (not of L_q)

def test_capped_attentions_default_scale_is_one_over_the_root_of_the_head_width():
    from minattn.softcap import capped_attention

    rng = np.random.default_rng(2)
    q = rng.normal(size=(1, 4, 3, 5))  # [B, H, L_q, d]: L_q = 3 is not d = 5
    k, v = rng.normal(size=(2, 1, 2, 6, 5))  # [B, H_kv, L_k, d], H_kv = 2
    out, weights = capped_attention(q, k, v, cap=2.0)
    for h in range(4):
        s = 2.0 * np.tanh(q[0, h] @ k[0, h // 2].T / np.sqrt(5) / 2.0)
        w = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)
        np.testing.assert_allclose(weights[0, h], w, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(out[0, h], w @ v[0, h // 2], rtol=1e-12, atol=1e-14)


# rope_scaling.py: longrope's length of an empty sequence (no position: nothing to rotate)

def test_longrope_rotates_an_empty_sequence_to_an_empty_one():
    scaling = {"rope_type": "longrope", "factor": 6.0, "original_max_position_embeddings": 5,
               "short_factor": [1.25, 2.5], "long_factor": [3.5, 4.75]}
    for x in (np.ones((2, 0, 4)), np.ones((0, 4), np.float32)):
        out = ma.apply_rope(x, np.arange(0), base=123.0, scaling=scaling)
        assert out.shape == x.shape and out.dtype == x.dtype


def test_longrope_of_an_original_context_of_one():
    # N = 1: every sequence of 3 is longer, so each pair's frequency is divided by its long
    # factor; at factor 1 the attention factor is 1. At factor > 1 its default,
    # sqrt(1 + ln(factor) / ln(1)), is undefined: refused by name, not a ZeroDivisionError;
    x = np.random.default_rng(3).normal(size=(3, 4))
    scaling = {"rope_type": "longrope", "factor": 1.0, "original_max_position_embeddings": 1,
               "short_factor": [1.5, 2.5], "long_factor": [3.25, 5.5]}
    out = ma.apply_rope(x, np.arange(3), base=77.0, scaling=scaling)
    angles = np.arange(3)[:, None] * 77.0 ** (-np.arange(2) / 2) / np.array([3.25, 5.5])
    want = np.concatenate([x[:, :2] * np.cos(angles) - x[:, 2:] * np.sin(angles),
                           x[:, 2:] * np.cos(angles) + x[:, :2] * np.sin(angles)], axis=-1)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)
    # the same for any N <= 1 (ln(N) < 0: sqrt of a negative at N = 0.5, factor 4; a factor
    # below 1 at N = 0.9, factor 1.01)
    for n, factor in ((1, 2.0), (0.5, 4.0), (0.9, 1.01)):
        with pytest.raises(ValueError, match=r"^longrope's default attention_factor, sqrt\(1 \+ "
                                             r"ln\(factor\) / ln\(N\)\), needs "
                                             r"original_max_position_embeddings N > 1, got "
                                             rf"N={n} \(factor={factor}\)"):
            ma.apply_rope(x, np.arange(3), scaling={
                **scaling, "factor": factor, "original_max_position_embeddings": n})
    out = ma.apply_rope(x, np.arange(3), base=77.0,
                        scaling={**scaling, "factor": 2.0, "attention_factor": 1.0})
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


# rope.py: apply_partial_rope's own refusals, read in full

def test_apply_partial_rope_refuses_an_integer_or_one_dimensional_x_by_name():
    from minattn.rope import apply_partial_rope

    with pytest.raises(TypeError) as info:
        apply_partial_rope(np.ones((3, 4), int), np.arange(3), 0.5)
    assert str(info.value) == ("x must be a floating-point array, got dtype int64 (convert it "
                               "with x.astype(np.float32) or np.float64)")
    with pytest.raises(ValueError) as info:
        apply_partial_rope(np.ones(4), np.arange(1), 0.5)
    assert str(info.value) == "x must have shape (..., L, d), got shape (4,)"


# transformer_decoder.py: init_* in the dtype asked, attention's weights too

def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in _leaves(value)]
    return [tree]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_init_decoder_block_and_causal_lm_make_every_weight_in_the_dtype_asked(dtype):
    rng = np.random.default_rng(4)
    for params in (ma.init_decoder_block(rng, 8, 2, 16, dtype=dtype),
                   ma.init_decoder_block(rng, 8, 2, 16, qk_norm=True, dtype=dtype),
                   ma.init_causal_lm(rng, 11, 2, 8, 2, 16, dtype=dtype)[0]):
        arrays = [leaf for leaf in _leaves(params) if hasattr(leaf, "dtype")]
        assert len(arrays) > 8 and {a.dtype for a in arrays} == {np.dtype(dtype)}


def test_init_decoder_block_of_a_head_width_apart_from_d_model_keeps_its_zero_biases():
    # d_k = 3 with d_model = 8, n_heads = 2: U(+-1/sqrt(d_in)) weights and, with bias, zeros
    rng = np.random.default_rng(5)
    p = ma.init_decoder_block(rng, 8, 2, 16, d_k=3, n_kv_heads=1, bias=True)["self_attention"]
    widths = {"q": 6, "k": 3, "v": 3, "o": 8}
    assert sorted(p) == sorted([f"w_{n}" for n in widths] + [f"b_{n}" for n in widths])
    for name, width in widths.items():
        np.testing.assert_array_equal(p[f"b_{name}"], np.zeros(width))
        d_in = p[f"w_{name}"].shape[0]
        assert p[f"w_{name}"].shape[1] == width
        assert 0 < np.abs(p[f"w_{name}"]).max() <= 1 / np.sqrt(d_in)


@pytest.mark.parametrize("bias", [True, False])
def test_init_decoder_blocks_cross_attention_has_biases_as_asked(bias):
    rng = np.random.default_rng(6)
    block = ma.init_decoder_block(rng, 8, 2, 16, cross_attention=True, bias=bias)
    for name in ("self_attention", "cross_attention"):
        biases = sorted(key for key in block[name] if key.startswith("b_"))
        assert biases == (["b_k", "b_o", "b_q", "b_v"] if bias else [])


def test_apply_rope_takes_x_and_positions_as_nested_lists():
    # Lists go through the full checks (the fast path is for two arrays): the same rotation
    # as the formula's on the arrays.
    x = np.random.default_rng(7).normal(size=(3, 4))
    out = ma.apply_rope(x.tolist(), [0, 1, 2], base=31.0)
    angles = np.arange(3)[:, None] * 31.0 ** (-np.arange(2) / 2)
    want = np.concatenate([x[:, :2] * np.cos(angles) - x[:, 2:] * np.sin(angles),
                           x[:, 2:] * np.cos(angles) + x[:, :2] * np.sin(angles)], axis=-1)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)


def test_apply_rope_refuses_positions_as_long_as_the_batch_not_the_sequence():
    # x [B = 2, L = 3, d]: positions [2] broadcast to x's batch axis, not to its (..., L)
    with pytest.raises(ValueError) as info:
        ma.apply_rope(np.ones((2, 3, 4)), np.arange(2))
    assert str(info.value) == "positions of shape (2,) must broadcast to x's (..., L) = (2, 3)"
