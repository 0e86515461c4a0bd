"""generate's options, each against an independent reference: the sampling distribution
(temperature, top_k, top_p) against a slow per-row loop of the rules transformers' logits
warpers state, left padding against each row generated alone, eos/pad against the greedy tokens,
the KV cache default, progress, and the position budget of learned positions."""
import math

import numpy as np
import pytest

import minattn as ma

from .reference import sampling_probabilities
from .strategies import perturbed

V = 11


def _model(position="learned", seed=0, scale=25.0, n_layers=2):
    """A tiny model whose next-token logits spread over a few units (lm_head scaled), so that
    temperature, top_k and top_p change the distribution visibly."""
    rope = position == "rope"
    params, config = ma.init_causal_lm(np.random.default_rng(seed), V, n_layers, 8, 2, 16,
                                       position=position, n_positions=16, tied=False,
                                       **(dict(norm="rms_norm", activation="swiglu", bias=False)
                                          if rope else {}))
    params = perturbed(params, seed)
    params["lm_head"] = scale * params["lm_head"]
    return params, config


def _fixed_logits_model(logits):
    """A model whose logits at every position are exactly `logits`: the final LayerNorm has
    gamma 0 and beta e_0, so every hidden state is e_0 and the unembedding reads lm_head[0]."""
    params, config = ma.init_causal_lm(np.random.default_rng(0), len(logits), 1, 4, 2, 8,
                                       n_positions=16, tied=False)
    params["final_norm"] = {"gamma": np.zeros(4), "beta": np.eye(4)[0]}
    params["lm_head"] = np.zeros((4, len(logits)))
    params["lm_head"][0] = logits
    return params, config


@pytest.mark.parametrize("temperature, top_k, top_p", [
    (1.0, None, None), (0.5, None, None), (2.5, None, None), (1.0, 4, None), (0.7, 2, None),
    (1.5, None, 0.7), (1.0, None, 0.95), (1.2, 6, 0.6)])
def test_sampling_follows_the_tempered_truncated_softmax(temperature, top_k, top_p):
    params, config = _model(n_layers=1)
    prompts = np.array([[1, 2], [3, 4], [9, 0]])
    n = 1000  # samples per prompt, all in one batch: one uniform per row
    logits = ma.causal_lm(params, prompts, **config)[:, -1]  # [3, V]
    out = ma.generate(params, np.repeat(prompts, n, axis=0), 1, temperature=temperature,
                      top_k=top_k, top_p=top_p, rng=np.random.default_rng(1), **config)
    samples = out[:, -1].reshape(3, n)
    for row, (x, sample) in enumerate(zip(logits, samples)):
        p = sampling_probabilities(list(x), temperature, top_k, top_p)
        freq = np.bincount(sample, minlength=V) / n
        assert np.all(freq[p == 0] == 0), (row, freq, p)  # nothing outside the kept tokens
        np.testing.assert_array_less(np.abs(freq - p), 5 * np.sqrt(p * (1 - p) / n) + 2e-3)


def test_the_test_distributions_are_spread():
    # The references above would not catch a wrong temperature if the logits were all alike.
    params, config = _model(n_layers=1)
    logits = ma.causal_lm(params, np.array([[1, 2], [3, 4], [9, 0]]), **config)[:, -1]
    assert np.all(logits.max(-1) - logits.min(-1) > 2)
    assert np.all(np.abs(logits.max(-1) - logits.max()) < 50)  # no row far above the others


def test_sampling_reaches_the_last_token_of_the_vocabulary():
    # The last token must be sampled as often as its probability, not folded into its neighbour.
    params, config = _fixed_logits_model(np.array([0.0, 0.0, 1.0, 2.0]))
    out = ma.generate(params, np.zeros((4000, 1), int), 1, temperature=1.0,
                      rng=np.random.default_rng(0), **config)
    p = np.exp([0.0, 0.0, 1.0, 2.0]) / np.exp([0.0, 0.0, 1.0, 2.0]).sum()
    freq = np.bincount(out[:, -1], minlength=4) / 4000
    np.testing.assert_allclose(freq, p, atol=0.03)


@pytest.mark.parametrize("position", ["learned", "rope"])
@pytest.mark.parametrize("options", [{}, {"top_p": 0.9}, {"top_k": 3}])
def test_a_tiny_temperature_samples_the_greedy_tokens(position, options):
    # logits / 1e-4 are thousands apart between rows and within them: no overflow, no NaN, and
    # every row's own maximum wins (warnings are errors here).
    params, config = _model(position)
    prompts = np.array([[1, 2], [3, 4], [9, 0], [5, 5]])
    greedy = ma.generate(params, prompts, 3, **config)
    sampled = ma.generate(params, prompts, 3, temperature=1e-4, rng=np.random.default_rng(0),
                          **options, **config)
    np.testing.assert_array_equal(sampled, greedy)


def test_top_p_at_a_tie_boundary_drops_the_mass_at_most_one_minus_top_p():
    # Probabilities exactly 1/4, 1/4, 1/2: top_p = 3/4 drops the first 1/4 (its mass is
    # <= 1 - top_p, as TopPLogitsWarper's `cumulative <= 1 - top_p`) and keeps the rest.
    params, config = _fixed_logits_model(np.array([0.0, 0.0, math.log(2.0)]))
    out = ma.generate(params, np.zeros((3000, 1), int), 1, temperature=1.0, top_p=0.75,
                      rng=np.random.default_rng(0), **config)
    freq = np.bincount(out[:, -1], minlength=3) / 3000
    assert freq[0] == 0
    np.testing.assert_allclose(freq[1:], [1 / 3, 2 / 3], atol=0.04)


@pytest.mark.parametrize("top_p", [0.3, 0.5, 0.8])
def test_top_p_breaks_ties_by_token_id_the_same_on_every_machine(top_p):
    # Tied logits at the nucleus boundary: the lower token id is dropped first (a stable order,
    # not whatever order a platform's quicksort leaves ties in), so a seeded run is reproducible.
    logits = np.array([1.0, 0.0, 1.0, 0.0, 2.0, 1.0, 0.0, 1.0, 2.0, 0.0] * 3)
    params, config = _fixed_logits_model(logits)
    out = ma.generate(params, np.zeros((2000, 1), int), 1, temperature=1.0, top_p=top_p,
                      rng=np.random.default_rng(0), **config)
    p = sampling_probabilities(list(logits), 1.0, None, top_p)
    freq = np.bincount(out[:, -1], minlength=len(logits)) / 2000
    np.testing.assert_array_equal(freq > 0, p > 0)


def test_a_tiny_top_p_keeps_the_most_likely_token():
    # Even when 1 - top_p rounds to 1.0 (so the whole mass is <= 1 - top_p), the most likely
    # token stays: sampling is greedy, never an empty distribution.
    params, config = _fixed_logits_model(np.array([0.0, 0.0, math.log(2.0)]))
    out = ma.generate(params, np.zeros((50, 1), int), 2, temperature=1.0, top_p=1e-300,
                      rng=np.random.default_rng(0), **config)
    np.testing.assert_array_equal(out[:, 1:], 2)


def test_top_p_one_keeps_every_token():
    params, config = _fixed_logits_model(np.array([0.0, 0.0, math.log(2.0)]))
    out = ma.generate(params, np.zeros((3000, 1), int), 1, temperature=1.0, top_p=1,
                      rng=np.random.default_rng(0), **config)
    np.testing.assert_allclose(np.bincount(out[:, -1], minlength=3) / 3000, [0.25, 0.25, 0.5],
                               atol=0.04)


@pytest.mark.parametrize("position", ["learned", "rope"])
@pytest.mark.parametrize("use_cache", [True, False])
def test_left_padding_generates_what_each_row_generates_alone(position, use_cache):
    params, config = _model(position, seed=3)
    rows = [np.array([3, 4, 5, 6]), np.array([7, 8]), np.array([1, 9, 2])]
    width = max(len(r) for r in rows)
    tokens = np.array([np.pad(r, (width - len(r), 0)) for r in rows])  # pad 0 on the left
    mask = np.array([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    out = ma.generate(params, tokens, 4, mask, use_cache=use_cache, **config)
    assert out.shape == (3, width + 4)
    for b, r in enumerate(rows):
        alone = ma.generate(params, r[None], 4, use_cache=use_cache, **config)
        np.testing.assert_array_equal(out[b, width:], alone[0, len(r):])
    # padding changes what an unmasked model generates: the mask is what makes them equal
    assert not np.array_equal(ma.generate(params, tokens, 4, use_cache=use_cache, **config),
                              out)


def test_a_bool_attention_mask_is_the_int_one():
    params, config = _model()
    tokens = np.array([[0, 7, 8], [1, 2, 3]])
    mask = np.array([[0, 1, 1], [1, 1, 1]])
    np.testing.assert_array_equal(ma.generate(params, tokens, 3, mask, **config),
                                  ma.generate(params, tokens, 3, mask.astype(bool), **config))


@pytest.mark.parametrize("eos_token_id", ["int", "list"])
def test_rows_that_produce_eos_continue_with_padding_and_stop_together(eos_token_id):
    params, config = _model(seed=5)
    prompts = np.array([[1], [4], [9], [6]])  # one-token prompts
    free = ma.generate(params, prompts, 8, **config)  # greedy, no eos
    eos = int(free[0, 2])  # row 0 produces it at its second new token
    ends = [next((t for t in range(1, 9) if free[b, t] == eos), None) for b in range(4)]
    pad = 0  # fed back like any token: the ended rows cannot change the others
    got = ma.generate(params, prompts, 8, eos_token_id=eos if eos_token_id == "int" else [eos],
                      pad_token_id=pad, **config)
    expected = free.copy()
    for b, end in enumerate(ends):
        if end is not None:
            expected[b, end + 1:] = pad
    stop = 9 if None in ends else max(ends) + 1  # every row ended: no further step
    np.testing.assert_array_equal(got, expected[:, :stop])


def test_generation_stops_when_every_row_has_ended():
    params, config = _fixed_logits_model(np.array([0.0, 3.0, 1.0]))  # greedy: always 1
    out = ma.generate(params, np.array([[0], [2]]), 6, eos_token_id=1, pad_token_id=0, **config)
    np.testing.assert_array_equal(out, [[0, 1], [2, 1]])


def test_n_new_zero_returns_the_prompt():
    params, config = _model()
    tokens = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(ma.generate(params, tokens, 0, **config), tokens)


def test_the_default_feeds_one_new_token_per_step_through_the_cache():
    # use_cache=True (the default): after the prompt, each layer sees one token per step;
    # use_cache=False: the whole sequence every step.
    params, config = _model()
    seen = []

    def spy(p, x, *args, **kw):
        seen.append(x.shape[-2])
        return ma.self_attention(p, x, *args, **kw)
    tokens = np.array([[1, 2, 3]])
    cached = ma.generate(params, tokens, 3, attention=spy, **config)
    assert seen == [3, 3, 1, 1, 1, 1]  # 2 layers
    seen.clear()
    full = ma.generate(params, tokens, 3, use_cache=False, attention=spy, **config)
    assert seen == [3, 3, 4, 4, 5, 5]
    np.testing.assert_array_equal(cached, full)


def test_progress_wraps_the_range_of_steps():
    params, config = _model()
    wrapped = []

    def progress(steps):
        wrapped.append(steps)
        return steps
    tokens = np.array([[1, 2]])
    out = ma.generate(params, tokens, 4, progress=progress, **config)
    assert wrapped == [range(4)]
    np.testing.assert_array_equal(out, ma.generate(params, tokens, 4, **config))


def test_learned_positions_allow_exactly_n_positions_fed_tokens():
    # The last new token is never fed back: L + n_new - 1 positions are used, n_positions=16.
    params, config = _model()
    tokens = np.array([[1, 2, 3]])
    assert ma.generate(params, tokens, 14, **config).shape == (1, 17)
    with pytest.raises(ValueError) as info:
        ma.generate(params, tokens, 15, **config)
    assert str(info.value) == ("n_new=15 after 3 tokens needs 17 positions, but "
                               "params['position_embedding'] has 16")


@pytest.mark.parametrize("n", [1, 3, 9])
def test_logits_to_keep_gives_the_last_positions_logits(n):
    params, config = _model("rope")
    tokens = np.random.default_rng(1).integers(0, V, size=(2, 6))
    full = ma.causal_lm(params, tokens, **config)  # [B, L, V]; n > L keeps all, as transformers
    kept = ma.causal_lm(params, tokens, logits_to_keep=n, **config)
    assert kept.shape == (2, min(n, 6), V)
    np.testing.assert_allclose(kept, full[:, -n:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("n, error", [(0, ValueError), (1.0, TypeError), (True, TypeError)])
def test_logits_to_keep_must_be_a_positive_int(n, error):
    params, config = _model("rope")
    with pytest.raises(error, match="logits_to_keep must be a positive int"):
        ma.causal_lm(params, [[1, 2]], logits_to_keep=n, **config)
