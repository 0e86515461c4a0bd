"""The contract of every call, checked by the grader around each call a property makes of a
student's function (minattn/course/grader.py applies it; the properties state only the math).

What every exercise's stub promises of any call, whatever the property drew:
- inputs: each argument (and each array inside a params or cache dict) is as it was before;
- dtype: float32 in, float32 out (and float16, where the stub promises x's dtype): the call is
  made again with every float array cast, on whatever path the property took (mask, cache,
  g=None, causal ...);
- no state and no shared memory: a second call with fresh copies of the arguments (arrays laid
  out non-contiguously, as a slice of a fused QKV; strings equal but not the same object; the
  rng in the same state; each argument with a default given explicitly when it was left out,
  and left out when it was given its default) returns the same values, in new memory, and
  leaves the first call's results as they were; no two results of one call share memory.

Only the outermost call of a student's function is checked (a student's composite calling its
own parts runs them plainly), so each check costs a few calls, never a cascade.
"""
import copy
import functools

import numpy

# the functions whose stub promises x's (or q's) dtype, float16 included; the others promise
# "float32 stays float32"
EVERY_FLOAT = {"softmax", "layer_norm", "split_heads", "merge_heads", "apply_rope",
               "blockwise_attention", "softmax_vjp"}
NEVER_TOGGLED = {"like"}  # the array whose device a mask follows: never graded


class BrokenContract(AssertionError):
    """A call broke the contract: the message says how, `hint` what to do instead."""

    def __init__(self, message, hint):
        super().__init__(message)
        self.hint = hint


_DEPTH = [0]  # guarded calls in progress: only the outermost is checked
_AGAIN = [False]  # True while the contract makes its own calls (copies, casts)


def calling_again():
    """True while the contract makes a checked call again (with copies of its arguments): a
    property that watches what a function passes on (the rng given) looks only at the first."""
    return _AGAIN[0]


def guard(name, function, signature):
    """A student's function -> the same function, each outermost call checked by the contract.
    signature: the exercise's (minattn's) signature, by which arguments are named."""
    @functools.wraps(function)
    def guarded(*args, **kwargs):
        if _DEPTH[0]:
            return function(*args, **kwargs)
        _DEPTH[0] += 1
        try:
            return Call(name, function, signature, args, kwargs).checked()
        finally:
            _DEPTH[0] -= 1
    return guarded


# --- walking arguments and results: arrays inside tuples, lists and dicts ----------------------

def arrays(value, path):
    """-> [(path, array)] of every NumPy array in value (tuples, lists and dicts walked)."""
    if isinstance(value, numpy.ndarray):
        return [(path, value)]
    if isinstance(value, dict):
        return [item for key, v in value.items() for item in arrays(v, f"{path}[{key!r}]")]
    if isinstance(value, (tuple, list)):
        return [item for i, v in enumerate(value) for item in arrays(v, f"{path}[{i}]")]
    return []


def rebuild(value, array, other=lambda v: v):
    """value with each array replaced by array(a), each other leaf by other(leaf)."""
    if isinstance(value, numpy.ndarray):
        return array(value)
    if isinstance(value, dict):
        return {k: rebuild(v, array, other) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(rebuild(v, array, other) for v in value)
    return other(value)


def strided(a):
    """A copy of a with the same values, laid out non-contiguously (every other element of a
    buffer twice the size, as a slice of a fused QKV is)."""
    out = numpy.empty(a.shape + (2,), a.dtype)[..., 0]
    out[...] = a
    return out


def fresh_leaf(value):
    """A copy of a leaf a second call may not tell from the first: the rng in the same state,
    an equal string that is another object."""
    if isinstance(value, numpy.random.Generator):
        return copy.deepcopy(value)
    if type(value) is str and len(value) > 1:
        return "".join(list(value))  # equal, not identical: `is "gelu"` tells them apart
    return value


def same_leaf(value):
    """A copy of a leaf as the first call had it: the rng in the same state, the same string."""
    return copy.deepcopy(value) if isinstance(value, numpy.random.Generator) else value


def same(a, b):
    """Deep equality of an argument before and after a call (arrays: shape, dtype, values)."""
    if isinstance(a, numpy.ndarray):
        return (isinstance(b, numpy.ndarray) and a.shape == b.shape and a.dtype == b.dtype
                and numpy.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, numpy.random.Generator):
        return True  # drawing from the rng given is what it is for
    try:
        return bool(a == b)
    except Exception:  # an object without a plain ==: not an argument the exercises pass
        return True


def agree(a, b):
    """-> None if two results of one computation agree (floats to a tolerance that only the
    order of summation can break), else where and how they differ."""
    for (path, x), (_, y) in zip(arrays(a, "the result"), arrays(b, "the result")):
        if x.shape != y.shape or x.dtype != y.dtype:
            return (f"{path}: {x.dtype} {list(x.shape)} the first time, {y.dtype} "
                    f"{list(y.shape)} the second")
        if x.dtype.kind in "fc":
            tol = 1e-7 if x.dtype == numpy.float64 else 1e-2
            scale = max(1.0, float(numpy.max(numpy.abs(x[numpy.isfinite(x)]), initial=0.0)))
            ok = numpy.allclose(x, y, rtol=tol, atol=tol * scale, equal_nan=True)
        else:
            ok = numpy.array_equal(x, y)
        if not ok:
            return f"{path} differs\nthe first time:\n{show(x)}\nthe second time:\n{show(y)}"
    if len(arrays(a, "")) != len(arrays(b, "")):
        return "the results have another structure the second time"
    return None


def show(a):
    """An array as the grader's reports print it: 5 digits, summarised beyond 120 entries."""
    return numpy.array2string(numpy.asarray(a), precision=5, separator=", ", threshold=120,
                              max_line_width=96)


def overlaps(a, b):
    if a.size == 0 or b.size == 0 or not numpy.may_share_memory(a, b):
        return False
    try:
        return numpy.shares_memory(a, b, max_work=10 ** 5)
    except Exception:  # too hard to tell (numpy's TooHardError): not a failure
        return False


# --- one call -------------------------------------------------------------------------------

class Call:
    """One outermost call of a student's function, made once as asked, then again to check it."""

    def __init__(self, name, function, signature, args, kwargs):
        self.name, self.function, self.signature = name, function, signature
        self.args, self.kwargs = args, kwargs
        self.before = copy.deepcopy((args, kwargs))  # the rng too, in its state before the call

    def checked(self):
        result = self.function(*self.args, **self.kwargs)
        self.inputs_left_alone()
        self.dtype_kept(self.args, self.kwargs, result, "")
        self.no_memory_shared_within(result)
        _AGAIN[0] = True
        try:
            self.same_again(result)
            self.every_float_dtype()
        finally:
            _AGAIN[0] = False
        return result

    # what the call was: named arguments, for the messages
    def bound(self, args, kwargs):
        try:
            return self.signature.bind(*args, **kwargs).arguments
        except TypeError:
            return {**{f"argument {i + 1}": a for i, a in enumerate(args)}, **kwargs}

    def described(self, args=None, kwargs=None):
        args, kwargs = (self.args, self.kwargs) if args is None else (args, kwargs)
        parts = []
        for name, value in self.bound(args, kwargs).items():
            if isinstance(value, numpy.ndarray):
                parts.append(f"{name}: {value.dtype} {list(value.shape)}")
            elif isinstance(value, dict):
                inside = arrays(value, "")
                parts.append(f"{name}: a dict"
                             + (f" of {inside[0][1].dtype} arrays" if inside else ""))
            elif isinstance(value, numpy.random.Generator):
                parts.append(f"{name}: a Generator")
            else:
                parts.append(f"{name}={value!r}")
        return f"{self.name}({', '.join(parts)})"

    def fail(self, what, hint, args=None, kwargs=None):
        raise BrokenContract(f"your {self.name} {what}\n(the call: {self.described(args, kwargs)})",
                             hint)

    def inputs_left_alone(self):
        before = self.bound(*self.before)
        for name, value in self.bound(self.args, self.kwargs).items():
            if not same(before[name], value):
                changed = [p for (p, a), (_, b) in zip(arrays(before[name], name),
                                                       arrays(value, name)) if not same(a, b)]
                shown = ""
                if changed:
                    path = changed[0]
                    old = dict(arrays(before[name], name))[path]
                    new = dict(arrays(value, name))[path]
                    shown = f"\n{path} before the call:\n{show(old)}\nafter it:\n{show(new)}"
                self.fail(f"changed its argument {changed[0] if changed else name} in place: a "
                          "function returns new arrays and leaves the caller's as they were"
                          + shown,
                          "compute into new arrays (x = x - top, np.where(...), "
                          "np.concatenate(...), {**cache, 'k': k}), never into an argument "
                          "(x -= top, x[...] = ..., out=x, cache['k'] = ...)")

    def dtype_kept(self, args, kwargs, result, how):
        given = {a.dtype for _, a in arrays((args, kwargs), "") if a.dtype.kind == "f"}
        if len(given) != 1 or given == {numpy.dtype(numpy.float64)}:
            return
        [dtype] = given
        for path, out in arrays(result, "the result"):
            if out.dtype.kind == "f" and out.dtype != dtype:
                self.fail(f"returned {path} as {out.dtype} for {dtype} inputs{how}: {dtype} in, "
                          f"{dtype} out, on every path (with a mask or without, a cache or not, "
                          "every optional argument)",
                          "a float64 scalar or array made inside (np.sqrt(d), np.float64(...), "
                          "np.zeros(shape), np.ones(shape)) upcasts: make them from the inputs "
                          "(np.zeros_like(x), x.dtype.type(...), a Python float)", args, kwargs)

    def every_float_dtype(self):
        # the call again with every float array cast: float32 always, float16 where promised
        given = {a.dtype for _, a in arrays(self.before, "") if a.dtype.kind == "f"}
        if given != {numpy.dtype(numpy.float64)}:
            return
        for dtype in [numpy.float32] + ([numpy.float16] if self.name in EVERY_FLOAT else []):
            args, kwargs = rebuild(self.before, lambda a: a.astype(dtype) if a.dtype.kind == "f"
                                   else a.copy(), fresh_leaf)
            try:
                result = self.function(*args, **kwargs)
            except Exception as error:
                self.fail(f"raised {type(error).__name__}: {error} when the same call was made "
                          f"with {numpy.dtype(dtype)} inputs, which the exercise accepts",
                          "compute in the inputs' dtype: nothing in the formula needs float64",
                          args, kwargs)
            self.dtype_kept(args, kwargs, result, f" (the same call as the property's, made "
                                                  f"with {numpy.dtype(dtype)} inputs)")

    def no_memory_shared_within(self, result):
        outs = [(p, a) for p, a in arrays(result, "the result") if a.flags.writeable]
        inputs = [a for _, a in arrays((self.args, self.kwargs), "")]
        for i, (p, a) in enumerate(outs):
            for q, b in outs[i + 1:]:
                if overlaps(a, b) and not any(overlaps(a, x) for x in inputs):
                    self.fail(f"returned {p} and {q} in the same memory: writing into one "
                              "changes the other", "return separate arrays (a .copy() of one)")

    def again(self, toggled=None, layout=strided, leaf=fresh_leaf):
        """The arguments of a second call: fresh copies of what the first was given, each
        parameter in `toggled` (None: every one with a default) given its default explicitly
        when it was left out, and left out when it was given its default."""
        args, kwargs = rebuild(self.before, layout, leaf)
        bound = self.signature.bind(*args, **kwargs)
        for parameter in self.signature.parameters.values():
            if parameter.default is parameter.empty or parameter.name in NEVER_TOGGLED or \
                    (toggled is not None and parameter.name not in toggled):
                continue
            if parameter.name in bound.arguments:
                value = bound.arguments[parameter.name]
                if value is parameter.default or (type(value) in (bool, int, float, str)
                                                  and type(value) is type(parameter.default)
                                                  and value == parameter.default):
                    del bound.arguments[parameter.name]
            else:
                bound.arguments[parameter.name] = parameter.default
        return bound.args, bound.kwargs

    def call(self, arguments):
        args, kwargs = arguments
        return self.function(*args, **kwargs)

    def outcome(self, arguments):
        """-> the result of a call, or the exception it raised (a second call may fail where the
        first did not: on a non-contiguous array, say)."""
        try:
            return self.call(arguments)
        except Exception as error:
            return error

    def differs(self, a, b):
        """-> None if two outcomes agree, else how they differ."""
        for value in (a, b):
            if isinstance(value, Exception):
                return (f"raised {type(value).__name__}: {value}" if a is value else
                        f"the second time it raised {type(value).__name__}: {value}")
        return agree(a, b)

    def same_again(self, result):
        kept = rebuild(result, numpy.copy)
        second = self.outcome(self.again())
        if isinstance(second, Exception):
            self.fail(*self.why_not_again(f"the second time it raised {type(second).__name__}: "
                                          f"{second}"))
        if not same(kept, result):
            self.fail("changed what an earlier call returned when it was called again: its "
                      "results are views of memory it reuses (a module-level buffer)",
                      "return new arrays from each call, not views of one buffer kept between "
                      "calls")
        # the defaults toggled give a memo keyed on the arguments (functools.lru_cache) another
        # key: the call again exactly as it was made too, its arrays fresh copies
        exact = self.outcome(self.again(set(), numpy.copy, same_leaf))
        for other in (second, exact):
            self.no_memory_shared_with(result, other)
        difference = self.differs(result, second)
        if difference is not None:
            self.fail(*self.why_not_again(difference))

    def no_memory_shared_with(self, result, second):
        if isinstance(second, Exception):
            return  # a call that raised shares nothing; same_again says why it raised
        for p, a in arrays(result, "the result"):
            for q, b in arrays(second, "the result"):
                if (a.flags.writeable or b.flags.writeable) and overlaps(a, b):
                    self.fail(f"returned {p} in the same memory the second time it was called "
                              "with the same arguments (fresh copies): a caller writing into one "
                              "result changes the other (a cache, functools.lru_cache, or a "
                              "module-level array handed out as it is)",
                              "return a new array each call (a .copy() of what you keep), or "
                              "make what you hand out read-only")

    def why_not_again(self, difference):
        """Two calls with fresh copies of the same arguments disagree: which change of them
        makes the difference -> (what failed, hint)."""
        first = self.outcome(rebuild(self.before, numpy.copy, same_leaf))
        plain = self.differs(first, self.outcome(rebuild(self.before, numpy.copy, same_leaf)))
        if isinstance(first, Exception) or plain is not None:
            return (f"returned different results for the same arguments (fresh copies, the rng in "
                    f"the same state): {plain or difference}",
                    "keep no state between calls (a global, a mutable default argument, a cache "
                    "keyed on less than every argument), and draw random numbers only from the "
                    "rng given")
        if self.differs(first, self.outcome(self.again(set(), strided, same_leaf))) is not None:
            return (f"returned another result for the same values laid out non-contiguously (a "
                    f"slice of a larger array, such as a fused QKV projection): {difference}",
                    "read arrays by their shape, not their memory layout: no x.shape = ..., "
                    "np.frombuffer, or strides computed by hand")
        fresh = self.outcome(rebuild(self.before, numpy.copy, fresh_leaf))
        if self.differs(first, fresh) is not None:
            return (f"returned another result for an equal string that is another object: "
                    f"{difference}", "compare strings with ==, never with `is`")
        given = self.bound(*self.before)
        for parameter in self.signature.parameters:
            if self.differs(first, self.outcome(self.again({parameter}, numpy.copy, same_leaf))) \
                    is not None:
                default = f"{parameter}={self.signature.parameters[parameter].default!r}"
                how = (f"called with {default} given and again with {parameter} left out" if
                       parameter in given else f"called with {parameter} left out and again with "
                       f"{default} given")
                return (f"is not the same function with the exercise's default {default}: "
                        f"{how}, it returned other results: {difference}",
                        f"give {parameter} the exercise's default, as in its signature "
                        f"{self.name}{self.signature}")
        return (f"returned another result when called again: {difference}",
                "keep no state between calls, and read arrays by their shape, not their layout")
