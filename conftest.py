"""Runs walkthrough.md (and README.md's examples) as a test: every ```python block executes, and `>>>` lines must print
exactly what the document shows (sybil). ```py blocks are source excerpts, checked against the
code by tests/test_walkthrough_sources.py instead."""
from doctest import ELLIPSIS, NORMALIZE_WHITESPACE

from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE),
             SkipParser()],
    patterns=["walkthrough.md", "README.md"],
).pytest()
