"""A test peer's names outside its documented API, reached in one place.

A parity test uses a peer's public behaviour: a model built from its config, its documented
functions. Where no public entry point reaches what a test compares (Qwen3-Next's delta-rule
functions with their own chunk size and initial state, say), the test names the attribute through
`undocumented(module, name)`, with a comment saying why; the lock (requirements/test-lock.txt)
holds the version it was read from. When a release moves the name, the test fails with one line
naming the peer, its version and what moved, not with an ImportError at collection.
"""
import importlib
import importlib.metadata

import pytest


def undocumented(module, name):
    """module.name, or a failure naming the peer, its installed version and the name. `module`
    may be a module's dotted name."""
    if isinstance(module, str):
        try:
            module = importlib.import_module(module)
        except ModuleNotFoundError:
            _gone(module, None)
    try:
        return getattr(module, name)
    except AttributeError:
        _gone(module.__name__, name)


def _gone(module, name):
    peer = module.split(".")[0]
    version = importlib.metadata.version(peer.replace("_", "-"))
    what = module if name is None else f"{module}.{name}"
    pytest.fail(f"{peer} {version}: {what} is gone (the test reads it outside {peer}'s "
                f"documented API; see the comment where it is used)", pytrace=False)
