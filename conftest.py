"""Runs walkthrough.md (and README.md's examples) as a test: every ```python block executes, and `>>>` lines must print
exactly what the document shows (sybil). ```py blocks are source excerpts, checked against the
code by tests/test_walkthrough_sources.py instead."""
from doctest import ELLIPSIS, NORMALIZE_WHITESPACE

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

from minattn.engine import threads

# The whole suite (this process: the tests, walkthrough.md, README.md) runs every call on the BLAS
# threads in force, not on the count timing chose (engine/threads.py), so no test's numbers
# depend on which count won a race on a busy machine; tests/test_decode_threads.py turns the
# timing on for its own tests.
threads.TIMED_THREADS = False

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE),
             SkipParser()],
    patterns=["walkthrough.md", "README.md"],
).pytest()
