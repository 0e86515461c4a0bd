"""causal_lm and self_attention against a slow loop, one token, one head, one pair of features at
a time, written from the model cards' formulas (GPT-2, Llama, Gemma 2/3): every option at once
(embedding_scale, learned or rotary positions, per-layer windows and RoPE bases, GQA, a head
width other than D / H, QK-norm, query_pre_attn_scalar, both soft-caps, sandwich norms, GEGLU,
left padding), and the documented defaults (eps: each norm its own kind's, LayerNorm's 1e-5 and
RMSNorm's 1e-6, QK-norm's too; rope_base 10000, layer_norm, gelu_tanh, learned positions)
spelled out."""
import math

import numpy as np
import pytest

import minattn as ma

from .strategies import perturbed

V, D = 13, 8


def _gelu_tanh(z):
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))


def _norm(v, p, kind, eps):
    if kind == "rms_norm":
        return v / np.sqrt(np.mean(v ** 2) + eps) * p["gamma"]
    mu = np.mean(v)
    return (v - mu) / np.sqrt(np.mean((v - mu) ** 2) + eps) * p["gamma"] + p["beta"]


def _rope(vec, position, base):
    # rotate half: feature i pairs with i + d/2, angle position * base^(-2i/d)
    d, out = len(vec), vec.copy()
    for i in range(d // 2):
        angle = position * base ** (-2 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        out[i] = vec[i] * c - vec[i + d // 2] * s
        out[i + d // 2] = vec[i + d // 2] * c + vec[i] * s
    return out


def _linear(p, name, v):
    return v @ p[f"w_{name}"] + (p[f"b_{name}"] if f"b_{name}" in p else 0)


def _attention_loop(p, xs, visible, positions, *, n_heads, n_kv_heads, d_k, base, eps,
                    scalar=None, cap=None):
    """xs [L, D] of one sequence; visible(i, j): may query i see key j; positions [L] or None."""
    group = n_heads // n_kv_heads
    heads = np.zeros((len(xs), n_heads * d_k))
    for h in range(n_heads):
        g = h // group  # the kv head this query head shares
        q = [_linear(p, "q", x)[h * d_k:(h + 1) * d_k] for x in xs]
        k = [_linear(p, "k", x)[g * d_k:(g + 1) * d_k] for x in xs]
        v = [_linear(p, "v", x)[g * d_k:(g + 1) * d_k] for x in xs]
        if "q_norm" in p:
            q = [_norm(t, p["q_norm"], "rms_norm", eps) for t in q]
            k = [_norm(t, p["k_norm"], "rms_norm", eps) for t in k]
        if positions is not None:
            q = [_rope(t, m, base) for t, m in zip(q, positions)]
            k = [_rope(t, m, base) for t, m in zip(k, positions)]
        for i in range(len(xs)):
            keys = [j for j in range(len(xs)) if visible(i, j)]
            if not keys:
                continue
            s = np.array([q[i] @ k[j] for j in keys]) / math.sqrt(scalar or d_k)
            if cap is not None:
                s = cap * np.tanh(s / cap)
            w = np.exp(s - s.max())
            heads[i, h * d_k:(h + 1) * d_k] = sum(wj * v[j] for wj, j in zip(w / w.sum(), keys))
    return np.array([_linear(p, "o", row) for row in heads])


def _causal_lm_loop(params, tokens, mask, c):
    out = []
    for b, row in enumerate(tokens):
        real = mask[b] if mask is not None else np.ones(len(row), int)
        positions = np.where(real == 1, np.cumsum(real) - 1, 0)
        h = params["token_embedding"][row] * (c.get("embedding_scale") or 1.0)
        if c["position"] == "learned":
            h = h + params["position_embedding"][positions]
        for n, layer in enumerate(params["layers"]):
            window = c["window"][n] if isinstance(c.get("window"), list) else c.get("window")
            base = c["rope_base"][n] if isinstance(c.get("rope_base"), list) else c["rope_base"]
            visible = lambda i, j: (j <= i and real[j] == 1 and (window is None or i - j < window))
            eps = c["eps"] if c["eps"] is not None else NORM_EPS[c["norm"]]
            norm = lambda v, key: _norm(v, layer[key], c["norm"], eps)
            a = _attention_loop(layer["self_attention"], [norm(v, "self_attention_norm") for v in h],
                                visible, positions if c["position"] == "rope" else None,
                                n_heads=c["n_heads"], n_kv_heads=c.get("n_kv_heads") or c["n_heads"],
                                d_k=c.get("d_k") or D // c["n_heads"], base=base,
                                eps=c["eps"] if c["eps"] is not None else NORM_EPS["rms_norm"],
                                scalar=c.get("query_pre_attn_scalar"),
                                cap=c.get("attn_logit_softcapping"))
            if "post_self_attention_norm" in layer:
                a = np.array([norm(v, "post_self_attention_norm") for v in a])
            h = h + a
            f = []
            for v in h:
                ff, v = layer["feed_forward"], norm(v, "feed_forward_norm")
                if c["activation"] == "gelu_tanh":
                    y = _gelu_tanh(v @ ff["w_1"] + ff["b_1"]) @ ff["w_2"] + ff["b_2"]
                elif c["activation"] == "swiglu":
                    z = v @ ff["w_gate"]
                    y = (z / (1 + np.exp(-z)) * (v @ ff["w_up"])) @ ff["w_down"]
                else:  # geglu_tanh
                    y = (_gelu_tanh(v @ ff["w_gate"]) * (v @ ff["w_up"])) @ ff["w_down"]
                if "post_feed_forward_norm" in layer:
                    y = norm(y, "post_feed_forward_norm")
                f.append(y)
            h = h + np.array(f)
        eps = c["eps"] if c["eps"] is not None else NORM_EPS[c["norm"]]
        h = np.array([_norm(v, params["final_norm"], c["norm"], eps) for v in h])
        logits = h @ (params["lm_head"] if "lm_head" in params else params["token_embedding"].T)
        cap = c.get("final_logit_softcapping")
        out.append(logits if cap is None else cap * np.tanh(logits / cap))
    return np.array(out)


def _model(family):
    rng = np.random.default_rng(0)
    family = family.split("_")[0]
    if family == "gpt2":
        params, config = ma.init_causal_lm(rng, V, 2, D, 2, 12, n_positions=16)
    elif family == "llama":
        params, config = ma.init_causal_lm(rng, V, 2, D, 4, 12, position="rope", norm="rms_norm",
                                           activation="swiglu", bias=False, tied=False,
                                           n_kv_heads=2)
    else:  # Gemma 2/3: head width 6 != D / H, one kv head, QK-norm (Gemma 3), sandwich norms
        params, config = ma.init_causal_lm(rng, V, 2, D, 2, 12, position="rope",
                                           norm="rms_norm", activation="geglu_tanh", bias=False,
                                           n_kv_heads=1, d_k=6, qk_norm=True)
        for layer in params["layers"]:
            layer["post_self_attention_norm"] = {"gamma": np.ones(D)}
            layer["post_feed_forward_norm"] = {"gamma": np.ones(D)}
    params = perturbed(params, 1, scale=0.5)
    return params, config


FAMILIES = {
    "gpt2": {},
    "llama": dict(eps=1e-5, rope_base=500.0),  # eps: Llama 2's, not RMSNorm's default
    "gemma": dict(eps=1e-6, rope_base=[10.0, 10000.0], window=[2, None], embedding_scale=2.8,
                  query_pre_attn_scalar=3.0, attn_logit_softcapping=0.7,
                  final_logit_softcapping=1.5),
    "llama_capped": dict(eps=1e-6, attn_logit_softcapping=0.7),  # scores scaled by d_k^-1/2
    "llama_scalar": dict(eps=1e-6, query_pre_attn_scalar=3.0),  # no cap
}
DEFAULTS = dict(norm="layer_norm", activation="gelu_tanh", eps=None, position="learned",
                rope_base=10000.0)
NORM_EPS = {"layer_norm": 1e-5, "rms_norm": 1e-6}  # eps None: each kind of norm's own default


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("family", FAMILIES)
def test_causal_lm_equals_the_slow_loop(family, padded):
    params, config = _model(family)
    config = {k: v for k, v in config.items() if v is not None}
    options = FAMILIES[family]
    tokens = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])
    mask = np.array([[1] * 6, [0, 0, 1, 1, 1, 1]]) if padded else None
    got = ma.causal_lm(params, tokens, mask, **config, **options)
    expected = _causal_lm_loop(params, tokens, mask, {**DEFAULTS, **config, **options})
    real = np.ones((2, 6), bool) if mask is None else mask.astype(bool)
    np.testing.assert_allclose(got[real], expected[real], rtol=1e-9, atol=1e-12)
    # the options matter: the reference without them is far off
    if options:
        plain = _causal_lm_loop(params, tokens, mask, {**DEFAULTS, **config})
        assert not np.allclose(plain[real], expected[real], atol=1e-3)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_cached_steps_equal_the_slow_loop(family):
    params, config = _model(family)
    config = {k: v for k, v in config.items() if v is not None}
    options = FAMILIES[family]
    tokens = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])
    mask = np.array([[1] * 6, [0, 0, 1, 1, 1, 1]])
    first, cache = ma.causal_lm(params, tokens[:, :4], mask[:, :4], return_cache=True, **config,
                                **options)
    rest, _ = ma.causal_lm(params, tokens[:, 4:], mask, cache=cache, **config, **options)
    expected = _causal_lm_loop(params, tokens, mask, {**DEFAULTS, **config, **options})
    got = np.concatenate([first, rest], axis=1)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], expected[real], rtol=1e-9, atol=1e-12)


def test_a_gpt2_model_runs_with_every_default():
    # causal_lm's defaults are GPT-2's: layer_norm, gelu_tanh, eps 1e-5, learned positions.
    params, _ = _model("gpt2")
    tokens = np.array([[3, 1, 4, 1, 5]])
    np.testing.assert_allclose(ma.causal_lm(params, tokens, n_heads=2),
                               _causal_lm_loop(params, tokens, None, {**DEFAULTS, "n_heads": 2}),
                               rtol=1e-9, atol=1e-12)


def test_rope_base_defaults_to_10000_in_causal_lm():
    params, config = _model("llama")
    config = {k: v for k, v in config.items() if v is not None}
    tokens = np.array([[3, 1, 4, 1, 5, 9, 2, 6]])
    got = ma.causal_lm(params, tokens, **config)
    np.testing.assert_array_equal(got, ma.causal_lm(params, tokens, rope_base=10000.0, **config))
    np.testing.assert_allclose(got, _causal_lm_loop(params, tokens, None, {**DEFAULTS, **config}),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("qk_norm", [False, True])
def test_bare_self_attention_defaults_rope_base_10000_and_eps_1e_6(qk_norm):
    rng = np.random.default_rng(2)
    block = ma.init_decoder_block(rng, D, 4, 12, n_kv_heads=2, d_k=4, qk_norm=qk_norm)
    p = perturbed(block["self_attention"], 3)
    x = 0.01 * rng.normal(size=(2, 7, D))  # tiny: QK-norm's eps matters
    positions = np.arange(3, 10)
    out, _ = ma.self_attention(p, x, ma.causal_mask(7), n_heads=4, n_kv_heads=2, d_k=4,
                               positions=positions)
    for b in range(2):
        expected = _attention_loop(p, list(x[b]), lambda i, j: j <= i, positions, n_heads=4,
                                   n_kv_heads=2, d_k=4, base=10000.0, eps=1e-6)
        np.testing.assert_allclose(out[b], expected, rtol=1e-9, atol=1e-13)


def test_decoder_block_defaults_eps_to_each_norms_own_and_rope_base_10000():
    # a LayerNorm block with QK-norm: its LayerNorms take 1e-5, its QK-norm (an RMSNorm) 1e-6
    rng = np.random.default_rng(4)
    p = perturbed(ma.init_decoder_block(rng, D, 2, 12, qk_norm=True), 5)
    x = 0.01 * rng.normal(size=(1, 5, D))
    positions = np.arange(5)
    qk_norm_1e_6 = lambda *a, **k: ma.self_attention(*a, **{**k, "eps": 1e-6})  # noqa: E731
    spelled = dict(eps=1e-5, rope_base=10000.0, attention=qk_norm_1e_6)
    for norm_first in (False, True):
        got = ma.decoder_block(p, x, ma.causal_mask(5), n_heads=2, positions=positions,
                               norm_first=norm_first)
        np.testing.assert_array_equal(got, ma.decoder_block(
            p, x, ma.causal_mask(5), n_heads=2, positions=positions, norm_first=norm_first,
            **spelled))
        assert not np.allclose(got, ma.decoder_block(
            p, x, ma.causal_mask(5), n_heads=2, positions=positions, norm_first=norm_first,
            eps=1e-3, rope_base=100.0), atol=1e-9)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_decoder_final_norm_defaults_to_the_blocks_norm_with_its_eps(norm):
    # decoder(...) without eps: the blocks and the final norm use their kind's default (1e-5 for
    # LayerNorm, 1e-6 for RMSNorm); the final norm is the blocks' kind (layer_norm by default).
    rng = np.random.default_rng(6)
    params = perturbed(ma.init_decoder(rng, 2, D, 2, 12, final_norm=True, norm=norm), 7)
    x = 0.01 * rng.normal(size=(2, 4, D))  # tiny: eps matters
    config = {} if norm == "layer_norm" else {"norm": norm}
    got = ma.decoder(params, x, ma.causal_mask(4), n_heads=2, **config)
    h = ma.decoder({"layers": params["layers"]}, x, ma.causal_mask(4), n_heads=2,
                   eps=NORM_EPS[norm], **config)
    expected = np.array([[_norm(v, params["final_norm"], norm, NORM_EPS[norm]) for v in row]
                         for row in h])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_init_decoder_final_norm_is_the_identity_norm_of_the_blocks_kind(norm, dtype):
    params = ma.init_decoder(np.random.default_rng(0), 1, D, 2, 12, final_norm=True, norm=norm,
                             dtype=dtype)
    final = params["final_norm"]
    assert sorted(final) == (["beta", "gamma"] if norm == "layer_norm" else ["gamma"])
    np.testing.assert_array_equal(final["gamma"], np.ones(D))
    assert all(a.dtype == dtype for a in final.values())
    if "beta" in final:
        np.testing.assert_array_equal(final["beta"], np.zeros(D))
    assert "final_norm" not in ma.init_decoder(np.random.default_rng(0), 1, D, 2, 12)
    default = ma.init_decoder(np.random.default_rng(0), 1, D, 2, 12, final_norm=True)
    assert default["final_norm"]["gamma"].dtype == np.float64 and "beta" in default["final_norm"]


@pytest.mark.parametrize("batched", [False, True])
def test_the_gradient_reaches_a_cached_key_alone_as_finite_differences(batched):
    # Differentiating with respect to the cache only (x and params constant): the past keys are
    # traced, the new ones are not, and they still join along the key axis.
    from autograd import grad
    rng = np.random.default_rng(8)
    p = ma.init_multi_head_attention(rng, D, 2)
    lead = (2,) if batched else ()
    x = rng.normal(size=lead + (1, D))
    keys, values = rng.normal(size=lead + (2, 3, 4)), rng.normal(size=lead + (2, 3, 4))
    loss = lambda k: np.sum(ma.self_attention(p, x, n_heads=2,
                                              cache={"k": k, "v": values})[0] ** 2)
    g = grad(loss)(keys)
    step = np.zeros_like(keys)
    step[(0,) * keys.ndim] = 1e-6
    np.testing.assert_allclose(g[(0,) * keys.ndim],
                               (loss(keys + step) - loss(keys - step)) / 2e-6, rtol=1e-5)
    # and with x traced too, along the key axis of an unbatched 3-d cache
    both = grad(lambda k, x: np.sum(ma.self_attention(p, x, n_heads=2,
                                                      cache={"k": k, "v": values})[0] ** 2))
    np.testing.assert_allclose(both(keys, x), g, rtol=1e-12)
