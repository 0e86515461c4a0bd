import json
import os
import sys

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


# Under pytest-xdist (README: -n 2 on 2 cores), each worker process runs its BLAS and torch on its
# share of the cores: cores // workers threads (1 on the README's 2 cores). At the default count,
# each worker's 2 OpenBLAS threads wait spinning for the core the other worker holds, and the
# suite took almost twice the CPU time (docs/benchmarks.md, "The suite's CPU time", has the
# runs). Only this process: the children tests start keep the default. A test about threads
# sets its own limit (threadpoolctl.threadpool_limits), as those in test_threads.py,
# test_one_blas_thread.py and the like do. Outside xdist nothing changes.
_SHARE = {"seen": ()}


def _cores_share(config):
    workers = getattr(config, "workerinput", {}).get("workercount")
    if not workers:
        return None
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    return max(1, cores // int(workers))


def _limit_threads(share):
    """BLAS and OpenMP through threadpoolctl, and torch's own pool: again whenever torch or SciPy
    (which bring their own libraries) were imported since (a test may import them late)."""
    seen = tuple(name for name in ("torch", "scipy") if name in sys.modules)
    if seen == _SHARE["seen"] and "limits" in _SHARE:
        return
    _SHARE["seen"] = seen
    if "torch" in seen:
        sys.modules["torch"].set_num_threads(share)
    try:
        import threadpoolctl
    except ImportError:
        return
    _SHARE["limits"] = threadpoolctl.threadpool_limits(share)


def pytest_runtest_setup(item):
    share = _cores_share(item.config)
    if share is not None:
        _limit_threads(share)


# Under pytest-xdist's --dist loadfile, a file goes whole to the next worker free, by default the
# files with the most tests first (xdist's --loadscope-reorder): the slowest files then, with 4
# and 5 tests (tests/test_train*.py), came last, and one worker ran them alone at the end while
# the other sat idle. Here the slowest go first, slowest first, and the rest, in the order
# collected, fill in behind them (docs/benchmarks.md, "The suite's CPU time"). The same tests
# run, each file's in its own order; only the order of the files changes.
SLOWEST_FILES = [  # the suite's run of 2026-12-07, 18:21 UTC, with the threads above
    "tests/test_grader.py", "tests/test_language_model.py", "tests/test_heads_of_a_model.py",
    "walkthrough.md", "tests/test_walkthrough_solutions.py", "tests/test_grader_root_classes.py",
    "tests/test_first_reading.py", "tests/test_train_lm.py", "tests/test_shakespeare_cli.py",
    "tests/test_cli_generate.py", "tests/test_train.py", "tests/test_llama_cpp_converter.py",
    "tests/test_data_flow_figures.py", "tests/test_cli_chat.py", "tests/test_html_page.py",
    "tests/test_grader_contract.py",
]


def pytest_configure(config):
    # the files dealt in the order the workers collected (SLOWEST_FILES first), not by test count
    if getattr(config.option, "dist", "no") == "loadfile" and hasattr(config.option,
                                                                       "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    if getattr(config, "workerinput", None) is not None:  # an xdist worker: the order it deals
        rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable
    _fastest_first_under_mutmut(items)


def _fastest_first_under_mutmut(items):
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
