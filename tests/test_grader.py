"""The grader (`python -m minattn check`): a correct plain-NumPy answer to each exercise exits 0
with the command its box gives; every documented argument of every stub has mutants (the
argument ignored, not passed on, the wrong axis, the wrong dtype) that fail with a property of
the mutated function named first; the pitfalls are caught; bad command lines get a sentence,
never a traceback. minattn itself satisfies every property."""
import inspect
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minattn
from minattn.course import grader, pitfalls, properties

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = Path(__file__).parent / "solutions"
# each correct answer -> the part its exercise box checks it with (`--part N`; 1 = no option)
ANSWERS = {"01_softmax.py": 1, "02_attention.py": 1, "03_masks.py": 1, "03_masks_part2.py": 2,
           "04_heads.py": 1, "05_multi_head_attention.py": 1, "06_layer_norm.py": 1,
           "07_feed_forward.py": 1, "08_encoder_block.py": 1, "10_rope.py": 2,
           "09_grouped_query_attention.py": 2, "11_kv_cache.py": 2,
           "12_softmax_backward.py": 3, "13_blockwise_attention.py": 4, "14_attention_sinks.py": 2,
           "15_delta_rule.py": 2}
# the most complete answer for each exercise function: the one the mutants are made from
MUTATED = {"01_softmax.py", "14_attention_sinks.py", "03_masks_part2.py", "04_heads.py",
           "06_layer_norm.py", "07_feed_forward.py", "08_encoder_block.py", "10_rope.py",
           "09_grouped_query_attention.py", "11_kv_cache.py", "12_softmax_backward.py",
           "13_blockwise_attention.py", "15_delta_rule.py"}
# documented arguments no output can show, and why
EXEMPT = {("causal_mask", "like"): "the array whose device the mask follows; NumPy has one",
          ("blockwise_attention", "block_size"): "changes the memory used, never the output"}


def grade_paths(*paths, part=1):
    out = io.StringIO()
    code = grader.check_paths(list(paths), max_examples=10, out=out, shrink=False, part=part)
    return code, out.getvalue()


def first_failure(functions, part=4):
    # -> the name of the first property that fails with `functions` swapped in (parts 1..part)
    out = io.StringIO()
    failures, _ = grader.grade(functions, 10, out, shrink=False, part=part, first_failure=True)
    failed = re.findall(r"^FAIL  (\w+)", out.getvalue(), re.M)
    return (failed[0] if failed else None), out.getvalue()


def answer(file):
    functions, _, _ = grader.attempted(grader.load(SOLUTIONS / file))
    return functions


# --- minattn itself, and the correct answers ---------------------------------------------------

@pytest.mark.parametrize("prop", properties.PROPERTIES, ids=lambda p: p.name)
def test_minattn_itself_has_every_property(prop):
    assert grader.run_property(prop, 10) is None


@pytest.mark.parametrize("file", sorted(ANSWERS))
def test_a_correct_answer_exits_0_with_its_boxs_command(file):
    code, out = grade_paths(SOLUTIONS / file, part=ANSWERS[file])
    assert code == 0 and "FAIL" not in out, out


def test_every_exercise_has_a_stub_a_correct_answer_and_properties():
    stubs = {s.name for s in grader.EXERCISES.glob("[0-9]*.py")}
    assert stubs <= set(ANSWERS)
    for stub in grader.EXERCISES.glob("[0-9]*.py"):
        _, names, _ = grader.attempted(grader.load(stub))
        for name in names:
            assert any(p.of == name for p in properties.PROPERTIES), name


def test_a_part_one_answer_leaves_out_part_two_parameters_and_their_properties_wait():
    code, out = grade_paths(SOLUTIONS / "03_masks.py")
    assert code == 0 and "WAIT  causal_mask_aligns_and_windows: taught in Part II" in out, out
    assert "leaves out align, window" in out
    code, out = grade_paths(SOLUTIONS / "03_masks.py", part=2)
    assert code == 1 and "your causal_mask does not take" in out and "(taught in Part II)" in out, out


def test_a_part_two_exercise_checked_at_part_one_says_the_command():
    code, out = grade_paths(SOLUTIONS / "10_rope.py")
    assert code == 1 and "--part 2" in out and "FAIL" not in out, out


# --- every documented argument: mutants of the class, generated from the answers ---------------

def ignoring(function, parameter):
    """`function` that ignores `parameter`: the default (or one head, or a fixed generator)."""
    signature = inspect.signature(function)
    default = signature.parameters[parameter].default
    replacement = {"n_heads": 1, "rng": None}.get(parameter, default)

    def mutant(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        if parameter == "rng":  # the student's own generator instead of the one given
            bound.arguments["rng"] = np.random.default_rng(0)
        elif parameter in bound.arguments:
            bound.arguments[parameter] = replacement
        return function(*bound.args, **bound.kwargs)
    mutant.__signature__ = signature
    return mutant


def upcasting(function):
    """`function` whose float results come back as float64."""
    def cast(result):
        if isinstance(result, tuple):
            return tuple(cast(r) for r in result)
        if isinstance(result, dict):
            return {k: cast(v) for k, v in result.items()}
        result = np.asarray(result)
        return result.astype(np.float64) if result.dtype.kind == "f" else result

    def mutant(*args, **kwargs):
        return cast(function(*args, **kwargs))
    mutant.__signature__ = inspect.signature(function)
    return mutant


def argument_mutants():
    for file in sorted(MUTATED):
        for name, function in answer(file).items():
            for parameter in inspect.signature(function).parameters.values():
                has_default = parameter.default is not parameter.empty
                if (has_default or parameter.kind is parameter.KEYWORD_ONLY) \
                        and (name, parameter.name) not in EXEMPT:
                    yield f"{name}-ignores-{parameter.name}", name, file, lambda f=function, p=parameter.name: ignoring(f, p)
            if name not in ("causal_mask", "padding_mask"):  # masks are bool
                yield f"{name}-returns-float64", name, file, lambda f=function: upcasting(f)


def source_mutants():
    """Edits of the answers' source: every axis changed, every argument not passed on."""
    other_axis = {"-1": "0", "-2": "-1", "-3": "-2", "axis": "-1"}
    for file in sorted(MUTATED):
        source = (SOLUTIONS / file).read_text()
        parameters = {p for f in answer(file).values() for p in inspect.signature(f).parameters}
        for match in re.finditer(r"axis=(-?\d|axis)\b", source):
            new = source[:match.start()] + f"axis={other_axis[match.group(1)]}" + source[match.end():]
            yield f"{file}-axis@{match.start()}", file, new
        for match in re.finditer(r",\s*(\w+)=(\w+)(?=[,)])", source):
            if match.group(2) in parameters:
                new = source[:match.start()] + source[match.end():]
                yield f"{file}-drops-{match.group(1)}@{match.start()}", file, new
        for match in re.finditer(r"\], eps\)", source):  # eps passed positionally
            yield f"{file}-drops-eps@{match.start()}", file, source[:match.start()] + "])" + source[match.end():]


ARGUMENT_MUTANTS = list(argument_mutants())
SOURCE_MUTANTS = list(source_mutants())


def test_every_documented_argument_of_every_stub_has_a_mutant():
    covered = {(name, m.split("-ignores-")[1]) for m, name, _, _ in ARGUMENT_MUTANTS
               if "-ignores-" in m}
    for stub in grader.EXERCISES.glob("[0-9]*.py"):
        module = grader.load(stub)
        for name in grader.attempted(module)[1]:
            for parameter in inspect.signature(getattr(module, name)).parameters.values():
                if parameter.default is not parameter.empty or parameter.kind is parameter.KEYWORD_ONLY:
                    assert (name, parameter.name) in covered | set(EXEMPT), (name, parameter.name)
                    assert parameter.name in inspect.getdoc(getattr(module, name)), \
                        f"{stub.name}: {name} does not document {parameter.name}"


@pytest.mark.parametrize("mutant, name, file, make", ARGUMENT_MUTANTS, ids=[m[0] for m in ARGUMENT_MUTANTS])
def test_an_argument_mutant_fails_with_a_property_of_its_function_first(mutant, name, file, make):
    functions = answer(file)
    functions[name] = make()
    failed, out = first_failure(functions)
    assert failed is not None, f"{mutant} passes every property:\n{out}"
    assert properties.BY_NAME[failed].of == name, out


@pytest.mark.parametrize("mutant, file, source", SOURCE_MUTANTS, ids=[m[0] for m in SOURCE_MUTANTS])
def test_a_source_mutant_fails_with_a_property_of_the_edited_function_first(mutant, file, source,
                                                                            tmp_path):
    path = tmp_path / file
    path.write_text(source)
    try:
        functions, _, _ = grader.attempted(grader.load(path))
    except grader.CannotCheck:
        return  # the edit breaks the signature: exit 2, not a silent pass
    failed, out = first_failure(functions)
    assert failed is not None, f"{mutant} passes every property:\n{out}"
    assert properties.BY_NAME[failed].of in functions, out


# A student's common mistakes, as edits of the answers -> the property that must fail first.
MISTAKES = {
    "scale by 1/d_k": ("02_attention.py", "q.shape[-1] ** -0.5", "1 / q.shape[-1]",
                       "attention_matches_the_formula"),
    "scale upcasts float32": ("02_attention.py", "q.shape[-1] ** -0.5", "1 / np.sqrt(q.shape[-1])",
                              "attention_keeps_float32"),
    "missing transpose of k": ("02_attention.py", "q @ np.swapaxes(k, -1, -2)", "q @ k",
                               "attention_matches_the_formula"),
    "dropout without rescaling": ("02_attention.py", "weights / (1 - dropout)", "weights",
                                  "attention_dropout_zeroes_and_rescales"),
    "off-by-one causal mask": ("03_masks.py", "[:, None] >= np", "[:, None] > np",
                               "causal_mask_hides_the_future"),
    "off-by-one padding mask": ("03_masks.py", "[None, :] < lengths", "[None, :] <= lengths",
                                "padding_mask_keeps_real_tokens"),
    "inverted mask polarity": ("01_softmax.py", "np.where(mask, x, -np.inf)",
                               "np.where(mask, -np.inf, x)", "softmax_masked_entries_are_zero"),
    "NaN for a fully masked row": ("01_softmax.py", "e / np.where(total == 0, 1, total)", "e / total",
                                   "softmax_masked_entries_are_zero"),
    "no max subtraction": ("01_softmax.py", "np.exp(x - top)", "np.exp(x)", "softmax_matches_the_formula"),
    "unbiased variance": ("06_layer_norm.py", "((x - mean) ** 2).mean(axis=-1, keepdims=True)",
                          "((x - mean) ** 2).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)",
                          "layer_norm_matches_the_formula"),
    "eps outside the square root": ("06_layer_norm.py", "np.sqrt(variance + eps)",
                                    "(np.sqrt(variance) + eps)", "layer_norm_matches_the_formula"),
    "bare reshape into heads": ("04_heads.py", "np.swapaxes(x.reshape(*lead, length, n_heads, d // n_heads), -2, -3)",
                                "x.reshape(*lead, n_heads, length, d // n_heads)",
                                "split_heads_takes_feature_slices"),
    "merge without swapping back": ("04_heads.py", "np.swapaxes(x, -2, -3).reshape", "x.reshape",
                                    "merge_heads_inverts_split_heads"),
    "no output projection": ("09_grouped_query_attention.py",
                             'merge_heads(heads) @ p["w_o"] + p["b_o"]', "merge_heads(heads)",
                             "multi_head_attention_matches_a_loop_over_heads"),
    "key used as value": ("09_grouped_query_attention.py", 'split_heads(value @', 'split_heads(key @',
                          "multi_head_attention_matches_a_loop_over_heads"),
    "GQA groups interleaved": ("09_grouped_query_attention.py",
                               'np.repeat(minattn.split_heads(key @ p["w_k"] + p["b_k"], n_kv), n_heads // n_kv, axis=-3)',
                               'np.concatenate([minattn.split_heads(key @ p["w_k"] + p["b_k"], n_kv)] * (n_heads // n_kv), axis=-3)',
                               "grouped_query_attention_shares_kv_heads"),
    "no activation": ("07_feed_forward.py", "h = np.maximum(h, 0)", "h = h",
                      "feed_forward_matches_the_formula"),
    "interleaved RoPE pairs": ("10_rope.py", "x[..., :d // 2], x[..., d // 2:]",
                               "x[..., 0::2], x[..., 1::2]", "apply_rope_rotates_feature_pairs"),
    "no residual in post-norm": ("08_encoder_block.py", 'norm(x + out, "self_attention_norm")', 'norm(out, "self_attention_norm")',
                                 "encoder_block_matches_the_paper"),
    "RoPE on the values": ("11_kv_cache.py", "    if cache is not None:",
                           "        v = minattn.apply_rope(v, positions, base=rope_base)\n    if cache is not None:",
                           "self_attention_matches_a_loop"),
    "cache appended on the wrong side": ("11_kv_cache.py", '[cache["k"], k]', '[k, cache["k"]]',
                                         "kv_cache_decoding_matches_the_full_pass"),
    "rope_base not passed on for q": ("11_kv_cache.py", "q = minattn.apply_rope(q, positions, base=rope_base)",
                                      "q = minattn.apply_rope(q, positions)", "self_attention_matches_a_loop"),
    "eps not passed to the second norm": ("08_encoder_block.py", 'x = norm(x + feed(x), "feed_forward_norm")',
                                          'x = minattn.layer_norm(x + feed(x), params["feed_forward_norm"]["gamma"], '
                                          'params["feed_forward_norm"]["beta"])', "encoder_block_matches_the_paper"),
    "weights averaged over axis 1": ("09_grouped_query_attention.py", "weights.mean(axis=-3)",
                                     "weights.mean(axis=1)",
                                     "multi_head_attention_averages_weights_over_heads"),
    "dropout from a fresh generator": ("07_feed_forward.py", "keep = rng.random(h.shape)",
                                       "keep = np.random.default_rng().random(h.shape)",
                                       "feed_forward_dropout_is_unbiased"),
    "the key mask ignored when causal": ("13_blockwise_attention.py", "if key_mask is not None:",
                                         "if key_mask is not None and not causal:",
                                         "blockwise_attention_matches_attention"),
    "softmax VJP without the sum": ("12_softmax_backward.py", "g - np.sum(g * y, axis=axis, keepdims=True)",
                                    "g", "softmax_vjp_matches_finite_differences"),
    "online softmax without rescaling": ("13_blockwise_attention.py", "c * acc", "acc",
                                         "blockwise_attention_matches_attention"),
    "the sink masked with the last key": ("14_attention_sinks.py", "[keep, np.ones(rows, bool)]",
                                          "[keep, keep[..., -1:]]",
                                          "attention_sinks_join_after_masking"),
    "the sink left out of the denominator": ("14_attention_sinks.py", "mask=keep)[..., :-1]",
                                             "mask=keep)[..., :-1]\n        weights = weights / "
                                             "np.sum(weights, axis=-1, keepdims=True)",
                                             "attention_sinks_take_their_share"),
    "the mask applied after the softmax": ("14_attention_sinks.py", "mask=keep)[..., :-1]",
                                           "mask=None)[..., :-1] * keep[..., :-1]",
                                           "attention_sinks_join_after_masking"),
    "the value written, not the error (linear attention)": (
        "15_delta_rule.py", "k_t[..., :, None] * error[..., None, :]",
        "k_t[..., :, None] * v[..., t, None, :]", "delta_rule_matches_a_loop"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_common_mistake_fails_with_its_property_named_first(mistake, tmp_path):
    file, old, new, prop = MISTAKES[mistake]
    source = (SOLUTIONS / file).read_text()
    assert source.count(old) == 1, f"the edit for {mistake!r} no longer applies"
    path = tmp_path / file
    path.write_text(source.replace(old, new))
    failed, out = first_failure(grader.attempted(grader.load(path))[0], part=ANSWERS[file])
    assert failed == prop, out  # with the box's command, the first failure names the mistake


# --- the pitfalls ------------------------------------------------------------------------------

# pitfall -> a property that must catch it (it may catch it in others too)
PITFALL_PROPERTIES = {
    "attention_without_scaling": "attention_matches_the_formula",
    "softmax_over_wrong_axis": "attention_matches_the_formula",
    "split_heads_without_transpose": "split_heads_takes_feature_slices",
    "attention_with_inverted_mask": "attention_mask_hides_keys",
    "attention_with_minus_1e9_mask": "attention_fully_masked_query_is_zero",
    "layer_norm_over_wrong_axis": "layer_norm_matches_the_formula",
    "layer_norm_std_plus_eps": "layer_norm_matches_the_formula",
    "softmax_without_max_subtraction": "softmax_matches_the_formula",
    "encoder_block_without_residual": "encoder_block_matches_the_paper",
    "causal_mask_off_by_one": "causal_mask_hides_the_future",
    "self_attention_with_rope_on_values": "rope_attention_depends_on_offsets_only",
    "causal_lm_without_advancing_positions": "causal_lm_cache_matches_the_full_pass",
}


def test_the_table_covers_every_pitfall():
    assert set(PITFALL_PROPERTIES) == set(pitfalls.PITFALLS)


@pytest.mark.parametrize("name", sorted(PITFALL_PROPERTIES))
def test_each_pitfall_is_caught_by_its_property(name):
    out = io.StringIO()
    assert grader.check_pitfall(name, 10, out, shrink=False) == 1
    assert f"FAIL  {PITFALL_PROPERTIES[name]}" in out.getvalue(), out.getvalue()


# --- the report ----------------------------------------------------------------------------------

def test_a_counterexample_names_its_arguments_and_shows_arrays_whole(tmp_path):
    path = tmp_path / "01_softmax.py"
    path.write_text((SOLUTIONS / "01_softmax.py").read_text().replace("np.exp(x - top)", "np.exp(x)"))
    out = io.StringIO()
    assert grader.check_paths([path], 10, out, shrink=True) == 1
    report = out.getvalue()
    assert "Draw 1" not in report and "bound=10000.0" in report and "x =\n" in report, report
    failure = report.split("FAIL  softmax_matches_the_formula")[1].split("hint:")[0]
    assert "NaN" in failure and "got:" in failure and "expected:" in failure and failure.count("[") == failure.count("]")


def test_the_students_own_properties_come_first_and_a_composite_failure_names_its_cause(tmp_path):
    path = tmp_path / "02_attention.py"
    path.write_text((SOLUTIONS / "02_attention.py").read_text().replace("** -0.5", "** -1.0"))
    code, out = grade_paths(path)
    lines = [line for line in out.splitlines() if line[:4] in ("PASS", "FAIL")]
    own = [i for i, line in enumerate(lines) if "minattn's" not in line]
    assert own == list(range(len(own))), out
    assert "FAIL  multi_head_attention_matches_a_loop_over_heads (minattn's multi_head_attention, " \
           "running your scaled_dot_product_attention)" in out
    assert "caused by your scaled_dot_product_attention: fix the failures of its own" in out


def test_several_files_are_graded_together_and_a_folder_file_by_file(tmp_path):
    code, out = grade_paths(SOLUTIONS / "01_softmax.py", SOLUTIONS / "02_attention.py")
    assert code == 0 and "checking softmax, scaled_dot_product_attention" in out, out
    assert grader.copy_exercises(tmp_path, io.StringIO()) == 0
    (tmp_path / "04_heads.py").write_text((SOLUTIONS / "04_heads.py").read_text())
    code, out = grade_paths(tmp_path)
    assert code == 0, out
    summary = out.split("summary:")[1]
    assert summary.index("03_masks.py: not started") < summary.index("04_heads.py: passes")
    (tmp_path / "06_layer_norm.py").write_text("def layer_norm(x, gamma, beta, eps=1e-5):\n    return x\n")
    assert grade_paths(tmp_path)[0] == 1


def test_plural_and_singular():
    assert grader.plural(1, "property") == "1 property" and grader.plural(2, "property") == "2 properties"


# --- files and command lines it cannot use: a sentence and exit 2, never a traceback ------------

@pytest.mark.parametrize("content, reason", [
    ("def softmax(x, axis=-1, mask=None)\n    return x\n", "syntax error on line 1"),
    ("import no_such_module_here\n", "ModuleNotFoundError"),
    ("def softmax(x):\n    return x\n", "does not take axis, mask"),
])
def test_a_file_that_cannot_be_checked_exits_2(content, reason, tmp_path):
    path = tmp_path / "student.py"
    path.write_text(content)
    code, out = grade_paths(path)
    assert code == 2 and reason in out, out


def test_odd_file_names(tmp_path):
    (tmp_path / "notpy.txt").write_text("def softmax(x, axis=-1, mask=None):\n    return x\n")
    code, out = grade_paths(tmp_path / "notpy.txt")
    assert code == 2 and "not a Python file" in out, out
    spaced = tmp_path / "my softmax.PY"
    spaced.write_text((SOLUTIONS / "01_softmax.py").read_text())
    assert grade_paths(spaced)[0] == 0
    assert grade_paths(tmp_path / "nothing.py") == (2, f"cannot check: {tmp_path / 'nothing.py'}: no such file\n")
    assert grade_paths(Path(""))[0] == 2


def test_fresh_stubs_have_nothing_to_check_and_copying_never_overwrites(tmp_path):
    assert grader.copy_exercises(tmp_path, io.StringIO()) == 0
    stubs = sorted(tmp_path.glob("*.py"))
    assert [s.name for s in stubs] == sorted(s.name for s in grader.EXERCISES.glob("[0-9]*.py"))
    for stub in stubs:
        code, out = grade_paths(stub)
        assert code == 1 and "nothing to check" in out, out
    out = io.StringIO()
    assert grader.copy_exercises(tmp_path, out) == 2 and "nothing was changed" in out.getvalue()
    out = io.StringIO()
    assert grader.copy_exercises(stubs[0], out) == 2 and "is a file, not a folder" in out.getvalue()
    out = io.StringIO()
    assert grader.copy_exercises("", out) == 2 and "give a folder name" in out.getvalue()


def test_stubs_have_the_exercise_signatures():
    for stub in sorted(grader.EXERCISES.glob("[0-9]*.py")):
        module = grader.load(stub)
        _, names, _ = grader.attempted(module)
        assert names, stub
        for name in names:
            assert inspect.signature(getattr(module, name)) == grader.exercise_signature(name)


def run_cli(*args, cwd=ROOT, block_hypothesis=False):
    code = ("import sys; sys.modules['hypothesis'] = None; " if block_hypothesis else "") + \
        "from minattn.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", "import sys; " + code, *args], capture_output=True,
                          text=True, cwd=cwd, env={"PYTHONPATH": str(ROOT), "PATH": ""})


def test_the_command_line_reports_and_exits_with_the_codes(tmp_path):
    assert run_cli("check", str(SOLUTIONS / "06_layer_norm.py"), "--examples", "3").returncode == 0
    result = run_cli("check", "--pitfall", "layer_norm_std_plus_eps", "--examples", "3")
    assert result.returncode == 1 and "FAIL  layer_norm_matches_the_formula" in result.stdout
    assert "counterexample" in result.stdout and "hint:" in result.stdout
    assert run_cli("check", str(tmp_path / "missing.py")).returncode == 2


@pytest.mark.parametrize("args", [["check", "missing.py"], ["check", "--pitfall", "no_such_pitfall"],
                                  ["check", "--pitfall", ""], ["check", ""], ["check"],
                                  ["exercises", ""], ["check", "notpy.txt"]])
def test_a_bad_command_line_exits_2_with_a_sentence(args, capsys, tmp_path, monkeypatch):
    from minattn import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notpy.txt").write_text("x = 1\n")
    assert cli.main(args) == 2  # raising instead would fail this test with the traceback
    assert "cannot" in capsys.readouterr().out


def test_check_help_lists_the_pitfalls_and_the_parts(capsys):
    from minattn import cli

    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    help_text = capsys.readouterr().out
    assert all(name in help_text for name in pitfalls.PITFALLS) and "--part" in help_text


def test_exercises_needs_no_hypothesis_and_check_works_from_the_exercise_folder(tmp_path):
    result = run_cli("exercises", str(tmp_path / "my_attention"), block_hypothesis=True)
    assert result.returncode == 0, result
    folder = tmp_path / "my_attention"
    (folder / "06_layer_norm.py").write_text((SOLUTIONS / "06_layer_norm.py").read_text())
    assert run_cli("check", "06_layer_norm.py", "--examples", "3", cwd=folder).returncode == 0
    assert run_cli("check", "my_attention/06_layer_norm.py", "--examples", "3",
                   cwd=tmp_path).returncode == 0
