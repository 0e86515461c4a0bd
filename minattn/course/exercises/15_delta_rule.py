"""Exercise 15: the recurrent delta rule (walkthrough.md, "Attention and recurrence", the second
reading). Grade it: python -m minattn check my_attention/15_delta_rule.py --part 4"""
import numpy as np


def delta_rule(q, k, v, beta, g=None, *, scale=None, initial_state=None, return_state=False):
    """The gated delta rule as a loop over time: a state S [..., d_k, d_v] that, at each token,
    first forgets (S ← e^{g_t} S), then writes what it failed to predict for the token's key,
    then is read by the token's query:

        error_t = v_t − k_t S            (k_t a row [1, d_k]: k_t S is the state's prediction)
        S ← S + β_t k_tᵀ error_t         (one step of online regression of v on k)
        o_t = (scale · q_t) S

    q, k [..., L, d_k], v [..., L, d_v], beta [..., L] (the write strength β_t), g [..., L] the
    log decay (<= 0; None: no decay). scale: None means 1 / sqrt(d_k). initial_state: None (a
    state of zeros) or [..., d_k, d_v], the state a previous call returned, to continue that
    sequence. Returns out [..., L, d_v], or (out, the final state) when return_state is True.
    float32 inputs give float32 results.

    The grader checks it against a slow loop of the papers' update, that with β = 1, no decay
    and orthonormal keys it is linear attention (scale · (q kᵀ masked causally) v), that two
    calls joined by the state equal one call, and that a decay of zero (g = -inf) forgets
    everything before the token itself.

    Hints: start from np.zeros(q.shape[:-2] + (d_k, d_v), q.dtype); k[..., t, :, None] *
    error[..., None, :] is the outer product k_tᵀ error_t; build the outputs in a list and
    np.stack(outputs, axis=-2).
    """
    raise NotImplementedError
