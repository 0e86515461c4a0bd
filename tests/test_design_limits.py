"""The shape of the code a reader opens (issue 42): a concept is its formula, a family is a file.

- every public function of a concept file: a body of at most 15 lines (docstring, comments and
  blank lines aside) and at most 10 keyword arguments;
- the common path (the functions every model runs) names no model family and no attention
  variant in its code (comments and docstrings may: they say where the variants live);
- from_hf's modules import in no circle; no module of the engine room imports a concept.

The sources are read, not run (ast). The functions still over the limits are listed in
OVER_THE_LIMITS with their size today: the list may only shrink (a listed function that grows,
or a new one over the limits, fails), and the worst offenders are printed (pytest -s)."""
import ast
import re
from pathlib import Path

import minattn

PACKAGE = Path(minattn.__file__).parent
MAX_BODY_LINES, MAX_KEYWORDS = 15, 10

# The concept files: the top of the package (minattn/*.py), less the package's own files and the
# two modules that are models/ under their documented names.
NOT_CONCEPTS = {"__init__", "__main__", "cli", "interop", "pretrained"}
# The common path: the functions every model runs (attention, heads, the blocks, the language
# model, generation and the pieces they are built from).
COMMON_PATH = ("attention", "multi_head", "heads", "linear", "masks", "normalization",
               "position_wise", "dropout", "positional", "rope", "kv_cache",
               "transformer_encoder", "transformer_decoder", "language_model", "generation",
               "loss")
FAMILY_AND_VARIANT_NAMES = (
    "gemma", "olmo", "qwen", "mistral", "neox", "pythia", "phi", "phi3", "stablelm", "cohere",
    "granite", "smollm", "smollm3", "deepseek", "diffllama", "gpt_oss", "gpt-oss", "sinks",
    "sink", "softcap", "soft_cap", "softcapping", "query_pre_attn_scalar", "partial_rotary",
    "partial_rotary_factor", "parallel", "sandwich", "head_mask", "latent", "differential",
    "nope", "embedding_scale")

# The concept functions in the files of the common path that are a variant's own concept (RoPE on
# part of each head lives beside RoPE): their code names it.
VARIANT_CONCEPTS = {"rope": {"apply_partial_rope", "rotary_width", "_check_apply_partial_rope"}}

# function -> (body lines, keyword arguments) today, over a limit: to shrink, never to grow.
OVER_THE_LIMITS = {
    # its two sublayer plugs, attention= and feed_forward=, through which a variant (hooks)
    # reaches each sublayer by keyword, next to torch's TransformerDecoderLayer's own keywords
    "transformer_decoder.decoder_block": (14, 11),
}


def concept_files():
    return sorted(p for p in PACKAGE.glob("*.py") if p.stem not in NOT_CONCEPTS)


def _docstring_lines(node):
    if node.body and isinstance(node.body[0], ast.Expr) and \
            isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value,
                                                                          str):
        return set(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    return set()


def body_lines(node, source_lines):
    """The lines of a function's body that hold code: no docstring, comment or blank line."""
    skip = _docstring_lines(node)
    lines = 0
    for number in range(node.body[0].lineno, node.end_lineno + 1):
        text = source_lines[number - 1].strip()
        if number not in skip and text and not text.startswith("#"):
            lines += 1
    return lines


def keyword_arguments(node):
    """Keyword-only parameters and positional ones with a default (not *args, **kwargs)."""
    return len(node.args.kwonlyargs) + len(node.args.defaults)


def public_functions():
    """-> {"module.function": (body lines, keyword arguments)} for every concept file."""
    sizes = {}
    for path in concept_files():
        source = path.read_text()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                sizes[f"{path.stem}.{node.name}"] = (body_lines(node, source.splitlines()),
                                                     keyword_arguments(node))
    return sizes


def test_concept_functions_are_short_and_take_few_keywords():
    sizes = public_functions()
    over = {name: size for name, size in sizes.items()
            if size[0] > MAX_BODY_LINES or size[1] > MAX_KEYWORDS}
    worst = sorted(over.items(), key=lambda item: (-max(item[1][0] - MAX_BODY_LINES,
                                                        item[1][1] - MAX_KEYWORDS), item[0]))
    print(f"\nover {MAX_BODY_LINES} body lines or {MAX_KEYWORDS} keywords "
          f"({len(over)} of {len(sizes)}):")
    for name, (lines, keywords) in worst:
        print(f"  {name}: {lines} lines, {keywords} keywords")
    new = sorted(set(over) - set(OVER_THE_LIMITS))
    assert not new, f"over the limits and not listed: {[(n, over[n]) for n in new]}"
    grown = [(name, OVER_THE_LIMITS[name], size) for name, size in over.items()
             if name in OVER_THE_LIMITS and (size[0] > OVER_THE_LIMITS[name][0]
                                             or size[1] > OVER_THE_LIMITS[name][1])]
    assert not grown, f"grown beyond their recorded size (name, recorded, now): {grown}"


def test_the_list_of_functions_over_the_limits_holds_only_functions_still_over():
    sizes = public_functions()
    stale = [name for name in OVER_THE_LIMITS if name not in sizes or (
        sizes[name][0] <= MAX_BODY_LINES and sizes[name][1] <= MAX_KEYWORDS)]
    assert not stale, f"within the limits now (remove them from OVER_THE_LIMITS): {stale}"


def code_words(path, leave_out=()):
    """The words of a module's code: identifiers and string constants, not comments and not
    docstrings (of the module, its classes and functions); the top-level functions named in
    leave_out left out."""
    tree = ast.parse(path.read_text())
    tree.body = [node for node in tree.body if getattr(node, "name", None) not in leave_out]
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) and \
                isinstance(node.body[0].value, ast.Constant):
            docstrings.add(id(node.body[0].value))
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, ast.arg):
            words.append(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            words.append(node.arg)
        elif isinstance(node, ast.alias):
            words.append(node.asname or node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in docstrings:
            words.append(node.value)
    return words


def test_the_common_path_names_no_family_and_no_variant_in_its_code():
    pattern = re.compile(r"(?<![a-z0-9])(" + "|".join(map(re.escape, FAMILY_AND_VARIANT_NAMES))
                         + r")(?![a-z0-9])", re.IGNORECASE)
    found = {}
    for stem in COMMON_PATH:
        for word in code_words(PACKAGE / f"{stem}.py", VARIANT_CONCEPTS.get(stem, ())):
            for match in pattern.findall(word.replace("_", " ").replace("-", " ")) + \
                    pattern.findall(word):
                found.setdefault(stem, set()).add(match.lower())
    assert not found, f"family or variant names in the code of the common path: {found}"


def imports_of(path):
    """The minattn modules a module imports (relative or absolute, anywhere in the file)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            base = (f"{base}.{node.module}" if node.module else base) if node.level else \
                node.module
            if not base or not base.startswith("minattn"):
                continue
            for alias in node.names:  # a submodule imported by name, or a name from a module
                candidate = f"{base}.{alias.name}"
                names.add(candidate if _module_path(candidate) else base)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("minattn"))
    return {name.removesuffix(".__init__") for name in names if _module_path(name)} - {module}


def _module_path(name):
    parts = name.split(".")
    base = PACKAGE.parent.joinpath(*parts)
    return base.with_suffix(".py") if base.with_suffix(".py").exists() else (
        base / "__init__.py" if (base / "__init__.py").exists() else None)


def test_from_hf_imports_in_no_circle():
    # Every module reachable from interop (the dispatch) and the family files, through the
    # imports they write (the package minattn itself aside: importing it runs its __init__).
    start = ["minattn.models.interop"] + [f"minattn.families.{p.stem}"
                                          for p in (PACKAGE / "families").glob("*.py")]
    graph, todo = {}, list(start)
    while todo:
        name = todo.pop()
        if name in graph or name == "minattn":
            continue
        graph[name] = imports_of(_module_path(name)) - {"minattn"}
        todo.extend(graph[name])
    state, circles = {}, []

    def visit(name, path):
        state[name] = "open"
        for other in sorted(graph.get(name, ())):
            if state.get(other) == "open":
                circles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path + [other])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, f"import circles: {circles}"


def test_no_engine_module_imports_a_concept():
    for path in sorted((PACKAGE / "engine").glob("*.py")):
        outside = {m for m in imports_of(path) if not m.startswith("minattn.engine")}
        assert not outside, f"{path.name} imports {sorted(outside)}"
