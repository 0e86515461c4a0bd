"""What exercise 13, blockwise attention (section 22, the second reading), is held to: the
properties its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/13_blockwise_attention.py --part 4
"""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import close, floats, prop, sizes
from ._references import ref_attention
from .ex02_attention import qkv


def key_blocks(length, block_size):
    # the blocks of keys a blockwise loop visits: (first, last) key of each, the last maybe partial
    return [(a, min(a + block_size, length) - 1) for a in range(0, length, block_size)]


def blockwise_diagnosis(got, q, k, v, keep, scale, block_size):
    """One batch entry of a wrong blockwise output -> what it shows, in the student's terms:
    which rows are wrong, and which block they lose (or what else their pattern points to)."""
    ref = ref_attention(q, k, v, keep, scale)[0]
    wrong = [i for i in range(len(q)) if not np.allclose(got[i], ref[i], rtol=1e-9, atol=1e-9)]
    blocks = key_blocks(k.shape[0], block_size)
    listed = ", ".join(f"{a}..{b}" for a, b in blocks)
    where = f"with block_size={block_size} the {k.shape[0]} keys form the blocks {listed}"
    for which, (a, b) in (("last", blocks[-1]), ("first", blocks[0])):
        without = keep.copy()
        without[:, a:b + 1] = False
        if np.allclose(got, ref_attention(q, k, v, without, scale)[0], rtol=1e-9, atol=1e-9):
            partial = b - a + 1 < block_size
            return (f"the output is attention without keys {a}..{b}, the {which} block"
                    + (f" (a partial one: {b - a + 1} of {block_size} keys)" if partial else "")
                    + f": {where}, and your loop never reads that one"
                    + ("; range(0, L_k, block_size) reaches it, L_k // block_size blocks do not"
                       if partial else ""))
    empty = [i for i in wrong if not keep[i].any()]
    if empty:
        return (f"queries {empty} see no key (every one is masked): their output must be zeros; "
                "where the running sum l is 0, divide by 1")
    scores = (q @ k.T) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    late = [i for i in wrong
            if np.argmax(np.where(keep[i], scores[i], -np.inf)) // block_size
            > min(j // block_size for j in np.flatnonzero(keep[i]))]
    if late and late == wrong:
        return (f"the wrong queries {wrong} are exactly those whose largest kept score comes in "
                f"a later block than their first kept key ({where}): when the running max grows, "
                "rescale l and acc by exp(m - m_new)")
    return (f"queries {wrong} of {len(q)} are wrong ({where}; "
            f"{'masked keys: ' + str([j for j in range(k.shape[0]) if not keep[:, j].any()]) if (~keep).all(axis=0).any() else 'no key is masked for every query'})")


def check_blockwise(data, q, k, v, causal=False, key_mask=None, scale=None, block_size=2):
    # blockwise_attention against the slow loop, entry by entry of the (broadcast) leading axes,
    # diagnosed on failure
    got = np.asarray(minattn.blockwise_attention(q, k, v, causal=causal, key_mask=key_mask,
                                                 scale=scale, block_size=block_size))
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                               () if key_mask is None else key_mask.shape[:-1])
    expected = lead + q.shape[-2:-1] + v.shape[-1:]
    assert got.shape == expected, f"the output has shape {got.shape}, expected {expected}"
    qs, ks, vs = (np.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
    for index in np.ndindex(lead):
        keep = np.ones((q.shape[-2], k.shape[-2]), bool)
        if causal:
            keep &= np.tril(keep)
        if key_mask is not None:
            keep &= np.broadcast_to(key_mask, lead + key_mask.shape[-1:])[index][None, :]
        entry = "batch entry " + ", ".join(map(str, index)) if len(index) == 1 else \
            f"batch entry {index[0]}, head {index[1]}"
        try:
            close(got[index], ref_attention(qs[index], ks[index], vs[index], keep, scale)[0], 1e-9,
                  f"the output of {entry}")
        except AssertionError as error:
            raise AssertionError(f"{blockwise_diagnosis(got[index], qs[index], ks[index], vs[index], keep, scale, block_size)}"
                                 f"\n{error}") from None


@st.composite
def blockwise_inputs(draw):
    # q, k, v [B, L, d] with key_mask [B, L_k] or None; or with heads, q [B, H, L_q, d_k] and
    # k, v [B, H or 1, L_k, ...] with key_mask [B, 1, L_k] or [B, H, L_k]: the documented forms
    if draw(st.booleans()):
        q, k, v = draw(qkv())
        return q, k, v, draw(st.one_of(hnp.arrays(bool, k.shape[:-1]), st.none()))
    batch, n_heads = draw(st.integers(1, 2)), draw(st.integers(2, 3))
    l_q, l_k, d_k, d_v = draw(sizes), draw(sizes), draw(sizes), draw(sizes)
    kv_heads = draw(st.sampled_from([1, n_heads]))
    q = draw(floats((batch, n_heads, l_q, d_k)))
    k, v = draw(floats((batch, kv_heads, l_k, d_k))), draw(floats((batch, kv_heads, l_k, d_v)))
    return q, k, v, draw(hnp.arrays(bool, (batch, draw(st.sampled_from([1, n_heads])), l_k)))


@prop("blockwise_attention_matches_attention", "blockwise_attention", "blockwise_attention(q, k, "
      "v, causal=c, key_mask=m, scale=s, block_size=n) equals attention's output for any block "
      "size and any scale (0 included), for q [B, L_q, d_k] or with heads [B, H, L_q, d_k] (k, v "
      "and key_mask broadcasting over the heads): the online softmax rescales the running sum "
      "whenever the running max grows", {"blockwise_attention"},
      "keep per query a running max m, sum l and output acc; for each block of keys: m_new = "
      "max(m, block max), rescale l and acc by exp(m - m_new), add the block's; divide at the end",
      part=4)
def _(data):
    q, k, v, key_mask = data.draw(blockwise_inputs(), "q, k, v, key_mask")
    causal = data.draw(st.sampled_from([True, False]), "causal")
    drawn = data.draw(st.sampled_from([0.3, None, 2.0]), "scale")
    block_size = data.draw(st.integers(1, 4), "block_size")
    # scale 0, the boundary, and the causal path, in every example
    for scale, causal in ((drawn, causal), (0.0, causal), (drawn, True)):
        check_blockwise(data, q, k, v, causal, key_mask, scale, block_size)


@prop("blockwise_attention_reads_the_last_partial_block", "blockwise_attention", "when L_k is "
      "not a multiple of block_size (L_k = n · block_size + r, 0 < r < block_size, n >= 0), the "
      "last, partial block of r keys counts like the others", {"blockwise_attention"},
      "loop over the block starts range(0, L_k, block_size) and slice k[..., a:a + block_size, "
      ":] (a slice past the end is just shorter); L_k // block_size blocks lose the last r keys",
      part=4)
def _(data):
    block_size = data.draw(st.integers(2, 4), "block_size")
    n_full = data.draw(st.integers(0, 2), "full blocks")
    length = n_full * block_size + data.draw(st.integers(1, block_size - 1), "keys in the last block")
    batch, l_q, d = data.draw(st.integers(1, 2), "B"), data.draw(sizes, "L_q"), data.draw(sizes, "d")
    q = data.draw(floats((batch, l_q, d)), "q")
    k, v = data.draw(floats((batch, length, d)), "k"), data.draw(floats((batch, length, d)), "v")
    key_mask = data.draw(st.one_of(st.none(), hnp.arrays(bool, (batch, length))), "key_mask")
    check_blockwise(data, q, k, v, key_mask=key_mask, block_size=block_size)


@prop("blockwise_attention_ignores_masked_keys_however_large", "blockwise_attention", "keys the "
      "key_mask (or causality) hides change nothing even when their scores are thousands above "
      "the others': the running max is taken over the kept keys only", {"blockwise_attention"},
      "mask a block's scores to -inf BEFORE its max (m_new = max(m, max of the kept scores)); "
      "where a block keeps nothing, shift by 0 instead of -inf", part=4)
def _(data):
    q, k, v = data.draw(qkv(), "q, k, v")
    causal = data.draw(st.sampled_from([False, True]), "causal")
    key_mask = data.draw(hnp.arrays(bool, k.shape[:-1]), "key_mask")
    loud = data.draw(hnp.arrays(bool, k.shape[:-1]), "keys scaled by 1000")
    k = np.where(loud[..., None], 1000.0 * k, k)
    data.show("k", k)
    check_blockwise(data, q, k, v, causal, key_mask, None, data.draw(st.integers(1, 3), "block_size"))


@prop("blockwise_attention_keeps_float32", "blockwise_attention", "blockwise_attention of "
      "float32 q, k, v is float32", {"blockwise_attention"},
      "a float64 scalar (np.sqrt(d_k)) or an accumulator created as float64 upcasts float32",
      part=4)
def _(data):
    q, k, v = data.draw(qkv(dtype=np.float32), "q, k, v")
    got = np.asarray(minattn.blockwise_attention(q, k, v, block_size=2))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"
