"""StreamingLLM's cache policy (minattn.sinks.streaming_cache), against a reference written here:
the kept keys are the first n_sink and the last `window` tokens' keys, rotated (rotate-half RoPE,
the formula spelled out below) at their new places in the cache, 0 .. n_sink + window - 1; the
values are the same tokens' values, untouched. And every refusal's whole message."""
import numpy as np
import pytest

from minattn.sinks import streaming_cache


def _rope(x, positions, base):
    # Rotate-half RoPE, the formula: pair (x[i], x[i + d/2]) turns by position * base^(-2i/d).
    d = x.shape[-1]
    angle = np.asarray(positions, float)[:, None] * base ** (-np.arange(0, d, 2) / d)  # [L, d/2]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle),
                           x2 * np.cos(angle) + x1 * np.sin(angle)], axis=-1)


def _cache(rng, shape, length, base, n_layers=2):
    # Raw keys and values [*shape, length, d]; the cache holds the keys rotated at 0 .. length - 1.
    raw = [(rng.normal(size=(*shape, length, 6)), rng.normal(size=(*shape, length, 6)))
           for _ in range(n_layers)]
    cache = tuple({"k": k if base is None else _rope(k, np.arange(length), base), "v": v}
                  for k, v in raw)
    return raw, cache


@pytest.mark.parametrize("shape", [(3,), (2, 3), (1, 2, 3)])  # [H_kv], [B, H_kv], one more axis
@pytest.mark.parametrize("n_sink, window, dropped", [(2, 3, 1), (1, 4, 3), (0, 2, 5), (3, 0, 2)])
@pytest.mark.parametrize("base", [500.0, 10000.0, None])
def test_kept_tokens_sit_at_their_new_places(shape, n_sink, window, dropped, base):
    rng = np.random.default_rng(n_sink * 7 + window + dropped)
    length = n_sink + window + dropped
    raw, cache = _cache(rng, shape, length, base)
    pruned = streaming_cache(cache, n_sink=n_sink, window=window, rope_base=base)
    kept = [*range(n_sink), *range(length - window, length)]  # the tokens StreamingLLM keeps
    assert isinstance(pruned, tuple) and len(pruned) == len(cache)
    for (k, v), layer in zip(raw, pruned):
        expected_k = k[..., kept, :] if base is None else _rope(
            k[..., kept, :], np.arange(n_sink + window), base)
        assert layer["k"].shape == layer["v"].shape == (*shape, n_sink + window, 6)
        np.testing.assert_allclose(layer["k"], expected_k, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(layer["v"], v[..., kept, :])


def test_a_cache_that_fits_comes_back_as_it_is():
    _, cache = _cache(np.random.default_rng(0), (2, 3), 5, 500.0)
    for n_sink, window in [(1, 4), (2, 3), (0, 5), (5, 0), (3, 9)]:
        kept = streaming_cache(list(cache), n_sink=n_sink, window=window, rope_base=500.0)
        assert isinstance(kept, tuple) and all(a is b for a, b in zip(kept, cache))


def test_an_empty_cache_stays_empty():
    assert streaming_cache((), n_sink=0, window=0) == ()
    assert streaming_cache([], n_sink=2, window=3, rope_base=500.0) == ()


@pytest.mark.parametrize("base", [0.5, 1.5])
def test_any_positive_rope_base_is_taken_as_apply_ropes(base):
    raw, cache = _cache(np.random.default_rng(1), (2,), 6, base, n_layers=1)
    kept = streaming_cache(cache, n_sink=1, window=2, rope_base=base)[0]["k"]
    np.testing.assert_allclose(kept, _rope(raw[0][0][..., [0, 4, 5], :], np.arange(3), base),
                               rtol=0, atol=1e-12)


A = np.zeros((2, 5, 4))
CACHE = ({"k": A, "v": A},)
CASES = [  # (keywords, error, the whole message)
    (dict(n_sink=-1, window=2), ValueError, "n_sink must be an int >= 0, got -1"),
    (dict(n_sink=1.5, window=2), ValueError, "n_sink must be an int >= 0, got 1.5"),
    (dict(n_sink=True, window=2), ValueError, "n_sink must be an int >= 0, got True"),
    (dict(n_sink="1", window=2), ValueError, "n_sink must be an int >= 0, got '1'"),
    (dict(n_sink=1, window=-2), ValueError, "window must be an int >= 0, got -2"),
    (dict(n_sink=1, window=2.0), ValueError, "window must be an int >= 0, got 2.0"),
    (dict(n_sink=1, window=2, rope_base=0), ValueError,
     "rope_base must be a positive float, got 0.0"),
    (dict(n_sink=1, window=2, rope_base=-1.0), ValueError,
     "rope_base must be a positive float, got -1.0"),
    (dict(n_sink=1, window=2, rope_base=True), TypeError,
     "rope_base must be a positive float, got True (bool)"),
    (dict(n_sink=1, window=2, rope_base="10000"), TypeError,
     "rope_base must be a positive float, got '10000' (str)"),
]
CACHE_CASES = [  # (cache, error, the whole message)
    (None, TypeError, "cache must be a tuple of {'k', 'v'} dicts, one per layer, as causal_lm "
     "returns, got NoneType"),
    (CACHE[0], TypeError, "cache must be a tuple of {'k', 'v'} dicts, one per layer, as causal_lm "
     "returns, got dict"),
    ((A,), TypeError, "cache must be a tuple of {'k', 'v'} dicts, one per layer, as causal_lm "
     "returns, got tuple"),
    (({"k": A},), TypeError, "cache must be a tuple of {'k', 'v'} dicts, one per layer, as "
     "causal_lm returns, got tuple"),
    ([{"v": A}], TypeError, "cache must be a tuple of {'k', 'v'} dicts, one per layer, as "
     "causal_lm returns, got list"),
    (({"k": A, "v": A}, {"k": A[:, :3], "v": A[:, :3]}), ValueError,
     "the cache's layers differ in length: [3, 5]"),
    (({"k": A, "v": A[:, :4]},), ValueError, "the cache's layers differ in length: [4, 5]"),
]


@pytest.mark.parametrize("keywords, error, message", CASES)
def test_bad_sizes_are_refused_by_name(keywords, error, message):
    with pytest.raises(error) as info:
        streaming_cache(CACHE, **keywords)
    assert str(info.value) == message


@pytest.mark.parametrize("cache, error, message", CACHE_CASES)
def test_a_bad_cache_is_refused(cache, error, message):
    with pytest.raises(error) as info:
        streaming_cache(cache, n_sink=1, window=2)
    assert str(info.value) == message
