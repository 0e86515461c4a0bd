"""What exercise 6, layer normalization (section 6), is held to: the properties its command grades
it by, each against a slow float64 reference:
    python -m minattn check my_attention/06_layer_norm.py
"""
import numpy as np
from hypothesis import strategies as st

import minattn

from ._machinery import close, floats, prop, sizes
from ._references import ref_layer_norm


@prop("layer_norm_matches_the_formula", "layer_norm", "layer_norm(x, gamma, beta, eps) = (x - mean)"
      " / sqrt(var + eps) * gamma + beta over the last axis of x [..., D] (any leading axes, none "
      "included), with the biased variance (divide by D), as torch.nn.LayerNorm — also for rows "
      "of tiny variance, rows of mean 1e6 (in every example) and any eps", {"layer_norm"},
      "mean and variance over axis=-1 with keepdims; variance divides by D, as the mean of "
      "(x - mean)² (E[x²] - E[x]² cancels to nothing, even below 0, when the mean is large); eps "
      "(the argument, even 0: `eps or 1e-5` ignores it) inside the sqrt")
def _(data):
    d = data.draw(st.integers(2, 6), "D")
    lead = data.draw(st.sampled_from([(data.draw(sizes, "rows"),), (2, 3), (), (0,)]),
                     "leading axes")
    x = data.draw(floats(lead + (d,)), "x")
    scale = data.draw(st.sampled_from([1.0, 1e-3]), "x scaled by")
    unscaled, x = x, x * scale  # tiny variances show eps
    gamma, beta = data.draw(floats((d,)), "gamma"), data.draw(floats((d,)), "beta")
    drawn = data.draw(st.sampled_from([0.1, None, 1e-5]), "eps")
    # eps=0 too, in every example whose rows all vary (eps=0 is refused on a constant row)
    for eps in (drawn, 0.0) if (np.ptp(x, axis=-1) > 0).all() else (drawn,):
        got = minattn.layer_norm(x, gamma, beta) if eps is None else minattn.layer_norm(x, gamma, beta, eps)
        close(got, ref_layer_norm(x, gamma, beta, 1e-5 if eps is None else eps), 1e-7,
              f"layer_norm(x, gamma, beta{'' if eps is None else f', eps={eps}'})")
    # and in every example, rows with a large common offset (mean 1e6, exact in float64): the
    # variance as E[x²] - E[x]² loses every digit to cancellation there
    offset = unscaled + 1e6
    data.show("x + 1e6 (x unscaled)", offset)
    close(minattn.layer_norm(offset, gamma, beta, 1e-5), ref_layer_norm(offset, gamma, beta, 1e-5),
          1e-7, "layer_norm(x + 1e6, gamma, beta, eps=1e-5), rows of mean near 1e6")


@prop("layer_norm_keeps_float32", "layer_norm", "layer_norm of float32 inputs is float32",
      {"layer_norm"}, "a NumPy float64 scalar (np.float64(eps), np.mean's dtype) upcasts float32")
def _(data):
    x = data.draw(floats((2, 4), dtype=np.float32), "x")
    out = minattn.layer_norm(x, np.ones(4, np.float32), np.zeros(4, np.float32))
    assert np.asarray(out).dtype == np.float32, f"got {np.asarray(out).dtype}"
