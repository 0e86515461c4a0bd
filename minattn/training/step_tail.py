"""A training step's tail leaf by leaf, in fewer arrays: a policy of the training loop
(loop.py), the same bits as the readable functions it stands for.

After a step's pieces have their gradients, the loop adds them and divides the sum
(loop.accumulated), clips it by its global norm (optimizer.clip_by_global_norm) and steps AdamW
(optimizer.adamw_update): as written, each a sweep over the whole model's numbers per operation
(3.2 MB for the baby GPT in float32, more than a core's cache), into a new array each, about
twenty a leaf. Two functions here compute the very same operations, element by element in the
same order with the same scalars (Python numbers: NumPy's weak scalars, cast to the leaf's
dtype as before), but

- `summed(gradients, count, squares)`: loop.accumulated's sum and division, the last addition,
  the division and the leaf's share of the global norm (optimizer.squared_norm) one leaf after
  the other while the leaf is in the cache, each sum after the first written over the one
  before (arrays made here, never the pieces' own);
- `clip_then_adamw(...)`: the clip's scaling and AdamW's formulas one leaf after the other,
  each intermediate result written over an array made a moment before for that leaf (`out=`):
  the clip's and AdamW's sixteen new arrays a leaf become five (the norm's square included;
  six where the gradient may not be written over and the clip scales it; a clip by a scale of 1
  is skipped, as x * 1 is x), the global norm from the squares `summed` left
  (sqrt of their sum in the leaves' order: optimizer.global_norm's own).

Nothing passed in is changed (but for a gradient tree the caller hands over with
overwrite_grads=True: the loop's own, dropped after the step).

Where the fused form applies, else the readable functions run as written (the same result):
every leaf of the four trees (params, grads, AdamW's two moments) a plain NumPy array (not a
subclass, CuPy's or autograd's box) of a floating dtype, each leaf's four arrays of one shape
and one dtype, the four trees of one structure (trees.zip_leaves), and the hyperparameters
and AdamW's step Python numbers (a NumPy scalar is not weak: the readable formulas would promote
the arrays, and run then). `summed` writes over a sum only where it is a NumPy float array and
the other operand an array of its shape and dtype or a Python number. STEP_TAIL = False (or
MINATTN_STEP_TAIL=0 in the environment): the readable functions always.

tests/test_step_tail.py holds both to the readable functions bit for bit. Measured:
docs/benchmarks.md, "The baby GPT's step tail leaf by leaf" (benchmarks/ab_step_tail.py); what
was tried and not kept there too (the leaves split over a second thread).
"""
import math
import os

import numpy as np

from ..engine.trees import leaves, tree_map, unzip, zip_leaves
from .optimizer import adamw_update, clip_by_global_norm, global_norm, squared_norm

STEP_TAIL = os.environ.get("MINATTN_STEP_TAIL", "1") != "0"  # False: the readable functions


def summed(gradients, count, squares=None):
    """-> the gradient trees of the iterable `gradients` added leaf by leaf in their order,
    then divided by count: (g0 + g1 + ... ) / count, as loop.accumulated always added them.
    squares (a list, or None): receives each leaf's optimizer.squared_norm of the result, in
    leaves' order (clip_then_adamw's `squares`). One tree: g0 / count."""
    gradients = iter(gradients)
    grads = next(gradients, None)
    if grads is None:
        raise ValueError("gradients must hold at least one gradient tree, got none")
    ours, last = False, None  # whether grads' arrays are made here; the tree not added yet
    for g in gradients:
        if last is not None:
            grads = tree_map(_add(ours), grads, last)
            ours = True
        last = g

    if not STEP_TAIL:
        return _as_written(grads, last, count, squares)
    pairs = zip_leaves(grads) if last is None else zip_leaves(grads, last)
    if pairs is None:  # (trees of other structures: tree_map's pairing, by key, as written)
        return _as_written(grads, last, count, squares)

    add = _add(ours)

    def finish(a, b=None):  # the last addition, the division and the square, on one leaf
        if b is not None:
            a = add(a, b)  # (a new array, or ours)
        a = np.divide(a, count, out=a) if (b is not None or ours) and _into(a, count) else \
            a / count
        if squares is not None:
            squares.append(squared_norm(a))
        return (a,)

    return unzip(grads, [finish(*pair) for pair in pairs], 1)[0]


def _as_written(grads, last, count, squares):
    # the last addition and the division as loop.accumulated wrote them, tree by tree
    grads = tree_map(lambda g: g / count, grads if last is None else
                     tree_map(np.add, grads, last))
    if squares is not None:
        squares.extend(squared_norm(g) for g in leaves(grads))
    return grads


def _add(ours):
    # np.add(a, b), written over a where a is made here (ours) and that gives the same bits
    return lambda a, b: np.add(a, b, out=a) if ours and STEP_TAIL and _into(a, b) else \
        np.add(a, b)


def _into(ours, other):
    # whether an operation of `ours` (an array made here) and `other` may be written over
    # `ours`: the very array a new one would hold (a NumPy float array, and other an array of
    # its shape and dtype or a Python number, NumPy's weak scalar)
    return type(ours) is np.ndarray and ours.dtype.kind == "f" and (
        type(other) in (int, float) or type(other) is np.ndarray and
        other.dtype == ours.dtype and other.shape == ours.shape)


def clip_then_adamw(params, grads, state, *, max_norm, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                    weight_decay=1e-2, decays=None, before_update=None, squares=None,
                    overwrite_grads=False, clip=clip_by_global_norm, update=adamw_update):
    """-> (new params, new state, the gradient's global norm before clipping):
    clip(grads, max_norm) then update(params, clipped, state, lr=..., betas=..., eps=...,
    weight_decay=..., decays=...), by default optimizer.py's clip_by_global_norm and
    adamw_update: computed leaf by leaf in fewer arrays where the module docstring's policy
    applies (the same bits), as called otherwise (and always for other functions: a caller's
    own, a test's stand-in). before_update(norm), if given, is called between the two (the
    training loop's check of the norm: what it raises stops the step before AdamW). squares:
    each leaf's optimizer.squared_norm of grads, in leaves' order, computed already (`summed`'s),
    else computed here. overwrite_grads: grads may be written over (the caller's own, not read
    after). Nothing else passed in is changed."""
    if clip is not clip_by_global_norm or update is not adamw_update:
        clipped, norm = clip(grads, max_norm)
        if before_update is not None:
            before_update(norm)
        new_params, new_state = update(params, clipped, state, lr=lr, betas=betas, eps=eps,
                                       weight_decay=weight_decay, decays=decays)
        return new_params, new_state, norm
    norm = global_norm(grads) if squares is None else math.sqrt(sum(squares))  # global_norm's
    if before_update is not None:
        before_update(norm)
    quads = _applies(params, grads, state, max_norm, lr, betas, eps, weight_decay)
    if quads is not None:
        b1, b2 = betas
        t = state["step"] + 1
        scale = min(max_norm / (norm + 1e-6), 1.0)  # clip_by_global_norm's, and
        step_size = lr / (1 - b1 ** t)  # adamw_update's, as they compute them
        root = math.sqrt(1 - b2 ** t)
        out = [_adamw_leaf(p, g, m, v, scale, b1, b2, step_size, root, eps,
                           1 - lr * (weight_decay if decays is None or decays(p) else 0.0),
                           overwrite_grads)
               for p, g, m, v in quads]
        new_params, new_m, new_v = unzip(params, out, 3)
        return new_params, {"step": t, "m": new_m, "v": new_v}, norm
    clipped, _ = clip_by_global_norm(grads, max_norm)
    new_params, new_state = adamw_update(params, clipped, state, lr=lr, betas=betas, eps=eps,
                                         weight_decay=weight_decay, decays=decays)
    return new_params, new_state, norm


def _adamw_leaf(p, g, m, v, scale, b1, b2, step_size, root, eps, shrink, overwrite):
    # One leaf of clip_by_global_norm's scaling and adamw_update's formulas, operation by
    # operation in their order (the comments: the readable expression each line computes),
    # each result written over an array made here (or over g, where it may be) ->
    # (new p, new m, new v)
    if scale != 1.0:  # (a clip that does not scale: g * 1 is g, bit for bit, and not made)
        scale = np.asarray(scale, dtype=g.dtype)
        g = np.multiply(g, scale, out=g) if overwrite else g * scale  # the clipped gradient
    new_m = g - m  # m + (1 - b1) * (g - m)
    np.multiply(1 - b1, new_m, out=new_m)
    np.add(m, new_m, out=new_m)
    new_v = b2 * v  # b2 * v + (1 - b2) * g * g
    squared = (1 - b2) * g
    np.multiply(squared, g, out=squared)
    np.add(new_v, squared, out=new_v)
    new_p = p * shrink  # p * (1 - lr * decay) - step_size * (m / (np.sqrt(v) / root + eps))
    step = np.sqrt(new_v, out=squared)
    np.divide(step, root, out=step)
    np.add(step, eps, out=step)
    np.divide(new_m, step, out=step)
    np.multiply(step_size, step, out=step)
    np.subtract(new_p, step, out=new_p)
    return new_p, new_m, new_v


def _applies(params, grads, state, max_norm, lr, betas, eps, weight_decay):
    # -> [(p, g, m, v)] in tree_map's order where the module docstring's policy applies (every
    # leaf checked before any is computed or written), else None
    if not (STEP_TAIL and all(type(x) in (int, float) for x in
                              (max_norm, lr, eps, weight_decay, *tuple(betas))) and
            len(tuple(betas)) == 2 and type(state["step"]) is int):
        return None
    quads = zip_leaves(params, grads, state["m"], state["v"])
    for p, g, m, v in quads or ():
        if not (type(p) is np.ndarray and p.dtype.kind == "f" and
                type(g) is type(m) is type(v) is np.ndarray and
                p.dtype == g.dtype == m.dtype == v.dtype and
                p.shape == g.shape == m.shape == v.shape):
            return None
    return quads
