"""Exercise 13: blockwise attention with an online softmax (walkthrough.md, section 22, Part V, the
second reading).
Grade it: python -m minattn check my_attention/13_blockwise_attention.py --part 4"""
import numpy as np


def blockwise_attention(q, k, v, *, causal=False, key_mask=None, scale=None, block_size=128):
    """Attention's output, computed over blocks of block_size keys at a time, never holding all
    the [L_q, L_k] scores at once.

    q [..., L_q, d_k], k [..., L_k, d_k], v [..., L_k, d_v] -> [..., L_q, d_v], q's dtype.
    causal: query i sees keys j <= i (top-left aligned). key_mask: None, or bool [..., L_k],
    True = a key that may be attended. scale: None means 1 / sqrt(d_k). A query with no key
    left gets a zero output. The result must equal scaled_dot_product_attention's output for
    every block_size.

    Hint (the online softmax): per query keep a running max m (start -inf), a running sum l
    (start 0) and an output acc (start 0). For each block: s = scores of the block (masked to
    -inf), m_new = max(m, max(s)), c = exp(m - m_new), p = exp(s - m_new), l = c l + Σ p,
    acc = c acc + p @ v_block, m = m_new. At the end acc / l (where l == 0, zeros). Where m_new is
    -inf (nothing kept yet) shift by 0 instead, so no -inf - (-inf) appears.
    """
    raise NotImplementedError
