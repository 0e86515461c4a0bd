"""Swap a function in everywhere minattn calls it: for exercises, pitfalls and experiments.

`monkeypatch.setattr(minattn, "softmax", mine)` changes only the package attribute; the modules
that imported softmax by name (attention.py's scaled_dot_product_attention, and through it
multi_head_attention and the encoder) keep the original. `swap` rebinds the name in every
loaded minattn module that holds the original function, and restores them all on exit:

    with minattn.swap(softmax=my_softmax):
        minattn.encoder(params, x, n_heads=4)   # runs my_softmax inside every attention
"""
import contextlib
import sys


@contextlib.contextmanager
def swap(**replacements):
    """Context manager: for each name=function, use `function` wherever minattn binds the
    public function `name` (minattn.__all__), until the block ends (also on an exception).
    minattn.course.pitfalls keeps the originals. Raises ValueError for a name that is not public and
    TypeError for a replacement that is not callable."""
    import minattn

    for name, function in replacements.items():
        if name not in minattn.__all__:
            raise ValueError(f"{name!r} is not a public minattn function (see minattn.__all__)")
        if not callable(function):
            raise TypeError(f"the replacement for {name} must be callable, got "
                            f"{type(function).__name__}")
    rebound = []  # (module, attribute, original), to undo in reverse order
    try:
        for name, function in replacements.items():
            original = getattr(minattn, name)
            for module_name, module in list(sys.modules.items()):
                if module_name.split(".")[0] != "minattn" or module_name == "minattn.course.pitfalls":
                    continue
                for attribute, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, attribute, function)
                        rebound.append((module, attribute, original))
        yield
    finally:
        for module, attribute, original in reversed(rebound):
            setattr(module, attribute, original)
