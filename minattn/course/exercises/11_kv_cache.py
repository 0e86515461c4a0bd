"""Exercise 11: self-attention with a KV cache and RoPE (walkthrough.md, section 9, Part II).
Grade it: python -m minattn check my_attention/11_kv_cache.py --part 2"""
import numpy as np

import minattn
# What the walkthrough's solution uses; or use your own from exercises 2, 4 and 10.
from minattn import apply_rope  # float32 stays float32
from minattn.course.teaching import merge_heads, project, scaled_dot_product_attention, split_heads


def self_attention(params, x, mask=None, *, n_heads, n_kv_heads=None, positions=None,
                   rope_base=10000.0, cache=None):
    """Self-attention of x [..., L, D] over the cached keys and values and its own.

    params: as multi_head_attention's (exercise 5); n_heads heads. float32 stays float32.
    Returns (output [..., L, D], new cache {"k": [..., H, L_past + L, d_k], "v": same}).
    n_kv_heads: a later exercise's parameter (exercise 9); leave it out (or ignore it): the
    grader asks for it only with --part 4. (There: n_kv_heads
    key/value heads, w_k, w_v [D, n_kv_heads * d_k], each shared by n_heads // n_kv_heads
    consecutive query heads, and the cache holds the n_kv_heads heads.)
    positions: None, or int positions broadcasting to [..., L] ([L], or [B, L]: one row per
    sequence): rotate q and k (never v) with RoPE, apply_rope(..., base=rope_base), before the
    keys go into the cache; q and k [..., H, L, d_k] have a head axis that positions lack
    (positions[..., None, :] gives it them).
    cache: None, or the cache a previous call returned: its keys and values come first, the
    new ones are appended along the key axis (-2). mask: None (no mask: every query sees every
    key, a cache or not), or bool covering all L_past + L keys (for a causal model
    causal_mask(L, L_past + L, align="bottom_right")).

    The grader checks the output and the cache against a slow loop, and that a sequence fed in
    chunks (one token or several at a time, each with its bottom-right causal mask) through the
    cache gives the outputs and the cache of one full causal pass.

    Hints: minattn.split_heads, minattn.apply_rope, minattn.scaled_dot_product_attention,
    minattn.merge_heads; np.concatenate([cache["k"], k], axis=-2).
    """
    raise NotImplementedError
