"""A name means one thing: no module of minattn shares its dotted name with a function.

Were minattn/encoder.py a module beside the function minattn.encoder, `import minattn.encoder as
m` would give the function, `sys.modules["minattn.encoder"]` the module, and monkeypatching the
one would miss the other. The files are read from the tree, not imported (some need torch)."""
import importlib
import pkgutil
import types
from pathlib import Path

import minattn

PACKAGE = Path(minattn.__file__).parent


def module_names():
    """Every module file and package under minattn/, as dotted names (minattn.engine.checks)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_tree_is_found():
    names = module_names()
    assert {"minattn.attention", "minattn.engine.checks", "minattn.course.swap"} <= set(names)


def test_no_top_level_module_is_named_like_an_attribute_of_minattn():
    # minattn.<name> is either the module minattn/<name>.py (or the package), or absent.
    for name in module_names():
        parts = name.split(".")
        if len(parts) != 2:
            continue
        attribute = getattr(minattn, parts[1], None)
        assert attribute is None or isinstance(attribute, types.ModuleType), (
            f"minattn.{parts[1]} is a {type(attribute).__name__} and {name} a module")
        assert parts[1] not in minattn.__all__, f"{name} is named like the function"


def test_every_dotted_module_name_reaches_its_module_by_attributes():
    # Each package's attribute named for a submodule is that module, once the package is
    # imported; the packages are light (importing a package imports none of its heavy parts).
    for name in module_names():
        parent, _, last = name.rpartition(".")
        if not parent or not (PACKAGE.parent / parent.replace(".", "/") / "__init__.py").exists():
            continue
        package = importlib.import_module(parent)
        attribute = getattr(package, last, None)
        assert attribute is None or isinstance(attribute, types.ModuleType), (
            f"{parent}.{last} is a {type(attribute).__name__}, and {name} is a module")


def test_the_documented_module_names_import_as_modules():
    # minattn.interop and minattn.pretrained are the modules in models/ under their own names.
    for name in ("minattn.interop", "minattn.pretrained", "minattn.kv_cache",
                 "minattn.transformer_encoder", "minattn.transformer_decoder",
                 "minattn.language_model", "minattn.generation"):
        module = importlib.import_module(name)
        assert isinstance(module, types.ModuleType)
    assert minattn.interop is importlib.import_module("minattn.models.interop")
    assert minattn.pretrained is importlib.import_module("minattn.models.pretrained")
    assert callable(minattn.encoder) and callable(minattn.decoder) and callable(minattn.swap)


def test_pkgutil_sees_the_same_top_level_modules():
    found = {f"minattn.{m.name}" for m in pkgutil.iter_modules(minattn.__path__)}
    assert found == {name for name in module_names() if name.count(".") == 1}
