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
    step_size = lr / (1 - b1 ** t)
    root = math.sqrt(1 - b2 ** t)  # the second moment's bias correction, under the root
    # Each formula's operations in its order, written in place into the arrays it makes (the
    # same bits as the formula in one line, fewer fresh arrays): m + (1 - b1) (g - m), torch's
    # lerp_; b2 v + (1 - b2) g g; p (1 - lr decay) - step_size m / (sqrt(v) / root + eps).

    def moment_1(m, g):
        out = g - m
        out *= 1 - b1
        return _added(out, m)

    def moment_2(v, g):
        out = (1 - b2) * g
        out *= g
        return _added(b2 * v, out)

    def step(p, m, v):
        decay = weight_decay if decays is None or decays(p) else 0.0
        denominator = np.sqrt(v)
        denominator /= root
        denominator += eps
        update = m / denominator
        update *= step_size
        return _added(p * (1 - lr * decay), update, -1)

    m, v = tree_map(moment_1, state["m"], grads), tree_map(moment_2, state["v"], grads)
    return tree_map(step, params, m, v), {"step": t, "m": m, "v": v}


def _added(a, b, sign=1):
    # a + b (sign 1) or a - b (-1), a an array made by the caller: into a where the two share a
    # dtype and shape, else a new array (mixed dtypes: the wider one's, as a + b gives)
    if getattr(a, "dtype", None) != getattr(b, "dtype", None) or np.ndim(a) == 0 or \
            np.shape(a) != np.shape(b):
        return a + b if sign == 1 else a - b
    return np.add(a, b, out=a) if sign == 1 else np.subtract(a, b, out=a)


def clip_by_global_norm(grads, max_norm):
    """-> (grads scaled by min(1, max_norm / (norm + 1e-6)), their global norm before): the
    2-norm of every entry of every array together, as torch.nn.utils.clip_grad_norm_ (which
    multiplies by the clamped factor always, 1 included)."""
    norm = math.sqrt(sum(float(np.sum(np.square(g))) for g in leaves(grads)))
    scale = min(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * np.asarray(scale, dtype=g.dtype), grads), norm


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
