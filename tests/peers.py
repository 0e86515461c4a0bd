"""A test peer's names outside its documented API, reached in one place.

A parity test uses a peer's public behaviour: a model built from its config, its documented
functions. Where no public entry point reaches what a test compares (Qwen3-Next's delta-rule
functions with their own chunk size and initial state, say), the test names the attribute through
`undocumented(module, name)`, with a comment saying why; the lock (requirements/test-lock.txt)
holds the version it was read from. When a release moves the name, the test fails with one line
naming the peer, its version and what moved, not with an ImportError at collection.
"""
import importlib.metadata

import pytest


def undocumented(module, name):
    """module.name, or a failure naming the peer, its installed version and the name."""
    try:
        return getattr(module, name)
    except AttributeError:
        peer = module.__name__.split(".")[0]
        version = importlib.metadata.version(peer.replace("_", "-"))
        pytest.fail(f"{peer} {version}: {module.__name__}.{name} is gone (the test reads it "
                    f"outside {peer}'s documented API; see the comment where it is used)",
                    pytrace=False)
