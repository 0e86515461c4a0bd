"""Reading a call's arguments by name, fast: what the policy decorators need to know.

`inspect.signature(f).bind` costs microseconds a call, and the policies run on every call of
every core function (per token, per layer, in generation). `binder(f)` reads f's signature once
and returns (names, bind), where bind(args, kwargs) is the list of every argument's value in
f's order, defaults filled in. A call that does not fit f is left to Python's own TypeError.
"""
import inspect

_EMPTY = inspect.Parameter.empty


def binder(f):
    signature = inspect.signature(f)
    names = tuple(signature.parameters)
    defaults = [p.default for p in signature.parameters.values()]
    index = {name: i for i, name in enumerate(names)}
    n_positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                       for p in signature.parameters.values())

    def bind(args, kwargs):
        if len(args) <= n_positional and all(index.get(k, -1) >= len(args) for k in kwargs):
            values = list(args) + defaults[len(args):]
            for name, value in kwargs.items():
                values[index[name]] = value
            if not any(v is _EMPTY for v in values):
                return values
        signature.bind(*args, **kwargs)  # raises the TypeError Python would
        raise AssertionError("unreachable")  # pragma: no cover, no mutate

    return names, bind


def call_by_name(f, names, values):
    """f called with every argument by name (keyword-only ones included)."""
    return f(**dict(zip(names, values)))
