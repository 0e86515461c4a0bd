"""The grader at --part 1 names only what Part I has taught (issue 62): a week-1 student who
grades exercises 1 to 5 meets no property, parameter, function or properties file of a later
section (section 6's block, Part II, the second reading), no WAIT line for a later part and no
`--part` to run. What is later is derived from the properties' own part numbers and the files
that hold them, and from the exercises whose boxes stand in Part I of walkthrough.md."""
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")

from minattn.course import grader, properties  # noqa: E402
from tests.test_walkthrough_solutions import STUBS, pasted  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "walkthrough.md").read_text(encoding="utf-8")
PART_I = TEXT[TEXT.index("\n# Part I:"):TEXT.index("\n# Part II:")]
# Part I's exercises: those whose boxes stand in Part I
PART_I_EXERCISES = sorted({int(n) for numbers in re.findall(
    r"^> \*\*Exercises? (\d+(?: and \d+)?)", PART_I, re.M) for n in numbers.split(" and ")})
SOLUTIONS = Path(__file__).parent / "solutions"


def later_names():
    """What Part I does not teach, as the report would name it: the properties of a later part or
    held in a later exercise's file, those files, the functions only later exercises ask for, the
    parameters a later part adds, and the later parts themselves."""
    later = [p for p in properties.PROPERTIES
             if p.part > 1 or p.exercise not in PART_I_EXERCISES]
    mine = {p.of for p in properties.PROPERTIES if p.exercise in PART_I_EXERCISES}
    names = {p.name for p in later}
    names |= {f"properties/{p.check.__module__.rsplit('.', 1)[1]}.py" for p in later
              if p.exercise not in PART_I_EXERCISES}
    names |= {p.of for p in later} - mine
    names |= {parameter for parameters in grader.LATER_PARAMETERS.values()
              for parameter, part in parameters.items() if part is not None and part > 1}
    return names | {grader.PART_NAMES[part] for part in (2, 3, 4)} | {"section 6", "--part"}


def test_part_ones_exercises_and_the_later_names_are_found():
    assert PART_I_EXERCISES == [1, 2, 3, 4, 5], PART_I_EXERCISES
    names = later_names()  # the test must see what it looks for
    for expected in ("encoder_block_matches_the_paper", "softmax_takes_minus_inf_without_a_mask",
                     "dropout", "sinks", "align", "layer_norm",
                     "properties/ex14_attention_sinks.py"):
        assert expected in names, expected


def named(report):
    return sorted(name for name in later_names() if re.search(
        rf"(?<![\w/]){re.escape(name)}(?![\w])", report))


def report(paths):
    out = io.StringIO()
    verdict = grader.grade_files(paths, 5, out, shrink=False, part=1)
    return verdict, out.getvalue()


@pytest.mark.parametrize("number", PART_I_EXERCISES)
def test_part_one_names_nothing_later_for_the_walkthroughs_answers(number, tmp_path):
    # the answers folded in walkthrough.md, pasted into the stubs as a student would (softmax and
    # attention still without section 4's mask: their mask properties wait, and say section 4)
    path = tmp_path / STUBS[number].name
    path.write_text(STUBS[number].read_text(encoding="utf-8") + "\n\n" + pasted(number),
                    encoding="utf-8")
    verdict, out = report([path])
    assert verdict == "passes", out
    assert not named(out), (named(out), out)
    assert "what Part I (sections 1 to 5) teaches" in out


@pytest.mark.parametrize("files", [[f"{n:02d}" for n in PART_I_EXERCISES]]
                         + [[f"{n:02d}"] for n in PART_I_EXERCISES], ids=" ".join)
def test_part_one_names_nothing_later_for_complete_answers(files):
    # tests/solutions' answers take every parameter (dropout, sinks, align ...): the later
    # parts' properties are counted, not listed; all five files graded together too
    paths = [next(SOLUTIONS.glob(f"{n}_*.py")) for n in files]
    verdict, out = report(paths)
    assert verdict == "passes", out
    assert not named(out), (named(out), out)
    said = re.search(r"(\d+) more of later parts, not listed$", out.strip())
    assert said and int(said[1]) > 0, out  # what is left out is counted


def test_section_six_is_named_once_the_student_grades_its_functions():
    # exercise 8's box needs no --part: with the block graded, --part 1 checks section 6 too,
    # and runs the student's softmax inside it
    verdict, out = report([SOLUTIONS / "01_softmax.py", SOLUTIONS / "08_encoder_block.py"])
    assert verdict == "passes", out
    assert "PASS  encoder_block_matches_the_paper" in out
    assert "sections 1 to 6" in out and "WAIT  " not in out, out
    verdict, out = report([SOLUTIONS / "01_softmax.py"])
    assert "encoder_block" not in out and "more of later parts, not listed" in out, out


@pytest.mark.parametrize("number", PART_I_EXERCISES)
def test_a_part_one_stub_keeps_later_material_to_its_last_paragraph(number):
    # exercise 2's stub once described dropout and rng before what Part I asks: a week-1 student
    # meets later material only in the docstring's last paragraph, "For later parts", which
    # stays for the part-4 student
    source = STUBS[number].read_text(encoding="utf-8")
    docstrings = re.findall(r'^    """(.*?)"""', source, re.M | re.S)
    assert docstrings, number
    for docstring in docstrings:
        paragraphs = docstring.strip().split("\n\n")
        first = "\n\n".join(p for p in paragraphs if not p.strip().startswith("For later parts"))
        assert not named(first), (number, named(first))
        later = [p for p in paragraphs if p.strip().startswith("For later parts")]
        assert later in ([], [paragraphs[-1]]), (number, later)
    module = source.split('"""', 2)[1]  # the module's docstring, the first thing read
    assert not named(module), (number, named(module))
