"""Every exercise box of walkthrough.md, followed literally (issue 62): the box gives the full
command its stub's docstring gives; every parameter it tells the student to leave out is one of
the stub's; every solution shown or folded for the exercise, pasted into its stub as a student
would (after the stub's own function, which it replaces, with the line the box tells them to
add), passes that command; and every stub documents the parameters, with the defaults, of the
minattn function it mirrors, and says what that function does with them. Exercises 1 to 4 ask
for something the text has not printed (a bug to find in the form shown under the box, or an
inverse to write), their answers folded: each answer passes, and each form with a bug fails.
Part I's and section 6's plain forms, shown above their boxes, are pasted by
tests/test_first_reading.py."""
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import minattn
from minattn.course import teaching

ROOT = Path(__file__).resolve().parent.parent
TEXT = (ROOT / "walkthrough.md").read_text(encoding="utf-8")
EXERCISES = ROOT / "minattn" / "course" / "exercises"
STUBS = {int(p.name[:2]): p for p in EXERCISES.glob("[0-9][0-9]_*.py")}
BOX = re.compile(r"^> \*\*Exercises? (\d+(?: and \d+)?)(, finished)?\.\*\*(.*)$", re.M)
COMMAND = re.compile(r"python -m minattn check my_attention/(\d\d)_\w+\.py(?: --part \d)?")
FOLDED = re.compile(r"^<details><summary>(Solution[^<]*)</summary>\n(.*?)^</details>$",
                    re.M | re.S)
CODE = re.compile(r"(?:<!-- source: ([\w.]+) -->\n)?```py\n(.*?)```", re.S)
BOXES = [(int(n), bool(finished), box, match.end())
         for match in BOX.finditer(TEXT)
         for n, finished, box in [match.groups()]
         for n in n.split(" and ")]


def stub_command(number):
    # the command the stub's docstring gives, the first line a student reads
    return COMMAND.search(" ".join(STUBS[number].read_text(encoding="utf-8").split()))[0]


# the plain forms of minattn.course.teaching shown in the text, where they start
EXCERPTS = [(match.start(), dotted.rsplit(".", 1)[1], shown)
            for match in re.finditer(r"<!-- source: ([\w.]+) -->\n```py\n(.*?)```", TEXT, re.S)
            for dotted, shown in [match.groups()] if dotted.startswith("minattn.course.teaching.")]


def folded_solution(number):
    """-> (its summary, [(dotted or None, code)]) of the folded solution right after the box of
    exercise `number`, or None when its box shows the solution above instead."""
    [(box, end)] = [(box, end) for n, finished, box, end in BOXES if n == number and not finished]
    if "folded below" not in box:
        return None
    summary, body = FOLDED.search(TEXT, end).groups()
    return summary, CODE.findall(body)


def test_every_exercise_has_a_box_and_every_box_gives_its_stubs_command_in_full():
    assert sorted({n for n, *_ in BOXES}) == sorted(STUBS)
    for number, finished, box, _ in BOXES:
        commands = [m[0] for m in COMMAND.finditer(box)]
        assert stub_command(number) in commands, (number, finished, commands)


def test_what_a_box_says_to_leave_out_is_in_the_stub():
    # exercise 11's box once said "the stub's last parameter", meaning n_kv_heads: the last was
    # cache, the subject of the exercise
    for number, _, box, _ in BOXES:
        assert "last parameter" not in box, number
        for said in re.findall(r"[Ll]eave out (?:\(or ignore\) |its )?((?:`\w+`(?:,| and| or)? ?)+)",
                               box):
            stub = STUBS[number].read_text(encoding="utf-8")
            for name in re.findall(r"`(\w+)`", said):
                assert re.search(rf"\b{name}\b", stub.split('"""', 3)[2]), (number, name)


FOLDED_NUMBERS = [n for n in sorted(STUBS) if folded_solution(n)]


def test_the_folded_solutions_are_those_the_boxes_announce():
    assert FOLDED_NUMBERS == [1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 14, 15, 16], FOLDED_NUMBERS


ANSWERED = "The answer is folded below."  # a box that builds on a form shown above it


def test_part_ones_exercises_ask_for_what_the_text_has_not_printed():
    # exercises 1 to 4 once said "the solution is the plain form above": copying
    for number in (1, 2, 3, 4):
        [box] = [b for n, f, b, _ in BOXES if n == number and not f]
        assert ANSWERED in box and "plain form above" not in box, number
        summary, blocks = folded_solution(number)
        asked = [code for _, code in blocks]
        # what the answer holds is not printed outside it (a bug's fix, or a form not shown)
        outside = FOLDED.sub("", TEXT)
        assert all(code not in outside for code in asked), number


def bug_form(number):
    """The form with a bug that the box of exercise `number` shows right under it, or None."""
    [(box, end)] = [(b, end) for n, f, b, end in BOXES if n == number and not f]
    if ANSWERED not in box:
        return None
    between = TEXT[end:TEXT.index("<details>", end)]
    found = re.findall(r"^```py\n(.*?)```", between, re.M | re.S)
    return found[0] if found else None


BUG_NUMBERS = [n for n in sorted(STUBS) if bug_form(n)]


def test_the_bugs_to_find_are_those_of_exercises_one_to_three():
    assert BUG_NUMBERS == [1, 2, 3], BUG_NUMBERS


@pytest.mark.parametrize("number", BUG_NUMBERS)
def test_each_form_with_a_bug_fails_its_exercises_command_and_its_fix_differs_little(number,
                                                                                     tmp_path):
    # the student is told to grade the form with the bug "to see the grader find it": it fails
    pytest.importorskip("hypothesis")
    bug, [(_, fixed)] = bug_form(number), folded_solution(number)[1]
    assert bug != fixed and bug.count("\n") == fixed.count("\n"), number  # one line changed
    assert sum(a != b for a, b in zip(bug.splitlines(), fixed.splitlines())) == 1, number
    run = grade(number, bug, tmp_path)
    assert run.returncode == 1 and "FAIL  " in run.stdout, run.stdout + run.stderr


def grade(number, code, tmp_path):
    # the code pasted after the stub, graded by the command the stub gives
    stub = STUBS[number]
    path = tmp_path / "my_attention" / stub.name
    path.parent.mkdir()
    path.write_text(stub.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")
    command = stub_command(number).split()
    return subprocess.run([sys.executable, *command[1:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})


def pasted(number):
    """The folded solution as a student pastes it: the plain forms it shows (teaching.py's, or a
    plain block), with what the box says to add; None for minattn's own source, which the
    student reads but cannot paste (it calls minattn's private helpers)."""
    summary, blocks = folded_solution(number)
    if "minattn's source" in summary:
        return None
    code = []
    for dotted, shown in blocks:
        assert not dotted or dotted.startswith("minattn.course.teaching."), (number, dotted)
        if dotted:  # what the text shows is what teaching.py holds
            function = getattr(teaching, dotted.rsplit(".", 1)[1])
            assert shown == inspect.getsource(function), dotted
        code.append(shown)
    [(box, end)] = [(b, end) for n, f, b, end in BOXES if n == number and not f]
    if ANSWERED in box:  # the stub's other functions: their plain forms shown before the box
        source = STUBS[number].read_text(encoding="utf-8")
        answered = set(re.findall(r"^def (\w+)\(", "".join(code), re.M))
        code = [shown for at, name, shown in EXCERPTS if at < end and name not in answered
                and re.search(rf"^def {name}\(", source, re.M)] + code
    for added in re.findall(r"give `cos` and `sin` the dtype of `x` before they multiply it: "
                            r"`([^`]+)`", box):  # exercise 10: "added after its `cos, sin` line"
        after = re.search(r"with that line added after its `([^`]+)` line", box)[1]
        code = [re.sub(rf"^( *)({re.escape(after)}.*)$", rf"\1\2\n\1{added}", c, flags=re.M)
                for c in code]
        assert added in "".join(code), number
    return "\n\n".join(code)


@pytest.mark.parametrize("number", FOLDED_NUMBERS)
def test_each_folded_solution_pasted_passes_its_exercises_command(number, tmp_path):
    pytest.importorskip("hypothesis")
    code = pasted(number)
    if code is None:  # minattn's own source: tests/test_grader.py grades minattn itself
        summary, blocks = folded_solution(number)
        assert all(dotted and not dotted.startswith("minattn.course.") for dotted, _ in blocks)
        return
    run = grade(number, code, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout and " 0 failed" in run.stdout, run.stdout


@pytest.mark.parametrize("number", FOLDED_NUMBERS)
def test_a_folded_solution_takes_the_stubs_parameters_less_those_the_box_leaves_out(number):
    code = pasted(number)
    if code is None:
        return
    namespace = {}
    stub = STUBS[number].read_text(encoding="utf-8")
    exec(compile(stub + "\n\n" + code, str(STUBS[number]), "exec"), namespace)
    stub_namespace = {}
    exec(compile(stub, str(STUBS[number]), "exec"), stub_namespace)
    box = [b for n, f, b, _ in BOXES if n == number and not f][0]
    later = re.search(r"parameters for later parts|[Ll]eave out", box)
    for name in re.findall(r"^def (\w+)\(", stub, re.M):
        mine = inspect.signature(namespace[name]).parameters
        full = inspect.signature(stub_namespace[name]).parameters
        assert list(mine) == [p for p in full if p in mine], (number, name)
        assert all(mine[p] == full[p] for p in mine), (number, name)
        assert set(mine) == set(full) or later, (number, name, set(full) - set(mine))


# --- the stubs and the functions they mirror --------------------------------------------------

def mirrored(name):
    # the function a stub's function mirrors: minattn's public one, or the plain form when
    # minattn's is not public (the softmax's VJP sits beside its softmax)
    return getattr(minattn, name, None) or getattr(teaching, name)


def stub_functions():
    found = []
    for number, path in sorted(STUBS.items()):
        source = path.read_text(encoding="utf-8")
        namespace = {}
        exec(compile(source, str(path), "exec"), namespace)
        found += [(number, name, namespace[name]) for name in re.findall(r"^def (\w+)\(", source,
                                                                         re.M)]
    return found


@pytest.mark.parametrize("number, name, function", stub_functions(),
                         ids=[f"{n:02d}-{name}" for n, name, _ in stub_functions()])
def test_each_stub_documents_the_parameters_and_defaults_of_the_function_it_mirrors(
        number, name, function):
    stub = inspect.signature(function).parameters
    library = inspect.signature(mirrored(name)).parameters
    for parameter in stub.values():
        assert parameter.name in library, (number, name, parameter.name)
        theirs = library[parameter.name]
        assert (parameter.kind, parameter.default) == (theirs.kind, theirs.default), (
            number, name, parameter, theirs)
        assert re.search(rf"\b{parameter.name}\b", function.__doc__), (number, name, parameter)


# What minattn's function does with a parameter beside passing it on, as the stub must say it
# (exercise 8's stub once said dropout was "passed on to multi_head_attention and feed_forward"
# while minattn.encoder_block also drops each sublayer's output).
SAID = {("encoder_block", "_dropout"): "drops each sublayer's output"}


@pytest.mark.parametrize("number, name, function", stub_functions(),
                         ids=[f"{n:02d}-{name}" for n, name, _ in stub_functions()])
def test_each_stub_says_where_its_function_passes_a_parameter_on(number, name, function):
    # where a stub says a parameter is "passed on to" functions, every call of minattn's function
    # that reads the parameter is accounted for: a public one by its name, a private one by
    # what it does (SAID)
    doc = " ".join(function.__doc__.split())
    library = inspect.unwrap(mirrored(name))
    source = re.sub(r'""".*?"""', "", inspect.getsource(library), count=1, flags=re.S)
    for parameter in inspect.signature(function).parameters:
        called = set(re.findall(rf"(\w+)\([^()]*\b{parameter}\b", source))
        passed = re.search(rf"\b{parameter}\b[^.;]*?\(passed on to ([^)]*)\)", doc)
        if not passed:
            continue
        for callee in called - {library.__name__} - {c for c in called if "check" in c}:
            if callee.startswith("_"):
                assert SAID.get((name, callee), callee) in doc, (number, name, parameter, callee)
            else:
                assert callee in passed[1] or callee in doc, (number, name, parameter, callee)


# --- a box that sends the student back to an earlier exercise ----------------------------------

AGAIN = [(int(numbers.split()[0]), m[0], match.end()) for match in BOX.finditer(TEXT)
         for numbers, _, box in [match.groups()] for m in COMMAND.finditer(box)
         if m[1].lstrip("0") not in numbers.split(" and ")]


def test_the_boxes_that_send_back_to_an_earlier_exercise():
    assert [(n, c) for n, c, _ in AGAIN] == [
        (11, "python -m minattn check my_attention/03_masks.py --part 2")], AGAIN


@pytest.mark.parametrize("number, command, end", AGAIN, ids=[c for _, c, _ in AGAIN])
def test_an_earlier_exercise_checked_again_passes_with_the_plain_forms_shown_before(
        number, command, end, tmp_path):
    # exercise 11's box: "add them to your causal_mask and check it again": the plain forms of
    # the stub's functions, the last shown before the box, pasted into the stub
    pytest.importorskip("hypothesis")
    stub = STUBS[int(COMMAND.search(command)[1])]
    source = stub.read_text(encoding="utf-8")
    names = re.findall(r"^def (\w+)\(", source, re.M)
    shown = {name: code for at, name, code in EXCERPTS if at < end and name in names}
    assert sorted(shown) == sorted(names), (names, sorted(shown))
    path = tmp_path / "my_attention" / stub.name
    path.parent.mkdir()
    path.write_text(source + "\n\n" + "\n\n".join(shown[n] for n in names), encoding="utf-8")
    run = subprocess.run([sys.executable, *command.split()[1:]], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0 and "FAIL" not in run.stdout, run.stdout + run.stderr
