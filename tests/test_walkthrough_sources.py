"""walkthrough.md shows real source: each ```py block after a `<!-- source: module.function -->`
marker must equal that function's current source, so the code cannot change behind the text.
The excerpt leaves out the docstring (that is for help(); the walkthrough's prose explains), and
nothing else. `python -m tests.test_walkthrough_sources` rewrites every excerpt from the code."""
import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

import minattn

WALKTHROUGH = Path(__file__).resolve().parent.parent / "walkthrough.md"
EXCERPT = re.compile(r"<!-- source: ([\w.]+) -->\n```py\n(.*?)```", re.S)


def excerpts():
    return EXCERPT.findall(WALKTHROUGH.read_text(encoding="utf-8"))


def _resolve(dotted):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def shown_source(obj):
    """inspect.getsource(obj) without its docstring's lines (of the function inside an autograd
    primitive, for a primitive)."""
    source = inspect.getsource(getattr(obj, "fun", obj))
    body = ast.parse(source).body[0].body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return source
    lines = source.splitlines(keepends=True)
    return "".join(lines[:body[0].lineno - 1] + lines[body[0].end_lineno:])


def sync():
    """Rewrite every excerpt in walkthrough.md from the current source."""
    text = WALKTHROUGH.read_text(encoding="utf-8")
    text = EXCERPT.sub(lambda m: f"<!-- source: {m[1]} -->\n```py\n{shown_source(_resolve(m[1]))}```",
                       text)
    WALKTHROUGH.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("dotted, shown", excerpts(), ids=[d for d, _ in excerpts()])
def test_excerpt_equals_current_source(dotted, shown):
    assert shown == shown_source(_resolve(dotted)), (
        f"walkthrough.md's excerpt of {dotted} differs from the code: update the walkthrough")


def test_every_public_core_function_is_shown():
    shown = {dotted.rsplit(".", 1)[1] for dotted, _ in excerpts()}
    missing = {name for name in minattn.__all__ if not name.startswith("init_")} - shown
    assert not missing, f"walkthrough.md shows no source for {sorted(missing)}"


def test_every_marker_is_followed_by_an_excerpt():
    text = WALKTHROUGH.read_text(encoding="utf-8")
    assert text.count("<!-- source:") == len(excerpts())


def test_every_pitfall_is_an_exercise_with_its_answer():
    from minattn.course import pitfalls

    text = WALKTHROUGH.read_text(encoding="utf-8")
    for name, node in pitfalls.PITFALLS.items():
        assert f"**`{name}`**" in text, f"walkthrough.md has no exercise for {name}"
        assert f"`{node}`" in text, f"walkthrough.md's answer for {name} is not {node}"


# What the reader meets before the gradients section is the math alone (issue 33): no dtype cast,
# no device or array-library switch, no thread limit, no autograd primitive, and no policy label
# (decorator) either: where minattn's function carries them, the walkthrough shows the plain form
# from minattn/course/teaching.py (tests/test_teaching_forms.py) and the function in Appendix C.
ENGINEERING = ("float16", "float32", "float64", "astype", "result_type", "getval", "isbox",
               "cupy", "primitive", "defvjp", "unbroadcast", "threadpool", "blas", "vjp",
               "numpy.", "errstate", "constant(", "gradient_by_hand", "like=", "like)")
PART_ONE = ("softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
            "split_heads", "merge_heads", "multi_head_attention", "layer_norm", "feed_forward",
            "encoder_block", "encoder")


def _before_gradients():
    text = WALKTHROUGH.read_text(encoding="utf-8")
    heading = re.search(r"^## (\d+\. )?Gradients", text, re.M)
    assert heading, "walkthrough.md has no Gradients section"
    return EXCERPT.findall(text[:heading.start()])


def test_no_engineering_in_the_excerpts_before_the_gradients_section():
    for dotted, shown in _before_gradients():
        body = shown.lower()
        found = [word for word in ENGINEERING if word in body] + re.findall(r"^\s*@.*", body, re.M)
        assert not found, f"the excerpt of {dotted} shows engineering: {found}"


def test_every_part_one_concept_is_quoted_before_the_gradients_section():
    shown = {dotted.rsplit(".", 1)[1] for dotted, _ in _before_gradients()}
    assert not set(PART_ONE) - shown, f"not quoted: {sorted(set(PART_ONE) - shown)}"


if __name__ == "__main__":
    sync()
