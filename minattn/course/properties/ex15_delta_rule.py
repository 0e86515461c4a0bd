"""What exercise 15, the delta rule (Attention and recurrence, the second reading), is held to: the
properties its command grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/15_delta_rule.py --part 4
"""
import math

import numpy as np
from hypothesis import strategies as st

import minattn

from ._machinery import close, floats, prop, sizes


def ref_delta_rule(q, k, v, beta, g, scale, state):
    # one sequence, the papers' column form: q, k [L, d_k], v [L, d_v], beta, g [L], state
    # [d_k, d_v] -> out [L, d_v], final state. M = stateᵀ [d_v, d_k]:
    # M ← e^{g_t} M (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,  o_t = M (scale q_t)
    m, out = np.array(state, np.float64).T, np.zeros((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        kt, vt = k[t][:, None], v[t][:, None]
        m = math.exp(g[t]) * m @ (np.eye(k.shape[1]) - beta[t] * kt @ kt.T) + beta[t] * vt @ kt.T
        out[t] = m @ (scale * q[t])
    return out, m.T


def draw_delta_rule(data, dtype=np.float64, heads=False):
    # q [B, L, d_k], keys k [B, L, d_k] of any length (the formula holds for every key: unit
    # keys alone would hide keys normalised again), v [B, L, d_v], beta in [0, 1] and g in
    # [-2, 0] [B, L], a state [B, d_k, d_v]; heads=True: [B, H, ...] instead of [B, ...] too
    lead = (data.draw(st.integers(1, 2), "B"),)
    if heads and data.draw(st.booleans(), "with a head axis"):
        lead += (data.draw(st.integers(1, 3), "H"),)
    length = data.draw(sizes, "L")
    d_k, d_v = data.draw(sizes, "d_k"), data.draw(sizes, "d_v")
    q = data.draw(floats(lead + (length, d_k), dtype=dtype), "q")
    k = data.draw(floats(lead + (length, d_k), dtype=dtype), "k")
    k = k / dtype(3)  # norms up to sqrt(5): a few steps of (I - beta k k^T) stay small
    data.show("k", k)
    v = data.draw(floats(lead + (length, d_v), dtype=dtype), "v")
    beta = data.draw(floats(lead + (length,), 1.0, dtype).map(np.abs), "beta")
    g = data.draw(floats(lead + (length,), 2.0, dtype).map(lambda a: -np.abs(a)), "g")
    state = data.draw(floats(lead + (d_k, d_v), dtype=dtype), "initial_state")
    return q, k, v, beta, g, state


@prop("delta_rule_matches_a_loop", "delta_rule", "delta_rule(q, k, v, beta, g, scale=s, "
      "initial_state=S_0, return_state=True) equals a slow loop of the papers' update, S_t = "
      "e^{g_t} (I − β_t k_tᵀ k_t) S_{t−1} + β_t k_tᵀ v_t and o_t = (s q_t) S_t, in its output "
      "and its final state, for q [B, L, d_k] or with heads [B, H, L, d_k], keys of any length, "
      "with a decay g and without one (g=None)", {"delta_rule"},
      "forget first (S ← e^{g_t} S), then predict with the forgotten state (k_t S), write "
      "β_t k_tᵀ (v_t − k_t S), and read with the new state; scale multiplies the query; start "
      "from initial_state; scale=0 is a valid scale (zeros), not 'not given'; use the keys as "
      "given (never normalise them)", part=4)
def _(data):
    q, k, v, beta, drawn, state = draw_delta_rule(data, heads=True)
    scale = data.draw(st.sampled_from([None, 0.0, 0.5, 2.0]), "scale")
    s = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    for g in (drawn, None):  # and no decay, g=None, in every example
        out, final = minattn.delta_rule(q, k, v, beta, g, scale=scale, initial_state=state,
                                        return_state=True)
        decay = np.zeros(beta.shape) if g is None else g  # g=None: no decay, e^0 = 1
        for b in np.ndindex(q.shape[:-2]):
            ref_out, ref_state = ref_delta_rule(q[b], k[b], v[b], beta[b], decay[b], s, state[b])
            close(np.asarray(out)[b], ref_out, 1e-8, f"the output of entry {b}"
                  + (" with g=None" if g is None else ""))
            close(np.asarray(final)[b], ref_state, 1e-8, f"the final state of entry {b}"
                  + (" with g=None" if g is None else ""))


@prop("delta_rule_is_linear_attention_for_orthonormal_keys", "delta_rule", "with β = 1, no "
      "decay (g=None), no initial state and orthonormal keys, nothing the state holds is "
      "predicted by a new key, so every value is written whole: the output is linear attention, "
      "scale · (q kᵀ masked causally) v", {"delta_rule"},
      "the prediction k_t S uses the state before this token's write; with g=None leave the "
      "state as it is (e^0 = 1), and start from zeros", part=4)
def _(data):
    d_k = data.draw(st.integers(1, 5), "d_k")
    length = data.draw(st.integers(1, d_k), "L")
    basis = np.linalg.qr(data.draw(floats((d_k, d_k)), "a matrix whose Q factor gives the keys")
                         + 4 * np.eye(d_k))[0]
    k = basis.T[:length]  # orthonormal rows
    q = data.draw(floats((length, d_k)), "q")
    v = data.draw(floats((length, data.draw(sizes, "d_v"))), "v")
    out = minattn.delta_rule(q, k, v, np.ones(length))
    close(out, np.tril(q @ k.T) @ v / math.sqrt(d_k), 1e-8, "the output")


@prop("delta_rule_continues_from_its_state", "delta_rule", "a sequence cut in two: the first "
      "part's final state (return_state=True), given as initial_state to the second part, gives "
      "the outputs and the final state of the whole sequence", {"delta_rule"},
      "return the state after the last token, and start the loop from initial_state when one is "
      "given", part=4)
def _(data):
    q, k, v, beta, g, state = draw_delta_rule(data)
    cut = data.draw(st.integers(0, q.shape[1]), "cut")
    part = lambda a, s: a[:, s] if a.ndim == 2 else a[:, s, :]  # noqa: E731
    first, second = slice(0, cut), slice(cut, None)
    whole, end = minattn.delta_rule(q, k, v, beta, g, return_state=True)
    if cut:
        out1, middle = minattn.delta_rule(*(part(a, first) for a in (q, k, v, beta, g)),
                                          return_state=True)
    else:
        out1, middle = whole[:, :0], np.zeros_like(state)
    if cut < q.shape[1]:
        out2, end2 = minattn.delta_rule(*(part(a, second) for a in (q, k, v, beta, g)),
                                        initial_state=middle, return_state=True)
    else:
        out2, end2 = whole[:, :0], middle
    close(np.concatenate([np.asarray(out1), np.asarray(out2)], axis=1), whole, 1e-8,
          "the two parts' outputs, joined")
    close(end2, end, 1e-8, "the second part's final state")


@prop("delta_rule_with_decay_zero_forgets", "delta_rule", "a decay of zero (g = -inf, e^g = 0) "
      "forgets the initial state and every earlier token: o_t = scale · (q_t · k_t) β_t v_t",
      {"delta_rule"},
      "multiply the state by e^{g_t} before the token's prediction and write", part=4)
def _(data):
    q, k, v, beta, _, state = draw_delta_rule(data)
    g = np.full(beta.shape, data.draw(st.sampled_from([-np.inf, -1e4]), "every g"))
    out = minattn.delta_rule(q, k, v, beta, g, initial_state=state)
    own = np.sum(q * k, axis=-1, keepdims=True) * beta[..., None] * v / math.sqrt(q.shape[-1])
    close(out, own, 1e-8, "the output")


@prop("delta_rule_keeps_float32", "delta_rule", "delta_rule of float32 q, k, v, beta and g is "
      "float32, and so is its final state", {"delta_rule"},
      "make the zero state in q's dtype; a float64 scalar array (np.float64(...)) or a state made "
      "with np.zeros(shape) upcasts float32", part=4)
def _(data):
    q, k, v, beta, g, _ = draw_delta_rule(data, np.float32)
    out, final = minattn.delta_rule(q, k, v, beta, g, return_state=True)
    out, final = np.asarray(out), np.asarray(final)
    assert out.dtype == final.dtype == np.float32, f"got {out.dtype}, {final.dtype}"
