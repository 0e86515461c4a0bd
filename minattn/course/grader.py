"""The grader: `python -m minattn check FILE.py` holds a student's functions to minattn's
properties (minattn/course/properties.py).

FILE may define any of minattn's public functions (and the course's own, such as softmax_vjp),
by their names and signatures (plain `import numpy as np` is fine). Each one it really
implements (a body that is more than `raise NotImplementedError`) is swapped in with
`minattn.swap`, so minattn's own composites call it too: a student's softmax runs inside
attention, multi-head attention and the encoder block. Several files (or a folder) may be given.

Grading goes by part of the walkthrough: each property belongs to the part that teaches it
(walkthrough.md's Parts I to IV: attention and the encoder, the decoder and the language model,
learning, cost and long sequences). `--part N` checks what parts 1..N teach (default 1); the others are listed as waiting. A Part I answer may leave out the
parameters Part II adds (`align`, `window`, `n_kv_heads`, `sinks`): they wait for Part II too.

The report lists the properties of the student's own functions first, then those of minattn's
composites running them; a failure gives its statement, the counterexample with its arguments
named, and a hint. Exit codes: 0 every property checked passed; 1 a property failed, or nothing
was checked; 2 FILE cannot be loaded (missing, not a .py file, a syntax error, an import error)
or a function's signature does not match minattn's. Needs hypothesis (the extra `check`).
"""
import argparse
import ast
import contextlib
import functools
import importlib.machinery
import importlib.util
import inspect
import io
import shutil
import sys
import textwrap
import warnings
from pathlib import Path

import numpy

import minattn

EXERCISES = Path(__file__).parent / "exercises"
PART_NAMES = {1: "Part I", 2: "Part II", 3: "Part III", 4: "Part IV",
              None: "the model families, which no exercise asks for"}
# Parameters a student's function may leave out, and the part that teaches each (None: no
# exercise asks for it): a call that uses one (a value other than the default) fails with a
# sentence saying so. `like` (the array whose device the mask follows) is never graded.
LATER_PARAMETERS = {
    "causal_mask": {"align": 2, "window": 2, "like": None},
    "multi_head_attention": {"n_kv_heads": 2},
    "apply_rope": {"scaling": None},
    "scaled_dot_product_attention": {"sinks": 2},
    "delta_rule": {"chunk_size": None},
    "self_attention": {"d_k": None, "rope_scaling": None, "eps": None,
                       "query_pre_attn_scalar": None, "attn_logit_softcapping": None,
                       "partial_rotary_factor": None},
}


def exercise_signature(name):
    """minattn's signature of `name` without the parameters no exercise asks for."""
    signature = inspect.signature(course_functions()[name])
    never = {p for p, part in LATER_PARAMETERS.get(name, {}).items() if part is None}
    return signature.replace(parameters=[p for p in signature.parameters.values()
                                         if p.name not in never])


class CannotCheck(Exception):
    """FILE cannot be graded (exit code 2): the message says why."""


class NotTakenYet(TypeError):
    """A student's function was called with a parameter it leaves out (a later part's)."""


def plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s" if not word.endswith("y") else f"{n} {word[:-1]}ies"


def course_functions():
    """-> {name: minattn's version} of every function the grader can take from a student."""
    from . import properties

    return {**{name: getattr(minattn, name) for name in minattn.__all__}, **properties.COURSE}


def load(path):
    """FILE -> its module; raises CannotCheck naming the reason. FILE's folder is on sys.path
    while it loads, so it may import a helper module beside it (not an exercise file: a module
    name cannot start with a digit; give the grader several files instead)."""
    path = Path(path)
    if not path.exists():
        nearby = sorted(Path.cwd().glob(f"*/{path.name}")) if len(path.parts) == 1 else []
        raise CannotCheck(f"{path}: no such file" + (f" here; did you mean {Path(nearby[0].parent.name) / path.name}?" if nearby else ""))
    if not path.is_file():
        raise CannotCheck(f"{path}: not a file")
    if path.suffix.lower() != ".py":
        raise CannotCheck(f"{path}: not a Python file (FILE.py expected)")
    name = f"_student_{abs(hash(str(path.resolve())))}"
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    sys.path.insert(0, str(path.resolve().parent))
    try:
        loader.exec_module(module)
    except SyntaxError as error:
        raise CannotCheck(f"{path}: syntax error on line {error.lineno}: {error.msg}") from None
    except Exception as error:  # an import error, or code at the top level that fails
        raise CannotCheck(f"{path}: cannot be loaded: {type(error).__name__}: {error}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
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
    """-> ({name: function} FILE implements, adapted to minattn's signature; [names FILE leaves
    as stubs]; {name: [parameters it leaves out]})."""
    functions, stubs, left_out = {}, [], {}
    for name, theirs in course_functions().items():
        function = getattr(module, name, None)
        if callable(function) and getattr(function, "__module__", None) == module.__name__:
            (stubs.append(name) if is_stub(function) else functions.__setitem__(name, function))
    for name, function in functions.items():
        reference = inspect.signature(course_functions()[name])
        mine = inspect.signature(function).parameters
        if any(p.kind is p.VAR_KEYWORD for p in mine.values()):
            continue
        missing = [p for p in reference.parameters if p not in mine]
        wrong = [p for p in missing if p not in LATER_PARAMETERS.get(name, {})]
        if wrong:
            raise CannotCheck(f"{name}{inspect.signature(function)} does not take "
                              f"{', '.join(wrong)}; the exercise's is {name}{exercise_signature(name)}")
        if missing:
            functions[name] = adapt(name, function, reference, missing)
            left_out[name] = [p for p in missing if LATER_PARAMETERS[name][p] is not None]
    return functions, stubs, left_out


def adapt(name, function, reference, missing):
    """A student's function that leaves out `missing` -> one that takes minattn's signature and
    drops them while they have their defaults (raising NotTakenYet otherwise)."""
    @functools.wraps(function)
    def adapted(*args, **kwargs):
        bound = reference.bind(*args, **kwargs)
        for parameter in missing:
            value = bound.arguments.pop(parameter, reference.parameters[parameter].default)
            if parameter != "like" and value is not reference.parameters[parameter].default:
                raise NotTakenYet(f"your {name} does not take {parameter} (taught in "
                                  f"{PART_NAMES[LATER_PARAMETERS[name][parameter]]}), but this "
                                  f"check calls it with {parameter}={value!r}")
        return function(*bound.args, **bound.kwargs)
    return adapted


class Named:
    """hypothesis's `data`, remembering what each draw was called, for the report."""

    def __init__(self, data):
        self.data, self.drawn = data, []

    def draw(self, strategy, label=None):
        value = self.data.draw(strategy)
        self.show(label or f"draw {len(self.drawn) + 1}", value)
        return value

    def show(self, label, value):
        names = label.split(", ")
        if isinstance(value, tuple) and len(names) == len(value) > 1:  # "q, k, v" -> three
            for name, part in zip(names, value):
                self.show(name, part)
            return
        self.drawn = [(n, v) for n, v in self.drawn if n != label] + [(label, value)]


def show_value(value):
    if isinstance(value, numpy.ndarray):
        text = numpy.array2string(value, precision=4, separator=", ", threshold=120,
                                  max_line_width=96)
        return f"{text}" + ("" if value.dtype in (numpy.float64, numpy.int64, bool) else
                            f" ({value.dtype})")
    return repr(value)


def show_drawn(drawn):
    scalars = [f"{n}={show_value(v)}" for n, v in drawn if not isinstance(v, numpy.ndarray)]
    arrays = [f"{n} =\n{textwrap.indent(show_value(v), '  ')}" for n, v in drawn
              if isinstance(v, numpy.ndarray)]
    return "\n".join(([", ".join(scalars)] if scalars else []) + arrays)


def run_property(prop, max_examples, shrink=True):
    """-> None if the property holds on max_examples examples, else (what failed, counterexample
    with its arguments named). shrink=False reports the first failing example as found (faster;
    for tests)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    last = []

    @settings(max_examples=max_examples, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False,
              report_multiple_bugs=False,
              # no Phase.explain: it reruns the property hundreds of times for notes not shown
              phases=[ph for ph in Phase if ph is not Phase.explain
                      and (shrink or ph is not Phase.shrink)])
    @given(st.data())
    def check(data):
        named = Named(data)
        last[:] = [named]
        prop.check(named)

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            numpy.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # a student's overflow warning is not the verdict
        try:
            check()
        except Exception as error:
            reason = str(error).strip() if isinstance(error, (AssertionError, NotTakenYet)) \
                else f"{type(error).__name__}: {error}".strip()
            if isinstance(error, AssertionError) and not reason:
                reason = "AssertionError"
            return reason, show_drawn(last[0].drawn) if last else ""
    return None


def order(chosen, functions):
    # the properties of the student's own functions first, then those of minattn's composites
    own = [p for p in chosen if p.of in functions]
    return own + [p for p in chosen if p.of not in functions]


def grade(functions, max_examples=20, out=None, shrink=True, part=1, first_failure=False):
    """Swap `functions` in, run every property of parts 1..`part` that exercises one (up to the
    first failure with first_failure=True); -> (failures, properties checked)."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    from . import properties

    chosen = order([p for p in properties.PROPERTIES if p.uses & set(functions)], functions)
    failed_own = []
    failures = checked = 0
    with minattn.swap(**{n: f for n, f in functions.items() if n in minattn.__all__}), \
            properties.student(**{n: f for n, f in functions.items() if n in properties.COURSE}):
        for prop in chosen:
            yours = sorted(prop.uses & set(functions))
            label = prop.name if prop.of in functions else \
                f"{prop.name} (minattn's {prop.of}, running your {', '.join(yours)})"
            if prop.part > part:  # listed for the student's own functions, counted for the rest
                if prop.of in functions:
                    print(f"WAIT  {label}: taught in {PART_NAMES[prop.part]} "
                          f"(check it with --part {prop.part})", file=out)
                continue
            checked += 1
            # only the first failure is shrunk to its smallest example: the rest follow from it
            result = run_property(prop, max_examples, shrink and not failures)
            print(f"{'PASS' if result is None else 'FAIL'}  {label}: {prop.statement}", file=out)
            if result is None:
                continue
            failures += 1
            reason, example = result
            print(textwrap.indent(f"what failed: {reason}", "      "), file=out)
            if example:
                print(textwrap.indent(f"counterexample:\n{textwrap.indent(example, '  ')}",
                                      "      "), file=out)
            if prop.of in functions:
                failed_own.append(prop.of)
                print(textwrap.indent(f"hint: {prop.hint}", "      "), file=out)
            elif set(yours) & set(failed_own):
                print(f"      caused by your {', '.join(sorted(set(yours) & set(failed_own)))}: "
                      "fix the failures of its own properties above first", file=out)
            else:
                print(f"      caused by your {', '.join(yours)}: it passes its own properties "
                      f"but not inside minattn's {prop.of}, which calls it with more leading axes "
                      "or broadcasting masks; try your function on such inputs", file=out)
            if first_failure:
                break
    waiting = len(chosen) - checked
    print(f"{plural(checked, 'property')} checked: {checked - failures} passed, {failures} failed"
          + (f"; {waiting} waiting for a later part" if waiting else ""), file=out)
    return failures, checked


def check_files(paths, max_examples=20, out=None, shrink=True, part=1):
    """The `check` command on one or several FILEs graded together -> exit code."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    return EXIT[grade_files(paths, max_examples, out, shrink, part)]


EXIT = {"passes": 0, "fails": 1, "not started": 1, "waits for a later part": 1,
        "cannot be checked": 2}


def grade_files(paths, max_examples=20, out=None, shrink=True, part=1):
    """-> one of EXIT's verdicts, after printing the report."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    functions, stubs, left_out = {}, [], {}
    try:
        for path in paths:
            mine, not_yet, skipped = attempted(load(path))
            functions.update(mine)
            stubs += not_yet
            left_out.update(skipped)
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return "cannot be checked"
    shown = " ".join(str(p) for p in paths)
    if not functions:
        print(f"{shown} implements no exercise function yet "
              f"({', '.join(stubs) + ' still raise NotImplementedError' if stubs else 'none defined'}): "
              "nothing to check", file=out)
        return "not started"
    print(f"checking {', '.join(functions)} from {shown}, inside minattn's own composites"
          + (f" (not attempted yet: {', '.join(stubs)})" if stubs else "")
          + ("; what Part I teaches" if part == 1 else f"; what parts 1 to {part} teach"), file=out)
    for name, parameters in left_out.items():
        if parameters:
            print(f"your {name} leaves out {', '.join(parameters)}: the properties that need them "
                  "wait for the part that teaches them", file=out)
    failures, checked = grade(functions, max_examples, out, shrink, part)
    if not checked:
        later = min(p.part for p in _properties_of(functions))
        print(f"nothing here is taught by {PART_NAMES[part] if part == 1 else f'parts 1 to {part}'}: "
              f"run python -m minattn check {shown} --part {later}", file=out)
        return "waits for a later part"
    return "fails" if failures else "passes"


def _properties_of(functions):
    from . import properties

    return [p for p in properties.PROPERTIES if p.uses & set(functions)]


def check_paths(paths, max_examples=20, out=None, shrink=True, part=1):
    """The `check` command: files are graded together; a folder grades each of its exercise
    files (NN_name.py) alone, in order, then prints a summary -> exit code (the worst)."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    if not paths or any(not str(p).strip() for p in paths):  # Path("") would be "."
        print("cannot check: give a FILE.py or a folder of exercise files", file=out)
        return 2
    paths = [Path(p) for p in paths]
    folders = [p for p in paths if p.is_dir()]
    if not folders:
        return check_files(paths, max_examples, out, shrink, part)
    if len(paths) > 1:
        print("cannot check: give one folder, or files (not both)", file=out)
        return 2
    files = sorted(folders[0].glob("[0-9]*.py"), key=lambda f: f.name)
    if not files:
        print(f"cannot check: {folders[0]} holds no exercise files (NN_name.py); copy them with "
              f"python -m minattn exercises {folders[0]}", file=out)
        return 2
    verdicts = []
    for file in files:
        print(f"=== {file.name}", file=out)
        verdicts.append(grade_files([file], max_examples, out, shrink, part))
        print(file=out)
    print("summary:", file=out)
    for file, verdict in zip(files, verdicts):
        print(f"  {file.name}: {verdict}", file=out)
    # exit 0: every file started so far passes what the part teaches
    if "cannot be checked" in verdicts:
        return 2
    return 1 if "fails" in verdicts or "passes" not in verdicts else 0


def check_file(path, max_examples=20, out=None, shrink=True, part=1):
    """The `check` command on one FILE -> exit code (kept for callers of the single-file form)."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    return check_paths([path], max_examples, out, shrink, part)


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


def check_pitfall(name, max_examples=20, out=None, shrink=True, part=4):
    """The worked example: grade a pitfall as if a student had written it -> exit code."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    try:
        public, pitfall = pitfall_target(name)
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return 2
    summary = inspect.getdoc(pitfall).splitlines()[0]
    print(f"pitfall {name} stands in for {public}: {summary}", file=out)
    failures, _ = grade({public: pitfall}, max_examples, out, shrink, part)
    return 1 if failures else 0


def copy_exercises(folder, out=None):
    """The `exercises` command: copy the stub files into `folder` (never over existing files).
    Needs no hypothesis."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    if not str(folder).strip():
        print("cannot copy: give a folder name, e.g. python -m minattn exercises my_attention",
              file=out)
        return 2
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        print(f"cannot copy: {folder} is a file, not a folder", file=out)
        return 2
    stubs = sorted(EXERCISES.glob("[0-9]*.py"))
    clashes = [s.name for s in stubs if (folder / s.name).exists()]
    if clashes:
        print(f"cannot copy: {folder} already has {', '.join(clashes)} (nothing was changed)", file=out)
        return 2
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for stub in stubs:
            shutil.copyfile(stub, folder / stub.name)
    except OSError as error:
        print(f"cannot copy to {folder}: {error.strerror or error}", file=out)
        return 2
    print(f"copied {len(stubs)} exercises to {folder}: {', '.join(s.name for s in stubs)}\n"
          f"implement one, then run: python -m minattn check {folder / stubs[0].name}\n"
          f"(or the whole folder: python -m minattn check {folder})", file=out)
    return 0


# --- the command line: `python -m minattn check` and `exercises` (minattn/cli.py adds them) ---

def add_commands(commands):
    """Add the `exercises` and `check` subcommands to cli.py's subparsers."""
    ex = commands.add_parser("exercises", help="copy the exercise stubs into a folder")
    ex.add_argument("folder", metavar="DIR")
    ex.set_defaults(run=lambda args: copy_exercises(args.folder))
    from . import pitfalls

    chk = commands.add_parser(
        "check", help="grade your functions (FILE.py) by minattn's properties",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Grade the functions FILE.py implements (several files are graded together; "
                    "a folder grades each of its exercise files in order).",
        epilog="pitfalls (for --pitfall NAME):\n" + "\n".join(
            f"  {name:40} {inspect.getdoc(getattr(pitfalls, name)).splitlines()[0]}"
            for name in pitfalls.PITFALLS))
    chk.add_argument("files", nargs="*", metavar="FILE.py",
                     help="files defining exercise functions by their names, or a folder")
    chk.add_argument("--pitfall", metavar="NAME",
                     help="grade one of minattn.course.pitfalls instead: a bug being caught")
    chk.add_argument("--part", type=int, choices=[1, 2, 3, 4], default=1,
                     help="check what walkthrough.md's parts 1..N teach: 1 Part I (default), "
                          "2 Part II (the decoder), 3 Part III (gradients), 4 Part IV (blockwise)")
    chk.add_argument("--examples", type=_positive_int, default=20,
                     help="examples hypothesis tries per property (default 20)")
    chk.set_defaults(run=_check_command)


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _check_command(args):
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise SystemExit("the grader needs hypothesis: pip install hypothesis (or, in your "
                         "minattn clone, pip install '.[check]')") from None
    if args.pitfall is not None:
        if args.files:
            print("cannot check: give FILE.py or --pitfall NAME, not both")
            return 2
        return check_pitfall(args.pitfall, args.examples, part=4)
    return check_paths(args.files, args.examples, part=args.part)
