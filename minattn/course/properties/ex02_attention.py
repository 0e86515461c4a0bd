"""What exercise 2, scaled dot-product attention (section 3; its mask, section 4), is held to: the
properties its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/02_attention.py
"""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import (
    ATTENTION, check_draws, check_dropout, check_seeds, close, floats, prop, seeds, sizes)
from ._references import ref_attention


@st.composite
def qkv(draw, batch=True, dtype=np.float64):
    b = (draw(st.integers(1, 2)),) if batch else ()
    l_q, l_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    return (draw(floats(b + (l_q, d_k), dtype=dtype)), draw(floats(b + (l_k, d_k), dtype=dtype)),
            draw(floats(b + (l_k, d_v), dtype=dtype)))


@prop("attention_matches_the_formula", "scaled_dot_product_attention", "scaled_dot_product_"
      "attention(q, k, v) returns softmax(q kᵀ / √d_k) v and those weights, for any L_q, L_k, d_k, "
      "d_v, L_q = 0 included (a slow loop computes the reference)", ATTENTION,
      "scores = q @ swapaxes(k, -1, -2) / sqrt(d_k); softmax over the keys (the last axis); then @ v")
def _(data):
    q, k, v = data.draw(qkv(), "q, k, v")
    none, no_weights = minattn.scaled_dot_product_attention(q[:, :0], k, v)  # no query at all
    assert np.shape(none) == (q.shape[0], 0, v.shape[-1]) and \
        np.shape(no_weights) == (q.shape[0], 0, k.shape[1]), (
            f"with no query (q of shape {q[:, :0].shape}) the output has shape {np.shape(none)} "
            f"and the weights {np.shape(no_weights)}, expected {(q.shape[0], 0, v.shape[-1])} and "
            f"{(q.shape[0], 0, k.shape[1])}")
    out, weights = minattn.scaled_dot_product_attention(q, k, v)
    for b in range(q.shape[0]):
        ref_out, ref_w = ref_attention(q[b], k[b], v[b])
        close(np.asarray(weights)[b], ref_w, 1e-9, f"the weights of batch entry {b}")
        close(np.asarray(out)[b], ref_out, 1e-9, f"the output of batch entry {b}")


@prop("attention_uses_the_given_scale", "scaled_dot_product_attention", "with scale=s the scores "
      "are q kᵀ · s (s replaces 1/√d_k; s = 0 gives every key the same weight)", ATTENTION,
      "scale = d_k ** -0.5 only when scale is None (`scale or d_k ** -0.5` ignores scale=0, which "
      "gives uniform weights); otherwise multiply the scores by the scale given")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    drawn = data.draw(st.sampled_from([0.1, 1.0, 2.5]), "scale")
    for scale in (drawn, 0.0):  # 0, the boundary, in every example
        out, weights = minattn.scaled_dot_product_attention(q, k, v, scale=scale)
        ref_out, ref_w = ref_attention(q, k, v, scale=scale)
        close(weights, ref_w, 1e-9, f"the weights with scale={scale}")
        close(out, ref_out, 1e-9, f"the output with scale={scale}")


@prop("attention_mask_hides_keys", "scaled_dot_product_attention", "a key the boolean mask hides "
      "(False) gets weight 0 and its value does not change the output; True means may attend",
      ATTENTION,
      "True = may attend: np.where(mask, scores, -np.inf), not the other way round, and not -1e9")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    keep = data.draw(hnp.arrays(bool, (q.shape[0], k.shape[0])), "mask")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    ref_out, ref_w = ref_attention(q, k, v, keep)
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_fully_masked_query_is_zero", "scaled_dot_product_attention", "a query whose keys "
      "are all masked gets all-zero weights and a zero output, with no NaN", ATTENTION,
      "softmax of an all -inf row is 0/0: give such rows zeros (divide by 1 where the sum is 0)")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    keep = np.ones((q.shape[0], k.shape[0]), bool)
    keep[0] = False
    data.show("mask", keep)
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    close(np.asarray(weights)[0], np.zeros(k.shape[0]), 0, "the fully masked query's weights")
    close(np.asarray(out)[0], np.zeros(v.shape[-1]), 0, "the fully masked query's output")


@prop("attention_dropout_zeroes_and_rescales", "scaled_dot_product_attention", "with dropout=p "
      "and an rng, each weight is 0 or its value without dropout / (1 - p), the output is those "
      "weights times v, and the rng's seed alone decides which", ATTENTION,
      "keep = rng.random(weights.shape) >= p; weights = np.where(keep, weights / (1 - p), 0), "
      "with the rng given, before the product with v", part=4)
def _(data):
    l_q, l_k = data.draw(st.integers(3, 5), "L_q"), data.draw(st.integers(3, 5), "L_k")
    q, k, v = (data.draw(floats((2, n, 2)), name) for n, name in ((l_q, "q"), (l_k, "k"), (l_k, "v")))
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    attend = lambda rng: minattn.scaled_dot_product_attention(q, k, v, dropout=rate, rng=rng)
    out, weights = attend(np.random.default_rng(0))
    undropped = np.stack([ref_attention(q[b], k[b], v[b])[1] for b in range(2)])
    check_dropout(weights, undropped, rate, "the weights")
    close(out, np.asarray(weights) @ v, 1e-9, "the output (the dropped weights @ v)")
    check_seeds(lambda rng: np.asarray(attend(rng)[1]), "the weights")


@prop("attention_dropout_draws_one_p_per_weight", "scaled_dot_product_attention", "with "
      "dropout=p each weight is dropped on its own with probability p: on q, k, v [2, 4, 32, 3] "
      "(2 batch entries, 4 heads), a fraction 1 - p of the 8192 weights is kept (each divided by 1 - p), and "
      "no two batch entries, heads, queries or keys share their draws (Hoeffding's bound for a "
      "failure probability of 1e-9, at the fixed seed and any other)", ATTENTION,
      "p is the probability of dropping a weight, and every weight of every batch entry and "
      "head is an independent draw", part=4)
def _(data):
    rng = np.random.default_rng(data.draw(seeds, "seed of q, k and v"))
    q, k, v = (rng.normal(0.0, 0.5, (2, 4, 32, 3)) for _ in range(3))
    rate = data.draw(st.sampled_from([0.25, 0.4]), "dropout")
    _, weights = minattn.scaled_dot_product_attention(
        q, k, v, dropout=rate, rng=np.random.default_rng(data.draw(seeds, "seed of the rng")))
    scores = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(3)  # all finite: no weight is 0
    undropped = np.exp(scores - scores.max(axis=-1, keepdims=True))
    undropped /= undropped.sum(axis=-1, keepdims=True)
    check_dropout(weights, undropped, rate, "the weights")
    check_draws(np.asarray(weights) != 0, rate, {0: "batch entries", 1: "heads", 2: "queries",
                                                 3: "keys"}, "the weights")


@prop("attention_broadcasts_leading_axes", "scaled_dot_product_attention", "q [B, H, L_q, d_k] "
      "with k, v [B, H, L_k, ...] or [B, 1, L_k, ...] (one head of keys for all: leading axes "
      "broadcast), or q [L_q, d_k] against a batch of keys, under a mask that broadcasts ([L_q, "
      "L_k], [B, 1, 1, L_k] padding, [B, 1, L_q, L_k]): each (batch entry, head) is attention on "
      "its own", ATTENTION,
      "leading axes broadcast as in any NumPy product: use the last two axes for the queries and "
      "keys, and index nothing else")
def _(data):
    batch, n_heads = data.draw(st.integers(1, 2), "B"), data.draw(st.integers(1, 3), "H")
    l_q, l_k, d_k, d_v = (data.draw(sizes, n) for n in ("L_q", "L_k", "d_k", "d_v"))
    form = data.draw(st.sampled_from(["heads", "one head of keys", "one query sequence"]), "form")
    q_lead = () if form == "one query sequence" else (batch, n_heads)
    k_lead = (batch, 1) if form == "one head of keys" else (batch, n_heads)
    q = data.draw(floats(q_lead + (l_q, d_k)), "q")
    k, v = data.draw(floats(k_lead + (l_k, d_k)), "k"), data.draw(floats(k_lead + (l_k, d_v)), "v")
    mask_shape = data.draw(st.sampled_from([None, (l_q, l_k), (batch, 1, 1, l_k),
                                            (batch, 1, l_q, l_k)]), "mask shape")
    keep = None if mask_shape is None else data.draw(hnp.arrays(bool, mask_shape), "mask")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    out, weights = np.asarray(out), np.asarray(weights)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2],
                               () if keep is None else keep.shape[:-2])
    assert out.shape == lead + (l_q, d_v) and weights.shape == lead + (l_q, l_k), (
        f"output {out.shape} and weights {weights.shape}, expected {lead + (l_q, d_v)} and "
        f"{lead + (l_q, l_k)}")
    full = lambda a: np.broadcast_to(a, lead + a.shape[-2:])  # noqa: E731
    qs, ks, vs = full(q), full(k), full(v)
    keeps = None if keep is None else np.broadcast_to(keep, lead + (l_q, l_k))
    for index in np.ndindex(lead):
        ref_out, ref_w = ref_attention(qs[index], ks[index], vs[index],
                                       None if keeps is None else keeps[index])
        close(weights[index], ref_w, 1e-9, f"the weights at {index}")
        close(out[index], ref_out, 1e-9, f"the output at {index}")


@prop("attention_ignores_masked_scores_however_large", "scaled_dot_product_attention", "a key the "
      "mask hides changes nothing even when its score is thousands above (or below) the others': "
      "the weights and the output are those of the kept keys alone", ATTENTION,
      "mask the scores before the softmax (np.where(mask, scores, -np.inf)), never the weights "
      "after it: exp(score - max) of the kept keys underflows to 0 when the max is a masked key's")
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    hidden = data.draw(hnp.arrays(bool, (k.shape[0],)), "hidden keys")
    k = np.where(hidden[:, None], k * data.draw(st.sampled_from([1000.0, -1000.0]), "hidden keys "
                                                                                   "scaled by"), k)
    data.show("k", k)
    keep = np.broadcast_to(~hidden, (q.shape[0], k.shape[0]))
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep)
    ref_out, ref_w = ref_attention(q, k, v, keep)
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_keeps_float32", "scaled_dot_product_attention", "attention on float32 q, k, v "
      "returns float32 output and weights, with or without a mask or a scale", ATTENTION,
      "scale by a Python float (d_k ** -0.5 or 1 / math.sqrt(d_k)), not np.sqrt(d_k)")
def _(data):
    q, k, v = data.draw(qkv(dtype=np.float32), "q, k, v")
    scale = data.draw(st.sampled_from([None, 0.5]), "scale")
    keep = data.draw(st.one_of(st.none(), hnp.arrays(bool, (q.shape[-2], k.shape[-2]))), "mask")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, scale=scale)
    out, weights = np.asarray(out), np.asarray(weights)
    assert out.dtype == weights.dtype == np.float32, f"got {out.dtype}, {weights.dtype}"
