"""What exercise 4, splitting into heads and merging back (section 5), is held to: the properties
its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/04_heads.py
"""
import numpy as np
from hypothesis import strategies as st

import minattn

from ._machinery import close, floats, prop, sizes


@prop("split_heads_takes_feature_slices", "split_heads", "split_heads(x, H)[..., h, i, :] is "
      "token i's features h*d_k .. (h+1)*d_k - 1, in x's dtype, for x [L, D], [B, L, D] or "
      "[B, B', L, D], L = 0 (no token yet) included in every example", {"split_heads"},
      "reshape to [..., L, H, d_k] THEN swap the L and H axes: a bare reshape mixes tokens; give "
      "reshape every length (x.shape[:-1] + (H, d_k)), not -1, which cannot be solved when L = 0")
def _(data):
    n_heads, d_k = data.draw(st.integers(1, 3), "n_heads"), data.draw(st.integers(1, 3), "d_k")
    dtype = data.draw(st.sampled_from([np.float64, np.float32]), "dtype")
    lead = data.draw(st.sampled_from([(2,), (), (2, 3)]), "leading axes of x")
    x = data.draw(floats(lead + (data.draw(sizes, "L"), n_heads * d_k), dtype=dtype), "x")
    for x in (x, x[..., :0, :]):  # the drawn length, and L = 0, in every example
        got = np.asarray(minattn.split_heads(x, n_heads))
        expected = lead + (n_heads, x.shape[-2], d_k)
        assert got.shape == expected, (f"split_heads of x {x.shape} has shape {got.shape}, "
                                       f"expected {expected}")
        assert got.dtype == x.dtype, f"{x.dtype} in, {got.dtype} out"
        for h in range(n_heads):
            close(got[..., h, :, :], x[..., h * d_k:(h + 1) * d_k], 0, f"head {h}")


@prop("merge_heads_inverts_split_heads", "merge_heads", "merge_heads(split_heads(x, H)) == x, in "
      "x's dtype, for heads [H, L, d_k], [B, H, L, d_k] or [B, B', H, L, d_k], L = 0 included "
      "in every example", {"merge_heads"},
      "swap the H and L axes back, then reshape to [..., L, H * d_k] (every length given, not "
      "-1, which cannot be solved when L = 0)")
def _(data):
    n_heads, d_k = data.draw(st.integers(1, 3), "n_heads"), data.draw(st.integers(1, 3), "d_k")
    dtype = data.draw(st.sampled_from([np.float64, np.float32]), "dtype")
    lead = data.draw(st.sampled_from([(2,), (), (2, 3)]), "leading axes of x")
    x = data.draw(floats(lead + (data.draw(sizes, "L"), n_heads * d_k), dtype=dtype), "x")
    for x in (x, x[..., :0, :]):  # the drawn length, and L = 0, in every example
        heads = np.stack([x[..., h * d_k:(h + 1) * d_k] for h in range(n_heads)], axis=-3)
        got = np.asarray(minattn.merge_heads(heads))
        assert got.dtype == x.dtype, f"{x.dtype} in, {got.dtype} out"
        close(got, x, 0, f"merge_heads(heads) of heads {list(heads.shape)}")
