"""What exercise 10, RoPE (section 7), is held to: the properties its command grades it by, each
against a slow float64 reference:
    python -m minattn check my_attention/10_rope.py --part 2
"""
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minattn

from ._machinery import close, floats, prop, sizes
from ._references import ref_rope


def draw_positions(data, lead, length, name="positions"):
    # int positions for x [*lead, L, ...]: [L] (the same for every sequence), or one row per
    # sequence, [B, L] with lead (B,), [B, 1, L] with lead (B, H)
    form = data.draw(st.sampled_from(["[L]", "one row per sequence"] if lead else ["[L]"]),
                     f"{name} form")
    shape = (length,) if form == "[L]" else (lead[0],) + (1,) * (len(lead) - 1) + (length,)
    return data.draw(hnp.arrays(int, shape, elements=st.integers(0, 1000)), name)


@prop("apply_rope_rotates_feature_pairs", "apply_rope", "apply_rope(x, positions, base=b) "
      "rotates each feature pair (x[i], x[i + d/2]) of the token at position m by the angle m · "
      "b^(-2i/d) (the rotate-half convention of Llama and Hugging Face; b defaults to 10000), for "
      "x [L, d], [B, L, d] or [B, H, L, d] (L = 0 included) and positions that broadcast to x's "
      "[..., L]: [L] or one row per sequence ([B, L], [B, 1, L])", {"apply_rope"},
      "pair feature i with i + d/2 (not 2i with 2i + 1); the angle of pair i is m / base^(2i/d), "
      "with the base given; positions may have leading axes of their own, so keep them", part=2)
def _(data):
    d, length = 2 * data.draw(st.integers(1, 3), "d / 2"), data.draw(st.integers(0, 5), "L")
    lead = data.draw(st.sampled_from([(2,), (2, 3)]), "leading axes of x")
    x = data.draw(floats(lead + (length, d)), "x")
    positions = draw_positions(data, lead, length)
    drawn = data.draw(st.sampled_from([None, 10000.0, 500000.0]), "base")
    # the first sequence alone too, x [L, d] with its positions [L], in every example
    first = (0,) * len(lead)
    alone = x[first], np.broadcast_to(positions, lead + (length,))[first]
    for (x, positions), base in [((x, positions), drawn), ((x, positions), 100.0), (alone, drawn)]:
        got = minattn.apply_rope(x, positions) if base is None else \
            minattn.apply_rope(x, positions, base=base)
        close(got, ref_rope(x, positions, base or 10000.0), 1e-9,
              f"apply_rope(x, positions{'' if base is None else f', base={base}'}) with x "
              f"{list(x.shape)} and positions {list(np.shape(positions))}")


@prop("apply_rope_is_exact_far_into_the_sequence", "apply_rope", "apply_rope of float32 or float16 "
      "x at positions up to 100000 (far past 1024) is the rotation by the exact angles, rounded "
      "once to x's dtype: within 2e-5 (float32) or 0.02 (float16) of the float64 rotation",
      {"apply_rope"}, "form the angles positions * base ** (-2i/d) in float64 (position 3001 is "
      "3000 in float16, and float32 keeps 3 digits of an angle near 100000), take cos and sin, "
      "THEN cast them to x.dtype; a table of angles for the first 1024 (or any fixed number of) "
      "positions does not reach them all", part=2)
def _(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float16]), "dtype")
    d, length = 2 * data.draw(st.integers(2, 4), "d / 2"), data.draw(sizes, "L")
    x = data.draw(floats((length, d), dtype=dtype), "x")
    positions = data.draw(hnp.arrays(int, (length,), elements=st.integers(1000, 100000)),
                          "positions")
    got = np.asarray(minattn.apply_rope(x, positions))
    assert got.dtype == dtype, f"{np.dtype(dtype)} in, {got.dtype} out"
    close(got.astype(np.float64), ref_rope(x.astype(np.float64), positions),
          2e-5 if dtype == np.float32 else 0.02, f"apply_rope(x, positions) in {np.dtype(dtype)}")


@prop("apply_rope_keeps_float32", "apply_rope", "apply_rope of float32 x is float32",
      {"apply_rope"}, "the angles are float64 (positions times a float64 power): cast cos and sin "
      "to x.dtype before multiplying", part=2)
def _(data):
    x = data.draw(floats((1, data.draw(sizes, "L"), 4), dtype=np.float32), "x")
    got = np.asarray(minattn.apply_rope(x, np.arange(x.shape[1])))
    assert got.dtype == np.float32, f"float32 in, {got.dtype} out"
