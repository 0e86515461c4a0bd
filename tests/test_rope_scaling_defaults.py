"""RoPE's frequency schedules at their documented defaults and at the edges of their cases, each
compared with the value spelled out (a formula, or the keyword given explicitly) and with
transformers' ROPE_INIT_FUNCTIONS: the default base 10000; dynamic NTK with no positions and at
L = max_position_embeddings (default RoPE, no formula evaluated); YaRN's default beta_fast 32 and
its attention factor for factor <= 1, for 1 < factor <= 2 and with only one of mscale and
mscale_all_dim. tests/test_rope_scaling.py draws random configs; these are the fixed cases."""
import math

import numpy as np
import pytest

from minattn.rope_scaling import rope_frequencies

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import modeling_rope_utils  # noqa: E402

from .peers import undocumented  # noqa: E402


def _rope_init(rope_type):
    # transformers' table of RoPE initialisations, from which its models build inv_freq and the
    # attention factor: no documented function returns them for a config alone, so the table is
    # read at the version the lock holds.
    return undocumented(modeling_rope_utils, "ROPE_INIT_FUNCTIONS")[rope_type]

RTOL = 2e-6  # transformers computes in float32


def _config(d, parameters, base=10000.0, max_position_embeddings=2048):
    return transformers.LlamaConfig(
        hidden_size=d * 2, num_attention_heads=2, head_dim=d,
        max_position_embeddings=max_position_embeddings,
        rope_parameters={"rope_theta": base, **parameters})


def _theirs(d, parameters, seq_len=None, **config):
    inv_freq, factor = _rope_init(parameters["rope_type"])(
        _config(d, parameters, **config), None, seq_len=seq_len)
    return inv_freq.double().numpy(), factor


def _default_rope(d, base=10000.0):
    return base ** -(np.arange(0, d, 2) / d)  # 1 / base^(2i/d), i = 0 .. d/2 - 1


@pytest.mark.parametrize("d", [2, 8, 64])
def test_default_base_is_10000_as_llama(d):
    ours, factor = rope_frequencies(d, np.arange(4))
    np.testing.assert_array_equal(ours, rope_frequencies(d, np.arange(4), base=10000.0)[0])
    np.testing.assert_allclose(ours, _default_rope(d), rtol=1e-15)
    # transformers' linear schedule at factor 1 is its default RoPE; LlamaConfig's own default
    # rope_theta is 10000 as well
    assert transformers.LlamaConfig().rope_parameters["rope_theta"] == 10000.0
    theirs, _ = _theirs(d, {"rope_type": "linear", "factor": 1.0})
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    assert factor == 1.0


@pytest.mark.parametrize("max_position_embeddings", [0.5, 1, 16])
def test_dynamic_without_positions_is_default_rope(max_position_embeddings):
    """No positions, no length beyond the context: default RoPE, whatever the context."""
    scaling = {"rope_type": "dynamic", "factor": 4.0,
               "max_position_embeddings": max_position_embeddings}
    ours, factor = rope_frequencies(8, np.arange(0), scaling=scaling)
    np.testing.assert_allclose(ours, _default_rope(8), rtol=1e-15)
    assert factor == 1.0
    if max_position_embeddings >= 1:  # a config's context is an int
        theirs, _ = _theirs(8, {"rope_type": "dynamic", "factor": 4.0}, seq_len=0,
                            max_position_embeddings=max_position_embeddings)
        np.testing.assert_allclose(ours, theirs, rtol=RTOL)


@pytest.mark.parametrize("d", [2, 4, 16])
def test_dynamic_at_the_context_length_is_default_rope(d):
    """L = max(positions) + 1 = max_position_embeddings: still default RoPE (the formula's base
    factor is 1 there); at d = 2 the formula has no value (d / (d - 2)) and is not evaluated."""
    scaling = {"rope_type": "dynamic", "factor": 3.0, "max_position_embeddings": 16}
    ours, _ = rope_frequencies(d, np.arange(16)[::-1], scaling=scaling)
    np.testing.assert_allclose(ours, _default_rope(d), rtol=1e-15)
    if d > 2:
        theirs, _ = _theirs(d, {"rope_type": "dynamic", "factor": 3.0}, seq_len=16,
                            max_position_embeddings=16)
        np.testing.assert_allclose(ours, theirs, rtol=RTOL)
        longer, _ = rope_frequencies(d, np.arange(17), scaling=scaling)
        assert np.all(longer[1:] < ours[1:])  # one position more: the base grows


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_default_betas_are_32_and_1(truncate):
    # d 64, base 10000, original context 2048: beta_fast 32 puts the ramp's start at pair 8
    # (33 would put it at 7), so the default is pinned
    parameters = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048,
                  "truncate": truncate}
    ours, our_factor = rope_frequencies(64, np.arange(4), scaling=parameters)
    spelled, _ = rope_frequencies(64, np.arange(4),
                                  scaling={**parameters, "beta_fast": 32, "beta_slow": 1})
    np.testing.assert_array_equal(ours, spelled)
    theirs, their_factor = _theirs(64, parameters)
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)
    assert our_factor == pytest.approx(their_factor, rel=1e-12)


@pytest.mark.parametrize("factor", [0.5, 1.0, 1.5, 2.0, 40.0])
@pytest.mark.parametrize("mscales", [{}, {"mscale": 0.7}, {"mscale_all_dim": 0.7},
                                     {"mscale": 0.7, "mscale_all_dim": 1.3}])
def test_yarn_attention_factor(factor, mscales):
    """m(s) = 0.1 s ln(factor) + 1 for factor > 1, else 1; m(1) unless both mscales are given,
    then m(mscale) / m(mscale_all_dim)."""
    parameters = {"rope_type": "yarn", "factor": factor,
                  "original_max_position_embeddings": 2048, **mscales}
    _, ours = rope_frequencies(64, np.arange(4), scaling=parameters)

    def m(s):
        return 0.1 * s * math.log(factor) + 1.0 if factor > 1 else 1.0

    both = len(mscales) == 2
    expected = m(mscales["mscale"]) / m(mscales["mscale_all_dim"]) if both else m(1.0)
    assert ours == pytest.approx(expected, rel=1e-15)
    assert ours == pytest.approx(_theirs(64, parameters)[1], rel=1e-12)
