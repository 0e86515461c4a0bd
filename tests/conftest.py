import os

from hypothesis import HealthCheck, settings

# deadline=None: timing varies on shared machines, and a slow example is not a wrong one.
settings.register_profile("dev", max_examples=100, deadline=None)
# CI: fewer examples, derandomized so a red run is reproducible from the same commit.
settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
