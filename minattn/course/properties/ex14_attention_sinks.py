"""What exercise 14, attention sinks (section 24, the second reading), is held to: the properties
its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/14_attention_sinks.py --part 4
"""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import ATTENTION, check_dropout, close, floats, prop, sizes
from ._references import ref_attention
from .ex02_attention import qkv


def ref_attention_with_sinks(q, k, v, sinks, keep=None, scale=None):
    # one head: q [L_q, d_k], k [L_k, d_k], v [L_k, d_v], sinks [L_q] (one logit a row), keep
    # bool [L_q, L_k] -> out [L_q, d_v], w [L_q, L_k]: w_ij = exp(S_ij) / (exp(s_i) + the sum of
    # exp(S_ij') over the kept keys); masked keys 0; nothing kept and a sink of -inf -> zeros
    d_k = q.shape[-1]
    scale = 1 / math.sqrt(d_k) if scale is None else scale
    weights = np.zeros((q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):
        kept = [j for j in range(k.shape[0]) if keep is None or keep[i, j]]
        scores = {j: sum(q[i, c] * k[j, c] for c in range(d_k)) * scale for j in kept}
        top = max([float(sinks[i]), *scores.values()])
        if top == -math.inf:
            continue
        denominator = math.exp(sinks[i] - top) + sum(math.exp(s - top) for s in scores.values())
        for j, s in scores.items():
            weights[i, j] = math.exp(s - top) / denominator
    return weights @ v, weights


def draw_heads(data, dtype=np.float64):
    # q [B, H, L_q, d_k], k [B, H, L_k, d_k], v [B, H, L_k, d_v], and H
    n_heads, batch = data.draw(st.integers(1, 3), "H"), data.draw(st.integers(1, 2), "B")
    l_q, l_k, d_k, d_v = (data.draw(sizes, n) for n in ("L_q", "L_k", "d_k", "d_v"))
    q = data.draw(floats((batch, n_heads, l_q, d_k), dtype=dtype), "q")
    k = data.draw(floats((batch, n_heads, l_k, d_k), dtype=dtype), "k")
    return n_heads, q, k, data.draw(floats((batch, n_heads, l_k, d_v), dtype=dtype), "v")


@prop("attention_sinks_take_their_share", "scaled_dot_product_attention", "with sinks=s of "
      "shape [H, 1] (one logit per head, broadcasting over the queries), p_ij = exp(S_ij) / "
      "(exp(s_h) + Σ_j' exp(S_ij')): each row sums to 1 − exp(s_h) / (exp(s_h) + Σ_j' "
      "exp(S_ij')), the sink's share, and the output is Σ_j p_ij v_j (a slow loop over the rows "
      "computes the reference); also with a scale given (S = q kᵀ · scale) and under a mask "
      "[B, 1, L_q, L_k]; with dropout=p too, the weights dropped are those",
      ATTENTION,
      "the sink is one more logit in the denominator and holds no value: append it to the scores "
      "as a last column, softmax, then drop that column without renormalising; head h uses "
      "sinks[h]; the scores are scaled as without sinks, and the mask broadcasts as without "
      "them (give its last axis a column of True for the sink)", part=4)
def _(data):
    n_heads, q, k, v = draw_heads(data)
    sinks = data.draw(floats((n_heads, 1)), "sinks")
    scale = data.draw(st.sampled_from([None, 0.5]), "scale")
    mask = data.draw(hnp.arrays(bool, q.shape[:1] + (1,) + q.shape[2:3] + k.shape[2:3]),
                     "mask [B, 1, L_q, L_k]")
    # the scale drawn without a mask, and in every example scale=2.0 with the mask
    for scale, keep in ((scale, None), (2.0, mask)):
        weights = check_sinks(q, k, v, sinks, keep, scale)
    out, dropped = (np.asarray(a) for a in minattn.scaled_dot_product_attention(
        q, k, v, keep, scale=scale, sinks=sinks, dropout=0.5, rng=np.random.default_rng(0)))
    check_dropout(dropped, weights, 0.5, "the weights with sinks", some=False)
    close(out, dropped @ v, 1e-9, "the output with sinks and dropout=0.5 (the dropped weights @ v)")


def check_sinks(q, k, v, sinks, keep, scale):
    # attention with sinks [H, 1] on q [B, H, L_q, d_k] against the slow loop -> the weights
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, scale=scale, sinks=sinks)
    out, weights = np.asarray(out), np.asarray(weights)
    factor = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    given = f"scale={scale}, {'no mask' if keep is None else f'a mask {list(keep.shape)}'}"
    for b, h in np.ndindex(q.shape[:2]):
        s = sinks[h, 0]
        if keep is None:  # the sink's share, stated on its own
            scores = [[sum(q[b, h, i] * k[b, h, j]) * factor for j in range(k.shape[2])]
                      for i in range(q.shape[2])]
            share = [1 / (1 + sum(math.exp(x - s) for x in row)) for row in scores]
            close(weights[b, h].sum(axis=-1), 1 - np.array(share), 1e-9,
                  f"the row sums of batch entry {b}, head {h} (sink {s}, {given})")
        ref_out, ref_w = ref_attention_with_sinks(q[b, h], k[b, h], v[b, h], np.full(q.shape[2], s),
                                                  None if keep is None else keep[b, 0], scale)
        close(weights[b, h], ref_w, 1e-9, f"the weights of batch entry {b}, head {h} ({given})")
        close(out[b, h], ref_out, 1e-9, f"the output of batch entry {b}, head {h} ({given})")
    return weights


@prop("attention_sinks_join_after_masking", "scaled_dot_product_attention", "with a boolean mask "
      "and sinks (one per query row, shape [L_q]), the masked keys leave the denominator and the "
      "sink stays in it (it is never masked): a query whose keys are all masked gets all-zero "
      "weights and a zero output", ATTENTION,
      "mask the scores first, then append the sink's column with a mask column of True (the "
      "sink is never masked, whatever the mask says of the keys); masking the weights after "
      "the softmax leaves the masked keys in the denominator", part=4)
def _(data):
    q, k, v = data.draw(qkv(batch=False), "q, k, v")
    keep = data.draw(hnp.arrays(bool, (q.shape[0], k.shape[0])), "mask")
    keep[0] = False  # query 0 sees no key
    data.show("mask", keep)
    sinks = data.draw(floats((q.shape[0],)), "sinks")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, sinks=sinks)
    ref_out, ref_w = ref_attention_with_sinks(q, k, v, sinks, keep)
    close(np.asarray(weights)[0], np.zeros(k.shape[0]), 0, "the fully masked query's weights")
    close(np.asarray(out)[0], np.zeros(v.shape[-1]), 0, "the fully masked query's output")
    close(weights, ref_w, 1e-9, "the weights")
    close(out, ref_out, 1e-9, "the output")


@prop("attention_sinks_of_minus_inf_are_plain_attention", "scaled_dot_product_attention", "sinks "
      "of -inf (or very negative, -1e4) take no share: the weights and the output equal "
      "attention's without sinks, masked or not", ATTENTION,
      "exp(-inf - max) is 0: shift by the row's max over the kept keys and the sink together, and "
      "by 0 where that max is -inf", part=4)
def _(data):
    n_heads, q, k, v = draw_heads(data)
    keep = data.draw(st.one_of(st.none(), hnp.arrays(bool, (q.shape[2], k.shape[2]))), "mask")
    sinks = np.full((n_heads, 1), data.draw(st.sampled_from([-np.inf, -1e4]), "every sink"))
    out, weights = minattn.scaled_dot_product_attention(q, k, v, keep, sinks=sinks)
    for b, h in np.ndindex(q.shape[:2]):
        ref_out, ref_w = ref_attention(q[b, h], k[b, h], v[b, h], keep)
        close(np.asarray(weights)[b, h], ref_w, 1e-9, f"the weights of batch entry {b}, head {h}")
        close(np.asarray(out)[b, h], ref_out, 1e-9, f"the output of batch entry {b}, head {h}")


@prop("attention_sinks_keep_float32", "scaled_dot_product_attention", "attention with sinks on "
      "float32 q, k, v returns float32 output and weights, whether the sinks are float32 or "
      "float64", ATTENTION,
      "cast the sinks to the scores' dtype before appending them: a float64 column upcasts",
      part=4)
def _(data):
    n_heads, q, k, v = draw_heads(data, np.float32)
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), "sinks dtype")
    sinks = data.draw(floats((n_heads, 1), dtype=dtype), "sinks")
    out, weights = minattn.scaled_dot_product_attention(q, k, v, sinks=sinks)
    out, weights = np.asarray(out), np.asarray(weights)
    assert out.dtype == weights.dtype == np.float32, f"got {out.dtype}, {weights.dtype}"
