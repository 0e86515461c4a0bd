"""Exercise 14: attention sinks (walkthrough.md, section 24, the second reading).
Grade it: python -m minattn check my_attention/14_attention_sinks.py --part 4"""
import numpy as np

import minattn


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    """Exercise 2's attention, extended with sinks (copy your answer to 2 here): q, k, v, mask,
    scale, dropout and rng as there. Returns (output [..., L_q, d_v], weights [..., L_q, L_k]).

    sinks: None (plain attention), or one logit per query row, broadcasting to [..., L_q] (one
    per head: [H, 1] with q [..., H, L_q, d_k]). The sink s_i joins the softmax's denominator
    and holds no value: p_ij = exp(S_ij) / (exp(s_i) + Σ_j' exp(S_ij')) over the keys the mask
    keeps, so a row's weights sum to 1 − exp(s_i) / (exp(s_i) + Σ_j' exp(S_ij')), the sink's
    share, and the output is Σ_j p_ij v_j. The sink is never masked: a query whose keys are all
    masked gives everything to the sink (zero weights, a zero output). A sink of -inf is plain
    attention. float32 q, k, v stay float32, whatever the sinks' dtype.

    The grader checks the weights and the output against a slow loop over the rows, with and
    without a mask.

    Hints: the sink is one more column of scores, never masked, dropped after the softmax:
    sink = np.broadcast_to(np.asarray(sinks, scores.dtype)[..., None], scores.shape[:-1] + (1,));
    np.concatenate([scores, sink], axis=-1), and the same for the mask with a column of True;
    minattn.softmax(..., mask=...)[..., :-1]. Do not renormalise what is left.
    """
    raise NotImplementedError
