"""The grader's classes of issue 62, each closed where it lives (minattn/course/properties/ and
contract.py), so that a variant of it is caught too: draws that hold rows of a large common
offset and rows of one sign far from zero in every example; float64 results compared with an
exact float64 reference at float64 tolerance beside the finite-difference check; every axis of
a 3-D array; the no-shared-memory contract on a call made again exactly as it was made (a memo
keyed on the arguments); mask=None meaning no mask, a cache or not; -inf entries with no
boolean mask; L = 0. For each class a wrong answer, graded with its exercise's own part (or the
part of the property that catches it), fails that property; and a correct answer in another
style passes every property of that part."""
import io

import pytest

from minattn.course import grader, properties
from tests.test_grader import ANSWERS, edited

# class -> (the correct answer's file, the edit that makes it wrong, the property that must fail)
WRONG = {
    "layer norm's variance as E[x²] - E[x]² (cancels for rows of a large mean)": (
        "06_layer_norm.py", "variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "variance = (x * x).mean(axis=-1, keepdims=True) - mean ** 2",
        "layer_norm_matches_the_formula"),
    "softmax shifted by max(row max, 0) (rows far below zero underflow)": (
        "01_softmax.py", "top = np.where(top == -np.inf, 0, top)", "top = np.maximum(top, 0)",
        "softmax_matches_the_formula"),
    "softmax shifted by a constant row of the first entry (rows far from zero)": (
        "01_softmax.py", "top = np.where(top == -np.inf, 0, top)",
        "top = np.where(top == -np.inf, 0, np.clip(top, -50, 50))",
        "softmax_matches_the_formula"),
    "a float64 softmax VJP computed in float32 inside": (
        "12_softmax_backward.py", "    return y * (g - np.sum(g * y, axis=axis, keepdims=True))",
        "    y32, g32 = y.astype(np.float32), g.astype(np.float32)\n"
        "    return (y32 * (g32 - np.sum(g32 * y32, axis=axis, keepdims=True))).astype(y.dtype)",
        "softmax_vjp_matches_finite_differences"),
    "a softmax VJP moving its axis back the wrong way": (
        "12_softmax_backward.py", "    return y * (g - np.sum(g * y, axis=axis, keepdims=True))",
        "    y, g = np.moveaxis(y, axis, -1), np.moveaxis(g, axis, -1)\n"
        "    return np.moveaxis(y * (g - np.sum(g * y, axis=-1, keepdims=True)), axis, -1)",
        "softmax_vjp_matches_finite_differences"),
    # with the stub's signature: the contract's second call gives align and window their
    # defaults, another key of the memo, so only a call made again exactly as it was made sees it
    "causal_mask memoised by functools.lru_cache (one array handed to every caller)": (
        "03_masks.py", "def causal_mask(n_q, n_k=None):",
        "@__import__('functools').lru_cache(maxsize=None)\n"
        "def causal_mask(n_q, n_k=None, *, align='top_left', window=None):",
        "causal_mask_hides_the_future"),
    "a KV cache imposing a causal mask when mask=None": (
        "11_kv_cache.py", "    group = n_heads // n_kv\n",
        "    if mask is None and cache is not None:\n"
        "        mask = minattn.causal_mask(x.shape[-2], k.shape[-2], align='bottom_right')\n"
        "    group = n_heads // n_kv\n", "self_attention_continues_a_long_cache"),
    "softmax's guard for a row with nothing left in the masked branch only": (
        "01_softmax.py", "        x = np.where(mask, x, -np.inf)\n"
        "    top = np.max(x, axis=axis, keepdims=True)\n"
        "    top = np.where(top == -np.inf, 0, top)  # a fully masked slice: shift by 0\n",
        "        x = np.where(mask, x, -np.inf)\n"
        "        top = np.max(x, axis=axis, keepdims=True)\n"
        "        top = np.where(top == -np.inf, 0, top)\n"
        "    else:\n        top = np.max(x, axis=axis, keepdims=True)\n",
        "softmax_takes_minus_inf_without_a_mask"),
    "split_heads reshaping with -1 (no answer for L = 0)": (
        "04_heads.py", "x.reshape(*lead, length, n_heads, d // n_heads)",
        "x.reshape(*lead, length, n_heads, -1)", "split_heads_takes_feature_slices"),
    "merge_heads reshaping with -1 (no answer for L = 0)": (
        "04_heads.py", ".reshape(*lead, length, n_heads * d_k)", ".reshape(*lead, length, -1)",
        "merge_heads_inverts_split_heads"),
}

# class -> (file, an edit to a correct answer in another style, the part it is graded with)
STYLES = {
    "layer norm's variance by np.var": (
        "06_layer_norm.py", "variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "variance = np.var(x, axis=-1, keepdims=True)", 1),
    "layer norm's variance by einsum of the centred rows": (
        "06_layer_norm.py", "variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "variance = np.einsum('...i,...i->...', x - mean, x - mean)[..., None] / x.shape[-1]", 1),
    "softmax through its log-sum-exp": (
        "01_softmax.py", "    e = np.exp(x - top)\n    total = np.sum(e, axis=axis, keepdims=True)\n"
        "    return e / np.where(total == 0, 1, total)\n",
        "    total = np.sum(np.exp(x - top), axis=axis, keepdims=True)\n"
        "    return np.exp(x - top - np.log(np.where(total == 0, 1, total)))\n", 4),
    "softmax's guard by np.isfinite on every path": (
        "01_softmax.py", "top = np.where(top == -np.inf, 0, top)",
        "top = np.where(np.isfinite(top), top, 0)", 4),
    "the softmax VJP expanded": (
        "12_softmax_backward.py", "    return y * (g - np.sum(g * y, axis=axis, keepdims=True))",
        "    return y * g - y * np.sum(g * y, axis=axis, keepdims=True)", 3),
    "the softmax VJP with its axis moved to the end and back": (
        "12_softmax_backward.py", "    return y * (g - np.sum(g * y, axis=axis, keepdims=True))",
        "    y, g = np.moveaxis(y, axis, -1), np.moveaxis(g, axis, -1)\n"
        "    return np.moveaxis(y * (g - np.einsum('...i,...i->...', g, y)[..., None]), -1, axis)", 3),
    "causal_mask memoised, handing out a copy": (
        "03_masks.py", "def causal_mask(n_q, n_k=None):\n    n_k = n_q if n_k is None else n_k\n"
        "    return np.arange(n_q)[:, None] >= np.arange(n_k)[None, :]\n",
        "@__import__('functools').lru_cache(maxsize=None)\ndef _causal(n_q, n_k):\n"
        "    return np.arange(n_q)[:, None] >= np.arange(n_k)[None, :]\n\n\n"
        "def causal_mask(n_q, n_k=None):\n    return _causal(n_q, n_q if n_k is None else n_k).copy()\n",
        1),
    "a KV cache by np.append": (
        "11_kv_cache.py", 'k = np.concatenate([cache["k"], k], axis=-2)\n'
        '        v = np.concatenate([cache["v"], v], axis=-2)',
        'k = np.append(cache["k"], k, axis=-2)\n        v = np.append(cache["v"], v, axis=-2)', 2),
    "split_heads and merge_heads by shape tuples": (
        "04_heads.py", "x.reshape(*lead, length, n_heads, d // n_heads)",
        "x.reshape(x.shape[:-1] + (n_heads, d // n_heads))", 1),
}


def graded(path, part):
    functions = grader.attempted(grader.load(path))[0]
    out = io.StringIO()
    grader.grade(functions, 20, out, shrink=False, part=part)
    return out.getvalue()


@pytest.mark.parametrize("mistake", sorted(WRONG))
def test_a_wrong_answer_of_each_class_fails_its_property_at_its_exercises_part(mistake, tmp_path):
    file, old, new, name = WRONG[mistake]
    part = max(ANSWERS[file], properties.BY_NAME[name].part)
    out = graded(edited(file, old, new, tmp_path), part)
    assert f"FAIL  {name}:" in out, out


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_correct_answer_in_another_style_passes_every_property(style, tmp_path):
    file, old, new, part = STYLES[style]
    out = graded(edited(file, old, new, tmp_path), part)
    assert "FAIL" not in out and " 0 failed" in out, out


def test_the_classes_are_caught_at_the_default_part_where_their_exercise_is_graded():
    # the memoised causal_mask and split_heads at L = 0: Part I's exercises, caught by --part 1
    for mistake in ("causal_mask memoised by functools.lru_cache (one array handed to every "
                    "caller)", "split_heads reshaping with -1 (no answer for L = 0)"):
        file, _, _, name = WRONG[mistake]
        assert ANSWERS[file] == properties.BY_NAME[name].part == 1, mistake
