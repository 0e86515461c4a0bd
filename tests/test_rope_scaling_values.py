"""Every numeric keyword of every RoPE scaling schedule is checked before use: a value the
schedule cannot use (0 where it divides or takes a log, a negative, NaN, inf, a string) is
refused naming scaling[key] (apply_rope's keyword; rope_scaling[key] in a model's), never a bare ZeroDivisionError or a math domain error, and
never a silent NaN. The valid limits (low_freq_factor = 0, mscale = 0: a factor of 1) run."""
import inspect
import math

import numpy as np
import pytest

import minattn as ma

X = np.random.default_rng(0).normal(size=(1, 2, 5, 8))  # [B, H, L, d_k]
POSITIONS = np.arange(5)
VALID = {
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0, "max_position_embeddings": 4},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 32.0,
             "beta_slow": 1.0, "attention_factor": 1.2, "mscale": 1.0, "mscale_all_dim": 0.5},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64},
    "longrope": {"short_factor": [1.0, 1.5, 2.0, 4.0], "long_factor": [1.0, 3.0, 8.0, 20.0],
                 "factor": 4.0, "original_max_position_embeddings": 3, "attention_factor": 1.1},
}
ZERO_ALLOWED = {"low_freq_factor", "mscale", "mscale_all_dim"}
CASES = [(rope_type, key) for rope_type, config in VALID.items() for key in config]


def rope(rope_type, **changes):
    return ma.apply_rope(X, POSITIONS, scaling={"rope_type": rope_type,
                                                **VALID[rope_type], **changes})


def test_the_valid_configs_run_and_are_finite():
    for rope_type in VALID:
        assert np.all(np.isfinite(rope(rope_type)))


def test_every_keyword_of_every_schedule_is_tried():
    # A schedule's keywords are its keyword-only parameters (check_rope_scaling reads the same).
    assert set(VALID) == set(ma.rope_scaling.SCHEDULES)
    for rope_type, schedule in ma.rope_scaling.SCHEDULES.items():
        keywords = [name for name, p in inspect.signature(schedule).parameters.items()
                    if p.kind is p.KEYWORD_ONLY]
        assert set(keywords) - {"truncate"} == set(VALID[rope_type]), rope_type


@pytest.mark.parametrize("rope_type, key", CASES)
@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, 0.0, "2"])
def test_a_value_the_schedule_cannot_use_is_refused_by_name(rope_type, key, bad):
    if bad == 0.0 and key in ZERO_ALLOWED:
        assert np.all(np.isfinite(rope(rope_type, **{key: bad})))  # a valid limit
        return
    with pytest.raises((ValueError, TypeError), match=rf"^scaling\['{key}'\] must be a "):
        rope(rope_type, **{key: bad})


@pytest.mark.parametrize("key", ["short_factor", "long_factor"])
@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, 0.0, "2"])
def test_a_longrope_factor_the_schedule_cannot_use_is_refused_by_name(key, bad):
    factors = list(VALID["longrope"][key])
    factors[2] = bad
    with pytest.raises((ValueError, TypeError), match=rf"^scaling\['{key}'\] must be a "):
        rope("longrope", **{key: factors})
    with pytest.raises(ValueError, match=rf"^longrope's {key} must hold one factor per rotated "
                                         r"feature pair, 4, got \(3,\)"):
        rope("longrope", **{key: VALID["longrope"][key][:3]})


@pytest.mark.parametrize("bad", ["no", 1, None])
def test_yarns_truncate_must_be_a_bool(bad):
    with pytest.raises(TypeError, match=r"^scaling\['truncate'\] must be a bool, got "):
        rope("yarn", truncate=bad)
