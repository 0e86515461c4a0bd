"""Issue #24's second class, swept: an auxiliary floating argument in another dtype than the inputs.

The rule (minattn/engine/checks.py, in_dtype): every auxiliary floating argument, the params'
weights and biases, attention sinks, gamma and beta, a KV cache, a 0-d scale or eps, Gemma's
scalars, is taken in the inputs' dtype, as the additive mask is (test_edge_classes.py). So
float32 inputs give float32 results whatever the params' dtype (NumPy alone would promote to
float64), and float16 inputs give float16 results computed in float32. Each case checks that the
call with the auxiliary argument in another dtype is identical, values and dtype, to the call
with it cast to the inputs' dtype first.

The first test checks that the catalogue names every such argument of every public function.
"""
import inspect

import numpy as np
import pytest

import minattn as ma

PUBLIC = {name: getattr(ma, name) for name in ma.__all__}
AUXILIARY_NAMES = {"params", "scale", "eps", "sinks", "gamma", "beta", "base", "rope_base", "cache",
                   "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
                   "embedding_scale"}


def _cast(tree, dtype):
    if isinstance(tree, dict):
        return {key: _cast(value, dtype) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_cast(value, dtype) for value in tree]
    if getattr(tree, "dtype", np.dtype(int)).kind == "f":
        return tree.astype(dtype)
    return tree


rng = np.random.default_rng(0)
X = rng.normal(size=(2, 3, 4))
TOKENS = np.array([[1, 2, 3], [4, 5, 6]])
MHA = {**ma.init_multi_head_attention(np.random.default_rng(1), 4, 2), "sinks": rng.normal(size=2)}
FF = ma.init_feed_forward(np.random.default_rng(2), 4, 8)
GATED = ma.init_gated_feed_forward(np.random.default_rng(3), 4, 8)
BLOCK = ma.init_encoder_block(np.random.default_rng(4), 4, 2, 8)
ENC = ma.init_encoder(np.random.default_rng(5), 2, 4, 2, 8, final_norm=True)
DEC = ma.init_decoder_block(np.random.default_rng(6), 4, 2, 8, cross_attention=True, qk_norm=True)
DEC["self_attention"]["sinks"] = rng.normal(size=2)
DECODER = ma.init_decoder(np.random.default_rng(7), 2, 4, 2, 8, norm="rms_norm",
                          activation="swiglu", final_norm=True)
GPT, GPT_CONFIG = ma.init_causal_lm(np.random.default_rng(8), 7, 1, 4, 2, 8, tied=False)
LLAMA, LLAMA_CONFIG = ma.init_causal_lm(np.random.default_rng(9), 7, 1, 4, 2, 8, position="rope",
                                        norm="rms_norm", activation="swiglu", bias=False)
SCALAR = np.array(0.7)
# A KV cache of 2 past positions for DEC's self-attention, and one per layer for DECODER, LLAMA
CACHE = {"k": rng.normal(size=(2, 2, 2, 2)), "v": rng.normal(size=(2, 2, 2, 2))}
CAUSAL = ma.causal_mask(3, 5, align="bottom_right")  # a 0-d float64 array: a scale, eps, base or Gemma scalar


def _model(params, dt, aux_keys, aux):
    # the params in dt, but for the auxiliary keys, given (in their own dtype) by the test
    return {**_cast(params, dt), **aux} if aux_keys else _cast(params, dt)


def x_(dt):
    return X.astype(dt)


# (function, argument) -> (the auxiliary value in float64, f(input dtype, auxiliary value))
CASES = {
    ("scaled_dot_product_attention", "scale"): (SCALAR, lambda dt, a: (
        ma.scaled_dot_product_attention(x_(dt), x_(dt), x_(dt), scale=a))),
    ("scaled_dot_product_attention", "sinks"): (rng.normal(size=3), lambda dt, a: (
        ma.scaled_dot_product_attention(x_(dt), x_(dt), x_(dt), sinks=a))),
    ("grouped_attention", "sinks"): (rng.normal(size=2), lambda dt, a: (  # X: 2 query heads
        ma.grouped_attention(x_(dt), x_(dt)[:1], x_(dt)[:1], sinks=a))),
    ("blockwise_attention", "scale"): (SCALAR, lambda dt, a: (
        ma.blockwise_attention(x_(dt), x_(dt), x_(dt), scale=a, block_size=2))),
    ("multi_head_attention", "params"): (MHA, lambda dt, p: (
        ma.multi_head_attention(p, x_(dt), x_(dt), x_(dt), n_heads=2))),
    ("layer_norm", "gamma"): (rng.normal(size=4), lambda dt, g: (
        ma.layer_norm(x_(dt), g, np.zeros(4, dt)))),
    ("layer_norm", "beta"): (rng.normal(size=4), lambda dt, b: (
        ma.layer_norm(x_(dt), np.ones(4, dt), b))),
    ("layer_norm", "eps"): (SCALAR, lambda dt, e: (
        ma.layer_norm(x_(dt), np.ones(4, dt), np.zeros(4, dt), e))),
    ("rms_norm", "gamma"): (rng.normal(size=4), lambda dt, g: ma.rms_norm(x_(dt), g)),
    ("rms_norm", "eps"): (SCALAR, lambda dt, e: ma.rms_norm(x_(dt), np.ones(4, dt), e)),
    ("feed_forward", "params"): (FF, lambda dt, p: ma.feed_forward(p, x_(dt), activation="gelu")),
    ("gated_feed_forward", "params"): (GATED, lambda dt, p: ma.gated_feed_forward(p, x_(dt))),
    ("encoder_block", "params"): (BLOCK, lambda dt, p: (
        ma.encoder_block(p, x_(dt), n_heads=2, return_weights=True))),
    ("encoder_block", "eps"): (SCALAR, lambda dt, e: (
        ma.encoder_block(_cast(BLOCK, dt), x_(dt), n_heads=2, eps=e))),
    ("encoder", "params"): (ENC, lambda dt, p: ma.encoder(p, x_(dt), n_heads=2)),
    ("encoder", "eps"): (SCALAR, lambda dt, e: ma.encoder(_cast(ENC, dt), x_(dt), n_heads=2,
                                                          eps=e)),
    ("delta_rule", "beta"): (rng.uniform(0, 1, size=(2, 3)), lambda dt, b: ma.delta_rule(
        ma.l2_normalize(x_(dt)), ma.l2_normalize(x_(dt)[::-1]), x_(dt), b, return_state=True)),
    ("delta_rule", "scale"): (SCALAR, lambda dt, a: ma.delta_rule(
        x_(dt), x_(dt), x_(dt), np.full((2, 3), 0.5, dt), scale=a, chunk_size=2)),
    ("l2_normalize", "eps"): (SCALAR, lambda dt, e: ma.l2_normalize(x_(dt), e)),
    ("apply_rope", "base"): (SCALAR * 100, lambda dt, b: ma.apply_rope(x_(dt), np.arange(3),
                                                                       base=b)),
    ("self_attention", "params"): (DEC["self_attention"], lambda dt, p: (
        ma.self_attention(p, x_(dt), n_heads=2, positions=np.arange(3)))),
    ("self_attention", "eps"): (SCALAR, lambda dt, e: ma.self_attention(
        _cast(DEC["self_attention"], dt), x_(dt), n_heads=2, eps=e)),
    ("self_attention", "rope_base"): (SCALAR * 100, lambda dt, b: ma.self_attention(
        _cast(DEC["self_attention"], dt), x_(dt), n_heads=2, positions=np.arange(3),
        rope_base=b)),
    **{("self_attention", name): (SCALAR * 10, lambda dt, s, name=name: ma.self_attention(
        {key: value for key, value in _cast(DEC["self_attention"], dt).items() if key != "sinks"},
        x_(dt), n_heads=2, **{name: s}))
       for name in ("query_pre_attn_scalar", "attn_logit_softcapping")},
    ("decoder_block", "params"): (DEC, lambda dt, p: (
        ma.decoder_block(p, x_(dt), memory=x_(dt), n_heads=2, positions=np.arange(3)))),
    ("decoder_block", "eps"): (SCALAR, lambda dt, e: ma.decoder_block(
        _cast(DEC, dt), x_(dt), memory=x_(dt), n_heads=2, eps=e)),
    ("decoder_block", "rope_base"): (SCALAR * 100, lambda dt, b: ma.decoder_block(
        _cast(DEC, dt), x_(dt), memory=x_(dt), n_heads=2, positions=np.arange(3), rope_base=b)),
    ("self_attention", "cache"): (CACHE, lambda dt, c: ma.self_attention(
        _cast(DEC["self_attention"], dt), x_(dt), CAUSAL, n_heads=2, cache=c)),
    ("decoder_block", "cache"): (CACHE, lambda dt, c: ma.decoder_block(
        _cast(DEC, dt), x_(dt), CAUSAL, memory=x_(dt), n_heads=2, cache=c)),
    ("decoder", "cache"): ([CACHE, CACHE], lambda dt, c: ma.decoder(
        _cast(DECODER, dt), x_(dt), CAUSAL, n_heads=2, norm="rms_norm", activation="swiglu",
        cache=tuple(c))),
    ("causal_lm", "cache"): ([CACHE], lambda dt, c: ma.causal_lm(
        _cast(LLAMA, dt), TOKENS, cache=tuple(c), **LLAMA_CONFIG)),
    ("decoder", "params"): (DECODER, lambda dt, p: ma.decoder(
        p, x_(dt), n_heads=2, norm="rms_norm", activation="swiglu")),
    # A language model's inputs are tokens: its dtype is its token embedding's.
    ("causal_lm", "params"): ({"lm_head": GPT["lm_head"],
                               "position_embedding": GPT["position_embedding"]},
                              lambda dt, a: ma.causal_lm({**_cast(GPT, dt), **a}, TOKENS,
                                                         **GPT_CONFIG)),
    ("generate", "params"): ({"lm_head": GPT["lm_head"]}, lambda dt, a: np.asarray(
        ma.generate({**_cast(GPT, dt), **a}, TOKENS, 3, **GPT_CONFIG), dtype=dt)),
    **{("causal_lm", name): (SCALAR * 10, lambda dt, s, name=name: ma.causal_lm(
        _cast(LLAMA, dt), TOKENS, **{name: s}, **LLAMA_CONFIG))
       for name in ("eps", "rope_base", "query_pre_attn_scalar", "attn_logit_softcapping",
                    "final_logit_softcapping", "embedding_scale")},
}


def test_the_catalogue_covers_every_auxiliary_floating_argument():
    found = {(name, argument) for name, f in PUBLIC.items()
             for argument in inspect.signature(f).parameters if argument in AUXILIARY_NAMES}
    # decoder's eps and rope_base travel in **config, as decoder_block's (above)
    assert found == set(CASES)


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _flat(r)]
    if isinstance(result, dict):
        return [a for r in result.values() for a in _flat(r)]
    return [result]


PAIRS = [(np.float32, np.float64), (np.float32, np.float16), (np.float16, np.float64),
         (np.float16, np.float32), (np.float64, np.float32)]


@pytest.mark.parametrize("case", CASES, ids="-".join)
@pytest.mark.parametrize("input_dtype, auxiliary_dtype", PAIRS,
                         ids=[f"{np.dtype(a).name}-in-{np.dtype(b).name}-aux" for a, b in PAIRS])
def test_an_auxiliary_argument_is_taken_in_the_inputs_dtype(case, input_dtype, auxiliary_dtype):
    auxiliary, f = CASES[case]
    with np.errstate(over="ignore"):
        given = _cast(auxiliary, auxiliary_dtype)
        got, expected = f(input_dtype, given), f(input_dtype, _cast(given, input_dtype))
    for a, b in zip(_flat(got), _flat(expected), strict=True):
        if getattr(b, "dtype", np.dtype(int)).kind == "f":
            assert a.dtype == np.dtype(input_dtype)  # float32 in, float32 out; float16 stays
        np.testing.assert_array_equal(a, b)


def test_a_float64_python_or_numpy_scalar_keeps_float32():
    x = X.astype(np.float32)
    for scale in (0.5, np.float64(0.5), np.float16(0.5), 1):
        assert ma.scaled_dot_product_attention(x, x, x, scale=scale)[0].dtype == np.float32
    assert ma.layer_norm(x, np.ones(4), np.zeros(4), np.float64(1e-5)).dtype == np.float32
    logits = ma.causal_lm(_cast(LLAMA, np.float32), TOKENS, final_logit_softcapping=np.float64(3),
                          embedding_scale=np.float64(2.0), **LLAMA_CONFIG)
    assert logits.dtype == np.float32


def test_gradients_reach_float64_params_through_the_cast():
    autograd = pytest.importorskip("autograd")
    x = X.astype(np.float32)
    loss = lambda p: autograd.numpy.sum(ma.multi_head_attention(p, x, x, x, n_heads=2)[0] ** 2)
    g64 = autograd.grad(loss)(MHA)
    g32 = autograd.grad(loss)(_cast(MHA, np.float32))
    for key in MHA:
        np.testing.assert_allclose(g64[key], g32[key], rtol=1e-5, atol=1e-6)
