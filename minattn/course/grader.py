"""The grader: `python -m minattn check FILE.py` holds a student's functions to minattn's
properties (minattn/course/properties/, one file per exercise).

FILE may define any of minattn's public functions (and the course's own, such as softmax_vjp),
by their names and signatures (plain `import numpy as np` is fine). Each one it really
implements (a body that is more than `raise NotImplementedError`) is swapped in with
`minattn.swap`, so minattn's own composites call it too: a student's softmax runs inside
attention, multi-head attention and the encoder block. Several files (or a folder) may be given.

Grading goes by part of the walkthrough: each property belongs to the part that teaches it. Parts 1
to 3 are walkthrough.md's Parts I to III, the first reading (attention; the language model;
learning), except that part 1 also holds section 6, the block that opens Part II (layer_norm,
feed_forward and encoder_block, exercises 6 to 8), so that its boxes need no --part; part 4 is
everything the second reading's exercises add (grouped-query attention, blockwise attention,
attention sinks, the delta rule). `--part N` checks what parts 1..N teach (default 1); the others
are listed as waiting. An answer may leave out the parameters a later part adds (`align` and
`window` for Part II; `n_kv_heads` and `sinks` for the second reading): their properties wait for
that part too. Within Part I, softmax and attention may leave out `mask` until section 4 teaches
it: at --part 1 the properties that pass a mask then wait, from --part 2 they fail.

At --part 1 the report names only what the student has been taught: what later parts teach is
counted in the summary, not listed (no WAIT line, no left-out parameter, no file of theirs), and
section 6's properties (exercises 6 to 8, the block) are checked, and named, only where the
student grades one of section 6's functions; a student of Part I alone (exercises 1 to 5) meets no
name of the block.

The report lists the properties of the student's own functions first, then those of minattn's
composites running them; a failure gives its statement, the counterexample with its arguments
named, and a hint. Every call a property makes of a student's function is also held to the
contract of every call (minattn/course/contract.py): its arguments left as they were, its float
dtype kept (the call is made again in float32, and in float16 where the stub promises x's
dtype), the same results, in new memory, from a second call with fresh copies of its arguments
(laid out non-contiguously, each argument with a default given or left out); a broken promise
fails the property that made the call, with the contract's own hint.

Exit codes: 0 every property checked passed; 1 a property failed (a wrong value, an example
past its time limit, the student's code ending the process), or nothing was checked; 2 FILE
cannot be loaded (missing, not a .py file, a syntax error, an import error, an exit while
loading) or a function's signature does not match minattn's. Needs hypothesis (the extra
`check`).

Time limits: the student's code runs under a limit per example (EXAMPLE_SECONDS of CPU time,
WAITING_FACTOR times that on the clock; the properties run once untimed first, so that imports
never count; an example past it is a FAIL naming the property and the example) and, from the command line, in a child
process under a limit per file (or per group of files graded together, FILE_SECONDS plus
SECONDS_PER_EXAMPLE per example asked for): an infinite loop, a sleep, a crash of the
interpreter, os._exit or sys.exit in the student's file each end as a FAIL line with the reason,
never a hang and never a silent exit.
"""
import argparse
import ast
import contextlib
import functools
import importlib.machinery
import importlib.util
import inspect
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings
from pathlib import Path

import numpy

import minattn

from . import contract

EXERCISES = Path(__file__).parent / "exercises"
# what --part 1 checks: Part I (sections 1 to 5) and section 6, the first section of Part II
PART_ONE = "sections 1 to 6 (Part I, and section 6 of Part II)"
PART_I_ALONE = "Part I (sections 1 to 5)"  # what --part 1 checks of exercises 1 to 5 alone
LAST_OF_PART_I = 5  # exercises 1 to 5 are Part I's; 6 to 8 section 6's, checked with them
PART_NAMES = {1: "Part I", 2: "Part II", 3: "Part III", 4: "the second reading",
              None: "the model families, which no exercise asks for"}
# Parameters a student's function may leave out, and the part that teaches each (None: no
# exercise asks for it): a call that uses one (a value other than the default) fails with a
# sentence saying so. `like` (the array whose device the mask follows) is never graded.
LATER_PARAMETERS = {
    "softmax": {"mask": 1},  # Part I, section 4: until then its properties wait (Waiting)
    "causal_mask": {"align": 2, "window": 2, "like": None},
    "padding_mask": {"side": None},
    "multi_head_attention": {"n_kv_heads": 4, "dropout": 4, "rng": 4, "average_weights": 4},
    "apply_rope": {"scaling": None},
    "scaled_dot_product_attention": {"mask": 1, "sinks": 4, "dropout": 4, "rng": 4},
    "feed_forward": {"activation": 4, "dropout": 4, "rng": 4},
    "encoder_block": {"activation": 4, "dropout": 4, "rng": 4, "return_weights": 4},
    "delta_rule": {"chunk_size": None},
    "self_attention": {"n_kv_heads": 4, "d_k": None, "eps": None},
    "causal_lm": {"logits_to_keep": None},
}  # and every variant's keyword (head_mask, hooks, rope_scaling, ...): later_parameters


def later_parameters(name):
    """LATER_PARAMETERS[name], with every variant's keyword (engine/variants.py: head_mask,
    hooks, lora, ...) as one no exercise asks for: a variant never changes the canonical
    function a student writes."""
    variant_keywords = getattr(course_functions()[name], "variant_keywords", ())
    return {**dict.fromkeys(variant_keywords), **LATER_PARAMETERS.get(name, {})}


def exercise_signature(name):
    """minattn's signature of `name` without the parameters no exercise asks for."""
    signature = inspect.signature(course_functions()[name])
    never = {p for p, part in later_parameters(name).items() if part is None}
    return signature.replace(parameters=[p for p in signature.parameters.values()
                                         if p.name not in never])


EXAMPLE_SECONDS = 10.0  # one example of one property: far more than a correct answer needs
FILE_SECONDS = 120.0  # the grading of one file (or of files graded together), plus:
SECONDS_PER_EXAMPLE = 0.5  # per example asked for (--examples), for each property
MAX_EXAMPLES = 1000  # --examples beyond this is refused: a correct answer would hit the limit


class CannotCheck(Exception):
    """FILE cannot be graded (exit code 2): the message says why."""


class TooSlow(BaseException):
    """An example ran past its time limit. A BaseException, so that neither a student's
    `except Exception:` nor hypothesis (which would shrink it, running it again and again)
    catches it on the way out."""


WAITING_FACTOR = 3  # an example may wait (sleep, block) this many times its CPU limit


@contextlib.contextmanager
def time_limit(seconds, what):
    """Raise TooSlow in the code running inside after `seconds` of CPU time, or after
    WAITING_FACTOR times that in wall-clock time (code that waits instead of computing: a
    sleep). CPU time, so that a loaded machine, which slows the clock's time of a correct answer
    and not its CPU time, never fails one. POSIX main thread: interval timers; elsewhere, and for
    seconds=None, no limit (the child process's limit still holds)."""
    if seconds is None or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def computing(signum, frame):
        raise TooSlow(f"{what} used more than {seconds:g} s of CPU time (the time limit of one "
                      "example): a loop that never ends, or far too much work")

    def waiting(signum, frame):
        raise TooSlow(f"{what} did not return within {WAITING_FACTOR * seconds:g} s while using "
                      f"less than {seconds:g} s of CPU time (the time limits of one example): a "
                      "sleep, or waiting for input")
    previous = signal.signal(signal.SIGPROF, computing), signal.signal(signal.SIGALRM, waiting)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, WAITING_FACTOR * seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, previous[0])
        signal.signal(signal.SIGALRM, previous[1])


class NotTakenYet(TypeError):
    """A student's function was called with a parameter it leaves out (a later part's)."""

    def __init__(self, message, part):
        super().__init__(message)
        self.part = part


def plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s" if not word.endswith("y") else f"{n} {word[:-1]}ies"


def course_functions():
    """-> {name: minattn's version} of every function the grader can take from a student: those
    some property exercises."""
    from . import properties

    graded = set().union(*(p.uses for p in properties.PROPERTIES))
    return {**{name: getattr(minattn, name) for name in minattn.__all__ if name in graded},
            **properties.COURSE}


def ungraded(module):
    """-> the names of minattn's public functions `module` defines that no exercise asks for
    (rms_norm, positional_encoding, ...): reported, never swapped in."""
    return [name for name in minattn.__all__ if name not in course_functions()
            and callable(getattr(module, name, None))
            and getattr(getattr(module, name), "__module__", None) == module.__name__]


def check_file_name(path):
    """A FILE given to the grader -> Path; raises CannotCheck if it is missing, not a file or not
    a .py file (the command line refuses it before grading anything)."""
    path = Path(path)
    if not path.exists():
        nearby = sorted(Path.cwd().glob(f"*/{path.name}")) if len(path.parts) == 1 else []
        raise CannotCheck(f"{path}: no such file" + (f" here; did you mean {Path(nearby[0].parent.name) / path.name}?" if nearby else ""))
    if not path.is_file():
        raise CannotCheck(f"{path}: not a file")
    if path.suffix.lower() != ".py":
        raise CannotCheck(f"{path}: not a Python file (FILE.py expected)")
    return path


def load(path, seconds=None):
    """FILE -> its module; raises CannotCheck naming the reason. FILE's folder is on sys.path
    while it loads, so it may import a helper module beside it (not an exercise file: a module
    name cannot start with a digit; give the grader several files instead). Its top-level code
    runs under the time limit of one example (seconds)."""
    path = check_file_name(path)
    name = f"_student_{abs(hash(str(path.resolve())))}"
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    sys.path.insert(0, str(path.resolve().parent))
    try:
        with time_limit(seconds, f"loading {path}"):
            loader.exec_module(module)
    except SyntaxError as error:
        raise CannotCheck(f"{path}: syntax error on line {error.lineno}: {error.msg}") from None
    except SystemExit as error:
        raise CannotCheck(f"{path}: cannot be loaded: its code calls sys.exit({error.code!r}) "
                          "when the file is loaded (at the top level)") from None
    except TooSlow as error:
        raise CannotCheck(f"{path}: cannot be loaded: {error}") from None
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
        wrong = [p for p in missing if p not in later_parameters(name)]
        if wrong:
            raise CannotCheck(f"{name}{inspect.signature(function)} does not take "
                              f"{', '.join(wrong)}; the exercise's is {name}{exercise_signature(name)}")
        if missing:
            functions[name] = adapt(name, function, reference, missing)
            left_out[name] = [p for p in missing if later_parameters(name)[p] is not None]
    return functions, stubs, left_out


def adapt(name, function, reference, missing):
    """A student's function that leaves out `missing` -> one that takes minattn's signature and
    drops them while they have their defaults (raising NotTakenYet otherwise)."""
    @functools.wraps(function)
    def adapted(*args, **kwargs):
        bound = reference.bind(*args, **kwargs)
        for parameter in missing:
            value = bound.arguments.pop(parameter, reference.parameters[parameter].default)
            default = reference.parameters[parameter].default
            # minattn's composites pass the default on (dropout=0.0): equal is the default too
            if parameter != "like" and not (value is default or (
                    type(value) is type(default) and value == default)):
                part = later_parameters(name)[parameter]
                raise NotTakenYet(f"your {name} does not take {parameter} (taught in "
                                  f"{'section 4 of ' if part == 1 else ''}{PART_NAMES[part]}), "
                                  f"but this check calls it with {parameter}={value!r}", part)
        return function(*bound.args, **bound.kwargs)
    return adapted


class Stop(str):
    """A failure's reason after which the grading of the file stops (the student's code ran past
    its time limit or tried to end the program): every other property would wait or exit too."""


class Broken(str):
    """A failure's reason that is a broken contract of every call (minattn/course/contract.py):
    its own hint replaces the property's."""

    def __new__(cls, reason, hint):
        self = super().__new__(cls, reason)
        self.hint = hint
        return self


class Waiting(str):
    """A failure's reason that is a Part I parameter (a mask) the student's function leaves out:
    at --part 1 the property waits for it (section 4 teaches it) instead of failing."""


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


def run_property(prop, max_examples, shrink=True, seconds=EXAMPLE_SECONDS):
    """-> None if the property holds on max_examples examples, else (what failed, counterexample
    with its arguments named). shrink=False reports the first failing example as found (faster;
    for tests). Each example runs under a time limit of `seconds` (None: none); one past it
    fails the property at once, unshrunk."""
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
        with time_limit(seconds, "this example"):
            prop.check(named)

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            numpy.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # a student's overflow warning is not the verdict
        try:
            check()
        except TooSlow as error:
            return Stop(error), show_drawn(last[0].drawn) if last else ""
        except SystemExit as error:  # hypothesis re-raises it after shrinking, as a failure
            return (Stop(f"your code called sys.exit({error.code!r}) (or raised SystemExit): a "
                         "function returns its result, it never ends the program"),
                    show_drawn(last[0].drawn) if last else "")
        except contract.BrokenContract as error:
            return Broken(str(error).strip(), error.hint), show_drawn(last[0].drawn) if last else ""
        except NotTakenYet as error:  # a later part's parameter: Part I's mask waits
            reason = str(error).strip()
            if error.part == 1:
                return Waiting(reason), ""
            return reason, show_drawn(last[0].drawn) if last else ""
        except Exception as error:
            reason = str(error).strip() if isinstance(error, AssertionError) \
                else f"{type(error).__name__}: {error}".strip()
            if isinstance(error, AssertionError) and not reason:
                reason = "AssertionError"
            return reason, show_drawn(last[0].drawn) if last else ""
    return None


def order(chosen, functions):
    # the properties of the student's own functions first, then those of minattn's composites
    own = [p for p in chosen if p.of in functions]
    return own + [p for p in chosen if p.of not in functions]


# How minattn's composites call each function a student may write: what a function that passes
# its own properties but fails inside a composite should be tried on.
CALLED_WITH = {
    "softmax": "scores with a head axis [B, H, L_q, L_k] and a boolean mask that broadcasts to "
               "them ([L_q, L_k], [B, 1, 1, L_k])",
    "scaled_dot_product_attention": "q, k, v with a head axis [B, H, L, d_k], L_q != L_k, and a "
                                    "mask that broadcasts over the heads",
    "split_heads": "query, key and value projections [B, L, D] of different lengths L_q, L_k",
    "merge_heads": "the heads' outputs [B, H, L_q, d_k] of attention, whose L_q may differ from "
                   "the keys' L_k",
    "layer_norm": "the residual stream [B, L, D], with the eps the block was given",
    "feed_forward": "the normed residual stream [B, L, D], with the activation, dropout and rng "
                    "the block was given",
    "multi_head_attention": "query = key = value [B, L, D] and the block's mask, dropout and rng",
    "apply_rope": "q and k split into heads [B, H, L, d_k], with positions [L] or [B, 1, L] "
                  "that broadcast over the heads",
}


def hint_for(reason, prop):
    """-> the hint of a failure of the student's own function: the property's, unless the function
    called one that takes no such keyword (teaching's softmax given a mask), which it names."""
    called = re.search(r"TypeError: (\w+)\(\) got an unexpected keyword argument '(\w+)'", reason)
    if not called:
        return prop.hint
    name, keyword = called.groups()
    return (f"your function calls {name}(..., {keyword}=...), but that {name} takes no {keyword}"
            + (": where a mask is given, call masked_softmax(scores, mask) instead (the stub "
               "imports it)" if (name, keyword) == ("softmax", "mask") else ""))


def warm_up(chosen):
    """Run each property once on minattn's own functions, untimed and unreported: the imports and
    first-call costs of the references and of minattn (scipy's erf for a GELU, say) are paid
    here, never inside a student's timed example. Once per property and process."""
    for prop in chosen:
        if prop.name not in _WARM:
            run_property(prop, 1, shrink=False, seconds=None)
            _WARM.add(prop.name)


_WARM = set()


@contextlib.contextmanager
def graded(functions):
    """Use `functions` (a student's, by name) wherever minattn and the properties call them, each
    call held to the contract of every call (minattn/course/contract.py)."""
    from . import properties

    references = course_functions()
    guarded = {n: contract.guard(n, f, inspect.signature(references[n]))
               for n, f in functions.items()}
    with minattn.swap(**{n: f for n, f in guarded.items() if n in minattn.__all__}), \
            properties.student(**{n: f for n, f in guarded.items() if n in properties.COURSE}):
        yield


def exercise_of(name):
    """The exercise that asks for `name`: the first whose file holds a property of it (0: none)."""
    from . import properties

    return min((p.exercise for p in properties.PROPERTIES if p.of == name), default=0)


def reaches_the_block(functions):
    # whether the student grades one of section 6's functions (exercises 6 to 8) or a later one
    return any(exercise_of(name) > LAST_OF_PART_I for name in functions)


def taught(prop, part, functions):
    """Whether --part `part` checks `prop` for a student who grades `functions`: its part is at
    most `part`, and at --part 1 a property of section 6's exercises only where the student
    grades one of section 6's functions."""
    return prop.part <= part and (part > 1 or prop.exercise <= LAST_OF_PART_I
                                  or reaches_the_block(functions))


def what_is_taught(part, functions):
    # the report's words for what --part `part` checks of `functions`
    if part > 1:
        return f"what parts 1 to {part} teach"
    if reaches_the_block(functions):
        return f"what {PART_ONE} teach"
    return f"what {PART_I_ALONE} teaches"


def grade(functions, max_examples=20, out=None, shrink=True, part=1, first_failure=False,
          seconds=EXAMPLE_SECONDS, status=None):
    """Swap `functions` in, run every property of parts 1..`part` that exercises one (up to the
    first failure with first_failure=True), each example under a limit of `seconds`; status(name)
    is told each property before it runs; -> (failures, properties checked)."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    from . import properties

    chosen = order([p for p in properties.PROPERTIES if p.uses & set(functions)], functions)
    warm_up([p for p in chosen if taught(p, part, functions)])
    failed_own, broken = [], set()  # broken: the hints of the contract's failures reported
    failures = checked = not_run = waited = 0
    with graded(functions):
        for prop in chosen:
            yours = sorted(prop.uses & set(functions))
            label = prop.name if prop.of in functions else \
                f"{prop.name} (minattn's {prop.of}, running your {', '.join(yours)})"
            if not taught(prop, part, functions):  # listed for the student's own functions
                if prop.of in functions and part > 1:  # from --part 2; counted for the rest
                    print(f"WAIT  {label}: taught in {PART_NAMES[prop.part]} "
                          f"(check it with --part {prop.part})", file=out)
                continue
            checked += 1
            if status is not None:
                status(label)
            # only the first failure is shrunk to its smallest example: the rest follow from it
            result = run_property(prop, max_examples, shrink and not failures, seconds)
            if result is not None and isinstance(result[0], Waiting) and part == 1:
                checked, waited = checked - 1, waited + 1
                print(f"WAIT  {label}: {result[0]}", file=out)
                continue
            print(f"{'PASS' if result is None else 'FAIL'}  {label}: {prop.statement}", file=out)
            if result is None:
                continue
            failures += 1
            reason, example = result
            if isinstance(reason, Broken) and reason.hint in broken:  # said in full above
                print(f"      what failed: {reason.splitlines()[0]} (the promise broken above)",
                      file=out)
                continue
            print(textwrap.indent(f"what failed: {reason}", "      "), file=out)
            if example:
                print(textwrap.indent(f"counterexample:\n{textwrap.indent(example, '  ')}",
                                      "      "), file=out)
            if isinstance(reason, Broken):
                broken.add(reason.hint)
                failed_own += sorted(set(yours) - set(failed_own))
                print(textwrap.indent(f"hint: {reason.hint}", "      "), file=out)
            elif prop.of in functions:
                failed_own.append(prop.of)
                print(textwrap.indent(f"hint: {hint_for(reason, prop)}", "      "), file=out)
            elif set(yours) & set(failed_own):
                print(f"      caused by your {', '.join(sorted(set(yours) & set(failed_own)))}: "
                      "fix the failures of its own properties above first", file=out)
            else:
                called = "; ".join(f"{name} with {CALLED_WITH[name]}" for name in yours
                                   if name in CALLED_WITH)
                print(textwrap.indent(textwrap.fill(
                    f"caused by your {', '.join(yours)}: it passes its own properties but not "
                    f"inside minattn's {prop.of}, which calls "
                    + (called if called else "it with other arguments than its own properties "
                       "draw") + ": try your function on such inputs", 92), "      "), file=out)
            if first_failure:
                break
            if isinstance(reason, Stop):
                left = [p for p in chosen[chosen.index(prop) + 1:] if taught(p, part, functions)]
                not_run = len(left)
                if left:
                    print(f"STOP  {plural(not_run, 'more property')} not run: the failure "
                          "above would repeat in each", file=out)
                break
    later = [p for p in chosen if not taught(p, part, functions)]
    waiting = [p for p in later if p.of in functions and part > 1]  # their WAIT lines above
    listed, unlisted = waited + len(waiting), len(later) - len(waiting)
    print(f"{plural(checked, 'property')} checked: {checked - failures} passed, {failures} failed"
          + (f"; {not_run} not run" if not_run else "")
          + (f"; {listed} waiting (the WAIT lines above)" if listed else "")
          + (f"; {unlisted} more of later parts, not listed" if unlisted else ""),
          file=out)
    return failures, checked


# each verdict on a FILE (or files graded together) -> the exit code
EXIT = {"passes": 0, "fails": 1, "not implemented yet": 1, "waits for a later part": 1,
        "nothing to check": 1, "stopped": 1, "cannot be checked": 2}


def grade_files(paths, max_examples=20, out=None, shrink=True, part=1, seconds=EXAMPLE_SECONDS,
                status=None):
    """-> one of EXIT's verdicts, after printing the report."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    functions, stubs, left_out, where, others = {}, [], {}, {}, []
    try:
        for path in paths:
            module = load(path, seconds)
            mine, not_yet, skipped = attempted(module)
            for name in mine:
                if name in where:  # never let the last file win silently
                    raise CannotCheck(f"{name} is defined in both {where[name]} and {path}: "
                                      "give the grader the file that holds the one to check")
                where[name] = path
            functions.update(mine)
            stubs += [name for name in not_yet if name not in stubs]
            left_out.update(skipped)
            others += [name for name in ungraded(module) if name not in others]
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return "cannot be checked"
    stubs = [name for name in stubs if name not in functions]
    shown = " ".join(str(p) for p in paths)
    if others:
        print(f"not graded: {', '.join(others)} ({'has' if len(others) == 1 else 'have'} no "
              "exercise, so the grader has no property for "
              f"{'it' if len(others) == 1 else 'them'}; minattn's own is used)", file=out)
    if not functions:
        if stubs:
            print(f"{shown}: not implemented yet: {', '.join(stubs)} "
                  f"({'raises' if len(stubs) == 1 else 'raise'} NotImplementedError): nothing "
                  "to check", file=out)
            return "not implemented yet"
        exercises = sorted(n for n in course_functions())
        print(f"{shown} defines no function an exercise asks for: nothing to check (the "
              f"exercise functions: {', '.join(exercises)})", file=out)
        return "nothing to check"
    print(f"checking {', '.join(functions)} from {shown}, inside minattn's own composites"
          + (f" (not implemented yet: {', '.join(stubs)})" if stubs else "")
          + f"; {what_is_taught(part, functions)}", file=out)
    written = sorted({p.check.__module__.rsplit(".", 1)[1] for p in _properties_of(functions)
                      if p.of in functions and (part > 1 or taught(p, part, functions))})
    if written:  # where a student reads what each function is held to
        print("the properties, written out: "
              + ", ".join(f"minattn/course/properties/{w}.py" for w in written), file=out)
    for name, parameters in left_out.items():
        if part == 1:  # only those Part I teaches (section 4's mask)
            parameters = [p for p in parameters if later_parameters(name).get(p) == 1]
        if parameters:
            print(f"your {name} leaves out {', '.join(parameters)}: the properties that need them "
                  "wait for the part that teaches them", file=out)
    failures, checked = grade(functions, max_examples, out, shrink, part, seconds=seconds,
                              status=status)
    if not checked:
        later = min(p.part for p in _properties_of(functions))
        print(f"nothing here is taught by {PART_ONE if part == 1 else f'parts 1 to {part}'}: "
              f"run python -m minattn check {shown} --part {later}", file=out)
        return "waits for a later part"
    return "fails" if failures else "passes"


def _properties_of(functions):
    from . import properties

    return [p for p in properties.PROPERTIES if p.uses & set(functions)]


def grading_units(paths):
    """FILEs and folders given to `check` -> [[files graded together], ...] and whether they came
    from a folder; raises CannotCheck for what cannot be graded at all (before anything runs)."""
    if not paths or any(not str(p).strip() for p in paths):  # Path("") would be "."
        raise CannotCheck("give a FILE.py or a folder of exercise files")
    paths = [Path(p) for p in paths]
    folders = [p for p in paths if p.is_dir()]
    if not folders:
        return [[check_file_name(p) for p in paths]], False
    if len(paths) > 1:
        raise CannotCheck("give one folder, or files (not both)")
    files = sorted(folders[0].glob("[0-9]*.py"), key=lambda f: f.name)
    if not files:
        raise CannotCheck(f"{folders[0]} holds no exercise files (NN_name.py); copy them with "
                          f"python -m minattn exercises {folders[0]}")
    return [[file] for file in files], True


def check_paths(paths, max_examples=20, out=None, shrink=True, part=1, seconds=EXAMPLE_SECONDS,
                isolate=False, file_seconds=None):
    """The `check` command: files are graded together; a folder grades each of its exercise
    files (NN_name.py) alone, in order, then prints a summary -> exit code (the worst).
    isolate=True grades each file (or the files together) in a child process under a limit of
    file_seconds (None: file_limit(max_examples)), as the command line does."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    try:
        units, from_folder = grading_units(paths)
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return 2

    def grade_unit(files):
        if isolate:
            return grade_in_child(files, max_examples, out, shrink, part, seconds,
                                  file_limit(max_examples) if file_seconds is None else file_seconds)
        return grade_files(files, max_examples, out, shrink, part, seconds)
    if not from_folder:
        return EXIT[grade_unit(units[0])]
    verdicts = []
    for [file] in units:
        print(f"=== {file.name}", file=out)
        verdicts.append(grade_unit([file]))
        print(file=out)
    print("summary:", file=out)
    for [file], verdict in zip(units, verdicts):
        print(f"  {file.name}: {verdict}", file=out)
    # exit 0: every file started so far passes what the part teaches
    if "cannot be checked" in verdicts:
        return 2
    return 1 if {"fails", "stopped"} & set(verdicts) or "passes" not in verdicts else 0


# --- the child process: a student's code cannot hang or end the grader -----------------------

def file_limit(max_examples):
    """The time limit (s) of grading one file (or files graded together) with max_examples."""
    return FILE_SECONDS + SECONDS_PER_EXAMPLE * max_examples


def grade_in_child(paths, max_examples, out, shrink, part, seconds, file_seconds):
    """grade_files in a child process that may take at most file_seconds; its report is copied
    to `out` as it comes. A child that ends without a verdict (os._exit, a crash, a signal) or
    runs past the limit (and is killed) -> a FAIL line saying so and which property was running;
    -> the verdict."""
    with tempfile.TemporaryDirectory(prefix="minattn-check-") as folder:
        state = Path(folder) / "status"
        request = json.dumps({"paths": [str(p) for p in paths], "max_examples": max_examples,
                              "shrink": shrink, "part": part, "seconds": seconds,
                              "status": str(state)})
        package_root = str(Path(minattn.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [package_root] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
            "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"}
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys; from minattn.course.grader import child_main; "
             "sys.exit(child_main(sys.argv[1]))", request], stdout=subprocess.PIPE, env=env,
            stdin=subprocess.DEVNULL, encoding="utf-8", errors="replace")
        copier = threading.Thread(target=lambda: [out.write(line) for line in child.stdout],
                                  daemon=True)
        copier.start()
        try:
            code = child.wait(timeout=file_seconds)
            timed_out = False
        except subprocess.TimeoutExpired:
            child.kill()
            code, timed_out = child.wait(), True
        copier.join(timeout=5)
        child.stdout.close()
        lines = state.read_text(encoding="utf-8").splitlines() if state.exists() else []
    verdicts = [line[len("verdict "):] for line in lines if line.startswith("verdict ")]
    if verdicts and not timed_out and code == EXIT[verdicts[-1]]:
        return verdicts[-1]
    running = [line[len("property "):] for line in lines if line.startswith("property ")]
    where = f"while checking {running[-1]}" if running else "while loading the file"
    shown = " ".join(str(p) for p in paths)
    if timed_out:
        reason = (f"no verdict within {file_seconds:g} s, the time limit of one file (with "
                  f"--examples {max_examples}): the grading was stopped {where}; a loop that never "
                  "ends (one that catches every exception too), or far too much work")
    elif code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        reason = (f"the Python process running your code was killed by signal {name} {where} "
                  "(a crash of the interpreter or of a library it calls)")
    else:
        reason = (f"your code ended the Python process {where}, with exit status {code} "
                  "(os._exit, or a crash): a function returns its result, it never ends the "
                  "program")
    print(f"FAIL  {shown}: {reason}", file=out)
    return "stopped"


def child_main(request):
    """The child process of grade_in_child: grade, telling the status file each property before
    it runs and the verdict at the end -> the verdict's exit code."""
    request = json.loads(request)
    with open(request["status"], "a", encoding="utf-8") as state:
        def status(label):
            state.write(f"property {label}\n")
            state.flush()
        verdict = grade_files([Path(p) for p in request["paths"]], request["max_examples"],
                              sys.stdout, request["shrink"], request["part"], request["seconds"],
                              status)
        sys.stdout.flush()
        state.write(f"verdict {verdict}\n")
    return EXIT[verdict]


def _canonical(function, dispatched):
    # function's signature, less the keywords variants add to dispatched's
    variant_keywords = getattr(dispatched, "variant_keywords", ())
    signature = inspect.signature(function)
    return signature.replace(parameters=[p for p in signature.parameters.values()
                                         if p.name not in variant_keywords])


def pitfall_target(name):
    """A pitfall -> the public function it stands in for (the one with its signature)."""
    from . import pitfalls

    if name not in pitfalls.PITFALLS:
        raise CannotCheck(f"no pitfall {name!r}; the pitfalls are: {', '.join(pitfalls.PITFALLS)}")
    pitfall = getattr(pitfalls, name)
    for public in minattn.__all__:  # the same signature, but for the variants' keywords
        function = getattr(minattn, public)
        if _canonical(function, function) == _canonical(pitfall, function):
            return public, pitfall
    raise CannotCheck(f"pitfall {name!r} has no public counterpart")  # pragma: no cover


def check_pitfall(name, max_examples=20, out=None, shrink=True, part=4, seconds=EXAMPLE_SECONDS):
    """The worked example: grade a pitfall as if a student had written it -> exit code."""
    out = sys.stdout if out is None else out  # looked up now: a test may capture it
    try:
        public, pitfall = pitfall_target(name)
    except CannotCheck as error:
        print(f"cannot check: {error}", file=out)
        return 2
    summary = inspect.getdoc(pitfall).splitlines()[0]
    print(f"pitfall {name} stands in for {public}: {summary}", file=out)
    failures, _ = grade({public: pitfall}, max_examples, out, shrink, part, seconds=seconds)
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


# --- the command line: `python -m minattn check` and `exercises` (minattn/cli/ adds them) ---

def add_commands(commands):
    """Add the `exercises` and `check` subcommands to minattn.cli's subparsers. What they refuse
    (argparse types, and args.refuse: the parser's error) speaks with minattn.cli's one voice."""
    ex = commands.add_parser("exercises", help="copy the exercise stubs into a folder",
                             formatter_class=argparse.RawDescriptionHelpFormatter,
                             epilog="examples:\n  python -m minattn exercises my_attention")
    ex.add_argument("folder", metavar="DIR", type=_exercise_folder,
                    help="a new or empty folder (existing files are never overwritten)")
    ex.set_defaults(run=lambda args: copy_exercises(args.folder))
    from . import pitfalls

    chk = commands.add_parser(
        "check", help="grade your functions (FILE.py) by minattn's properties",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Grade the functions FILE.py implements (several files are graded together; "
                    "a folder grades each of its exercise files in order). Each file is graded "
                    "in a child process, each example under --time-limit and each file under "
                    "--file-time-limit: a loop that never ends, a sleep, a crash or an exit in "
                    "your code is a FAIL with its reason.",
        epilog="examples:\n  python -m minattn check my_attention/01_softmax.py\n"
               "  python -m minattn check my_attention --part 2\n"
               "  python -m minattn check --pitfall attention_without_scaling\n\n"
               "exit codes: 0 every property checked passed; 1 a property failed (a wrong value, "
               "an example\npast --time-limit, a file past --file-time-limit, a crash or exit of "
               "your code), or\nnothing was checked; 2 a FILE cannot be checked (syntax error, "
               "import error, exit while\nloading, a signature that is not the exercise's) or a "
               "bad command line (`error: ...` on\nstderr)\n\n"
               "pitfalls (for --pitfall NAME):\n" + "\n".join(
                   f"  {name:40} {inspect.getdoc(getattr(pitfalls, name)).splitlines()[0]}"
                   for name in pitfalls.PITFALLS))
    chk.add_argument("files", nargs="*", metavar="FILE.py", type=_student_path,
                     help="files defining exercise functions by their names, or a folder")
    chk.add_argument("--pitfall", metavar="NAME", type=_pitfall_name,
                     help="grade one of minattn.course.pitfalls instead: a bug being caught")
    chk.add_argument("--part", type=int, choices=[1, 2, 3, 4], default=1,
                     help="check what walkthrough.md's parts 1..N teach: 1 sections 1 to 6, Part I and "
                          "section 6 (default), "
                          "2 Part II (the language model), 3 Part III (learning), 4 the second "
                          "reading (grouped-query attention, blockwise attention, sinks, the "
                          "delta rule)")
    chk.add_argument("--examples", type=_examples, default=20,
                     help=f"examples hypothesis tries per property, 1 to {MAX_EXAMPLES} "
                          "(default 20)")
    chk.add_argument("--time-limit", metavar="SECONDS", type=_seconds, default=EXAMPLE_SECONDS,
                     help=f"time limit of one example, in CPU time (default {EXAMPLE_SECONDS:g}; "
                          f"{WAITING_FACTOR} times that on the clock for code that waits)")
    chk.add_argument("--file-time-limit", metavar="SECONDS", type=_seconds,
                     help=f"time limit of one file (default {FILE_SECONDS:g} + "
                          f"{SECONDS_PER_EXAMPLE:g} per example)")
    chk.set_defaults(run=_check_command, refuse=chk.error)


def _positive_int(text, most=None):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1 or (most is not None and value > most):
        raise argparse.ArgumentTypeError(f"must be a positive integer" + (
            f" up to {most}" if most else "") + f", got {value}")
    return value


def _examples(text):
    return _positive_int(text, MAX_EXAMPLES)


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def _student_path(text):
    if not text.strip():
        raise argparse.ArgumentTypeError(f"give a FILE.py or a folder of exercise files, got {text!r}")
    if Path(text).is_dir():
        return text
    try:
        check_file_name(text)
    except CannotCheck as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _pitfall_name(text):
    from . import pitfalls

    if text not in pitfalls.PITFALLS:
        raise argparse.ArgumentTypeError(f"no pitfall {text!r}; the pitfalls are: "
                                         f"{', '.join(pitfalls.PITFALLS)}")
    return text


def _exercise_folder(text):
    if not text.strip():
        raise argparse.ArgumentTypeError("give a folder name, e.g. python -m minattn exercises "
                                         f"my_attention, got {text!r}")
    folder = Path(text)
    if folder.exists() and not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    clashes = [s.name for s in sorted(EXERCISES.glob("[0-9]*.py")) if (folder / s.name).exists()]
    if clashes:
        raise argparse.ArgumentTypeError(f"{text!r} already has {', '.join(clashes)} (nothing "
                                         "was changed)")
    return text


def _check_command(args):
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        args.refuse("the grader needs hypothesis: pip install hypothesis (or, in your minattn "
                    "clone, pip install '.[check]')")
    if args.pitfall is not None:
        if args.files:
            args.refuse("give FILE.py or --pitfall NAME, not both")
        return check_pitfall(args.pitfall, args.examples, part=4, seconds=args.time_limit)
    try:
        grading_units(args.files)
    except CannotCheck as error:
        args.refuse(str(error))
    return check_paths(args.files, args.examples, part=args.part, seconds=args.time_limit,
                       isolate=True, file_seconds=args.file_time_limit)
