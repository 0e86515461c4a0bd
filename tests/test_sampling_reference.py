"""generate's sampling, draw by draw: for a fixed uniform draw u, the sampled token is the one
whose stretch of the cumulative distribution holds u, the distribution computed by a slow loop of
the rules transformers' TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper state
(transformers/generation/logits_process.py). Every draw numpy can make counts, the extremes
included: Generator.random() is in [0, 1), so it can return exactly 0.0 and at most 1 - 2^-53,
and neither may ever give a token that temperature, top_k or top_p removed."""
import math

import numpy as np
import pytest

import minattn as ma

from .reference import sampling_probabilities
from .test_generate_options import _fixed_logits_model

PCG64_MULTIPLIER = (2549297995355413924 << 64) + 4865540595714422341  # PCG's 128-bit LCG


def _drawing(u):
    """A real np.random.Generator (PCG64) whose next random() is exactly u (a multiple of
    2^-53 in [0, 1)): random() is the output's top 53 bits / 2^53, and PCG64 outputs the xor of
    the high and low halves of its state (rotated by the state's top 6 bits, here 0) just after
    one LCG step; so the state is set one step before a state with the wanted xor."""
    k = round(u * 2 ** 53)
    assert k / 2 ** 53 == u and 0 <= k < 2 ** 53
    after = (5 << 64) | (5 ^ (k << 11))  # high half 5 (rotation 0), xor of halves: k << 11
    rng = np.random.Generator(np.random.PCG64(0))
    state = rng.bit_generator.state
    step_back = pow(PCG64_MULTIPLIER, -1, 1 << 128)
    state["state"]["state"] = (after - state["state"]["inc"]) * step_back % (1 << 128)
    rng.bit_generator.state = state
    return rng


def _sample(logits, u, **options):
    params, config = _fixed_logits_model(np.asarray(logits, dtype=float))
    out = ma.generate(params, np.zeros((1, 1), int), 1, rng=_drawing(u), **options, **config)
    return int(out[0, -1])


def test_the_crafted_generator_draws_exactly_u():
    for u in (0.0, 0.5, 0.25 + 2 ** -53, 1 - 2 ** -53):
        assert _drawing(u).random() == u
        assert _drawing(u).random((1, 1))[0, 0] == u  # as generate draws, one row


ROW = [1.0, 3.0, 2.0, 3.0, -0.5, 0.25, 2.0, -2.0]  # ties at the top and inside


@pytest.mark.parametrize("options", [
    dict(temperature=1.0), dict(temperature=0.3), dict(temperature=4.0),
    dict(temperature=1.0, top_k=3), dict(temperature=0.7, top_k=1), dict(temperature=2.0, top_k=5),
    dict(temperature=1.0, top_p=0.5), dict(temperature=1.5, top_p=0.9),
    dict(temperature=1.2, top_k=5, top_p=0.6)], ids=repr)
def test_each_token_is_drawn_on_its_own_stretch_of_the_uniform(options):
    p = sampling_probabilities(ROW, options["temperature"], options.get("top_k"),
                                 options.get("top_p"))
    assert sum(x > 0 for x in p) < len(p) or len(options) == 1
    below = 0.0  # the reference cdf before token i
    for token, weight in enumerate(p):
        if weight > 0:  # the middle of its stretch [below, below + weight), on numpy's grid
            u = math.floor((below + weight / 2) * 2 ** 53) / 2 ** 53
            assert _sample(ROW, u, **options) == token, (token, u, p)
        below += weight


@pytest.mark.parametrize("u", [0.0, 2 ** -53, 1 - 2 ** -53], ids=["0", "2^-53", "1-2^-53"])
@pytest.mark.parametrize("options", [
    dict(temperature=1.0, top_k=1), dict(temperature=1.0, top_p=0.1),
    dict(temperature=1e-300),  # too small for exp: the documented limit, the greedy token
    dict(temperature=1.0, top_k=2)], ids=repr)
def test_the_extreme_draws_never_give_a_removed_token(u, options):
    # Token 0 and the last token are removed (top_k, top_p, or a vanishing temperature); the draw
    # 0.0 must not land on the first, nor the draw 1 - 2^-53 on the last.
    row = [1.0, 3.0, 2.5, 2.0]
    p = sampling_probabilities(row, options["temperature"], options.get("top_k"),
                                 options.get("top_p"))
    assert p[0] == p[-1] == 0
    assert p[_sample(row, u, **options)] > 0


def test_the_largest_draw_never_gives_a_removed_last_token_whatever_the_rounding():
    # With many kept tokens, their probabilities summed in floating point can end a few ulps
    # below 1 - 2^-53; the largest draw must still land on a kept token, not the removed last.
    rng = np.random.default_rng(0)
    for _ in range(40):
        n = int(rng.integers(3, 40))
        row = list(3 * rng.normal(size=n))
        row[-1] = min(row) - 10  # the least likely: top_k = n - 1 removes it
        token = _sample(row, 1 - 2 ** -53, temperature=1.0, top_k=n - 1)
        assert token < n - 1
        assert token == int(np.argmax(np.cumsum(sampling_probabilities(
            row, 1.0, n - 1, None)) > 1 - 1e-9))  # the last kept token


def test_tied_maxima_share_the_draws_and_the_first_comes_first():
    # Two tied most-likely tokens (ids 1 and 3), top_k=1 keeps both (ties with the k-th stay):
    # draws below 1/2 give the lower id, draws from 1/2 the other.
    row = [0.0, 2.0, 1.0, 2.0]
    assert _sample(row, 0.0, temperature=1.0, top_k=1) == 1
    assert _sample(row, 0.5 - 2 ** -53, temperature=1.0, top_k=1) == 1
    assert _sample(row, 0.5, temperature=1.0, top_k=1) == 3
    assert _sample(row, 1 - 2 ** -53, temperature=1.0, top_k=1) == 3
