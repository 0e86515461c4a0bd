"""What exercise 11, self-attention with a KV cache (section 9), is held to: the properties its
command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/11_kv_cache.py --part 2
"""
import numpy as np
from hypothesis import strategies as st

import minattn

from ._machinery import MULTI_HEAD, as_dtype, close, floats, prop, random_params, seeds, sizes
from ._references import ref_attention, ref_rope, ref_self_attention
from .ex05_multi_head_attention import draw_mask
from .ex10_rope import draw_positions


SELF_ATTENTION = {"self_attention", "apply_rope"} | (MULTI_HEAD - {"multi_head_attention"})


def draw_self_attention(data, rope=None, grouped=False):
    # grouped: fewer key/value heads than query heads (the second reading's grouped-query
    # attention); otherwise one per query head and n_kv_heads left at its default, so that a
    # first-reading answer without the parameter is checked
    if grouped:
        n_kv_heads = data.draw(st.integers(1, 2), "n_kv_heads")
        n_heads = n_kv_heads * data.draw(st.integers(2, 3), "n_heads / n_kv_heads")
    else:
        n_heads = n_kv_heads = data.draw(st.integers(1, 3), "n_heads")
    d_k = 2 * data.draw(st.sampled_from([2, 3]), "d_k / 2")  # d_k = 2 would not show rope_base
    p = random_params(data.draw(seeds, "params seed"), n_heads * d_k, d_kv=n_kv_heads * d_k)
    if rope is None:
        rope = data.draw(st.sampled_from([True, False]), "with RoPE")
    base = data.draw(st.sampled_from([50.0, 10000.0, 500.0]), "rope_base")
    return n_heads, n_kv_heads, n_heads * d_k, p["self_attention"], rope, base


def ref_cache(p, x, n_heads, n_kv_heads, positions, base):
    # one sequence x [L, D] -> the keys (rotated when positions are given) and the values of its
    # key/value heads, [H_kv, L, d_k] each
    d_k = x.shape[-1] // n_heads
    k, v = x @ p["w_k"] + p["b_k"], x @ p["w_v"] + p["b_v"]
    k, v = (np.stack([a[:, g * d_k:(g + 1) * d_k] for g in range(n_kv_heads)]) for a in (k, v))
    return (k if positions is None else ref_rope(k, positions, base)), v


def row(positions, b):
    # the positions of batch entry b: [L] are everyone's, [B, L] one row per entry
    return None if positions is None else positions if positions.ndim == 1 else positions[b]


def rope_keywords(positions, base):
    # RoPE's keywords: positions with their base, or neither (a base without positions is
    # refused: it would rotate nothing)
    return {} if positions is None else {"positions": positions, "rope_base": base}


def given_kv_heads(n_heads, n_kv_heads):
    # the n_kv_heads a check passes: None (the default) when every query head has its own
    return None if n_kv_heads == n_heads else n_kv_heads


def self_attention_matches_a_loop(data, grouped):
    n_heads, n_kv_heads, d_model, p, rope, base = draw_self_attention(data, rope=True,
                                                                      grouped=grouped)
    length, batch = data.draw(st.integers(2, 5), "L"), data.draw(st.integers(1, 2), "B")
    x = data.draw(floats((batch, length, d_model)), "x")
    positions = draw_positions(data, (batch,), length)
    mask, keep = draw_mask(data, batch, length, length)
    out, cache = minattn.self_attention(p, x, mask, n_heads=n_heads,
                                        n_kv_heads=given_kv_heads(n_heads, n_kv_heads),
                                        positions=positions, rope_base=base)
    for b in range(batch):
        check_sequence(np.asarray(out)[b], {n: np.asarray(a)[b] for n, a in cache.items()}, p,
                       x[b], n_heads, n_kv_heads, keep(b), row(positions, b), base,
                       f"batch entry {b}")


def check_sequence(out, cache, p, x, n_heads, n_kv_heads, keep, positions, base, what):
    # self-attention's output [L, D] and cache {'k', 'v'} [H_kv, L, d_k] of one sequence x [L, D]
    # against the slow loop
    close(out, ref_self_attention(p, x, n_heads, n_kv_heads, keep, positions, base), 1e-8,
          f"the output of {what}")
    k, v = ref_cache(p, x, n_heads, n_kv_heads, positions, base)
    close(np.asarray(cache["k"]), k, 1e-8, f"cache['k'] [H_kv, L, d_k] of {what}")
    close(np.asarray(cache["v"]), v, 1e-8, f"cache['v'] [H_kv, L, d_k] of {what}")


@prop("self_attention_matches_a_loop", "self_attention", "self_attention(params, x, mask, n_heads="
      "H, positions=p, rope_base=b) projects x [B, L, D], rotates q and k by RoPE at positions "
      "[L] or [B, L] (one row per sequence), attends in H heads under the mask (any documented "
      "form), and returns the cache {'k', 'v'} of the rotated keys and the values [B, H, L, d_k]",
      SELF_ATTENTION,
      "RoPE on q and k only, with rope_base, at each sequence's own positions (q and k have a head "
      "axis that positions [B, L] lack); the cache holds k after RoPE", part=2)
def _(data):
    self_attention_matches_a_loop(data, grouped=False)


@prop("grouped_self_attention_matches_a_loop", "self_attention", "self_attention with n_kv_heads="
      "H_kv < n_heads=H (grouped-query attention, the second reading): query head h reads "
      "key/value head h // (H / H_kv), and the cache holds the H_kv key/value heads "
      "[B, H_kv, L, d_k]", SELF_ATTENTION,
      "w_k and w_v project to n_kv_heads * d_k features; query head h reads key/value head "
      "h // (H / H_kv); the cache keeps the H_kv heads, not copies for every query head", part=4)
def _(data):
    self_attention_matches_a_loop(data, grouped=True)


@prop("kv_cache_decoding_matches_the_full_pass", "self_attention", "a sequence fed in chunks of "
      "any lengths (a prompt, then one or several tokens at a time), each with the cache the call "
      "before returned, its own positions and the bottom-right causal mask over all the keys so "
      "far (or no mask for a single token), gives the outputs of one full causal pass, and the "
      "last cache holds the keys and values of the whole sequence, in order; for a batch "
      "[B, L, D] or one sequence [L, D]", SELF_ATTENTION,
      "the cache is the past: the new keys and values come after the cached ones, and a chunk's "
      "queries are the last positions of the keys it sees; x [L, D] has no batch axis (use "
      "axis -2 and -3, never 1 or 2)", part=2)
def _(data):
    n_heads, n_kv_heads, d_model, p, rope, base = draw_self_attention(data)
    length, batch = data.draw(st.integers(2, 6), "L"), data.draw(st.integers(1, 2), "B")
    starts = sorted(data.draw(st.sets(st.integers(1, length - 1), min_size=1, max_size=3),
                              "where chunks after the first start"))
    x = data.draw(floats((batch, length, d_model)), "x")
    positions = draw_positions(data, (batch,), length) if rope else None
    chunks = list(zip([0, *starts], [*starts, length]))
    masks = []
    for a, b in chunks:
        mask = np.arange(a, b)[:, None] >= np.arange(b)[None, :]  # query i sits at position a + i
        masks.append(None if b - a == 1 and data.draw(st.booleans(), f"no mask for the token at {a}")
                     else mask)

    def decode(x, positions):
        cache, outs = None, []
        for (a, b), mask in zip(chunks, masks):
            out, cache = minattn.self_attention(
                p, x[..., a:b, :], mask, n_heads=n_heads,
                n_kv_heads=given_kv_heads(n_heads, n_kv_heads), cache=cache,
                **rope_keywords(None if positions is None else positions[..., a:b], base))
            outs.append(np.asarray(out))
        return np.concatenate(outs, axis=-2), cache

    causal = np.tril(np.ones((length, length), bool))
    shown = ", ".join(f"{a}..{b - 1}" for a, b in chunks)
    # the batch [B, L, D], and in every example its first sequence alone [L, D]
    for alone in (False, True):
        got, cache = decode(x[0], row(positions, 0)) if alone else decode(x, positions)
        for e in range(1 if alone else batch):
            at = () if alone else (e,)
            what = "the sequence alone (x [L, D])" if alone else f"batch entry {e}"
            check_sequence(got[at], {n: np.asarray(a)[at] for n, a in cache.items()}, p, x[e],
                           n_heads, n_kv_heads, causal, row(positions, e), base,
                           f"{what}, fed as the chunks of tokens {shown} (the last cache)")


@prop("self_attention_continues_a_long_cache", "self_attention", "given a cache of L_past keys "
      "and values (1000 to 1100 of them: far past 1024), self_attention of L new tokens attends "
      "over all L_past + L keys under the bottom-right causal mask, or with mask=None over all "
      "of them unmasked (in every example), and returns the cache with "
      "the new keys and values after the old ones, for a batch [1, L, D] or one sequence [L, D]",
      SELF_ATTENTION, "append to the cache given (np.concatenate along axis -2), whatever its "
      "length: no buffer of a fixed size (1024), and never the caller's cache changed; mask=None "
      "means no mask, a cache or not (never a causal mask imposed)", part=2)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_k, length = 2, data.draw(sizes, "L")
    p = random_params(data.draw(seeds, "params seed"), n_heads * d_k)["self_attention"]
    past = data.draw(st.integers(1000, 1100), "L_past")
    batch = data.draw(st.sampled_from([(1,), ()]), "batch shape")
    rng = np.random.default_rng(data.draw(seeds, "seed of the cache"))
    cache = {"k": rng.normal(size=batch + (n_heads, past, d_k)),
             "v": rng.normal(size=batch + (n_heads, past, d_k))}
    x = data.draw(floats(batch + (length, n_heads * d_k)), "x")
    keep = np.arange(length)[:, None] + past >= np.arange(past + length)[None, :]
    check_long_cache(p, x, keep, n_heads, cache, batch, past, length, d_k)
    # mask=None is no mask, with a cache too, in every example: every query sees every key
    check_long_cache(p, x, None, n_heads, cache, batch, past, length, d_k)


def check_long_cache(p, x, keep, n_heads, cache, batch, past, length, d_k):
    out, new = minattn.self_attention(p, x, keep, n_heads=n_heads, cache=cache)
    out, new_k, new_v = np.asarray(out), np.asarray(new["k"]), np.asarray(new["v"])
    assert new_k.shape == batch + (n_heads, past + length, d_k), (
        f"the new cache['k'] has shape {new_k.shape}, expected {batch + (n_heads, past + length, d_k)}")
    one = (0,) if batch else ()
    x1, old_k, old_v = x[one], cache["k"][one], cache["v"][one]
    q, k, v = (x1 @ p[f"w_{c}"] + p[f"b_{c}"] for c in "qkv")
    heads = []
    for h in range(n_heads):
        part = slice(h * d_k, (h + 1) * d_k)
        keys = np.concatenate([old_k[h], k[:, part]])
        values = np.concatenate([old_v[h], v[:, part]])
        heads.append(ref_attention(q[:, part], keys, values, keep)[0])
        close(new_k[one][h], keys, 1e-12, f"the new cache['k'] of head {h}")
        close(new_v[one][h], values, 1e-12, f"the new cache['v'] of head {h}")
    close(out[one], np.concatenate(heads, axis=-1) @ p["w_o"] + p["b_o"], 1e-8,
          f"the output of {length} tokens after {past} cached ones, "
          + ("mask=None (no mask)" if keep is None else "under the bottom-right causal mask"))


@prop("self_attention_keeps_float32", "self_attention", "self-attention on float32 inputs and "
      "params returns a float32 output and cache, with RoPE or without", SELF_ATTENTION,
      "cast RoPE's cos and sin to x.dtype; a float64 scalar or array created inside upcasts",
      part=2)
def _(data):
    n_heads, n_kv_heads, d_model, p, rope, base = draw_self_attention(data)
    x = data.draw(floats((1, data.draw(sizes, "L"), d_model), dtype=np.float32), "x")
    out, cache = minattn.self_attention(as_dtype(p, np.float32), x, n_heads=n_heads,
                                        n_kv_heads=given_kv_heads(n_heads, n_kv_heads),
                                        **rope_keywords(np.arange(x.shape[1]) if rope else None,
                                                        base))
    dtypes = {np.asarray(out).dtype, np.asarray(cache["k"]).dtype, np.asarray(cache["v"]).dtype}
    assert dtypes == {np.dtype(np.float32)}, f"float32 in, {dtypes} out"


@prop("rope_attention_depends_on_offsets_only", "self_attention", "self_attention with RoPE "
      "positions p and with p + c (the same tokens, numbered from c) gives the same output",
      {"self_attention", "apply_rope"},
      "apply RoPE to q and k only: rotating the values stamps absolute positions on the output",
      part=2)
def _(data):
    n_heads, shift = data.draw(st.integers(1, 2), "n_heads"), data.draw(st.integers(1, 500), "shift")
    d_model, length = 4 * n_heads, data.draw(sizes, "L")
    p = random_params(data.draw(seeds, "params seed"), d_model)["self_attention"]
    x = data.draw(floats((1, length, d_model)), "x")
    positions = np.arange(length)
    a = minattn.self_attention(p, x, n_heads=n_heads, positions=positions)[0]
    b = minattn.self_attention(p, x, n_heads=n_heads, positions=positions + shift)[0]
    close(np.asarray(b), np.asarray(a), 1e-8, f"the output with positions shifted by {shift}")


@prop("causal_lm_cache_matches_the_full_pass", "causal_lm", "feeding tokens one at a time "
      "through the KV cache gives the logits of one full causal_lm pass", {"causal_lm"},
      "a token fed after a cache of L_past tokens sits at position L_past, not 0; its mask is "
      "bottom-right aligned", part=2)
def _(data):
    length, seed = data.draw(st.integers(2, 5), "L"), data.draw(seeds, "seed")
    lm, _ = minattn.init_causal_lm(np.random.default_rng(seed), 7, 1, 4, 2, 8, n_positions=8)
    tokens = np.random.default_rng(seed).integers(0, 7, size=(1, length))
    data.show("tokens", tokens)
    full = np.asarray(minattn.causal_lm(lm, tokens, n_heads=2))
    cache, steps = None, []
    for t in range(length):
        logits, cache = minattn.causal_lm(lm, tokens[:, t:t + 1], n_heads=2, cache=cache,
                                          return_cache=True)
        steps.append(np.asarray(logits))
    close(np.concatenate(steps, axis=1), full, 1e-9, "the step-by-step logits")
