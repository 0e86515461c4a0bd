import os

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
