"""README.md's "Check your own kernel" runs against torch and transformers from tests/ too (the
root conftest.py runs README.md's blocks with sybil where pytest is given README.md, as setup.cfg's
testpaths do; `pytest tests` alone would leave them out): each ```python block of the section in
order, in one namespace, a `>>>` block as a doctest whose output must match."""
import doctest
import re
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the section compares with torch")
pytest.importorskip("transformers", reason="the section compares with transformers")

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
SECTION = README.split("## Check your own kernel\n", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, re.S)


def test_the_section_holds_its_checks():
    assert len(BLOCKS) >= 6
    # every block runs where torch and transformers are installed: no other skip condition
    skips = re.findall(r"<!-- skip: next if\((.*?),", SECTION)
    assert len(skips) == len(BLOCKS) and set(skips) == {"not have_torch"}


def test_every_block_of_the_section_runs_against_torch():
    namespace = {}
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for i, block in enumerate(BLOCKS):
        if block.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(block, namespace, f"block {i}", "README.md",
                                                       0)
            runner = doctest.DocTestRunner(optionflags=flags)
            runner.run(test, clear_globs=False)
            assert runner.failures == 0, f"README.md's kernel section, block {i}:\n{block}"
        else:
            exec(compile(block, f"README.md, kernel section block {i}", "exec"), namespace)
