"""The first reading's plain forms of the composite concepts (minattn/course/teaching.py, issue
46): each computes what minattn's own function computes with the matching arguments. The
references are minattn's functions, which the rest of the suite holds to loops, formulas and
torch; the forms are written apart from them, so a wrong form fails here."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minattn as ma
from minattn.course import teaching as t
from minattn.generation import _next_token
from tests.strategies import float_arrays, seeds

CLOSE = dict(rtol=1e-12, atol=1e-12)


@settings(deadline=None)
@given(float_arrays((2, 3, 4)), seeds, st.booleans())
def test_project(x, seed, bias):
    params = ma.init_multi_head_attention(np.random.default_rng(seed), 4, 2, bias=bias)
    theirs = x @ params["w_q"] + (params["b_q"] if bias else 0.0)  # the formula, written out
    np.testing.assert_allclose(t.project(x, params, "q"), theirs, **CLOSE)


@settings(deadline=None)
@given(seeds, st.sampled_from([1, 2, 4]), st.sampled_from(["none", "causal", "per_batch"]))
def test_multi_head_attention(seed, n_heads, mask_kind):
    rng = np.random.default_rng(seed)
    params = ma.init_multi_head_attention(rng, 8, n_heads)
    query, key = rng.normal(size=(2, 3, 8)), rng.normal(size=(2, 5, 8))
    mask = {"none": None, "causal": ma.causal_mask(3, 5),
            "per_batch": rng.random((2, 1, 3, 5)) < 0.6}[mask_kind]
    ours = t.multi_head_attention(params, query, key, key, mask, n_heads=n_heads)
    theirs = ma.multi_head_attention(params, query, key, key, mask, n_heads=n_heads)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **CLOSE)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_encoder_block(norm_first, masked):
    rng = np.random.default_rng(4)
    params = ma.init_encoder_block(rng, 8, 2, 16)
    x = rng.normal(size=(2, 5, 8))
    mask = ma.padding_mask(np.array([5, 3]), 5) if masked else None
    np.testing.assert_allclose(t.encoder_block(params, x, mask, n_heads=2, norm_first=norm_first),
                               ma.encoder_block(params, x, mask, n_heads=2,
                                                norm_first=norm_first), **CLOSE)


def _llama(seed=0, n_layers=2):
    return ma.init_causal_lm(np.random.default_rng(seed), 13, n_layers, 16, 4, 24,
                             position="rope", norm="rms_norm", activation="swiglu", bias=False)


def test_self_attention_and_decoder_block():
    params, _ = _llama()
    layer = params["layers"][0]
    x = np.random.default_rng(5).normal(size=(2, 4, 16))
    positions, mask = np.arange(4), ma.causal_mask(4)
    ours = t.self_attention(layer["self_attention"], x, mask, n_heads=4, positions=positions)
    theirs, _ = ma.self_attention(layer["self_attention"], x, mask, n_heads=4,
                                  positions=positions)
    np.testing.assert_allclose(ours, theirs, **CLOSE)
    ours = t.decoder_block(layer, x, mask, n_heads=4, positions=positions)
    theirs = ma.decoder_block(layer, x, mask, n_heads=4, positions=positions, norm_first=True,
                              norm="rms_norm", activation="swiglu")
    np.testing.assert_allclose(ours, theirs, **CLOSE)


@pytest.mark.parametrize("past", [0, 3])
@pytest.mark.parametrize("per_sequence", [False, True])  # positions [L], or [B, L] (exercise 11)
def test_cached_self_attention_and_decoder_block(past, per_sequence):
    params, _ = _llama()
    layer = params["layers"][0]
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 4, 16))
    cache = {"k": rng.normal(size=(2, 4, past, 4)), "v": rng.normal(size=(2, 4, past, 4))}
    positions = np.arange(past, past + 4)
    if per_sequence:  # the second sequence numbered from 10 more
        positions = np.stack([positions, positions + 10])
    mask = ma.causal_mask(4, past + 4, align="bottom_right")
    ours = t.cached_self_attention(layer["self_attention"], x, mask, n_heads=4,
                                   positions=positions, cache=cache)
    theirs = ma.self_attention(layer["self_attention"], x, mask, n_heads=4, positions=positions,
                               cache=cache)
    np.testing.assert_allclose(ours[0], theirs[0], **CLOSE)
    for name in "kv":
        np.testing.assert_allclose(ours[1][name], theirs[1][name], **CLOSE)
    ours = t.cached_decoder_block(layer, x, mask, n_heads=4, positions=positions, cache=cache)
    theirs = ma.decoder_block(layer, x, mask, n_heads=4, positions=positions, cache=cache,
                              norm_first=True, norm="rms_norm", activation="swiglu")
    np.testing.assert_allclose(ours[0], theirs[0], **CLOSE)
    np.testing.assert_allclose(ours[1]["k"], theirs[1]["k"], **CLOSE)


def test_language_model_in_one_pass_and_through_its_cache():
    params, config = _llama()
    tokens = np.random.default_rng(6).integers(0, 13, size=(2, 7))
    full = t.language_model(params, tokens, n_heads=4)
    np.testing.assert_allclose(full, ma.causal_lm(params, tokens, **config), **CLOSE)
    cache, steps = t.empty_cache(params, 2, 4), []  # the prompt (3 tokens), then one at a time
    for start, stop in [(0, 3), (3, 4), (4, 5), (5, 6), (6, 7)]:
        logits, cache = t.cached_language_model(params, tokens[:, start:stop], cache, n_heads=4)
        steps.append(logits)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-10, atol=1e-10)
    assert [c["k"].shape for c in cache] == [(2, 4, 7, 4)] * 2


@pytest.mark.parametrize("sampling", [dict(), dict(temperature=0.8),
                                      dict(temperature=1.3, top_k=4)])
def test_generate(sampling):
    params, config = _llama()
    prompt = np.array([[3, 1, 4], [1, 5, 9]])
    draw = lambda: np.random.default_rng(3) if sampling else None  # noqa: E731
    np.testing.assert_array_equal(t.generate(params, prompt, 5, n_heads=4, rng=draw(), **sampling),
                                  ma.generate(params, prompt, 5, rng=draw(), **sampling, **config))


@pytest.mark.parametrize("sampling", [dict(), dict(temperature=0.8), dict(temperature=1.3, top_k=4),
                                      dict(temperature=0.5, top_k=1)])
def test_next_token_top_k(sampling):
    logits = np.random.default_rng(2).normal(size=(64, 13)) * 3
    draw = lambda: np.random.default_rng(3) if sampling else None  # noqa: E731
    full = dict(dict(temperature=0.0, top_k=None), **sampling)
    np.testing.assert_array_equal(t.next_token_top_k(logits, rng=draw(), **sampling),
                                  _next_token(logits, full["temperature"], full["top_k"], None,
                                              draw()))


@settings(deadline=None)
@given(float_arrays((2, 3, 4)), seeds)
def test_feed_forward_with_relu(x, seed):
    params = ma.init_feed_forward(np.random.default_rng(seed), 4, 6)
    np.testing.assert_allclose(t.feed_forward(params, x), ma.feed_forward(params, x), **CLOSE)


@settings(deadline=None)
@given(float_arrays((2, 3, 4)), seeds)
def test_gated_feed_forward(x, seed):
    params = ma.init_gated_feed_forward(np.random.default_rng(seed), 4, 6)
    np.testing.assert_allclose(t.gated_feed_forward(params, x), ma.gated_feed_forward(params, x),
                               **CLOSE)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_encoder(norm_first, masked):
    rng = np.random.default_rng(7)
    params = ma.init_encoder(rng, n_layers=2, d_model=8, n_heads=2, d_ff=16,
                             final_norm=norm_first)
    assert ("final_norm" in params) == norm_first  # both paths of the form are taken
    x = rng.normal(size=(2, 5, 8))
    mask = ma.padding_mask(np.array([5, 3]), 5) if masked else None
    np.testing.assert_allclose(t.encoder(params, x, mask, n_heads=2, norm_first=norm_first),
                               ma.encoder(params, x, mask, n_heads=2, norm_first=norm_first),
                               **CLOSE)
