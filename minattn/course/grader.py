"""The grader: `python -m minattn check FILE.py` holds a student's functions to minattn's
properties (minattn/course/properties.py).

FILE may define any of minattn's public functions, by their minattn names and signatures (plain
`import numpy as np` is fine). Each one it really implements (a body that is more than
`raise NotImplementedError`) is swapped in with `minattn.swap`, so minattn's own composites call
it too: a student's softmax runs inside attention, multi-head attention and the encoder block.
Then every property that exercises a swapped function runs, with a fixed, derandomized
hypothesis budget, and the report gives per property its statement, PASS or FAIL, and for a
failure the smallest counterexample hypothesis found and a hint.

Exit codes: 0 every property checked passed; 1 a property failed, or FILE implements nothing
to check; 2 FILE cannot be loaded (missing, a syntax error, an import error) or a function's
signature does not match minattn's. Needs hypothesis (the extra `check`).
"""
import ast
import contextlib
import importlib.util
import inspect
import io
import shutil
import sys
import textwrap
import warnings
from pathlib import Path

import minattn

EXERCISES = Path(__file__).parent / "exercises"


class CannotCheck(Exception):
    """FILE cannot be graded (exit code 2): the message says why."""


def load(path):
    """FILE -> its module; raises CannotCheck naming the reason."""
    path = Path(path)
    if not path.is_file():
        raise CannotCheck(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"_student_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise CannotCheck(f"{path}: syntax error on line {error.lineno}: {error.msg}") from None
    except Exception as error:  # an import error, or code at the top level that fails
        raise CannotCheck(f"{path}: cannot be loaded: {type(error).__name__}: {error}") from None
    return module


def is_stub(function):
    # A body that only raises NotImplementedError (after its docstring) is not an attempt.
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0].body
    except (OSError, TypeError, SyntaxError):
        return False
    body = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
            and "NotImplementedError" in ast.unparse(body[0].exc))


def attempted(module):
    """-> ({name: function} FILE implements, [names FILE leaves as stubs])."""
    functions, stubs = {}, []
    for name in minattn.__all__:
        function = getattr(module, name, None)
        if callable(function) and getattr(function, "__module__", None) == module.__name__:
            (stubs.append(name) if is_stub(function) else functions.__setitem__(name, function))
    for name, function in functions.items():
        theirs = inspect.signature(getattr(minattn, name)).parameters
        mine = inspect.signature(function).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in mine.values())
        missing = [p for p in theirs if p not in mine and not takes_any]
        if missing:
            raise CannotCheck(f"{name}{inspect.signature(function)} does not take "
                              f"{', '.join(missing)}; minattn's is {name}{inspect.signature(getattr(minattn, name))}")
    return functions, stubs


def run_property(prop, max_examples, shrink=True):
    """-> None if the property holds on max_examples examples, else (what failed, counterexample).
    shrink=False reports the first failing example as found (faster; for tests)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=max_examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False,
              report_multiple_bugs=False,
              phases=[ph for ph in Phase if shrink or ph not in (Phase.shrink, Phase.explain)])
    @given(st.data())
    def check(data):
        prop.check(data)

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # a student's overflow warning is not the verdict
        try:
            check()
        except Exception as error:
            notes = [n for n in getattr(error, "__notes__", []) if n.startswith("Draw ")]
            reason = f"{type(error).__name__}: {error}".strip().splitlines()
            return " ".join(reason)[:400], "\n".join(notes)
    return None


def grade(functions, max_examples=20, out=sys.stdout, shrink=True):
    """Swap `functions` in, run every property that exercises one; -> number of failures."""
    from . import properties

    chosen = [p for p in properties.PROPERTIES if p.uses & set(functions)]
    failures = 0
    with minattn.swap(**functions):
        for prop in chosen:
            result = run_property(prop, max_examples, shrink)
            print(f"{'PASS' if result is None else 'FAIL'}  {prop.name}: {prop.statement}", file=out)
            if result is not None:
                failures += 1
                reason, example = result
                print(textwrap.indent(f"what failed: {reason}", "      "), file=out)
                if example:
                    print(textwrap.indent(f"smallest counterexample found:\n{example}", "      "), file=out)
                print(textwrap.indent(f"hint: {prop.hint}", "      "), file=out)
    print(f"{len(chosen)} properties checked: {len(chosen) - failures} passed, {failures} failed",
          file=out)
    return failures


def check_file(path, max_examples=20, out=sys.stdout, shrink=True):
    """The `check` command on FILE -> exit code."""
    try:
        functions, stubs = attempted(load(path))
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return 2
    if not functions:
        print(f"{path} implements none of minattn's public functions yet "
              f"({', '.join(stubs) + ' still raise NotImplementedError' if stubs else 'none defined'}): "
              "nothing to check", file=out)
        return 1
    print(f"checking {', '.join(functions)} from {path}, inside minattn's own composites"
          + (f" (not attempted yet: {', '.join(stubs)})" if stubs else ""), file=out)
    return 1 if grade(functions, max_examples, out, shrink) else 0


def pitfall_target(name):
    """A pitfall -> the public function it stands in for (the one with its signature)."""
    from . import pitfalls

    if name not in pitfalls.PITFALLS:
        raise CannotCheck(f"no pitfall {name!r}; the pitfalls are: {', '.join(pitfalls.PITFALLS)}")
    pitfall = getattr(pitfalls, name)
    for public in minattn.__all__:
        if inspect.signature(getattr(minattn, public)) == inspect.signature(pitfall):
            return public, pitfall
    raise CannotCheck(f"pitfall {name!r} has no public counterpart")  # pragma: no cover


def check_pitfall(name, max_examples=20, out=sys.stdout, shrink=True):
    """The worked example: grade a pitfall as if a student had written it -> exit code."""
    try:
        public, pitfall = pitfall_target(name)
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return 2
    summary = inspect.getdoc(pitfall).splitlines()[0]
    print(f"pitfall {name} stands in for {public}: {summary}", file=out)
    return 1 if grade({public: pitfall}, max_examples, out, shrink) else 0


def copy_exercises(folder, out=sys.stdout):
    """The `exercises` command: copy the stub files into `folder` (never over existing files)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stubs = sorted(EXERCISES.glob("[0-9]*.py"))
    clashes = [s.name for s in stubs if (folder / s.name).exists()]
    if clashes:
        print(f"cannot copy: {folder} already has {', '.join(clashes)} (nothing was changed)", file=out)
        return 2
    for stub in stubs:
        shutil.copyfile(stub, folder / stub.name)
    print(f"copied {len(stubs)} exercises to {folder}: {', '.join(s.name for s in stubs)}\n"
          f"implement one, then run: python -m minattn check {folder / stubs[0].name}", file=out)
    return 0
