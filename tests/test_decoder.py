"""The decoder: causality, the KV cache equals the full forward pass, generation."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

# Calls go through the package (ma.causal_lm, ...), so that minattn.swap reaches them
# (tests/test_pitfalls.py swaps in the decoder pitfalls).
init_causal_lm, init_decoder_block = ma.init_causal_lm, ma.init_decoder_block

from .strategies import float_arrays, perturbed, seeds, tolerance

V = 11
GPT2 = dict(n_heads=2, norm="layer_norm", activation="gelu_tanh", position="learned")
LLAMA = dict(n_heads=4, n_kv_heads=2, norm="rms_norm", activation="swiglu", position="rope",
             eps=1e-6)
MQA = dict(LLAMA, n_kv_heads=1)
STYLES = {"gpt2": GPT2, "llama": LLAMA, "mqa": MQA}


def _model(style, seed=0, n_layers=2):
    config = STYLES[style]
    init = {k: config[k] for k in ("n_kv_heads", "norm", "activation") if k in config}
    llama = config["position"] == "rope"
    params, _ = init_causal_lm(np.random.default_rng(seed), V, n_layers, 8, config["n_heads"],
                               12, position=config["position"], n_positions=32, tied=not llama,
                               bias=not llama, **init)
    return perturbed(params, seed), config  # perturbed: no zero bias or unit gamma hides a bug


@pytest.mark.parametrize("style", STYLES)
@given(seed=seeds, data=st.data())
def test_cached_decoding_equals_the_full_forward_pass(style, seed, data):
    params, config = _model(style, seed % 1000)
    b, length = data.draw(st.integers(1, 2)), data.draw(st.integers(2, 9))
    tokens = np.random.default_rng(seed).integers(0, V, size=(b, length))
    full = ma.causal_lm(params, tokens, **config)
    # Split the sequence into random chunks (chunks of 1 = one token at a time).
    cuts = sorted(set(data.draw(st.lists(st.integers(1, length - 1), max_size=4))))
    chunks, cache = [], None
    for start, stop in zip([0] + cuts, cuts + [length]):
        logits, cache = ma.causal_lm(params, tokens[:, start:stop], cache=cache, return_cache=True,
                                  **config)
        chunks.append(logits)
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), full, rtol=0, atol=1e-12)
    assert cache[0]["k"].shape[-2] == length


@pytest.mark.parametrize("style", ["gpt2", "llama"])
def test_one_token_at_a_time_equals_the_full_forward_pass(style):
    params, config = _model(style, 3)
    tokens = np.random.default_rng(3).integers(0, V, size=(2, 7))
    full = ma.causal_lm(params, tokens, **config)
    cache, steps = None, []
    for t in range(7):
        logits, cache = ma.causal_lm(params, tokens[:, t:t + 1], cache=cache, return_cache=True,
                                  **config)
        steps.append(logits)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("style", STYLES)
def test_logits_do_not_depend_on_later_tokens(style):
    params, config = _model(style, 1)
    tokens = np.random.default_rng(1).integers(0, V, size=(2, 8))
    changed = tokens.copy()
    changed[:, 5:] = (changed[:, 5:] + 1) % V
    a, b = ma.causal_lm(params, tokens, **config), ma.causal_lm(params, changed, **config)
    np.testing.assert_allclose(a[:, :5], b[:, :5], rtol=0, atol=1e-13)
    assert not np.allclose(a[:, 5:], b[:, 5:])


def test_self_attention_without_cache_or_rope_is_multi_head_attention():
    p = perturbed(ma.init_multi_head_attention(np.random.default_rng(0), 8, 4), 0)
    x = np.random.default_rng(1).normal(size=(2, 5, 8))
    mask = ma.causal_mask(5)
    out, cache = ma.self_attention(p, x, mask, n_heads=4)
    np.testing.assert_allclose(out, ma.multi_head_attention(p, x, x, x, mask, n_heads=4)[0],
                               **tolerance(np.float64))
    assert cache["k"].shape == (2, 4, 5, 2)


def test_tied_embeddings_unembed_with_the_token_embedding():
    params, config = _model("gpt2", 2, n_layers=1)
    tokens = np.array([[1, 2, 3]])
    untied = {**params, "lm_head": params["token_embedding"].T.copy()}
    np.testing.assert_array_equal(ma.causal_lm(params, tokens, **config),
                                  ma.causal_lm(untied, tokens, **config))


@pytest.mark.parametrize("style", STYLES)
def test_generate_with_and_without_cache_gives_the_same_tokens(style):
    params, config = _model(style, 4)
    tokens = np.random.default_rng(4).integers(0, V, size=(2, 3))
    fast = ma.generate(params, tokens, 6, **config)
    slow = ma.generate(params, tokens, 6, use_cache=False, **config)
    np.testing.assert_array_equal(fast, slow)
    np.testing.assert_array_equal(fast[:, :3], tokens)
    assert fast.shape == (2, 9)


def test_greedy_generation_appends_the_argmax_of_the_last_logits():
    params, config = _model("llama", 5)
    tokens = np.array([[1, 2, 3]])
    out = ma.generate(params, tokens, 1, **config)
    assert out[0, -1] == np.argmax(ma.causal_lm(params, tokens, **config)[0, -1])


def test_sampling_is_reproducible_with_the_same_rng_and_respects_top_k():
    params, config = _model("gpt2", 6)
    tokens = np.array([[1, 2]])
    run = lambda **kw: ma.generate(params, tokens, 8, temperature=1.5,
                                rng=np.random.default_rng(7), **kw, **config)
    np.testing.assert_array_equal(run(), run(use_cache=False))
    top1 = ma.generate(params, tokens, 8, temperature=1.5, top_k=1, rng=np.random.default_rng(7),
                    **config)
    np.testing.assert_array_equal(top1, ma.generate(params, tokens, 8, **config))


def test_the_cache_is_never_changed_in_place():
    params, config = _model("llama", 7)
    _, cache = ma.causal_lm(params, np.array([[1, 2, 3]]), return_cache=True, **config)
    before = [{k: v.copy() for k, v in layer.items()} for layer in cache]
    ma.causal_lm(params, np.array([[4]]), cache=cache, **config)
    for layer, old in zip(cache, before):
        for k in "kv":
            np.testing.assert_array_equal(layer[k], old[k])


def test_cross_attention_block_attends_to_memory():
    p = perturbed(init_decoder_block(np.random.default_rng(0), 8, 2, 16, cross_attention=True), 0)
    x, memory = np.random.default_rng(1).normal(size=(2, 4, 8)), np.ones((2, 6, 8))
    a = ma.decoder_block(p, x, ma.causal_mask(4), memory=memory, n_heads=2)
    b = ma.decoder_block(p, x, ma.causal_mask(4), memory=2 * memory, n_heads=2)
    assert a.shape == (2, 4, 8) and not np.allclose(a, b)


@pytest.mark.parametrize("call, error, match", [
    (lambda p, c: ma.causal_lm(p, np.array([[1, V]]), **c), ValueError, "tokens"),
    (lambda p, c: ma.causal_lm(p, np.array([[-1, 2]]), **c), ValueError, "tokens"),
    (lambda p, c: ma.causal_lm(p, np.array([[1.0, 2.0]]), **c), TypeError, "tokens"),
    (lambda p, c: ma.causal_lm(p, np.array([1, 2]), **c), ValueError, "tokens"),
    (lambda p, c: ma.causal_lm(p, np.array([[1]]), **{**c, "n_kv_heads": 3}), ValueError,
     "n_kv_heads"),
    (lambda p, c: ma.causal_lm(p, np.array([[1]]), cache=(), **c), ValueError, "cache"),
    (lambda p, c: ma.causal_lm(p, np.array([[1]]), cache=tuple(
        {"k": np.zeros((1, 2, 3, 5)), "v": np.zeros((1, 2, 3, 5))} for _ in range(2)), **c),
     ValueError, "cache"),
    (lambda p, c: ma.causal_lm(p, np.array([[1], [2]]), cache=ma.causal_lm(  # another batch size
        p, np.array([[1]]), return_cache=True, **c)[1], **c), ValueError, "cache"),
    (lambda p, c: ma.generate(p, np.array([[1]]), 2, temperature=1.0, **c), ValueError, "rng"),
    (lambda p, c: ma.generate(p, np.array([[1]]), -1, **c), TypeError, "n_new"),
])
def test_bad_input_names_the_argument(call, error, match):
    params, config = _model("llama", 0)
    with pytest.raises(error, match=match):
        call(params, config)


def test_per_sequence_positions_rotate_each_sequence_by_its_own():
    p = perturbed(ma.init_multi_head_attention(np.random.default_rng(0), 8, 2), 0)
    x = np.random.default_rng(1).normal(size=(2, 3, 8))
    positions = np.array([[0, 1, 2], [5, 6, 7]])  # [B, L]
    out, _ = ma.self_attention(p, x, n_heads=2, positions=positions)
    for b in range(2):
        alone, _ = ma.self_attention(p, x[b], n_heads=2, positions=positions[b])
        np.testing.assert_allclose(out[b], alone, **tolerance(np.float64))


@pytest.mark.parametrize("positions, error", [(np.arange(3.0), TypeError),
                                              (np.arange(4), ValueError),
                                              (np.zeros((3, 3), int), ValueError)])
def test_self_attention_refuses_bad_positions(positions, error):
    p = ma.init_multi_head_attention(np.random.default_rng(0), 8, 2)
    with pytest.raises(error, match="positions"):
        ma.self_attention(p, np.ones((2, 3, 8)), n_heads=2, positions=positions)


@given(seeds, st.integers(0, 1000), st.data())
def test_rope_attention_is_invariant_to_shifting_all_positions(seed, shift, data):
    # RoPE's promise at the level of attention: only offsets matter, so numbering the same
    # tokens from 0 or from `shift` gives the same output (up to rounding in the angles).
    p = perturbed(ma.init_multi_head_attention(np.random.default_rng(seed % 1000), 8, 2,
                                               n_kv_heads=1, bias=False), seed % 1000)
    x = data.draw(float_arrays((2, 4, 8)))
    positions = np.arange(4)
    mask = ma.causal_mask(4)
    a, _ = ma.self_attention(p, x, mask, n_heads=2, n_kv_heads=1, positions=positions)
    b, _ = ma.self_attention(p, x, mask, n_heads=2, n_kv_heads=1, positions=positions + shift)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_an_empty_cache_is_an_empty_dict_and_equals_a_zero_length_one():
    # {} starts a cache for any self-attention sublayer (causal_lm's return_cache=True uses it);
    # it must act exactly as explicit zero-length keys and values.
    rng = np.random.default_rng(5)
    params = ma.init_decoder_block(rng, 8, 4, 16, n_kv_heads=2)["self_attention"]
    x = rng.normal(size=(2, 3, 8))
    mask = ma.causal_mask(3)
    zero = {key: np.zeros((2, 2, 0, 2)) for key in ("k", "v")}
    out_empty, cache_empty = ma.self_attention(params, x, mask, n_heads=4, n_kv_heads=2, cache={})
    out_zero, cache_zero = ma.self_attention(params, x, mask, n_heads=4, n_kv_heads=2, cache=zero)
    np.testing.assert_array_equal(out_empty, out_zero)
    for key in ("k", "v"):
        np.testing.assert_array_equal(cache_empty[key], cache_zero[key])
