"""RoPE's frequency schedules (minattn/rope_scaling.py) against transformers' own
ROPE_INIT_FUNCTIONS, on configs drawn at random: the inverse frequencies and the attention
factor of linear, dynamic NTK, YaRN (with and without truncation, mscale, explicit attention
factor) and Llama 3. transformers computes in float32, hence the tolerance."""
import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

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

# transformers computes in float32 (its arange cast to torch.float, then pow and YaRN's ramp
# blended in): against minattn's float64 that is a few dozen float32 ulps (6e-8 each), 2.02e-6
# found at d 64, base 500, YaRN's factor 12 (hypothesis, 2026-11-28); a wrong formula is off by
# far more (a ramp or a beta swapped: 1e-3 and up)
RTOL = 128 * float(np.finfo(np.float32).eps)  # 1.5e-5

heads = st.sampled_from([2, 4, 6, 8, 16, 64, 128])  # RoPE width d (head_dim)
bases = st.sampled_from([2.0, 10.0, 500.0, 10000.0, 500000.0, 1e6])


def _theirs(d, base, parameters, seq_len=None, max_position_embeddings=2048):
    config = transformers.LlamaConfig(
        hidden_size=d * 2, num_attention_heads=2, head_dim=d,
        max_position_embeddings=max_position_embeddings,
        rope_parameters={"rope_theta": base, **parameters})
    inv_freq, factor = _rope_init(parameters["rope_type"])(config, None, seq_len=seq_len)
    return inv_freq.double().numpy(), factor


def _check(d, base, parameters, positions, rtol=RTOL, **theirs):
    ours, our_factor = rope_frequencies(d, positions, base=base, scaling=parameters)
    expected, their_factor = _theirs(d, base, parameters, **theirs)
    assert ours.shape == (d // 2,)
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=0)
    assert our_factor == pytest.approx(their_factor, rel=1e-12)


@given(d=heads, base=bases, factor=st.floats(1.0, 64.0))
def test_linear_equals_transformers(d, base, factor):
    _check(d, base, {"rope_type": "linear", "factor": factor}, np.arange(8))


@given(d=heads, base=bases, factor=st.floats(1.0, 16.0), n=st.integers(1, 64),
       length=st.integers(1, 1000))
@example(d=2, base=10.0, factor=2.0, n=16, length=40)
def test_dynamic_equals_transformers_at_every_length(d, base, factor, n, length):
    """The base grows with L = max(positions) + 1 once L passes max_position_embeddings n;
    transformers gets L as seq_len."""
    if d == 2:  # d / (d - 2) has no value: transformers divides by zero too
        d = 4
    positions = np.arange(length)[::-1]  # the largest position, not the last, sets L
    parameters = {"rope_type": "dynamic", "factor": factor}
    ours, our_factor = rope_frequencies(
        d, positions, base=base, scaling={**parameters, "max_position_embeddings": n})
    expected, their_factor = _theirs(d, base, parameters, seq_len=length,
                                     max_position_embeddings=n)
    np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=0)
    assert our_factor == their_factor == 1.0


yarn_configs = st.fixed_dictionaries(
    {"rope_type": st.just("yarn"), "factor": st.floats(1.0, 64.0),
     "original_max_position_embeddings": st.sampled_from([16, 128, 2048, 4096, 32768, 10 ** 6])},
    optional={"beta_fast": st.floats(1.0, 64.0), "beta_slow": st.floats(0.05, 1.0),
              "mscale": st.floats(0.1, 2.0), "mscale_all_dim": st.floats(0.1, 2.0),
              "attention_factor": st.floats(0.5, 2.0), "truncate": st.booleans()})


@given(d=heads, base=bases, parameters=yarn_configs)
@example(d=64, base=10000.0, parameters={"rope_type": "yarn", "factor": 40.0,  # DeepSeek-V3
                                         "original_max_position_embeddings": 4096,
                                         "beta_fast": 32.0, "beta_slow": 1.0,
                                         "mscale": 1.0, "mscale_all_dim": 1.0})
@example(d=8, base=2.0, parameters={"rope_type": "yarn", "factor": 4.0,  # ramp up to d - 1
                                    "original_max_position_embeddings": 10 ** 6})
@example(d=8, base=2.0, parameters={"rope_type": "yarn", "factor": 4.0,  # ramp 0 .. d - 1
                                    "original_max_position_embeddings": 128})
@example(d=16, base=10000.0, parameters={"rope_type": "yarn", "factor": 4.0,  # low == high
                                         "original_max_position_embeddings": 4096,
                                         "beta_fast": 1.0, "beta_slow": 1.0, "truncate": False})
@example(d=16, base=10000.0, parameters={"rope_type": "yarn", "factor": 1.0,  # no scaling
                                         "original_max_position_embeddings": 4096,
                                         "mscale": 0.7, "mscale_all_dim": 1.3})
def test_yarn_equals_transformers(d, base, parameters):
    _check(d, base, parameters, np.arange(8), max_position_embeddings=int(
        parameters["factor"] * parameters["original_max_position_embeddings"]))


@given(d=heads, base=bases, factor=st.floats(1.0, 64.0), low=st.floats(0.5, 4.0),
       ratio=st.floats(1.1, 8.0), n=st.sampled_from([64, 2048, 8192, 131072]))
@example(d=128, base=10000.0, factor=8.0, low=0.5, ratio=1.125, n=2048)
def test_llama3_equals_transformers(d, base, factor, low, ratio, n):
    # transformers' float32 error in the ramp (turns - low) / (high - low) grows as high - low
    # shrinks: about 6e-8 * turns / (high - low), times up to factor - 1 in the result; 2e-5
    # covers ratio >= 1.1 (a mutated schedule is off by far more)
    _check(d, base, {"rope_type": "llama3", "factor": factor, "low_freq_factor": low,
                     "high_freq_factor": low * ratio, "original_max_position_embeddings": n},
           np.arange(8), rtol=2e-5)


def test_yarn_ramp_keeps_fast_pairs_and_divides_slow_pairs_by_the_factor():
    """The paper's rule, without transformers: a pair turning more than beta_fast times over the
    original context keeps its frequency, one turning fewer than beta_slow times is divided by
    the factor."""
    d, base, n, factor = 64, 10000.0, 4096, 8.0
    plain = base ** -(np.arange(0, d, 2) / d)
    ours, _ = rope_frequencies(d, np.arange(4), base=base, scaling={
        "rope_type": "yarn", "factor": factor, "original_max_position_embeddings": n,
        "truncate": False})
    turns = n * plain / (2 * math.pi)
    np.testing.assert_allclose(ours[turns > 32], plain[turns > 32], rtol=1e-12)
    np.testing.assert_allclose(ours[turns < 1], plain[turns < 1] / factor, rtol=1e-12)
    middle = (turns <= 32) & (turns >= 1)
    assert np.all(ours[middle] <= plain[middle]) and np.all(ours[middle] >= plain[middle] / factor)
