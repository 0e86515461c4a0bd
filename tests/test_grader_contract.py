"""The contract of every call (minattn/course/contract.py) and the properties of issue 54's
classes: wrong answers written as students write them, each wrong on a concrete input the
exercise's stub allows, fail a property of their function with the part their box names; correct
answers in unusual styles (loops, scipy, a class, recursion, stride tricks, a read-only cache)
pass every property of theirs.

Each answer is a whole small file; `expected` is a pattern the first failure's report must hold
(the property's name, or the contract's sentence)."""
import io
import re
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import minattn
from minattn.course import contract, grader, properties

SOLUTIONS = Path(__file__).parent / "solutions"
# the correct answers the wrong ones below are edits of (others are written out here, in the
# shape their edits need)
SOFTMAX, KV_CACHE, ENCODER = ((SOLUTIONS / f).read_text() for f in (
    "01_softmax.py", "11_kv_cache.py", "08_encoder_block.py"))


def first_failure(source, tmp_path, part, examples=10):
    """-> (name of the first property of the file's own functions that fails, its report) or
    (None, None): the file graded as `python -m minattn check FILE --part N` grades it, its own
    functions' properties only (the composites' add nothing here and take time)."""
    path = tmp_path / "answer.py"
    path.write_text("import math\n\nimport numpy as np\n\nimport minattn\n\n"
                    + textwrap.dedent(source))
    with warnings.catch_warnings():  # `is "gelu"` is a SyntaxWarning, an error in this suite
        warnings.simplefilter("ignore", SyntaxWarning)
        functions, _, _ = grader.attempted(grader.load(path))
    chosen = [p for p in properties.PROPERTIES if p.of in functions and p.part <= part]
    assert chosen
    with grader.graded(functions):
        for prop in chosen:
            result = grader.run_property(prop, examples, shrink=False)
            if result is not None:
                reason = result[0]
                hint = reason.hint if isinstance(reason, grader.Broken) else prop.hint
                return prop.name, f"{prop.name}: {reason}\nhint: {hint}"
    return None, None


GQA = """
def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                         rng=None, average_weights=False, n_kv_heads=None):
    p, n_kv = params, n_kv_heads or n_heads
    group = n_heads // n_kv
    q = minattn.split_heads(query @ p["w_q"] + p["b_q"], n_heads)
    k = np.repeat(minattn.split_heads(key @ p["w_k"] + p["b_k"], n_kv), group, axis=-3)
    v = np.repeat(minattn.split_heads(value @ p["w_v"] + p["b_v"], n_kv), group, axis=-3)
    heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)
    out = minattn.merge_heads(heads) @ p["w_o"] + p["b_o"]
    return out, (weights.mean(axis=-3) if average_weights else weights)
"""

SINKS = """
def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    keep = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    if sinks is None:
        weights = minattn.softmax(scores, mask=keep)
    else:
        sink = np.broadcast_to(np.asarray(sinks, scores.dtype)[..., None], scores.shape[:-1] + (1,))
        every = np.concatenate([keep, np.ones(sink.shape, bool)], axis=-1)
        weights = minattn.softmax(np.concatenate([scores, sink], axis=-1), mask=every)[..., :-1]
    if dropout:
        weights = np.where(rng.random(weights.shape) >= dropout, weights / (1 - dropout), 0)
        weights = weights.astype(scores.dtype)
    return weights @ v, weights
"""

DELTA = """
def delta_rule(q, k, v, beta, g=None, *, scale=None, initial_state=None, return_state=False):
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    state = np.zeros(q.shape[:-2] + (k.shape[-1], v.shape[-1]), q.dtype) \\
        if initial_state is None else initial_state
    outputs = []
    for t in range(q.shape[-2]):
        if g is not None:
            state = np.exp(g[..., t, None, None]) * state
        k_t = k[..., t, :]
        error = v[..., t, :] - np.einsum("...i,...ij->...j", k_t, state)
        state = state + beta[..., t, None, None] * k_t[..., :, None] * error[..., None, :]
        outputs.append(np.einsum("...i,...ij->...j", scale * q[..., t, :], state))
    out = np.stack(outputs, axis=-2)
    return (out, state) if return_state else out
"""


def edit(source, *pairs):
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


CHANGED = "changed its argument"
# class -> {wrong answer: (source, part, pattern its first failure's report holds)}
WRONG = {
    "inputs changed in place": {
        "softmax x -= max, no mask": (edit(SOFTMAX, "    e = np.exp(x - top)", "    x -= top\n    e = np.exp(x)"), 1, CHANGED),
        "layer_norm x -= mean": ("""
            def layer_norm(x, gamma, beta, eps=1e-5):
                x -= x.mean(axis=-1, keepdims=True)
                return x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps) * gamma + beta
            """, 1, CHANGED),
        "KV cache written into the caller's dict": (edit(
            KV_CACHE, '        k = np.concatenate([cache["k"], k], axis=-2)\n        v = np.concatenate([cache["v"], v], axis=-2)',
            '        cache["k"] = k = np.concatenate([cache["k"], k], axis=-2)\n        cache["v"] = v = np.concatenate([cache["v"], v], axis=-2)'),
            2, CHANGED),
        "softmax backward in the caller's g": ("""
            def softmax_vjp(y, g, axis=-1):
                g -= np.sum(g * y, axis=axis, keepdims=True)
                g *= y
                return g
            """, 3, CHANGED),
        "delta rule state updated in place when g is None": (edit(
            DELTA, "        state = state + beta", "        state += beta"), 4, CHANGED),
        "RoPE rotating x in place": ("""
            def apply_rope(x, positions, *, base=10000.0):
                d = x.shape[-1]
                angles = np.asarray(positions)[..., None] * base ** (-np.arange(0, d, 2) / d)
                cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
                a, b = x[..., :d // 2].copy(), x[..., d // 2:].copy()
                x[..., :d // 2] = a * cos - b * sin
                x[..., d // 2:] = a * sin + b * cos
                return x
            """, 2, CHANGED),
    },
    "dtype on a path the checks never took": {
        "softmax float16 in, float32 out": (edit(SOFTMAX, "    if mask is not None:\n        x = np.where",
                                                 "    x = x.astype(np.promote_types(x.dtype, np.float32))\n"
                                                 "    if mask is not None:\n        x = np.where"), 1, "float16"),
        "layer_norm float16 in, float32 out": ("""
            def layer_norm(x, gamma, beta, eps=1e-5):
                x = x.astype(np.float32) if x.dtype == np.float16 else x
                mean = x.mean(axis=-1, keepdims=True)
                var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
                return (x - mean) / np.sqrt(var + eps) * gamma + beta
            """, 1, "float16"),
        "softmax float64 with a mask only": (edit(SOFTMAX, "x = np.where(mask, x, -np.inf)",
                                                  "x = np.where(mask, x, np.full(x.shape, -np.inf))"),
                                             1, "float32 in"),
        "KV cache float64 with a cache only": (edit(KV_CACHE, '[cache["k"], k]', '[np.array(cache["k"], float), k]'),
                                               2, "float32 in"),
        "delta rule float64 when g is None": (edit(DELTA, "        if g is not None:\n", "        if g is None:\n"
                                                   "            g = np.zeros(beta.shape)\n        if True:\n"), 4, "float32 in"),
        "blockwise float64 when causal": ("""
            def blockwise_attention(q, k, v, *, causal=False, key_mask=None, scale=None, block_size=128):
                scale = q.shape[-1] ** -0.5 if scale is None else scale
                s = q @ np.swapaxes(k, -1, -2) * scale
                if causal:
                    s = s + np.where(np.tri(s.shape[-2], s.shape[-1], dtype=bool), 0.0, -np.inf)
                if key_mask is not None:
                    s = np.where(key_mask[..., None, :], s, -np.inf)
                return minattn.scaled_dot_product_attention(
                    q, k, v, np.isfinite(s), scale=scale)[0].astype(s.dtype)
            """, 4, "float32 in"),
        "RoPE angles in x's dtype": ("""
            def apply_rope(x, positions, *, base=10000.0):
                d = x.shape[-1]
                inv = (base ** (-np.arange(0, d, 2) / d)).astype(x.dtype)
                angles = np.asarray(positions)[..., None].astype(x.dtype) * inv
                a, b = x[..., :d // 2], x[..., d // 2:]
                cos, sin = np.cos(angles), np.sin(angles)
                return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
            """, 2, "apply_rope_is_exact_far_into_the_sequence"),
    },
    "shapes the stub allows": {
        "RoPE adds a batch axis to positions [L]": ("""
            def apply_rope(x, positions, *, base=10000.0):
                d = x.shape[-1]
                positions = np.asarray(positions)
                positions = positions[None] if positions.ndim == 1 else positions
                angles = positions[..., None] * base ** (-np.arange(0, d, 2) / d)
                cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
                a, b = x[..., :d // 2], x[..., d // 2:]
                return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
            """, 2, "apply_rope_rotates_feature_pairs"),
        "KV cache concatenated along axis 2": (edit(KV_CACHE, '[cache["k"], k], axis=-2', '[cache["k"], k], axis=2',
                                                    '[cache["v"], v], axis=-2', '[cache["v"], v], axis=2'),
                                               2, "kv_cache_decoding_matches_the_full_pass"),
        "GQA repeated along axis 1": (edit(GQA, "group, axis=-3)\n    v", "group, axis=1)\n    v",
                                           "n_kv), group, axis=-3)\n    heads", "n_kv), group, axis=1)\n    heads"),
                                      4, "grouped_query_attention_shares_kv_heads"),
        "multi-head attention for [L, D] and [B, L, D] only": (edit(
            GQA, "    q = minattn.split_heads(", "    batch = query.shape[0] if query.ndim == 3 else 1\n"
            "    q = minattn.split_heads(", "    out = minattn.merge_heads(heads)",
            "    heads = heads.reshape(batch, n_heads, query.shape[-2], -1)[0 if query.ndim == 2 else slice(None)]\n"
            "    out = minattn.merge_heads(heads)"), 1, "multi_head_attention_matches_a_loop_over_heads"),
        "attention stacking its query rows (L_q = 0)": ("""
            def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None):
                scale = q.shape[-1] ** -0.5 if scale is None else scale
                rows = [minattn.softmax(q[..., i:i + 1, :] @ np.swapaxes(k, -1, -2) * scale,
                                        mask=None if mask is None else np.asarray(mask)[..., i:i + 1, :]
                                        if np.ndim(mask) >= 2 and np.shape(mask)[-2] > 1 else mask)
                        for i in range(q.shape[-2])]
                weights = np.concatenate(rows, axis=-2)
                if dropout:
                    weights = np.where(rng.random(weights.shape) >= dropout, weights / (1 - dropout), 0)
                return weights @ v, weights
            """, 1, "attention_matches_the_formula"),
        "causal mask cut from a 1024 x 1024 table": ("""
            _TABLE = np.tril(np.ones((1024, 1024), bool))
            def causal_mask(n_q, n_k=None):
                n_k = n_q if n_k is None else n_k
                return _TABLE[:n_q, :n_k].copy()
            """, 1, "causal_mask_takes_any_length"),
        "KV cache in a buffer of 1024 positions": (edit(
            KV_CACHE, '        k = np.concatenate([cache["k"], k], axis=-2)\n        v = np.concatenate([cache["v"], v], axis=-2)',
            '        past = cache["k"].shape[-2]\n'
            '        k = np.concatenate([cache["k"], k], axis=-2)[..., :1024, :]\n'
            '        v = np.concatenate([cache["v"], v], axis=-2)[..., :1024, :]'), 2,
            "self_attention_continues_a_long_cache"),
        "split_heads by strides from the itemsize (contiguous input only)": ("""
            from numpy.lib.stride_tricks import as_strided
            def split_heads(x, n_heads):
                *lead, length, d = x.shape
                d_k, item = d // n_heads, x.itemsize
                return as_strided(x, tuple(lead) + (n_heads, length, d_k),
                                  x.strides[:-2] + (d_k * item, d * item, item), writeable=False)


            def merge_heads(x):
                y = np.swapaxes(x, -2, -3)
                return y.reshape(y.shape[:-2] + (-1,))
            """, 1, "non-contiguously"),
        "softmax backward keeping dims by hand": ("""
            def softmax_vjp(y, g, axis=-1):
                total = np.sum(g * y, axis=axis)
                total = np.expand_dims(total, 0) if axis == 0 else total[..., None]
                return y * (g - total)
            """, 3, "softmax_vjp_matches_finite_differences"),
        "padding mask subtracting from unsigned lengths": ("""
            def padding_mask(lengths, n):
                lengths = np.asarray(lengths)
                return (lengths[:, None] - 1 >= np.arange(n)[None, :])[:, None, None, :]
            """, 1, "padding_mask_keeps_real_tokens"),
    },
    "grouped-query attention": {
        "weights returned still grouped": ("""
            def multi_head_attention(params, query, key, value, mask=None, *, n_heads, dropout=0.0,
                                     rng=None, average_weights=False, n_kv_heads=None):
                p, n_kv = params, n_kv_heads or n_heads
                group = n_heads // n_kv
                q = minattn.split_heads(query @ p["w_q"] + p["b_q"], n_heads)
                q = q.reshape(q.shape[:-3] + (n_kv, group) + q.shape[-2:])
                k = minattn.split_heads(key @ p["w_k"] + p["b_k"], n_kv)[..., None, :, :]
                v = minattn.split_heads(value @ p["w_v"] + p["b_v"], n_kv)[..., None, :, :]
                if mask is not None and np.ndim(mask) >= 3:
                    mask = np.reshape(mask, np.shape(mask)[:-3] + (-1, 1) + np.shape(mask)[-2:]) \\
                        if np.shape(mask)[-3] == 1 else np.reshape(
                            mask, np.shape(mask)[:-3] + (n_kv, group) + np.shape(mask)[-2:])
                heads, weights = minattn.scaled_dot_product_attention(q, k, v, mask, dropout=dropout, rng=rng)
                heads = heads.reshape(heads.shape[:-4] + (n_heads,) + heads.shape[-2:])
                out = minattn.merge_heads(heads) @ p["w_o"] + p["b_o"]
                weights = weights[..., 0, :, :] if group == 1 else weights
                return out, (weights.mean(axis=-3) if average_weights else weights)
            """, 4, "grouped_query_attention_shares_kv_heads"),
        "per-head mask given a group axis as if it were [B, 1, L_q, L_k]": (edit(
            GQA, "    heads, weights = minattn", "    if mask is not None and np.ndim(mask) == 4 and group > 1:\n"
            "        mask = np.repeat(mask[:, :n_kv], group, axis=1)\n    heads, weights = minattn"),
            4, "grouped_query_attention_shares_kv_heads"),
        "average_weights skipped on the grouped branch": (edit(
            GQA, "    return out, (weights.mean(axis=-3) if average_weights else weights)",
            "    if group > 1:\n        return out, weights\n"
            "    return out, (weights.mean(axis=-3) if average_weights else weights)"),
            4, "grouped_query_attention_shares_kv_heads"),
    },
    "sinks": {
        "sinks ignoring an explicit scale": (edit(SINKS, "        sink = np.broadcast_to(",
                                                  "        scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])\n"
                                                  "        sink = np.broadcast_to("), 4, "attention_sinks_take_their_share"),
        "sinks with a 2-D mask only": (edit(SINKS, "        every = np.concatenate([keep, np.ones(sink.shape, bool)], axis=-1)",
                                            "        keep = keep if mask is None else np.asarray(mask)\n"
                                            "        every = np.concatenate([np.broadcast_to(keep, scores.shape[-2:]), "
                                            "np.ones(scores.shape[-2:-1] + (1,), bool)], axis=-1)"),
                                       4, "attention_sinks_take_their_share"),
    },
    "defaults and options": {
        "norm_first defaulting to True": (edit(ENCODER, "norm_first=False", "norm_first=True"), 1, "norm_first"),
        "eps defaulting to 1e-6": ("""
            def layer_norm(x, gamma, beta, eps=1e-6):
                mean = x.mean(axis=-1, keepdims=True)
                var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
                return (x - mean) / np.sqrt(var + eps) * gamma + beta
            """, 1, "layer_norm_matches_the_formula"),
        "rope_base defaulting to 1000": (edit(KV_CACHE, "rope_base=10000.0", "rope_base=1000.0"), 2, "rope_base"),
        "activation compared with is": ("""
            def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
                h = x @ params["w_1"] + params["b_1"]
                if activation is "gelu":
                    h = 0.5 * h * (1 + np.vectorize(math.erf, otypes=[float])(h / math.sqrt(2))).astype(h.dtype)
                elif activation is "gelu_tanh":
                    h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
                else:
                    h = np.maximum(h, 0)
                if dropout:
                    h = np.where(rng.random(h.shape) >= dropout, h / (1 - dropout), 0).astype(h.dtype)
                return h @ params["w_2"] + params["b_2"]
            """, 4, "another object"),
        "feed-forward dropout 1 giving NaN": ("""
            def feed_forward(params, x, *, activation="relu", dropout=0.0, rng=None):
                h = np.maximum(x @ params["w_1"] + params["b_1"], 0)
                if activation == "gelu":
                    h = 0.5 * (x @ params["w_1"] + params["b_1"]) * (1 + np.vectorize(math.erf, otypes=[float])(
                        (x @ params["w_1"] + params["b_1"]) / math.sqrt(2))).astype(h.dtype)
                elif activation == "gelu_tanh":
                    z = x @ params["w_1"] + params["b_1"]
                    h = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
                if dropout:
                    h = (h * (rng.random(h.shape) >= dropout) / (1 - dropout)).astype(h.dtype)
                return h @ params["w_2"] + params["b_2"]
            """, 4, "feed_forward_drops_hidden_units"),
        "one dropout mask for both sublayers": (edit(
            ENCODER, "    if norm_first:\n", "    shared = {}\n\n"
            "    def drop(h):\n        if not dropout:\n            return h\n"
            "        keep = shared.setdefault(h.shape, rng.random(h.shape) >= dropout)\n"
            "        return np.where(keep, h / (1 - dropout), 0).astype(h.dtype)\n"
            "    if norm_first:\n", "        x = x + out\n        x = x + feed(", "        x = x + drop(out)\n        x = x + drop(feed(")
            .replace("feed(norm(x, \"feed_forward_norm\"))", "feed(norm(x, \"feed_forward_norm\")))"),
            4, "encoder_block_draws_each_sublayers_dropout_on_its_own"),
    },
    "state between calls": {
        "causal mask from lru_cache, handed out as it is": ("""
            import functools
            @functools.lru_cache(maxsize=None)
            def causal_mask(n_q, n_k=None):
                n_k = n_q if n_k is None else n_k
                return np.arange(n_q)[:, None] >= np.arange(n_k)[None, :]
            """, 1, "same memory"),
        "KV cache a view of a module-level buffer": (edit(
            KV_CACHE, '        k = np.concatenate([cache["k"], k], axis=-2)\n        v = np.concatenate([cache["v"], v], axis=-2)\n',
            '        k = np.concatenate([cache["k"], k], axis=-2)\n        v = np.concatenate([cache["v"], v], axis=-2)\n'
            '    k, v = _keep(k, "k"), _keep(v, "v")\n').replace(
            "def self_attention(", '_BUFFER = {}\n\n\ndef _keep(a, name):\n'
            '    buffer = _BUFFER.setdefault((name, a.shape, a.dtype.str), np.empty(a.shape, a.dtype))\n'
            '    buffer[...] = a\n    return buffer\n\n\ndef self_attention('), 2, "earlier call|same memory"),
        "softmax writing into a scratch array kept between calls": ("""
            _SCRATCH = {}
            def softmax(x, axis=-1, mask=None):
                out = _SCRATCH.setdefault((np.shape(x), np.asarray(x).dtype.str), np.empty(np.shape(x), np.asarray(x).dtype))
                x = x if mask is None else np.where(mask, x, -np.inf)
                top = np.max(x, axis=axis, keepdims=True)
                np.exp(x - np.where(np.isneginf(top), 0, top), out=out)
                total = out.sum(axis=axis, keepdims=True)
                out /= np.where(total == 0, 1, total)
                return out
            """, 1, "earlier call|same memory"),
        "padding mask cached by n alone": ("""
            _MASKS = {}
            def padding_mask(lengths, n):
                if n not in _MASKS:
                    _MASKS[n] = (np.arange(n)[None, :] < np.asarray(lengths)[:, None])[:, None, None, :]
                return _MASKS[n].copy()
            """, 1, "padding_mask_keeps_real_tokens|different results"),
    },
    "draws that hide a bug": {
        "delta rule normalising its keys again": (edit(
            DELTA, "    outputs = []\n", "    k = k / np.maximum(np.linalg.norm(k, axis=-1, keepdims=True), 1e-12)\n"
            "    outputs = []\n").replace("        if initial_state is None else initial_state",
                                         "        if initial_state is None else np.array(initial_state)"),
            4, "delta_rule_matches_a_loop"),
    },
}
CASES = [(cls, name) + case for cls, cases in WRONG.items() for name, case in cases.items()]


@pytest.mark.parametrize("cls, name, source, part, expected", CASES, ids=[c[1] for c in CASES])
def test_a_wrong_answer_of_each_class_fails_a_property_of_its_function(cls, name, source, part,
                                                                      expected, tmp_path):
    failed, report = first_failure(source, tmp_path, part)
    assert failed is not None, f"{cls}: {name} passes every property of its function"
    assert re.search(expected, report), report


def test_every_class_of_the_issue_has_several_wrong_answers():
    assert all(len(cases) >= 2 for cls, cases in WRONG.items() if cls != "draws that hide a bug")
    assert len(CASES) >= 30


# correct answers in unusual styles: they pass every property of their functions
CORRECT = {
    "softmax by scipy, rows by a loop": ("""
        from scipy.special import softmax as scipy_softmax
        def softmax(x, axis=-1, mask=None):
            x = np.asarray(x)
            keep = np.ones(x.shape, bool) if mask is None else np.broadcast_to(mask, x.shape)
            rows, kept = np.moveaxis(x, axis, -1), np.moveaxis(keep, axis, -1)
            out = np.zeros(rows.shape, x.dtype)
            for index in np.ndindex(rows.shape[:-1]):
                if kept[index].any():
                    out[index][kept[index]] = scipy_softmax(rows[index][kept[index]])
            return np.moveaxis(out, -1, axis)
        """, 1),
    "a causal mask cached read-only": ("""
        import functools
        @functools.lru_cache(maxsize=None)
        def causal_mask(n_q, n_k=None):
            n_k = n_q if n_k is None else n_k
            mask = np.tri(n_q, n_k, dtype=bool)
            mask.setflags(write=False)
            return mask


        def padding_mask(lengths, n):
            return np.less.outer(np.arange(n), np.asarray(lengths)).T[:, None, None, :]
        """, 1),
    "heads by stride tricks": ("""
        from numpy.lib.stride_tricks import as_strided
        def split_heads(x, n_heads):
            *lead, length, d = x.shape
            d_k = d // n_heads
            s = x.strides
            return as_strided(x, tuple(lead) + (n_heads, length, d_k),
                              s[:-2] + (d_k * s[-1], s[-2], s[-1]), writeable=False)


        def merge_heads(x):
            return np.concatenate([x[..., h, :, :] for h in range(x.shape[-3])], axis=-1)
        """, 1),
    "layer norm row by row": ("""
        def layer_norm(x, gamma, beta, eps=1e-5):
            out = np.empty_like(x)
            for index in np.ndindex(x.shape[:-1]):
                row = x[index]
                mean = row.sum() / row.shape[0]
                var = ((row - mean) ** 2).sum() / row.shape[0]
                out[index] = (row - mean) / np.sqrt(var + x.dtype.type(eps)) * gamma + beta
            return out
        """, 1),
    "RoPE as a callable class with a cached table": ("""
        class _Rope:
            def __init__(self):
                self.tables = {}

            def __call__(self, x, positions, *, base=10000.0):
                d = x.shape[-1]
                if (d, base) not in self.tables:
                    self.tables[d, base] = base ** (-np.arange(0, d, 2) / d)
                angles = np.multiply.outer(np.asarray(positions, np.float64), self.tables[d, base])
                cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
                a, b = x[..., :d // 2], x[..., d // 2:]
                return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


        apply_rope = _Rope()
        """, 2),
    "the delta rule by recursion": ("""
        def delta_rule(q, k, v, beta, g=None, *, scale=None, initial_state=None, return_state=False):
            scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
            state = np.zeros(q.shape[:-2] + (k.shape[-1], v.shape[-1]), q.dtype) \\
                if initial_state is None else initial_state

            def run(t, state):
                if t == q.shape[-2]:
                    return [], state
                if g is not None:
                    state = np.exp(g[..., t, None, None]) * state
                error = v[..., t, :] - np.einsum("...i,...ij->...j", k[..., t, :], state)
                state = state + np.einsum("...,...i,...j->...ij", beta[..., t], k[..., t, :], error)
                rest, last = run(t + 1, state)
                return [np.einsum("...i,...ij->...j", q[..., t, :] * q.dtype.type(scale), state)] + rest, last

            outputs, last = run(0, state)
            out = np.stack(outputs, axis=-2) if outputs else np.zeros(v.shape[:-1] + v.shape[-1:], q.dtype)
            return (out, last) if return_state else out
        """, 4),
    "attention with sinks by a log-sum-exp, einsum": ("""
        def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                         sinks=None):
            scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
            scores = np.einsum("...id,...jd->...ij", q, k) * scores_dtype(q)(scale)
            kept = scores if mask is None else np.where(mask, scores, -np.inf)
            sink = np.full(scores.shape[:-1] + (1,), -np.inf, scores.dtype) if sinks is None else \\
                np.broadcast_to(np.asarray(sinks, scores.dtype)[..., None], scores.shape[:-1] + (1,))
            top = np.maximum(kept.max(axis=-1, keepdims=True, initial=-np.inf), sink)
            top = np.where(np.isneginf(top), 0, top)
            e = np.exp(kept - top)
            total = e.sum(axis=-1, keepdims=True) + np.exp(sink - top)
            weights = e / np.where(total == 0, 1, total)
            if dropout:
                weights = np.where(rng.random(weights.shape) >= dropout, weights / (1 - dropout), 0)
                weights = weights.astype(scores.dtype)
            return np.einsum("...ij,...jd->...id", weights, v), weights


        def scores_dtype(q):
            return q.dtype.type
        """, 4),
}


@pytest.mark.parametrize("style", sorted(CORRECT))
def test_a_correct_answer_in_an_unusual_style_passes_every_property_of_its_function(style,
                                                                                   tmp_path):
    source, part = CORRECT[style]
    failed, report = first_failure(source, tmp_path, part)
    assert failed is None, report


# --- the contract itself --------------------------------------------------------------------

def test_a_contract_failure_is_one_fail_line_with_the_call_a_counterexample_and_its_hint(tmp_path):
    path = tmp_path / "01_softmax.py"
    path.write_text("import numpy as np\n" + textwrap.dedent(edit(
        SOFTMAX, "    e = np.exp(x - top)", "    x -= top\n    e = np.exp(x)")))
    out = io.StringIO()
    assert grader.check_paths([path], 10, out, shrink=True) == 1
    report = out.getvalue()
    first = report.split("FAIL  ")[1].split("\nPASS")[0].split("\nFAIL")[0]
    assert "what failed: your softmax changed its argument x in place" in first, report
    assert "(the call: softmax(x: float64 [" in first and "counterexample:" in first, report
    assert "hint: compute into new arrays" in first, report


def test_the_checks_run_once_per_outermost_call_and_leave_the_result_alone():
    calls, reference = [], minattn.softmax

    def softmax(x, axis=-1, mask=None):
        calls.append(x.dtype)
        return reference(x, axis=axis, mask=mask)
    guarded = contract.guard("softmax", softmax, grader.exercise_signature("softmax"))
    x = np.array([[1.0, 2.0, 3.0]])
    assert np.array_equal(guarded(x), minattn.softmax(x))
    # the call, the call again (fresh copies, its defaults toggled), again exactly as it was made
    # (a memo keyed on the arguments), then float32 and float16 (softmax promises x's dtype)
    assert calls == [np.float64, np.float64, np.float64, np.float32, np.float16]
    calls.clear()
    with grader.graded({"softmax": softmax}):
        minattn.scaled_dot_product_attention(x, x, x)  # minattn's own attention calls it
    assert len(calls) == 5


def test_a_correct_answer_keeps_its_result_when_the_caller_writes_into_it():
    # the results of a checked call are the first call's, not a copy the caller cannot tell apart
    guarded = contract.guard("split_heads", minattn.split_heads, grader.exercise_signature("split_heads"))
    x = np.arange(8.0).reshape(2, 4)
    heads = guarded(x, 2)
    assert np.shares_memory(heads, x)  # a view of the input, as minattn's: allowed
