"""What exercise 5, multi-head attention (section 5), is held to: the properties its command grades
it by, each against a slow float64 reference:
    python -m minattn check my_attention/05_multi_head_attention.py
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import (
    MULTI_HEAD, as_dtype, check_dropout, check_seeds, close, floats, prop, random_params,
    seeds, sizes)
from ._references import ref_multi_head


def draw_multi_head(data, n_kv=False):
    n_heads = data.draw(st.integers(1, 3), "n_heads")
    d_model = n_heads * data.draw(st.integers(1, 3), "d_k")
    p = random_params(data.draw(seeds, "params seed"), d_model)["self_attention"]
    return n_heads, d_model, p


def draw_mask(data, batch, l_q, l_k, form=None, name="mask"):
    # a mask for a batch of [B, L_q, L_k] attention with heads, in one of its documented forms
    # (or the form given): None, causal [L_q, L_k], padding [B, 1, 1, L_k], both [B, 1, L_q,
    # L_k] -> (the mask, keep(b): the bool [L_q, L_k] batch entry b attends with)
    causal = np.array([[j <= i for j in range(l_k)] for i in range(l_q)], bool).reshape(l_q, l_k)
    form = form or data.draw(st.sampled_from(["causal [L_q, L_k]", "padding [B, 1, 1, L_k]", "none",
                                              "causal and padding [B, 1, L_q, L_k]"]), "mask form")
    if form == "none":
        return None, lambda b: None
    if form.startswith("causal ["):
        data.show(name, causal)
        return causal, lambda b: causal
    lengths = data.draw(hnp.arrays(int, (batch,), elements=st.integers(0, l_k)), f"lengths ({name})")
    padding = (np.arange(l_k)[None, :] < lengths[:, None])[:, None, None, :]
    mask = padding if form.startswith("padding") else padding & causal
    data.show(name, mask)
    return mask, lambda b: np.broadcast_to(mask[b, 0], (l_q, l_k))


@prop("multi_head_attention_matches_a_loop_over_heads", "multi_head_attention", "multi_head_"
      "attention projects query, key and value, attends in each head separately, concatenates the "
      "heads and projects back: self- and cross-attention (L_q != L_k), one sequence [L, D], a "
      "batch [B, L, D] or two leading axes [B, B', L, D], under a mask of any documented form "
      "(causal [L_q, L_k], padding [B, 1, 1, L_k], both [B, 1, L_q, L_k])", MULTI_HEAD,
      "each head attends over its own d_k features of every batch entry; the mask broadcasts over "
      "the head axis; merge the heads before the output projection")
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    l_q, l_k = data.draw(sizes, "L_q"), data.draw(sizes, "L_k")
    batch = data.draw(st.sampled_from([(1,), (2,), (), (2, 2)]), "batch shape")
    query = data.draw(floats(batch + (l_q, d_model)), "query")
    key, value = data.draw(floats(batch + (l_k, d_model)), "key"), \
        data.draw(floats(batch + (l_k, d_model)), "value")
    causal = np.array([[j <= i for j in range(l_k)] for i in range(l_q)], bool).reshape(l_q, l_k)
    if len(batch) == 1:  # the form drawn, a padding mask [B, 1, 1, L_k], and in every example
        # the batch under one more leading axis [1, B, L, D] (causal)
        cases = [((), draw_mask(data, batch[0], l_q, l_k)),
                 ((), draw_mask(data, batch[0], l_q, l_k, "padding [B, 1, 1, L_k]", "padding mask")),
                 ((1,), (causal, lambda b: causal))]
    else:  # one sequence [L, D] or [B, B', L, D], under a causal mask [L_q, L_k]
        cases = [((), (causal, lambda b: causal))]
    for extra, (mask, keep) in cases:
        lead = extra + batch
        out, weights = minattn.multi_head_attention(
            p, *(a.reshape(extra + a.shape) for a in (query, key, value)), mask, n_heads=n_heads)
        out, weights = np.asarray(out), np.asarray(weights)
        assert out.shape == lead + (l_q, d_model) and weights.shape == lead + (n_heads, l_q, l_k), (
            f"for query {list(lead + (l_q, d_model))}: output {out.shape} and weights "
            f"{weights.shape}, expected {lead + (l_q, d_model)} and {lead + (n_heads, l_q, l_k)}")
        shown = "no mask" if mask is None else f"a mask {list(np.shape(mask))}"
        for at in np.ndindex(batch):
            ref_out, ref_w = ref_multi_head(p, query[at], key[at], value[at], n_heads,
                                            keep(at[0] if len(batch) == 1 else None))
            where = (0,) * len(extra) + at
            close(weights[where], ref_w, 1e-8, f"the per-head weights [H, L_q, L_k] of batch "
                                               f"entry {where} with {shown}")
            close(out[where], ref_out, 1e-8, f"the output of batch entry {where} with {shown}")


@prop("multi_head_attention_averages_weights_over_heads", "multi_head_attention", "with "
      "average_weights=True the weights are the per-head weights averaged over the heads, "
      "[B, L_q, L_k]", MULTI_HEAD, "average over the head axis (-3), not the batch or the queries",
      part=4)
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    l_q, l_k = data.draw(sizes, "L_q"), data.draw(sizes, "L_k")
    batch = data.draw(st.sampled_from([(2,), ()]), "batch shape")  # [B, H, L_q, L_k] or [H, L_q, L_k]
    query = data.draw(floats(batch + (l_q, d_model)), "query")
    key = data.draw(floats(batch + (l_k, d_model)), "key")
    _, weights = minattn.multi_head_attention(p, query, key, key, n_heads=n_heads,
                                              average_weights=True)
    expected = np.stack([ref_multi_head(p, q, k, k, n_heads)[1].mean(axis=0)
                         for q, k in zip(query.reshape(-1, l_q, d_model), key.reshape(-1, l_k, d_model))])
    close(weights, expected.reshape(batch + (l_q, l_k)), 1e-8,
          f"the weights averaged over heads {list(batch + (l_q, l_k))}")


def ref_output_of_weights(p, value, weights):
    # one sequence: the multi-head output that attention weights [H, L_q, L_k] give, value [L_k, D]
    n_heads = weights.shape[0]
    d_k = value.shape[-1] // n_heads
    v = value @ p["w_v"] + p["b_v"]
    heads = [weights[h] @ v[:, h * d_k:(h + 1) * d_k] for h in range(n_heads)]
    return np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"]


@prop("multi_head_attention_passes_dropout_on", "multi_head_attention", "with dropout=p and an rng "
      "each head's weights are 0 or their value without dropout / (1 - p), the rng's seed "
      "alone decides which, and the weights returned are those the output was computed with",
      MULTI_HEAD, "pass dropout and rng on to the attention of the heads, and return the weights "
      "of that same call", part=4)
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    length = data.draw(st.integers(3, 5), "L")
    x = data.draw(floats((2, length, d_model)), "query = key = value")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    attend = lambda rng: minattn.multi_head_attention(p, x, x, x,  # noqa: E731
                                                      n_heads=n_heads, dropout=rate, rng=rng)
    out, weights = (np.asarray(a) for a in attend(np.random.default_rng(0)))
    check_dropout(weights, np.stack([ref_multi_head(p, a, a, a, n_heads)[1] for a in x]), rate,
                  "the weights")
    for b in range(2):
        close(out[b], ref_output_of_weights(p, x[b], weights[b]), 1e-8,
              f"the output of batch entry {b} (the one the weights returned give)")
    check_seeds(lambda rng: np.asarray(attend(rng)[1]), "the weights")


@prop("multi_head_attention_keeps_float32", "multi_head_attention", "multi-head attention on "
      "float32 inputs and params returns float32 output and weights", MULTI_HEAD,
      "a NumPy float64 scalar (np.sqrt(d_k)) or a float64 array created inside upcasts float32")
def _(data):
    n_heads, d_model, p = draw_multi_head(data)
    x = data.draw(floats((1, data.draw(sizes, "L"), d_model), dtype=np.float32), "x")
    out, weights = minattn.multi_head_attention(as_dtype(p, np.float32), x, x, x, n_heads=n_heads)
    assert np.asarray(out).dtype == np.asarray(weights).dtype == np.float32, \
        f"got {np.asarray(out).dtype}, {np.asarray(weights).dtype}"
