import json
import os

import pytest
from hypothesis import HealthCheck, Phase, settings

# deadline=None: timing varies on shared machines, and a slow example is not a wrong one.
settings.register_profile("dev", max_examples=100, deadline=None)
# CI: fewer examples, derandomized so a red run is reproducible from the same commit.
settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
if "MUTANT_UNDER_TEST" in os.environ:
    # Under mutmut (tests/MUTANTS.md), the same examples without shrinking: a failing example
    # kills the mutant all the same, and shrinking it (for a readable report nobody reads here)
    # took minutes per mutant. No example database either, so each mutant runs the same examples.
    settings.register_profile(
        "ci", max_examples=25, deadline=None, derandomize=True, database=None,
        phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_collection_modifyitems(items):
    """Under mutmut, run the fastest tests first: mutmut stops a mutant at its first failing
    test, so a mutant that many tests kill is killed by a fast one (the same tests run; only
    their order changes). Durations are those mutmut recorded (mutants/mutmut-stats.json)."""
    if "." not in os.environ.get("MUTANT_UNDER_TEST", ""):  # not running a mutant
        return
    try:
        with open("mutmut-stats.json") as f:
            durations = json.load(f)["duration_by_test"]
    except (OSError, ValueError, KeyError):
        return
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))


@pytest.fixture
def float64_islands():
    """The test's torch peers (transformers, PEFT, TransformerLens) compute in float64 where they
    would compute in float32 inside a float64 model (tests/float64_peers.py says how)."""
    try:
        from .float64_peers import float64_throughout
    except ImportError:  # no torch: the tests that use this fixture skip on their own
        yield
        return
    with float64_throughout():
        yield
