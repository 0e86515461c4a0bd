"""The optimizer of a fine-tuning run, each step as the library people train with computes it:
AdamW as torch.optim.AdamW (Loshchilov & Hutter 2019: the weight decay taken from the weights,
not added to the gradient), the gradients clipped by their global norm as
torch.nn.utils.clip_grad_norm_, and the learning rate warmed up then decayed along a cosine as
transformers' get_cosine_schedule_with_warmup. Trees are nested dicts and lists of arrays (the
LoRA matrices); nothing is changed in place. tests/test_finetune_optimizer.py runs torch beside
each, step by step, in float64.
"""
import math

import numpy as np

from ..engine.trees import leaves, tree_map


def adamw_init(params):
    """AdamW's state for params: step 0, first and second moments at zero, params' structure."""
    return {"step": 0, "m": tree_map(np.zeros_like, params), "v": tree_map(np.zeros_like, params)}


def adamw_update(params, grads, state, *, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, decays=None):
    """One AdamW step -> (new params, new state), torch.optim.AdamW's arithmetic and defaults:
    decay the weight, update the moments, correct their bias, step (eps outside the square
    root, after the second moment's correction). decays(array) -> whether that array's weight
    decays (None: every array's), as torch's two parameter groups (nanoGPT decays the matrices
    and embeddings, not the biases and norms)."""
    b1, b2 = betas
    t = state["step"] + 1
    m = tree_map(lambda m, g: m + (1 - b1) * (g - m), state["m"], grads)  # torch's lerp_
    v = tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    step_size = lr / (1 - b1 ** t)
    root = math.sqrt(1 - b2 ** t)  # the second moment's bias correction, under the root

    def step(p, m, v):
        decay = weight_decay if decays is None or decays(p) else 0.0
        return p * (1 - lr * decay) - step_size * (m / (np.sqrt(v) / root + eps))

    return tree_map(step, params, m, v), {"step": t, "m": m, "v": v}


def clip_by_global_norm(grads, max_norm):
    """-> (grads scaled by min(1, max_norm / (norm + 1e-6)), their global norm before): the
    2-norm of every entry of every array together, as torch.nn.utils.clip_grad_norm_ (which
    multiplies by the clamped factor always, 1 included)."""
    norm = global_norm(grads)
    scale = min(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * np.asarray(scale, dtype=g.dtype), grads), norm


def global_norm(grads):
    """The 2-norm of every entry of every array of the tree together (clip_by_global_norm's)."""
    return math.sqrt(sum(squared_norm(g) for g in leaves(grads)))


def squared_norm(g):
    """One array's share of the global norm: the sum of its entries' squares, a Python float."""
    return float(np.sum(np.square(g)))


def cosine_lr(step, *, lr, warmup, total, min_lr=0.0):
    """The learning rate of optimizer step `step` (0, 1, ... total - 1): lr * step / warmup for
    the first `warmup` steps (so step 0 has lr 0), then lr * (1 + cos(pi * progress)) / 2, with
    progress = (step - warmup) / (total - warmup) going from 0 to 1: transformers'
    get_cosine_schedule_with_warmup (num_cycles=0.5), its scheduler stepped after each update.
    min_lr: the cosine runs from lr down to min_lr instead of 0 (nanoGPT's)."""
    if step < warmup:
        return lr * step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return min_lr + (lr - min_lr) * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
