"""Exercise 10: rotary position embedding (walkthrough.md, section 7, Part II).
Grade it: python -m minattn check my_attention/10_rope.py --part 2"""
import numpy as np


def apply_rope(x, positions, *, base=10000.0):
    """Rotate each feature pair of x by an angle proportional to the token's position.

    x [..., L, d] (d even), positions: int array broadcasting to [..., L]. Returns x's shape and
    dtype (float32 stays float32). base: the b of the angles below (Llama 3 uses 500000). Feature i pairs with feature i + d/2 (the "rotate half" convention of Llama and
    Hugging Face); the pair of a token at position m turns by the angle m * base**(-2i/d):
        out[i]       = x[i] cos(angle) - x[i + d/2] sin(angle)
        out[i + d/2] = x[i] sin(angle) + x[i + d/2] cos(angle)

    The grader checks the rotation against a slow loop, for positions [L] and for one row of
    positions per sequence ([B, L] with x [B, L, d]; [B, 1, L] with x [B, H, L, d]), and that
    attention with RoPE on q and k depends only on the offset between positions.

    Hint: angles = positions[..., None] * base ** (-np.arange(0, d, 2) / d), shape [..., L, d/2].
    """
    raise NotImplementedError
