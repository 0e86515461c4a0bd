"""What attention must satisfy, stated once: the properties `python -m minattn check` grades a
student's functions by (tests/test_properties.py holds minattn itself to them too).

Each property calls the PUBLIC minattn function through the package (`minattn.softmax`, ...),
so that under `minattn.swap` it exercises a student's version, and every composite that calls
it. Each compares with an independent reference written here: slow loops in plain NumPy, in
float64, that share no code with minattn. Optional: needs hypothesis; the core never imports it.
"""
import math
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn


@dataclass(frozen=True)
class Property:
    name: str  # short, for the report and the tests
    statement: str  # the property, in plain language
    uses: frozenset  # the public functions it exercises (composites include their parts)
    hint: str  # what usually breaks it
    check: object  # a function of hypothesis-drawn data: asserts the property


def floats(shape, bound=3.0, dtype=np.float64):
    width = np.dtype(dtype).itemsize * 8
    return hnp.arrays(dtype, shape, elements=st.floats(-bound, bound, width=width,
                                                       allow_subnormal=False))


def close(got, expected, tol=1e-8, what="the result"):
    got = np.asarray(got)
    assert got.shape == np.shape(expected), f"{what} has shape {got.shape}, expected {np.shape(expected)}"
    assert np.all(np.isfinite(got) == np.isfinite(expected)), f"{what} has NaN or inf where it should not"
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=what)


# --- references: slow, obvious, float64, independent of minattn -----------------------------

def ref_softmax(row, keep=None):
    # one row -> weights; masked entries 0; nothing kept -> zeros
    row = np.asarray(row, np.float64)
    keep = np.ones(row.shape, bool) if keep is None else keep
    if not keep.any():
        return np.zeros_like(row)
    top = max(r for r, k in zip(row, keep) if k)
    e = np.array([math.exp(r - top) if k else 0.0 for r, k in zip(row, keep)])
    return e / e.sum()


def ref_attention(q, k, v, keep=None):
    # q [L_q, d], k [L_k, d], v [L_k, d_v], keep bool [L_q, L_k] -> out [L_q, d_v], w [L_q, L_k]
    d_k = q.shape[-1]
    weights = np.zeros((q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):
        scores = [sum(q[i, c] * k[j, c] for c in range(d_k)) / math.sqrt(d_k) for j in range(k.shape[0])]
        weights[i] = ref_softmax(scores, None if keep is None else keep[i])
    return weights @ v, weights


def ref_layer_norm(x, gamma, beta, eps):
    out = np.empty_like(x, dtype=np.float64)
    for index in np.ndindex(x.shape[:-1]):
        row = x[index].astype(np.float64)
        mean = sum(row) / len(row)
        variance = sum((r - mean) ** 2 for r in row) / len(row)
        out[index] = (row - mean) / math.sqrt(variance + eps) * gamma + beta
    return out


def ref_multi_head(p, query, key, value, n_heads, keep=None):
    # one sequence: query [L_q, D], key/value [L_k, D] -> [L_q, D], weights [H, L_q, L_k]
    d_k = query.shape[-1] // n_heads
    q, k, v = (x @ p[f"w_{c}"] + p[f"b_{c}"] for x, c in ((query, "q"), (key, "k"), (value, "v")))
    heads, weights = [], []
    for h in range(n_heads):
        part = slice(h * d_k, (h + 1) * d_k)
        out, w = ref_attention(q[:, part], k[:, part], v[:, part], keep)
        heads.append(out)
        weights.append(w)
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], np.array(weights)


def ref_feed_forward(p, x, activation="relu"):
    act = {"relu": lambda h: np.maximum(h, 0.0),
           "gelu": lambda h: 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))),
           "gelu_tanh": lambda h: 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))}
    return act[activation](x @ p["w_1"] + p["b_1"]) @ p["w_2"] + p["b_2"]


def ref_encoder_block(p, x, n_heads, keep=None, norm_first=False, eps=1e-5):
    # one sequence x [L, D]
    ln = lambda h, n: ref_layer_norm(h, p[n]["gamma"], p[n]["beta"], eps)
    attend = lambda h: ref_multi_head(p["attention"], h, h, h, n_heads, keep)[0]
    feed = lambda h: ref_feed_forward(p["feed_forward"], h)
    if norm_first:
        x = x + attend(ln(x, "norm1"))
        return x + feed(ln(x, "norm2"))
    x = ln(x + attend(x), "norm1")
    return ln(x + feed(x), "norm2")


def random_params(seed, d_model, d_ff=None):
    # params of an encoder block with non-trivial biases, gammas and betas
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.normal(0.0, 0.5, size=shape)
    attention = {**{f"w_{c}": w(d_model, d_model) for c in "qkvo"},
                 **{f"b_{c}": w(d_model) for c in "qkvo"}}
    d_ff = d_ff or 2 * d_model
    norm = lambda: {"gamma": 1.0 + w(d_model), "beta": w(d_model)}
    return {"attention": attention, "norm1": norm(), "norm2": norm(),
            "feed_forward": {"w_1": w(d_model, d_ff), "b_1": w(d_ff), "w_2": w(d_ff, d_model),
                             "b_2": w(d_model)}}


# --- the properties --------------------------------------------------------------------------

ATTENTION = {"scaled_dot_product_attention", "softmax"}
MULTI_HEAD = {"multi_head_attention", "split_heads", "merge_heads"} | ATTENTION
BLOCK = {"encoder_block", "layer_norm", "feed_forward"} | MULTI_HEAD
PROPERTIES = []


def prop(name, statement, uses, hint):
    def register(check):
        PROPERTIES.append(Property(name, statement, frozenset(uses), hint, check))
        return check
    return register


sizes = st.integers(1, 5)


@prop("softmax_rows_sum_to_one", "softmax(x) is non-negative and each row (the last axis) sums to one",
      {"softmax"}, "normalise over the last axis: divide exp(x) by its sum over axis=-1, keepdims=True")
def _(data):
    x = data.draw(floats((data.draw(sizes), data.draw(sizes))))
    w = np.asarray(minattn.softmax(x))
    assert w.shape == x.shape, f"shape {w.shape}, expected {x.shape}"
    assert (w >= 0).all(), "negative weights"
    close(w.sum(axis=-1), np.ones(x.shape[0]), 1e-9, "the row sums")


@prop("softmax_matches_the_formula", "softmax(x) equals exp(x_i) / sum_j exp(x_j), row by row, "
      "also for huge logits (|x| up to 1e4)", {"softmax"},
      "subtract each row's max before exp(): softmax is unchanged by it, and exp() cannot overflow")
def _(data):
    bound = data.draw(st.sampled_from([3.0, 1e4]))
    x = data.draw(floats((data.draw(sizes), data.draw(sizes)), bound))
    close(minattn.softmax(x), np.array([ref_softmax(r) for r in x]), 1e-9, "softmax(x)")


@prop("softmax_along_any_axis", "softmax(x, axis=a) normalises along axis a", {"softmax"},
      "use the axis argument in the max and the sum, not a fixed -1")
def _(data):
    x = data.draw(floats((data.draw(sizes), data.draw(sizes), data.draw(sizes))))
    axis = data.draw(st.sampled_from([0, 1, -1]))
    expected = np.apply_along_axis(ref_softmax, axis, x)
    close(minattn.softmax(x, axis=axis), expected, 1e-9, f"softmax(x, axis={axis})")


@prop("softmax_masked_entries_are_zero", "with a boolean mask (True = keep), masked entries get "
      "weight exactly 0, the kept ones are the softmax of the kept scores, and a row with nothing "
      "kept is all zeros (not NaN)", {"softmax"},
      "np.where(mask, x, -np.inf) before the softmax, and guard rows whose every entry is masked")
def _(data):
    shape = (data.draw(sizes), data.draw(sizes))
    x = data.draw(floats(shape))
    keep = data.draw(hnp.arrays(bool, shape))
    expected = np.array([ref_softmax(r, k) for r, k in zip(x, keep)])
    close(minattn.softmax(x, mask=keep), expected, 1e-9, "softmax(x, mask=mask)")


@prop("softmax_keeps_float32", "softmax of a float32 array is float32", {"softmax"},
      "a NumPy float64 scalar (np.float64, np.sqrt of a Python int) upcasts float32 arrays")
def _(data):
    x = data.draw(floats((2, data.draw(sizes)), dtype=np.float32))
    assert np.asarray(minattn.softmax(x)).dtype == np.float32, "float32 in, not float32 out"


@st.composite
def qkv(draw, batch=True):
    b = (draw(st.integers(1, 2)),) if batch else ()
    l_q, l_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    return (draw(floats(b + (l_q, d_k))), draw(floats(b + (l_k, d_k))), draw(floats(b + (l_k, d_v))))


@prop("attention_matches_the_formula", "scaled_dot_product_attention(q, k, v) returns "
      "softmax(q kᵀ / √d_k) v and those weights, for any L_q, L_k, d_k, d_v (a slow loop computes "
      "the reference)", ATTENTION,
      "scores = q @ swapaxes(k, -1, -2) / sqrt(d_k); softmax over the keys (the last axis); then @ v")
def _(data):
    q, k, v = data.draw(qkv())
    out, weights = minattn.scaled_dot_product_attention(q, k, v)
    for b in range(q.shape[0]):
        ref_out, ref_w = ref_attention(q[b], k[b], v[b])
        close(np.asarray(weights)[b], ref_w, 1e-9, "the weights")
        close(np.asarray(out)[b], ref_out, 1e-9, "the output")


@prop("attention_mask_hides_keys", "a key the boolean mask hides (False) gets weight 0 and its "
      "value does not change the output; True means may attend", ATTENTION,
      "True = may attend: np.where(mask, scores, -np.inf), not the other way round, and not -1e9")
def _(data):
    q, k, v = data.draw(qkv(batch=False))
    keep = data.draw(hnp.arrays(bool, (q.shape[0], k.shape[0])))
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    ref_out, ref_w = ref_attention(q, k, v, keep)
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_fully_masked_query_is_zero", "a query whose keys are all masked gets all-zero "
      "weights and a zero output, with no NaN", ATTENTION,
      "softmax of an all -inf row is 0/0: give such rows zeros (divide by 1 where the sum is 0)")
def _(data):
    q, k, v = data.draw(qkv(batch=False))
    keep = np.ones((q.shape[0], k.shape[0]), bool)
    keep[0] = False
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    close(np.asarray(weights)[0], np.zeros(k.shape[0]), 0, "the fully masked query's weights")
    close(np.asarray(out)[0], np.zeros(v.shape[-1]), 0, "the fully masked query's output")


@prop("attention_keeps_float32", "attention on float32 q, k, v returns float32 output and weights",
      ATTENTION, "scale by a Python float (d_k ** -0.5 or 1 / math.sqrt(d_k)), not np.sqrt(d_k)")
def _(data):
    q, k, v = (a.astype(np.float32) for a in data.draw(qkv()))
    out, weights = minattn.scaled_dot_product_attention(q, k, v)
    assert out.dtype == weights.dtype == np.float32, f"got {out.dtype}, {weights.dtype}"


@prop("causal_mask_hides_the_future", "causal_mask(n_q, n_k)[i, j] is True exactly when j <= i "
      "(top-left aligned when n_q != n_k)", {"causal_mask"},
      "query i may see keys 0..i: rows[:, None] >= cols[None, :] (>=, not >)")
def _(data):
    n_q, n_k = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 6))
    expected = np.array([[j <= i for j in range(n_k)] for i in range(n_q)], bool).reshape(n_q, n_k)
    got = np.asarray(minattn.causal_mask(n_q, n_k))
    assert got.dtype == bool and got.shape == (n_q, n_k), f"got {got.dtype} {got.shape}"
    assert (got == expected).all(), f"causal_mask({n_q}, {n_k}) =\n{got.astype(int)}"


@prop("causal_mask_aligns_and_windows", "causal_mask(n_q, n_k, align='bottom_right')[i, j] is True "
      "exactly when j <= i + n_k - n_q; with window=w also j > (that position) - w",
      {"causal_mask"}, "bottom-right: query i sits at position i + n_k - n_q; a window of w keeps "
      "keys position - w + 1 .. position")
def _(data):
    n_q, n_k = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 6))
    align = data.draw(st.sampled_from(["top_left", "bottom_right"]))
    window = data.draw(st.one_of(st.none(), st.integers(1, 7)))
    offset = n_k - n_q if align == "bottom_right" else 0
    expected = np.array([[j <= i + offset and (window is None or j > i + offset - window)
                          for j in range(n_k)] for i in range(n_q)], bool).reshape(n_q, n_k)
    got = np.asarray(minattn.causal_mask(n_q, n_k, align=align, window=window))
    assert got.shape == (n_q, n_k), f"shape {got.shape}"
    assert (got == expected).all(), (f"causal_mask({n_q}, {n_k}, align={align!r}, "
                                     f"window={window}) =\n{got.astype(int)}")


@prop("padding_mask_keeps_real_tokens", "padding_mask(lengths, n) has shape (B, 1, 1, n) and is "
      "True exactly at the first lengths[b] positions of sequence b", {"padding_mask"},
      "positions < lengths[:, None], then add the two singleton axes: [:, None, None, :]")
def _(data):
    n = data.draw(st.integers(1, 6))
    lengths = np.array(data.draw(st.lists(st.integers(0, n), min_size=1, max_size=4)))
    got = np.asarray(minattn.padding_mask(lengths, n))
    expected = np.array([[j < length for j in range(n)] for length in lengths])[:, None, None, :]
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    assert (got == expected).all()


@prop("split_heads_takes_feature_slices", "split_heads(x, H)[..., h, i, :] is token i's features "
      "h*d_k .. (h+1)*d_k - 1", {"split_heads"},
      "reshape to [..., L, H, d_k] THEN swap the L and H axes: a bare reshape mixes tokens")
def _(data):
    n_heads, d_k, length = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(sizes)
    x = data.draw(floats((2, length, n_heads * d_k)))
    got = np.asarray(minattn.split_heads(x, n_heads))
    assert got.shape == (2, n_heads, length, d_k), f"shape {got.shape}"
    for h in range(n_heads):
        close(got[:, h], x[..., h * d_k:(h + 1) * d_k], 0, f"head {h}")


@prop("merge_heads_inverts_split_heads", "merge_heads(split_heads(x, H)) == x", {"merge_heads"},
      "swap the H and L axes back, then reshape to [..., L, H * d_k]")
def _(data):
    n_heads, d_k, length = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(sizes)
    x = data.draw(floats((2, length, n_heads * d_k)))
    heads = np.stack([x[..., h * d_k:(h + 1) * d_k] for h in range(n_heads)], axis=1)
    close(minattn.merge_heads(heads), x, 0, "merge_heads(heads)")


@prop("multi_head_attention_matches_a_loop_over_heads", "multi_head_attention projects q, k, v, "
      "attends in each head separately, concatenates the heads and projects back (self- and "
      "cross-attention, with a causal mask)", MULTI_HEAD,
      "each head attends over its own d_k features; merge the heads before the output projection")
def _(data):
    n_heads = data.draw(st.integers(1, 3))
    d_model = n_heads * data.draw(st.integers(1, 3))
    l_q, l_k = data.draw(sizes), data.draw(sizes)
    p = random_params(data.draw(st.integers(0, 99)), d_model)["attention"]
    query, key = data.draw(floats((l_q, d_model))), data.draw(floats((l_k, d_model)))
    keep = np.asarray([[j <= i for j in range(l_k)] for i in range(l_q)], bool)
    out, weights = minattn.multi_head_attention(p, query[None], key[None], key[None], keep,
                                                n_heads=n_heads)
    ref_out, ref_w = ref_multi_head(p, query, key, key, n_heads, keep)
    close(np.asarray(weights)[0], ref_w, 1e-8, "the per-head weights [H, L_q, L_k]")
    close(np.asarray(out)[0], ref_out, 1e-8, "the output")


@prop("layer_norm_matches_the_formula", "layer_norm(x, gamma, beta, eps) = (x - mean) / sqrt(var + "
      "eps) * gamma + beta over the last axis, with the biased variance (divide by D), as "
      "torch.nn.LayerNorm — also for rows of tiny variance", {"layer_norm"},
      "mean and variance over axis=-1 with keepdims; variance divides by D; eps inside the sqrt")
def _(data):
    d = data.draw(st.integers(2, 6))
    x = data.draw(floats((data.draw(sizes), d)))
    x = x * data.draw(st.sampled_from([1.0, 1e-3]))  # tiny variances show where eps sits
    gamma, beta = data.draw(floats((d,))), data.draw(floats((d,)))
    close(minattn.layer_norm(x, gamma, beta, 1e-5), ref_layer_norm(x, gamma, beta, 1e-5), 1e-7,
          "layer_norm(x, gamma, beta)")


@prop("layer_norm_keeps_float32", "layer_norm of float32 inputs is float32", {"layer_norm"},
      "a NumPy float64 scalar (np.float64(eps), np.mean's dtype) upcasts float32")
def _(data):
    x = data.draw(floats((2, 4), dtype=np.float32))
    out = minattn.layer_norm(x, np.ones(4, np.float32), np.zeros(4, np.float32))
    assert np.asarray(out).dtype == np.float32, f"got {np.asarray(out).dtype}"


@prop("feed_forward_matches_the_formula", "feed_forward(params, x) = act(x w_1 + b_1) w_2 + b_2 "
      "for every token, for relu, gelu and gelu_tanh", {"feed_forward"},
      "the activation goes between the two linear maps, on the hidden width F")
def _(data):
    d = data.draw(st.integers(1, 4))
    p = random_params(data.draw(st.integers(0, 99)), d)["feed_forward"]
    x = data.draw(floats((2, data.draw(sizes), d)))
    activation = data.draw(st.sampled_from(["relu", "gelu", "gelu_tanh"]))
    close(minattn.feed_forward(p, x, activation=activation), ref_feed_forward(p, x, activation),
          1e-8, f"feed_forward(params, x, activation={activation!r})")


@prop("encoder_block_matches_the_paper", "encoder_block is x = norm1(x + attention(x)), then "
      "norm2(x + feed_forward(x)) (post-norm); with norm_first=True x + attention(norm1(x)), then "
      "x + feed_forward(norm2(x)) (pre-norm); a causal mask reaches the attention", BLOCK,
      "each sublayer's output is ADDED to its input (the residual), and the norm sits after the "
      "add (post-norm) or before the sublayer (pre-norm)")
def _(data):
    n_heads = data.draw(st.integers(1, 2))
    d_model = n_heads * data.draw(st.integers(1, 3))
    length, norm_first = data.draw(sizes), data.draw(st.booleans())
    p = random_params(data.draw(st.integers(0, 99)), d_model)
    x = data.draw(floats((length, d_model)))
    keep = np.tril(np.ones((length, length), bool))
    got = minattn.encoder_block(p, x[None], keep, n_heads=n_heads, norm_first=norm_first)
    close(np.asarray(got)[0], ref_encoder_block(p, x, n_heads, keep, norm_first), 1e-7,
          f"encoder_block (norm_first={norm_first})")


# --- the decoder ---

def ref_grouped_multi_head(p, query, key, n_heads, n_kv_heads):
    # one sequence, grouped-query attention: query head h reads key/value head h // (H / H_kv)
    d_k = query.shape[-1] // n_heads
    q, k, v = query @ p["w_q"] + p["b_q"], key @ p["w_k"] + p["b_k"], key @ p["w_v"] + p["b_v"]
    heads = []
    for h in range(n_heads):
        g = h // (n_heads // n_kv_heads)
        heads.append(ref_attention(q[:, h * d_k:(h + 1) * d_k], k[:, g * d_k:(g + 1) * d_k],
                                   v[:, g * d_k:(g + 1) * d_k])[0])
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"]


@prop("grouped_query_attention_shares_kv_heads", "multi_head_attention with n_kv_heads < n_heads "
      "(GQA; MQA when 1): K and V are projected to n_kv_heads heads, and query head h reads key/value "
      "head h // (n_heads // n_kv_heads)", {"multi_head_attention"},
      "project K and V to n_kv_heads * d_k features; give each group of n_heads // n_kv_heads "
      "consecutive query heads the same K/V head (broadcast over a group axis, or repeat)")
def _(data):
    n_kv_heads = data.draw(st.integers(1, 2))
    n_heads = n_kv_heads * data.draw(st.integers(1, 3))
    d_k = data.draw(st.integers(1, 2))
    d_model, l_q, l_k = n_heads * d_k, data.draw(sizes), data.draw(sizes)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    w = lambda *shape: rng.normal(0.0, 0.5, size=shape)
    d_kv = n_kv_heads * d_k
    p = {"w_q": w(d_model, d_model), "b_q": w(d_model), "w_k": w(d_model, d_kv), "b_k": w(d_kv),
         "w_v": w(d_model, d_kv), "b_v": w(d_kv), "w_o": w(d_model, d_model), "b_o": w(d_model)}
    query, key = data.draw(floats((l_q, d_model))), data.draw(floats((l_k, d_model)))
    out, _ = minattn.multi_head_attention(p, query[None], key[None], key[None], n_heads=n_heads,
                                          n_kv_heads=n_kv_heads)
    close(np.asarray(out)[0], ref_grouped_multi_head(p, query, key, n_heads, n_kv_heads), 1e-8,
          f"the output with {n_heads} query heads and {n_kv_heads} key/value heads")


def ref_rope(x, positions, base=10000.0):
    # slow rotate-half RoPE: feature i pairs with i + d/2, rotated by positions * base^(-2i/d)
    out = np.array(x, dtype=np.float64)
    d = x.shape[-1]
    for index in np.ndindex(x.shape[:-1]):
        m = positions[index[-1]]
        for i in range(d // 2):
            angle = m * base ** (-2.0 * i / d)
            a, b = x[index][i], x[index][i + d // 2]
            out[index][i] = a * math.cos(angle) - b * math.sin(angle)
            out[index][i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


@prop("apply_rope_rotates_feature_pairs", "apply_rope(x, positions) rotates each feature pair "
      "(x[i], x[i + d/2]) of the token at position m by the angle m · base^(-2i/d) (the rotate-half "
      "convention of Llama and Hugging Face)", {"apply_rope"},
      "pair feature i with i + d/2 (not 2i with 2i + 1); the angle of pair i is m / base^(2i/d)")
def _(data):
    d, length = 2 * data.draw(st.integers(1, 3)), data.draw(sizes)
    x = data.draw(floats((2, length, d)))
    positions = np.array(data.draw(st.lists(st.integers(0, 1000), min_size=length, max_size=length)))
    close(minattn.apply_rope(x, positions), ref_rope(x, positions), 1e-9, "apply_rope(x, positions)")


@prop("rope_attention_depends_on_offsets_only", "self_attention with RoPE positions p and with "
      "p + c (the same tokens, numbered from c) gives the same output", {"self_attention", "apply_rope"},
      "apply RoPE to q and k only: rotating the values stamps absolute positions on the output")
def _(data):
    n_heads, shift = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 500))
    d_model, length = 4 * n_heads, data.draw(sizes)
    p = random_params(data.draw(st.integers(0, 99)), d_model)["attention"]
    x = data.draw(floats((1, length, d_model)))
    positions = np.arange(length)
    a = minattn.self_attention(p, x, n_heads=n_heads, positions=positions)[0]
    b = minattn.self_attention(p, x, n_heads=n_heads, positions=positions + shift)[0]
    close(np.asarray(b), np.asarray(a), 1e-8, f"the output with positions shifted by {shift}")


@prop("causal_lm_cache_matches_the_full_pass", "feeding tokens one at a time through the KV cache "
      "gives the logits of one full causal_lm pass", {"causal_lm"},
      "a token fed after a cache of L_past tokens sits at position L_past, not 0; its mask is "
      "bottom-right aligned")
def _(data):
    length, seed = data.draw(st.integers(2, 5)), data.draw(st.integers(0, 99))
    lm, _ = minattn.init_causal_lm(np.random.default_rng(seed), 7, 1, 4, 2, 8, n_positions=8)
    tokens = np.random.default_rng(seed).integers(0, 7, size=(1, length))
    full = np.asarray(minattn.causal_lm(lm, tokens, n_heads=2))
    cache, steps = None, []
    for t in range(length):
        logits, cache = minattn.causal_lm(lm, tokens[:, t:t + 1], n_heads=2, cache=cache,
                                          return_cache=True)
        steps.append(np.asarray(logits))
    close(np.concatenate(steps, axis=1), full, 1e-9, "the step-by-step logits")


BY_NAME = {p.name: p for p in PROPERTIES}
