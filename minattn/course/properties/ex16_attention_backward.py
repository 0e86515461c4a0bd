"""What exercise 16, attention's backward pass (section 11), is held to: the properties its
command grades it by, each against a float64 reference of its own:
    python -m minattn check my_attention/16_attention_backward.py --part 3
"""
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ._machinery import _CURRENT, close, floats, prop, sizes

GRADIENTS = ("dq", "dk", "dv")


def attend(q, k, v, keep):
    # attention's output in plain float64 NumPy (no minattn): keep bool [L_q, L_k], a row with
    # nothing kept gives zeros
    scores = np.where(keep, q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]), -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = np.sum(e, axis=-1, keepdims=True)
    return (e / np.where(total == 0, 1.0, total)) @ v


def ref_attention_vjp(q, k, v, g, keep):
    # one query row at a time, in float64 with exactly rounded sums: the chain rule written out
    # dv_j = Σ_i p_ij g_i; ds_ij = p_ij (g_i·v_j - Σ_l p_il g_i·v_l); dq_i = Σ_j ds_ij k_j / √d;
    # dk_j = Σ_i ds_ij q_i / √d
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    scale = 1 / math.sqrt(q.shape[-1])
    for lead in np.ndindex(q.shape[:-2]):
        for i in range(q.shape[-2]):
            kept = [j for j in range(k.shape[-2]) if keep[i, j]]
            if not kept:
                continue
            s = {j: math.fsum(float(a) * float(b) for a, b in zip(q[lead][i], k[lead][j])) * scale
                 for j in kept}
            top = max(s.values())
            e = {j: math.exp(s[j] - top) for j in kept}
            total = math.fsum(e.values())
            p = {j: e[j] / total for j in kept}
            dp = {j: math.fsum(float(a) * float(b) for a, b in zip(g[lead][i], v[lead][j]))
                  for j in kept}
            mean = math.fsum(p[j] * dp[j] for j in kept)
            for j in kept:
                ds = p[j] * (dp[j] - mean)
                dv[lead][j] += p[j] * g[lead][i]
                dq[lead][i] += ds * scale * k[lead][j]
                dk[lead][j] += ds * scale * q[lead][i]
    return dq, dk, dv


def finite_differences(q, k, v, g, keep):
    # the gradient of sum(g · O) with respect to each of q, k, v, by central differences
    found, h = [], 1e-6
    arrays = [q, k, v]
    for which, x in enumerate(arrays):
        grad = np.zeros(x.shape)
        for index in np.ndindex(x.shape):
            step = np.zeros(x.shape)
            step[index] = h
            up, down = list(arrays), list(arrays)
            up[which], down[which] = x + step, x - step
            grad[index] = np.sum(g * (attend(*up, keep) - attend(*down, keep))) / (2 * h)
        found.append(grad)
    return found


def draw_inputs(data):
    lead = data.draw(st.sampled_from([(), (2,)]), "leading dimensions")
    l_q, l_k, d_k, d_v = (data.draw(sizes, name) for name in ("L_q", "L_k", "d_k", "d_v"))
    q = data.draw(floats(lead + (l_q, d_k)), "q")
    k = data.draw(floats(lead + (l_k, d_k)), "k")
    v = data.draw(floats(lead + (l_k, d_v)), "v")
    g = data.draw(floats(lead + (l_q, d_v)), "g")
    keep = data.draw(hnp.arrays(bool, (l_q, l_k)), "mask")
    keep[0] = False  # in every example, a row that may see nothing, and a key no row may see
    keep[:, -1] = False
    return q, k, v, g, keep


def got_gradients(q, k, v, g, mask, what):
    got = _CURRENT["attention_vjp"](q, k, v, g, **({} if mask is None else {"mask": mask}))
    assert isinstance(got, tuple) and len(got) == 3, (
        f"{what} returned {type(got).__name__}, expected the tuple (dq, dk, dv)")
    return got


@prop("attention_vjp_matches_finite_differences", "attention_vjp", "attention_vjp(q, k, v, g, "
      "mask) is (dq, dk, dv), the gradients of sum(g · O) with O the output of "
      "scaled_dot_product_attention(q, k, v, mask), as central finite differences give them, "
      "with no mask and with a drawn mask (a row that may see nothing, a key no row may see: "
      "their gradients 0); and, in float64, it equals the chain rule computed exactly in "
      "float64 (to 1e-10: no float32 inside)", set(),
      "dv = Pᵀ g; ds = softmax_vjp(P, g Vᵀ); dq = ds K / √d_k; dk = dsᵀ Q / √d_k, with P the "
      "forward pass's weights (the mask applied there): every product in the order of the "
      "forward pass's shapes, and dk from the transpose of ds", part=3)
def _(data):
    q, k, v, g, keep = draw_inputs(data)
    for mask in (None, keep):
        kept = np.ones(keep.shape, bool) if mask is None else keep
        what = (f"attention_vjp(q, k, v, g{'' if mask is None else ', mask'}) with q of shape "
                f"{list(q.shape)} and k of shape {list(k.shape)}")
        got = got_gradients(q, k, v, g, mask, what)
        for name, mine, expected in zip(GRADIENTS, got, finite_differences(q, k, v, g, kept)):
            close(mine, expected, 1e-6, f"{name} of {what}")
        for name, mine, expected in zip(GRADIENTS, got, ref_attention_vjp(q, k, v, g, kept)):
            close(mine, expected, 1e-10, f"{name} of {what}, in float64")


@prop("attention_vjp_keeps_float32", "attention_vjp", "attention_vjp of float32 q, k, v and g "
      "gives float32 dq, dk and dv", set(),
      "a float64 scalar or array created inside (np.sqrt of an int is float64) upcasts float32; "
      "math.sqrt gives a Python float, which does not", part=3)
def _(data):
    q, k, v, g, keep = (a.astype(np.float32) if a.dtype.kind == "f" else a
                        for a in draw_inputs(data))
    for mask in (None, keep):
        got = got_gradients(q, k, v, g, mask, "attention_vjp of float32 arrays")
        for name, mine in zip(GRADIENTS, got):
            assert np.asarray(mine).dtype == np.float32, f"{name}: float32 in, " \
                                                         f"{np.asarray(mine).dtype} out"
