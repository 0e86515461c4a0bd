"""The grader (`python -m minattn check`): a correct plain-NumPy solution passes, every pitfall
and every common mistake below fails with the property that names it, and files it cannot load
exit with 2. minattn itself satisfies every property."""
import io
import subprocess
import sys
from pathlib import Path

import pytest

import minattn
from minattn.course import grader as check, pitfalls, properties

SOLUTIONS = Path(__file__).parent / "solutions"
CORRECT = (SOLUTIONS / "correct.py").read_text()


def grade(path):
    out = io.StringIO()
    code = check.check_file(path, max_examples=20, out=out, shrink=False)  # shrinking: CLI test
    return code, out.getvalue()


@pytest.mark.parametrize("prop", properties.PROPERTIES, ids=lambda p: p.name)
def test_minattn_itself_has_every_property(prop):
    assert check.run_property(prop, 20) is None


def test_every_public_function_is_exercised_by_some_property():
    used = set().union(*(p.uses for p in properties.PROPERTIES))
    graded = {"softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
              "split_heads", "merge_heads", "multi_head_attention", "layer_norm", "feed_forward",
              "encoder_block"}
    assert graded <= used


def test_a_correct_plain_numpy_solution_passes():
    code, out = grade(SOLUTIONS / "correct.py")
    assert code == 0, out
    # every property of the functions correct.py writes (of the decoder's, apply_rope only)
    chosen = [p for p in properties.PROPERTIES if p.uses & {"softmax", "causal_mask",
                                                           "padding_mask", "split_heads",
                                                           "merge_heads", "layer_norm",
                                                           "feed_forward", "encoder_block",
                                                           "multi_head_attention", "apply_rope",
                                                           "scaled_dot_product_attention"}]
    assert "FAIL" not in out and f"{len(chosen)} properties checked" in out


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
    assert check.check_pitfall(name, 20, out, shrink=False) == 1
    assert f"FAIL  {PITFALL_PROPERTIES[name]}:" in out.getvalue(), out.getvalue()


# A student's common mistakes, as edits of the correct solution -> the property that must fail.
MISTAKES = {
    "scale by 1/d_k": ("scale = 1 / math.sqrt(q.shape[-1])", "scale = 1 / q.shape[-1]",
                       "attention_matches_the_formula"),
    "no scale": ("scale = 1 / math.sqrt(q.shape[-1])", "scale = 1.0", "attention_matches_the_formula"),
    "scale upcasts float32": ("scale = 1 / math.sqrt(q.shape[-1])", "scale = 1 / np.sqrt(q.shape[-1])",
                              "attention_keeps_float32"),
    "missing transpose of k": ("np.matmul(q, np.swapaxes(k, -1, -2))", "np.matmul(q, k)",
                               "attention_matches_the_formula"),
    "off-by-one causal mask": ("np.arange(n_q)[:, None] >= np.arange(n_k)[None, :]",
                               "np.arange(n_q)[:, None] > np.arange(n_k)[None, :]",
                               "causal_mask_hides_the_future"),
    "off-by-one padding mask": ("np.arange(n)[None, :] < lengths[:, None]",
                                "np.arange(n)[None, :] <= lengths[:, None]",
                                "padding_mask_keeps_real_tokens"),
    "softmax sums over a fixed axis": ("e.sum(axis=axis, keepdims=True)", "e.sum(axis=-1, keepdims=True)",
                                       "softmax_along_any_axis"),
    "inverted mask polarity": ("np.where(mask, x, -np.inf)", "np.where(mask, -np.inf, x)",
                               "softmax_masked_entries_are_zero"),
    "NaN for a fully masked row": ("e / np.where(s == 0, 1, s)", "e / s", "attention_fully_masked_query_is_zero"),
    "no max subtraction": ("e = np.exp(x - top)", "e = np.exp(x)", "softmax_matches_the_formula"),
    "unbiased variance": ("var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)",
                          "var = ((x - mu) ** 2).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)",
                          "layer_norm_matches_the_formula"),
    "eps outside the square root": ("np.sqrt(var + eps)", "(np.sqrt(var) + eps)",
                                    "layer_norm_matches_the_formula"),
    "layer norm over the wrong axis": ("mu = x.mean(axis=-1, keepdims=True)", "mu = x.mean(axis=0, keepdims=True)",
                                       "layer_norm_matches_the_formula"),
    "bare reshape into heads": ("np.moveaxis(x.reshape(*lead, length, n_heads, d // n_heads), -2, -3)",
                                "x.reshape(*lead, n_heads, length, d // n_heads)",
                                "split_heads_takes_feature_slices"),
    "merge without swapping back": ("np.moveaxis(x, -3, -2).reshape", "x.reshape",
                                    "merge_heads_inverts_split_heads"),
    "no output projection": ('out = minattn.merge_heads(heads) @ p["w_o"] + p["b_o"]',
                             "out = minattn.merge_heads(heads)",
                             "multi_head_attention_matches_a_loop_over_heads"),
    "no activation": ("h = np.maximum(h, 0)", "h = h", "feed_forward_matches_the_formula"),
    "GQA groups interleaved": ("n_heads // n_kv, axis=-3)\n    v", "n_heads // n_kv, axis=-3)[..., "
                               "np.arange(n_heads) % n_kv * (n_heads // n_kv) + np.arange(n_heads) "
                               "// n_kv, :, :]\n    v", "grouped_query_attention_shares_kv_heads"),
    "interleaved RoPE pairs": ("first, second = x[..., :half], x[..., half:]",
                               "first, second = x[..., 0::2], x[..., 1::2]",
                               "apply_rope_rotates_feature_pairs"),
    "no residual in post-norm": ('x = norm(x + out, "norm1")', 'x = norm(out, "norm1")',
                                 "encoder_block_matches_the_paper"),
    "norm after the sublayer in pre-norm": ('out, w = attend(norm(x, "norm1"))\n        x = x + out',
                                            'out, w = attend(x)\n        x = norm(x + out, "norm1")',
                                            "encoder_block_matches_the_paper"),
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_common_mistake_fails_with_its_property_named(mistake, tmp_path):
    old, new, prop = MISTAKES[mistake]
    assert CORRECT.count(old) == 1, f"the edit for {mistake!r} no longer applies"
    path = tmp_path / "student.py"
    path.write_text(CORRECT.replace(old, new))
    code, out = grade(path)
    assert code == 1 and f"FAIL  {prop}:" in out, out


@pytest.mark.parametrize("content, reason", [
    ("def softmax(x, axis=-1, mask=None)\n    return x\n", "syntax error on line 1"),
    ("import no_such_module_here\n", "ModuleNotFoundError"),
    ("def softmax(x):\n    return x\n", "does not take axis, mask"),
])
def test_a_file_that_cannot_be_checked_exits_2(content, reason, tmp_path):
    path = tmp_path / "student.py"
    path.write_text(content)
    code, out = grade(path)
    assert code == 2 and reason in out, out


def test_a_missing_file_exits_2(tmp_path):
    code, out = grade(tmp_path / "nothing.py")
    assert code == 2 and "no such file" in out


def test_fresh_stubs_have_nothing_to_check_and_copying_never_overwrites(tmp_path):
    assert check.copy_exercises(tmp_path, io.StringIO()) == 0
    stubs = sorted(tmp_path.glob("*.py"))
    assert len(stubs) == 9
    for stub in stubs:
        code, out = grade(stub)
        assert code == 1 and "nothing to check" in out, out
    assert check.copy_exercises(tmp_path, io.StringIO()) == 2


def test_stubs_have_minattns_signatures():
    for stub in sorted(check.EXERCISES.glob("[0-9]*.py")):
        module = check.load(stub)
        _, names = check.attempted(module)
        assert names, stub
        for name in names:
            import inspect
            assert inspect.signature(getattr(module, name)) == inspect.signature(getattr(minattn, name))


def test_the_command_line_reports_and_exits_with_the_codes(tmp_path):
    root = Path(__file__).resolve().parents[1]
    run = lambda *args: subprocess.run([sys.executable, "-m", "minattn", "check", *args],
                                       capture_output=True, text=True, cwd=root)
    assert run(str(SOLUTIONS / "correct.py")).returncode == 0
    result = run("--pitfall", "layer_norm_std_plus_eps")
    assert result.returncode == 1 and "FAIL  layer_norm_matches_the_formula" in result.stdout
    assert "smallest counterexample found" in result.stdout and "hint:" in result.stdout
    assert run(str(tmp_path / "missing.py")).returncode == 2
    assert run("--pitfall", "no_such_pitfall").returncode == 2
