"""`import minattn` gives minattn.pretrained and minattn.interop without importing them first
(module __getattr__, PEP 562): they, and their optional dependencies, load when first used."""
import subprocess
import sys

HEAVY = ("torch", "transformers", "gguf", "tokenizers", "jinja2", "safetensors")


def run(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_minattn_loads_neither_module_nor_their_dependencies():
    loaded = run(f"import sys, minattn; print(sorted(m for m in sys.modules if m.split('.')[0] "
                 f"in {HEAVY!r} or m in ('minattn.pretrained', 'minattn.interop', "
                 f"'minattn.models.pretrained', 'minattn.models.interop')))")
    assert loaded == "[]"


def test_the_modules_are_attributes_of_minattn_without_an_import():
    # the names users' code reaches for, through `import minattn` alone
    assert run("import minattn; print(callable(minattn.pretrained.load_language_model), "
               "callable(minattn.pretrained.load_sentence_encoder), "
               "callable(minattn.interop.from_hf))") == "True True True"


def test_the_attribute_is_the_module_an_import_gives():
    assert run("import minattn, importlib; a = minattn.pretrained; "
               "print(a is importlib.import_module('minattn.pretrained'), "
               "minattn.interop is importlib.import_module('minattn.interop'))") == "True True"


def test_an_unknown_attribute_is_still_an_attribute_error():
    assert run("import minattn\ntry:\n    minattn.no_such_thing\nexcept AttributeError as e:\n"
               "    print(e)") == "module 'minattn' has no attribute 'no_such_thing'"
