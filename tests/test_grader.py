"""The grader (`python -m minattn check`): a correct plain-NumPy answer to each exercise exits 0
with the command its box gives; every documented argument of every stub has mutants (the
argument ignored, not passed on, the wrong axis, the wrong dtype) that fail with a property of
the mutated function named first; a wrong answer of each class that one argument form, one
dropout draw or the main output alone would hide (FORMS) fails its property, and a correct
answer in other styles passes every one; the pitfalls are caught; bad command lines get a
sentence, never a traceback. minattn itself satisfies every property."""
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
           "09_grouped_query_attention.py": 4, "11_kv_cache.py": 2,
           "12_softmax_backward.py": 3, "13_blockwise_attention.py": 4, "14_attention_sinks.py": 4,
           "15_delta_rule.py": 4, "16_attention_backward.py": 3}
# the most complete answer for each exercise function: the one the mutants are made from
MUTATED = {"01_softmax.py", "14_attention_sinks.py", "03_masks_part2.py", "04_heads.py",
           "06_layer_norm.py", "07_feed_forward.py", "08_encoder_block.py", "10_rope.py",
           "09_grouped_query_attention.py", "11_kv_cache.py", "12_softmax_backward.py",
           "13_blockwise_attention.py", "15_delta_rule.py", "16_attention_backward.py"}
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
    # at --part 1 what Part II teaches is counted, not named (tests/test_grader_part_one.py)
    code, out = grade_paths(SOLUTIONS / "03_masks.py")
    assert code == 0 and "aligns_and_windows" not in out and "align," not in out, out
    assert out.strip().endswith("; 1 more of later parts, not listed"), out
    code, out = grade_paths(SOLUTIONS / "03_masks.py", part=2)
    assert code == 1 and "your causal_mask does not take" in out and "(taught in Part II)" in out, out


def test_a_first_reading_kv_cache_without_shared_heads_passes_part_two(tmp_path):
    # exercise 11 as the first reading asks for it: no n_kv_heads (grouped-query attention is
    # the second reading's); its property waits for --part 4, and a mutant ignoring the cache fails
    source = (SOLUTIONS / "11_kv_cache.py").read_text()
    for old, new in [("n_kv_heads=None, ", ""), ("n_kv_heads or n_heads", "n_heads")]:
        assert source.count(old) == 1
        source = source.replace(old, new)
    path = tmp_path / "11_kv_cache.py"
    path.write_text(source)
    code, out = grade_paths(path, part=2)
    assert code == 0 and "FAIL" not in out, out
    assert "WAIT  grouped_self_attention_matches_a_loop: taught in the second reading" in out, out
    path.write_text(source.replace('[cache["k"], k]', '[k, cache["k"]]'))
    code, out = grade_paths(path, part=2)
    assert code == 1 and "FAIL  kv_cache_decoding_matches_the_full_pass" in out, out


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


# --- the `x or default` class: an explicit 0 (or 0.0) read as "not given" ------------------------

# parameters whose zero is not a valid value (so `x or default` changes nothing a caller may
# pass), and why; parameters whose default is itself 0 or False (dropout, norm_first) have no
# such mutant: `dropout or 0.0` is the identity
ZERO_INVALID = {"mask": "an array (`mask or ...` raises on it)", "key_mask": "an array",
                "sinks": "an array", "positions": "an array", "cache": "a dict",
                "rng": "a Generator", "like": "an array", "activation": "a name",
                "align": "a name", "window": "a positive int (0 is refused)",
                "n_kv_heads": "a positive int (0 is refused)", "base": "positive (0 ** -x)",
                "rope_base": "positive", "block_size": "a positive int",
                "g": "an array, one log decay per token (0-d is refused; zeros are g=None)",
                "initial_state": "an array [..., d_k, d_v] (0-d is refused)"}


def zero_as_not_given(function, parameter):
    """`function` reading `parameter` as `parameter or default`: 0 becomes the default."""
    signature = inspect.signature(function)
    default = signature.parameters[parameter].default

    def mutant(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        value = bound.arguments.get(parameter, default)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            bound.arguments[parameter] = default
        return function(*bound.args, **bound.kwargs)
    mutant.__signature__ = signature
    return mutant


def zero_mutants():
    for file in sorted(MUTATED):
        for name, function in answer(file).items():
            for parameter in inspect.signature(function).parameters.values():
                default = parameter.default
                if default is parameter.empty or (default is not None and not default) \
                        or parameter.name in ZERO_INVALID:
                    continue
                yield f"{name}-{parameter.name}-or-default", name, file, \
                    lambda f=function, p=parameter.name: zero_as_not_given(f, p)


ZERO_MUTANTS = list(zero_mutants())


def test_the_zero_mutants_cover_every_argument_whose_zero_means_something():
    covered = {m.split("-")[0] + "." + m.split("-")[1] for m, *_ in ZERO_MUTANTS}
    assert covered >= {"softmax.axis", "scaled_dot_product_attention.scale", "causal_mask.n_k",
                       "layer_norm.eps", "encoder_block.eps", "softmax_vjp.axis",
                       "blockwise_attention.scale"}, covered


@pytest.mark.parametrize("mutant, name, file, make", ZERO_MUTANTS, ids=[m[0] for m in ZERO_MUTANTS])
def test_an_argument_of_zero_read_as_not_given_fails_with_a_property_of_its_function(
        mutant, name, file, make):
    functions = answer(file)
    functions[name] = make()
    failed, out = first_failure(functions)
    assert failed is not None, f"{mutant} passes every property:\n{out}"
    assert properties.BY_NAME[failed].of == name, out


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
    # the contract of every call makes each call again in float32: the first property fails
    "scale upcasts float32": ("02_attention.py", "q.shape[-1] ** -0.5", "1 / np.sqrt(q.shape[-1])",
                              "attention_matches_the_formula"),
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
    "attention VJP without the softmax's sum": (
        "16_attention_backward.py", "    ds = ds - p * np.sum(ds, axis=-1, keepdims=True)\n", "",
        "attention_vjp_matches_finite_differences"),
    "attention VJP: dq without the scale": ("16_attention_backward.py", "ds @ k * scale", "ds @ k",
                                            "attention_vjp_matches_finite_differences"),
    "attention VJP: dk from ds, not its transpose": (
        "16_attention_backward.py", "np.swapaxes(ds, -1, -2) @ q * scale",
        "ds @ q * scale", "attention_vjp_matches_finite_differences"),
    "attention VJP: the scores in float32": (
        "16_attention_backward.py", "p = minattn.softmax(q @ np.swapaxes(k, -1, -2) * scale",
        "p = minattn.softmax((q @ np.swapaxes(k, -1, -2)).astype(np.float32) * scale",
        "attention_vjp_matches_finite_differences"),
    "online softmax without rescaling": ("13_blockwise_attention.py", "c * acc", "acc",
                                         "blockwise_attention_matches_attention"),
    "the sink masked with the last key": ("14_attention_sinks.py", "[keep, np.ones(rows, bool)]",
                                          "[keep, keep[..., -1:]]",
                                          "attention_sinks_take_their_share"),
    "the sink left out of the denominator": ("14_attention_sinks.py", "mask=keep)[..., :-1]",
                                             "mask=keep)[..., :-1]\n        weights = weights / "
                                             "np.sum(weights, axis=-1, keepdims=True)",
                                             "attention_sinks_take_their_share"),
    "the mask applied after the softmax": ("14_attention_sinks.py", "mask=keep)[..., :-1]",
                                           "mask=None)[..., :-1] * keep[..., :-1]",
                                           "attention_sinks_take_their_share"),
    "the value written, not the error (linear attention)": (
        "15_delta_rule.py", "k_t[..., :, None] * error[..., None, :]",
        "k_t[..., :, None] * v[..., t, None, :]", "delta_rule_matches_a_loop"),
}


# The classes of wrong answers that pass properties drawing only typical values -> the property
# that must fail on each (with the box's command; others may fail too).
CLASSES = {
    "scale or default": ("02_attention.py", "if scale is None:\n        scale = q.shape[-1] ** -0.5",
                         "scale = scale or q.shape[-1] ** -0.5", "attention_uses_the_given_scale"),
    "eps or default": ("06_layer_norm.py", "    mean = x.mean(", "    eps = eps or 1e-5\n    mean = x.mean(",
                       "layer_norm_matches_the_formula"),
    "axis or -1": ("01_softmax.py", "    if mask is not None:\n        x = np.where",
                   "    axis = axis or -1\n    if mask is not None:\n        x = np.where",
                   "softmax_along_any_axis"),
    "n_k or n_q": ("03_masks_part2.py", "    n_k = n_q if n_k is None else n_k", "    n_k = n_k or n_q",
                   "causal_mask_hides_the_future"),
    "block scale or default": ("13_blockwise_attention.py",
                               "scale = q.shape[-1] ** -0.5 if scale is None else scale",
                               "scale = scale or q.shape[-1] ** -0.5",
                               "blockwise_attention_matches_attention"),
    "softmax masked after exp": ("01_softmax.py", "    if mask is not None:\n        x = np.where(mask, x, -np.inf)\n"
                                 "    top = np.max(x, axis=axis, keepdims=True)\n"
                                 "    top = np.where(top == -np.inf, 0, top)  # a fully masked slice: shift by 0\n"
                                 "    e = np.exp(x - top)\n",
                                 "    top = np.max(x, axis=axis, keepdims=True)\n    e = np.exp(x - top)\n"
                                 "    if mask is not None:\n        e = np.where(mask, e, 0)\n",
                                 "softmax_ignores_masked_values_however_large"),
    "softmax max over masked entries": ("01_softmax.py", "    if mask is not None:\n        x = np.where(mask, x, -np.inf)\n"
                                        "    top = np.max(x, axis=axis, keepdims=True)\n",
                                        "    top = np.max(x, axis=axis, keepdims=True)\n"
                                        "    if mask is not None:\n        x = np.where(mask, x, -np.inf)\n",
                                        "softmax_ignores_masked_values_however_large"),
    "attention masked after the softmax": ("02_attention.py", "weights = minattn.softmax(scores, mask=mask)",
                                           "weights = minattn.softmax(scores)\n    if mask is not None:\n"
                                           "        weights = np.where(mask, weights, 0)\n"
                                           "        total = weights.sum(axis=-1, keepdims=True)\n"
                                           "        weights = weights / np.where(total == 0, 1, total)",
                                           "attention_ignores_masked_scores_however_large"),
    "dropout on the feed-forward output": ("07_feed_forward.py", "    if dropout:\n        keep = rng.random(h.shape) >= dropout\n"
                                           "        h = np.where(keep, h / (1 - dropout), 0).astype(h.dtype)\n"
                                           "    return h @ params[\"w_2\"] + params[\"b_2\"]",
                                           "    h = h @ params[\"w_2\"] + params[\"b_2\"]\n    if dropout:\n"
                                           "        keep = rng.random(h.shape) >= dropout\n"
                                           "        h = np.where(keep, h / (1 - dropout), 0).astype(h.dtype)\n"
                                           "    return h", "feed_forward_drops_hidden_units"),
    "dropout on the feed-forward input": ("07_feed_forward.py", "    h = x @ params",
                                          "    if dropout:\n        x = np.where(rng.random(x.shape) >= dropout, "
                                          "x / (1 - dropout), 0)\n        dropout = 0.0\n    h = x @ params",
                                          "feed_forward_drops_hidden_units"),
    "dropout on the residual sum": ("08_encoder_block.py", "        x = norm(x + out, \"self_attention_norm\")",
                                    "        x = norm(x + out if not dropout else np.where(rng.random(x.shape) >= dropout, "
                                    "(x + out) / (1 - dropout), 0), \"self_attention_norm\")",
                                    "encoder_block_keeps_dropout_off_the_residual_path"),
    "dropout on the block's output": ("08_encoder_block.py", "    return (x, weights) if return_weights else x",
                                      "    x = x if not dropout else np.where(rng.random(x.shape) >= dropout, x / (1 - dropout), 0)\n"
                                      "    return (x, weights) if return_weights else x",
                                      "encoder_block_keeps_dropout_off_the_residual_path"),
    "the last partial block lost": ("13_blockwise_attention.py", "range(0, l_k, block_size)",
                                    "range(0, l_k - block_size + 1, block_size)",
                                    "blockwise_attention_reads_the_last_partial_block"),
    "L_k // block_size blocks": ("13_blockwise_attention.py", "range(0, l_k, block_size)",
                                 "range(0, l_k // block_size * block_size, block_size)",
                                 "blockwise_attention_reads_the_last_partial_block"),
    "the block max over masked keys": ("13_blockwise_attention.py",
                                       "m_new = np.maximum(m, s.max(axis=-1, keepdims=True))",
                                       "m_new = np.maximum(m, np.where(keep, s, raw).max(axis=-1, keepdims=True))",
                                       "blockwise_attention_ignores_masked_keys_however_large"),
}


def edited(file, old, new, tmp_path):
    source = (SOLUTIONS / file).read_text()
    if file == "13_blockwise_attention.py" and "raw" in new:  # the scores before masking
        source = source.replace("        s = np.where(keep, s, -np.inf)",
                                "        raw = s\n        s = np.where(keep, s, -np.inf)")
    assert source.count(old) == 1, f"the edit {old!r} no longer applies to {file}"
    path = tmp_path / file
    path.write_text(source.replace(old, new))
    return path


@pytest.mark.parametrize("mistake", sorted(CLASSES))
def test_each_class_of_wrong_answer_fails_its_property(mistake, tmp_path):
    file, old, new, prop = CLASSES[mistake]
    functions = grader.attempted(grader.load(edited(file, old, new, tmp_path)))[0]
    out = io.StringIO()
    part = max(ANSWERS[file], properties.BY_NAME[prop].part)  # dropout: the second reading's
    grader.grade(functions, 20, out, shrink=False, part=part)
    assert f"FAIL  {prop}:" in out.getvalue(), out.getvalue()


# The classes of wrong answers that pass properties drawing only one argument form, the
# values of one dropout draw, or the main output alone: each of the grader's properties on
# argument forms (leading axes, broadcast masks, batches with heads, [B, L] positions, cache
# chunks), on dropout's draws (the kept fraction, independence) and on auxiliary outputs (weights
# and caches the main output used) -> the property that must fail on it. Cheaper than CLASSES:
# the one property, with the edited answer's functions swapped in.
FORMS = {
    # dropout: its distribution and independence, not just 0 or w / (1 - p)
    "dropout keeps a weight with probability p": (
        "02_attention.py", "rng.random(weights.shape) >= dropout",
        "rng.random(weights.shape) < dropout", "attention_dropout_draws_one_p_per_weight"),
    "one dropout mask for every head and batch entry": (
        "02_attention.py", "rng.random(weights.shape)", "rng.random(weights.shape[-2:])",
        "attention_dropout_draws_one_p_per_weight"),
    "one dropout mask for every query": (
        "02_attention.py", "rng.random(weights.shape)", "rng.random(weights.shape[-1:])",
        "attention_dropout_draws_one_p_per_weight"),
    "feed-forward dropout keeps a unit with probability p": (
        "07_feed_forward.py", "rng.random(h.shape) >= dropout", "rng.random(h.shape) < dropout",
        "feed_forward_dropout_draws_one_p_per_unit"),
    "one feed-forward dropout mask for every token": (
        "07_feed_forward.py", "rng.random(h.shape)", "rng.random(h.shape[-1:])",
        "feed_forward_dropout_draws_one_p_per_unit"),
    # auxiliary outputs: the weights and the cache the main output used
    "block weights from a second attention call (post-norm)": (
        "08_encoder_block.py", "        out, weights = attend(x)\n",
        "        out, _ = attend(x)\n        _, weights = attend(x)\n",
        "encoder_block_returns_the_weights_it_used"),
    "block weights from a second attention call (pre-norm)": (
        "08_encoder_block.py", '        out, weights = attend(norm(x, "self_attention_norm"))\n',
        '        out, _ = attend(norm(x, "self_attention_norm"))\n'
        '        _, weights = attend(norm(x, "self_attention_norm"))\n',
        "encoder_block_returns_the_weights_it_used"),
    "multi-head weights from a second attention call": (
        "09_grouped_query_attention.py",
        "    heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)\n",
        "    heads, _ = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)\n"
        "    _, weights = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)\n",
        "multi_head_attention_passes_dropout_on"),
    "the new keys and values before the cached ones": (
        "11_kv_cache.py",
        'k = np.concatenate([cache["k"], k], axis=-2)\n        v = np.concatenate([cache["v"], v], axis=-2)',
        'k = np.concatenate([k, cache["k"]], axis=-2)\n        v = np.concatenate([v, cache["v"]], axis=-2)',
        "kv_cache_decoding_matches_the_full_pass"),
    "the mask left out when there is a cache": (
        "11_kv_cache.py", "np.repeat(v, group, axis=-3), mask)",
        "np.repeat(v, group, axis=-3), mask if cache is None else None)",
        "kv_cache_decoding_matches_the_full_pass"),
    # argument forms: every one the exercise documents
    "RoPE angles by np.outer (1-d positions only)": (
        "10_rope.py", "np.asarray(positions)[..., None] * base ** (-np.arange(0, d, 2) / d)",
        "np.outer(positions, base ** (-np.arange(0, d, 2) / d))", "apply_rope_rotates_feature_pairs"),
    "positions [B, L] given no head axis": (
        "11_kv_cache.py", "        positions = np.asarray(positions)[..., None, :]\n", "",
        "self_attention_matches_a_loop"),
    "softmax masking in place (x changed; no broadcast mask)": (
        "01_softmax.py", "        x = np.where(mask, x, -np.inf)\n", "        x[~np.asarray(mask)] = -np.inf\n",
        "softmax_masked_entries_are_zero"),
    "softmax moving the axis but not the mask": (
        "01_softmax.py", "    if mask is not None:\n        x = np.where(mask, x, -np.inf)\n",
        "    x, given, axis = np.moveaxis(x, axis, -1), axis, -1\n    if mask is not None:\n"
        "        x = np.where(mask, x, -np.inf)\n    return np.moveaxis(_rest(x, axis), -1, given)\n\n\n"
        "def _rest(x, axis):\n", "softmax_masked_entries_are_zero"),
    "split_heads for [B, L, D] only": (
        "04_heads.py", "    *lead, length, d = x.shape\n    return np.swapaxes(x.reshape(*lead, length, "
        "n_heads, d // n_heads), -2, -3)", "    batch, length, d = x.shape\n    return x.reshape("
        "batch, length, n_heads, d // n_heads).transpose(0, 2, 1, 3)", "split_heads_takes_feature_slices"),
    "merge_heads for [B, H, L, d_k] only": (
        "04_heads.py", "    *lead, n_heads, length, d_k = x.shape\n    return np.swapaxes(x, -2, -3)."
        "reshape(*lead, length, n_heads * d_k)", "    batch, n_heads, length, d_k = x.shape\n    return "
        "x.transpose(0, 2, 1, 3).reshape(batch, length, n_heads * d_k)", "merge_heads_inverts_split_heads"),
    "leading axes flattened (q's and k's must then agree)": (
        "02_attention.py", "q @ np.swapaxes(k, -1, -2)",
        "(q.reshape(-1, *q.shape[-2:]) @ np.swapaxes(k.reshape(-1, *k.shape[-2:]), -1, -2))"
        ".reshape(q.shape[:-1] + k.shape[-2:-1])", "attention_broadcasts_leading_axes"),
    "a mask broadcast over the batch, not the heads": (
        "09_grouped_query_attention.py", "heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask,",
        "heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask if mask is None or "
        "np.ndim(mask) < 4 else np.swapaxes(mask, 0, 1),", "multi_head_attention_matches_a_loop_over_heads"),
    "a key mask indexed as [B, L_k] only": (
        "13_blockwise_attention.py", "key_mask[..., None, start:stop]", "key_mask[:, None, start:stop]",
        "blockwise_attention_matches_attention"),
    "the delta rule for [B, L, d] only": (
        "15_delta_rule.py", 'error = v[..., t, :] - np.einsum("...i,...ij->...j", k_t, state)',
        'error = v[..., t, :] - np.einsum("bi,bij->bj", k_t, state)', "delta_rule_matches_a_loop"),
    "the feed-forward network for [B, L, D] only": (
        "07_feed_forward.py", 'h = x @ params["w_1"] + params["b_1"]',
        'h = np.einsum("bld,df->blf", x, params["w_1"]) + params["b_1"]', "feed_forward_matches_the_formula"),
    "dropout left out when there are sinks": (
        "14_attention_sinks.py", "    if dropout:\n", "    if dropout and sinks is None:\n",
        "attention_sinks_take_their_share"),
    "layer_norm for [N, D] only": (
        "06_layer_norm.py", "    mean = x.mean(axis=-1, keepdims=True)\n",
        "    x = x.reshape(-1, x.shape[-1])\n    mean = x.mean(axis=-1, keepdims=True)\n",
        "layer_norm_matches_the_formula"),
}


@pytest.mark.parametrize("mistake", sorted(FORMS))
def test_a_wrong_answer_of_each_class_fails_its_property(mistake, tmp_path):
    file, old, new, name = FORMS[mistake]
    functions = grader.attempted(grader.load(edited(file, old, new, tmp_path)))[0]
    with minattn.swap(**{n: f for n, f in functions.items() if n in minattn.__all__}):
        result = grader.run_property(properties.BY_NAME[name], 10, shrink=False)
    assert result is not None, f"{mistake} passes {name}"


# Correct answers in other styles -> the properties of the classes above they must still pass
# (no false failures): other ways of drawing a dropout mask, dropout on a sublayer's output,
# positions given their head axis another way.
STYLES = {
    "a strict comparison for the kept weights": (
        "02_attention.py", "rng.random(weights.shape) >= dropout", "rng.random(weights.shape) > dropout",
        ["attention_dropout_zeroes_and_rescales", "attention_dropout_draws_one_p_per_weight"]),
    "the mask drawn by rng.choice": (
        "02_attention.py", "rng.random(weights.shape) >= dropout",
        "rng.choice([False, True], size=weights.shape, p=[dropout, 1 - dropout])",
        ["attention_dropout_zeroes_and_rescales", "attention_dropout_draws_one_p_per_weight"]),
    "dropout as a multiplied 0/1 mask": (
        "07_feed_forward.py", "h = np.where(keep, h / (1 - dropout), 0).astype(h.dtype)",
        "h = (h * keep.astype(h.dtype) * (1 / (1 - dropout) if dropout < 1 else 0)).astype(h.dtype)",
        ["feed_forward_dropout_is_unbiased", "feed_forward_drops_hidden_units",
         "feed_forward_dropout_draws_one_p_per_unit"]),
    "the attention sublayer's output dropped before the residual add (as torch)": (
        "08_encoder_block.py", '        x = norm(x + out, "self_attention_norm")',
        '        x = norm(x + (out if not dropout else np.where(rng.random(out.shape) >= dropout, '
        'out / (1 - dropout), 0)), "self_attention_norm")',
        ["encoder_block_passes_dropout_on", "encoder_block_keeps_dropout_off_the_residual_path",
         "encoder_block_returns_the_weights_it_used"]),
    "positions given their head axis by np.expand_dims": (
        "11_kv_cache.py", "positions = np.asarray(positions)[..., None, :]",
        "positions = np.expand_dims(positions, -2)",
        ["self_attention_matches_a_loop", "kv_cache_decoding_matches_the_full_pass"]),
    "RoPE angles by einsum": (
        "10_rope.py", "np.asarray(positions)[..., None] * base ** (-np.arange(0, d, 2) / d)",
        'np.einsum("...l,f->...lf", np.asarray(positions, float), base ** (-np.arange(0, d, 2) / d))',
        ["apply_rope_rotates_feature_pairs"]),
    "attention's VJP by einsum": (
        "16_attention_backward.py", "np.swapaxes(ds, -1, -2) @ q * scale, np.swapaxes(p, -1, -2) @ g",
        'np.einsum("...ij,...id->...jd", ds, q) * scale, np.einsum("...ij,...id->...jd", p, g)',
        ["attention_vjp_matches_finite_differences", "attention_vjp_keeps_float32"]),
    "attention's VJP through the softmax's whole Jacobian": (
        "16_attention_backward.py", "    ds = p * (g @ np.swapaxes(v, -1, -2))\n"
        "    ds = ds - p * np.sum(ds, axis=-1, keepdims=True)\n",
        "    eye = np.eye(p.shape[-1], dtype=p.dtype)\n"
        "    jacobian = p[..., :, None] * (eye - p[..., None, :])  # [..., L_q, L_k, L_k]\n"
        '    ds = np.einsum("...ij,...ijl->...il", g @ np.swapaxes(v, -1, -2), jacobian)\n',
        ["attention_vjp_matches_finite_differences", "attention_vjp_keeps_float32"]),
}


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_correct_answer_in_another_style_passes_the_properties_of_its_class(style, tmp_path):
    file, old, new, names = STYLES[style]
    functions = grader.attempted(grader.load(edited(file, old, new, tmp_path)))[0]
    with minattn.swap(**{n: f for n, f in functions.items() if n in minattn.__all__}):
        failed = {name: grader.run_property(properties.BY_NAME[name], 10, shrink=False)
                  for name in names}
    assert not any(failed.values()), failed


def test_a_correct_answer_in_other_styles_passes_every_property():
    # einsum, moveaxis, np.var, a binomial or uniform dropout draw, GQA by a group axis, a cache
    # by np.append, dropout on the sublayer's output too: no correct style is failed
    code, out = grade_paths(SOLUTIONS / "correct.py", part=4)
    assert code == 0 and "FAIL" not in out and "WAIT" not in out, out


def test_a_blockwise_loop_that_never_ends_is_a_fail_naming_the_time_limit(tmp_path):
    path = edited("13_blockwise_attention.py", "    for start in range(0, l_k, block_size):\n",
                  "    start = 0\n    while start < l_k:\n", tmp_path)
    source = path.read_text().replace("        m = m_new\n", "        m = m_new\n"
                                      "        start += block_size if stop - start == block_size else 0\n")
    path.write_text(source)
    out = io.StringIO()
    assert grader.check_paths([path], 5, out, shrink=False, part=4, seconds=0.3) == 1
    assert "FAIL  blockwise_attention_matches_attention" in out.getvalue()
    assert " of one example)" in out.getvalue() and "STOP  " in out.getvalue()


def test_the_blockwise_failure_names_the_block_and_the_rows(tmp_path):
    file, old, new, _ = CLASSES["the last partial block lost"]
    out = io.StringIO()
    grader.grade(grader.attempted(grader.load(edited(file, old, new, tmp_path)))[0], 20, out,
                 shrink=True, part=4)
    report = out.getvalue().split("FAIL  blockwise_attention_reads_the_last_partial_block")[1]
    assert re.search(r"the output is attention without keys \d+\.\.\d+, the last block \(a "
                     r"partial one: \d of \d keys\)", report), report
    file, old, new, _ = MISTAKES["online softmax without rescaling"]
    out = io.StringIO()
    grader.grade(grader.attempted(grader.load(edited(file, old, new, tmp_path)))[0], 20, out,
                 shrink=True, part=4)
    report = out.getvalue().split("FAIL  blockwise_attention_matches_attention")[1]
    assert "whose largest kept score comes in a later block" in report, report


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_common_mistake_fails_with_its_property_named_first(mistake, tmp_path):
    file, old, new, prop = MISTAKES[mistake]
    source = (SOLUTIONS / file).read_text()
    assert source.count(old) == 1, f"the edit for {mistake!r} no longer applies"
    path = tmp_path / file
    path.write_text(source.replace(old, new))
    part = max(ANSWERS[file], properties.BY_NAME[prop].part)  # dropout: the second reading's
    failed, out = first_failure(grader.attempted(grader.load(path))[0], part=part)
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
    "attention_with_scale_or_default": "attention_uses_the_given_scale",
    "softmax_masking_after_exp": "softmax_ignores_masked_values_however_large",
    "feed_forward_with_dropout_on_the_output": "feed_forward_drops_hidden_units",
    "encoder_block_with_dropout_on_the_residual_sum":
        "encoder_block_keeps_dropout_off_the_residual_path",
    "blockwise_attention_without_the_last_partial_block":
        "blockwise_attention_reads_the_last_partial_block",
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
    # the smallest example: any row, moved 1000 above zero (in every example) overflows exp(x)
    assert "Draw 1" not in report and "bound=" in report and "x =\n" in report, report
    assert "what failed: softmax(x + 1000) has NaN" in report, report
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
    assert summary.index("03_masks.py: not implemented yet") < summary.index("04_heads.py: passes")
    (tmp_path / "06_layer_norm.py").write_text("def layer_norm(x, gamma, beta, eps=1e-5):\n    return x\n")
    assert grade_paths(tmp_path)[0] == 1


def test_plural_and_singular():
    assert grader.plural(1, "property") == "1 property" and grader.plural(2, "property") == "2 properties"


# --- files and command lines it cannot use: a sentence and exit 2, never a traceback ------------

@pytest.mark.parametrize("content, reason", [
    ("def softmax(x, axis=-1, mask=None)\n    return x\n", "syntax error on line 1"),
    ("import no_such_module_here\n", "ModuleNotFoundError"),
    ("def softmax(x):\n    return x\n", "does not take axis;"),
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


@pytest.mark.parametrize("part", [2, 4])
def test_fresh_stubs_checked_at_a_later_part_report_not_implemented_per_exercise(part, tmp_path):
    assert grader.copy_exercises(tmp_path, io.StringIO()) == 0
    code, out = grade_paths(tmp_path, part=part)
    assert code == 1 and "FAIL" not in out and "does not take" not in out, out
    summary = out.split("summary:")[1].strip().splitlines()
    assert len(summary) == len(list(tmp_path.glob("[0-9]*.py")))
    assert all(line.endswith(": not implemented yet") for line in summary), summary
    assert "03_masks.py: not implemented yet: causal_mask, padding_mask (raise " \
           "NotImplementedError)" in out
    assert "01_softmax.py: not implemented yet: softmax (raises NotImplementedError)" in out


def test_two_files_defining_the_same_function_are_refused_naming_both(tmp_path):
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text((SOLUTIONS / "01_softmax.py").read_text())
    second.write_text("import numpy as np\n\ndef softmax(x, axis=-1, mask=None):\n    return x\n")
    code, out = grade_paths(first, second)
    assert code == 2 and f"softmax is defined in both {first} and {second}" in out, out


@pytest.mark.parametrize("source", [
    "def rms_norm(x, gamma, eps=1e-6):\n    return x\n",
    "def positional_encoding(n_positions, d_model):\n    return 0\n",
    "def rms_norm(x, weight, eps=1e-6):\n    return x\n",  # not even minattn's signature
])
def test_a_file_with_no_exercise_function_says_so(source, tmp_path):
    path = tmp_path / "extra.py"
    path.write_text(source)
    code, out = grade_paths(path)
    assert code == 1 and "no exercise" in out and "defines no function an exercise asks for" in out
    assert "min()" not in out and "does not take" not in out, out
    path.write_text(source + (SOLUTIONS / "06_layer_norm.py").read_text())
    code, out = grade_paths(path)
    assert code == 0 and "not graded: " in out and "checking layer_norm" in out, out


def test_a_composite_failure_says_how_the_composite_calls_the_function(tmp_path):
    path = tmp_path / "04_heads.py"
    # merge_heads right on its own property's heads (no batch, or a batch of 2), wrong on a batch
    # of 1, which minattn's multi_head_attention gives it
    path.write_text((SOLUTIONS / "04_heads.py").read_text() + "\n\n_merge = merge_heads\n\n\n"
                    "def merge_heads(x):\n    return _merge(x) * (2 if x.shape[:-3] == (1,) else 1)\n")
    out = io.StringIO()
    functions = grader.attempted(grader.load(path))[0]
    grader.grade({"merge_heads": functions["merge_heads"]}, 10, out, shrink=False)
    text = " ".join(out.getvalue().split())
    assert "PASS merge_heads_inverts_split_heads" in text, text
    assert "caused by your merge_heads: it passes its own properties but not inside minattn's " \
           "multi_head_attention, which calls merge_heads with the heads' outputs" in text, text
    assert "more leading axes" not in text


def test_stubs_have_the_exercise_signatures():
    for stub in sorted(grader.EXERCISES.glob("[0-9]*.py")):
        module = grader.load(stub)
        _, names, _ = grader.attempted(module)
        assert names, stub
        for name in names:  # a stub may start without a later section's or part's parameters
            full = grader.exercise_signature(name)
            mine = inspect.signature(getattr(module, name))
            left_out = set(full.parameters) - set(mine.parameters)
            assert left_out <= set(grader.later_parameters(name)), (stub, name, left_out)
            assert mine == full.replace(parameters=[p for p in full.parameters.values()
                                                    if p.name not in left_out]), (stub, name)


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
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err


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


# --- a student's file that misbehaves: a FAIL line with its reason, never a hang or a silent exit

MISBEHAVING = {  # the body of softmax -> what the report must say
    # CPU time, or the clock's on a machine so loaded that the loop gets under a third of a core
    "while True:\n        pass": " of one example)",
    "time.sleep(60)": "did not return within 0.9 s while using less than 0.3 s of CPU time",
    "sys.exit(3)": "your code called sys.exit(3)",
    "raise SystemExit": "your code called sys.exit(None)",
    "os._exit(0)": "your code ended the Python process while checking softmax_rows_sum_to_one, "
                   "with exit status 0",
    "os._exit(3)": "with exit status 3",
    "os.kill(os.getpid(), signal.SIGSEGV)": "killed by signal SIGSEGV while checking "
                                            "softmax_rows_sum_to_one",
    "while True:\n        try:\n            time.sleep(60)\n        except BaseException:\n"
    "            pass": "no verdict within 3 s, the time limit of one file",
}


def misbehaving(tmp_path, body, top=""):
    path = tmp_path / "01_softmax.py"
    path.write_text(f"import os, signal, sys, time\n{top}\n\ndef softmax(x, axis=-1, mask=None):\n"
                    f"    {body}\n")
    return path


def grade_isolated(*paths, seconds=0.3, file_seconds=60.0):
    # file_seconds: a limit the child's start, its warm-up and the properties up to the
    # misbehaving one meet even on a loaded machine; the loop that catches every exception is
    # given 3 s (it can only be stopped by this limit)
    out = io.StringIO()
    code = grader.check_paths(list(paths), 5, out, shrink=False, seconds=seconds, isolate=True,
                              file_seconds=file_seconds)
    return code, out.getvalue()


@pytest.mark.parametrize("body", sorted(MISBEHAVING))
def test_a_file_that_hangs_exits_or_crashes_is_a_fail_line_with_its_reason(body, tmp_path):
    timing = "while" in body or "sleep" in body  # what the limits must stop
    code, out = grade_isolated(misbehaving(tmp_path, body), seconds=0.3 if timing else 5.0,
                               file_seconds=3.0 if "BaseException" in body else 60.0)
    assert code == 1, out
    assert "FAIL  " in out and MISBEHAVING[body] in out, out
    assert "passed" not in out.splitlines()[-1] or "0 passed" in out, out


@pytest.mark.parametrize("top, reason", [
    ("sys.exit(3)", "its code calls sys.exit(3) when the file is loaded"),
    ("while True:\n    pass", " of one example)"),
    ("os._exit(0)", "while loading the file, with exit status 0"),
])
def test_a_file_that_exits_or_hangs_when_loaded_cannot_be_checked(top, reason, tmp_path):
    code, out = grade_isolated(misbehaving(tmp_path, "return x", top))
    assert code in (1, 2) and reason in out, out
    assert code == (1 if "os._exit" in top else 2)


def test_a_folder_goes_on_to_the_next_file_after_one_that_hangs(tmp_path):
    misbehaving(tmp_path, "while True:\n        pass")
    (tmp_path / "04_heads.py").write_text((SOLUTIONS / "04_heads.py").read_text())
    # limits a correct answer meets even on a loaded machine (they are wall-clock time)
    code, out = grade_isolated(tmp_path, seconds=3.0, file_seconds=60.0)
    summary = out.split("summary:")[1]
    assert code == 1 and "01_softmax.py: fails" in summary and "04_heads.py: passes" in summary
    assert "STOP  " in out  # the other properties of the file that hung were not run


def test_an_example_past_its_time_limit_in_process_too(tmp_path):
    code, out = grade_paths_seconds(misbehaving(tmp_path, "time.sleep(60)"))
    assert code == 1 and "did not return within 0.9 s" in out and "STOP  " in out, out


def grade_paths_seconds(path):
    out = io.StringIO()
    return grader.check_paths([path], 5, out, shrink=False, seconds=0.3), out.getvalue()


def test_a_correct_answer_passes_in_the_child_process_too():
    code, out = grade_isolated(SOLUTIONS / "04_heads.py", seconds=10, file_seconds=60)
    assert code == 0 and "FAIL" not in out, out


def test_huge_examples_are_refused_and_the_time_limits_are_documented(capsys):
    from minattn import cli

    assert cli.main(["check", str(SOLUTIONS / "01_softmax.py"), "--examples", "1000000000"]) == 2
    assert capsys.readouterr().err.startswith(
        f"error: argument --examples: must be a positive integer up to {grader.MAX_EXAMPLES}, "
        "got 1000000000")
    help_text = cli.build_parser()._actions[-1].choices["check"].format_help()
    assert "--time-limit" in help_text and "--file-time-limit" in help_text
    assert "exit codes: 0" in help_text and "crash or exit" in help_text
