"""The training loop of `finetune`, for any trainable tree (the LoRA matrices) and any loss.

loss_sum(trainable, batch, rng) -> the SUM of the loss over the batch's counted targets (a
scalar autograd can differentiate); batch = (tokens, targets, weights) from chat_data.batch. An
optimizer step takes `accumulation` micro-batches of `batch_size` examples: their sums and
gradients are added, then divided by the number of counted targets of all of them, so the step
is the one a single batch of batch_size * accumulation examples would take (each assistant
token weighs the same wherever it falls). Then the gradients are clipped by their global norm,
and AdamW steps at the schedule's learning rate (optimizer.py).

Deterministic for a seed, and stateless: micro-batch k of the run holds positions
k * batch_size ... of a sequence of permutations of the examples (one per pass over the data,
drawn from the seed and the pass's number), and its dropout draws from (seed, k). So a run
resumed from a checkpoint at step s takes the very batches the uninterrupted run took, to the
same bits. The checkpoint (the trainable tree, AdamW's state, the step, the losses) is written
to a temporary file in its folder and renamed over the last: an interrupted write leaves the
last one whole. Ctrl-C saves one at the last finished step; a loss or gradient that is not
finite stops the run (NonFinite) and leaves the last checkpoint as it was.
"""
import functools
import json
import math
import os
from pathlib import Path

import numpy as np

from ..engine.autograd_rules import gradient_by_hand, gradient_with_the_value, \
    value_and_grad_by_leaf
from ..engine.files import write_replacing
from ..engine.threads import on_workers, row_pieces
from ..language_model import unembedding
from ..models.count_task import tree_map
from .chat_data import batch
from .optimizer import adamw_init, adamw_update, clip_by_global_norm, cosine_lr

CHECKPOINT = "checkpoint.npz"


class NonFinite(ArithmeticError):
    """The loss (or the gradient's norm) became NaN or infinite at a step: the run stops."""


def micro_batch(n_examples, batch_size, seed, k):
    """The indices (into the examples) of micro-batch k: positions k * batch_size onwards of
    the permutations of range(n_examples) drawn from default_rng([seed, pass]), one a pass."""
    positions = range(k * batch_size, (k + 1) * batch_size)
    return [int(_permutation(n_examples, seed, p // n_examples)[p % n_examples])
            for p in positions]


@functools.lru_cache(maxsize=2)
def _permutation(n, seed, epoch):
    return np.random.default_rng([seed, epoch]).permutation(n)


def train(loss_sum, trainable, examples, *, steps, batch_size, pad_id, lr, seed=0,
          accumulation=1, warmup=0, weight_decay=0.0, max_grad_norm=1.0, out=None,
          every=None, state=None, settings=None, callback=None, batches=None, total=None,
          min_lr=0.0, betas=(0.9, 0.999), decays=None):
    """Train -> the final state {"step", "trainable", "adam", "losses"}. examples: [(ids, keep)]
    (chat_data.encode). state: a checkpoint's (load_checkpoint) to continue from, else a fresh
    one from trainable. out (a folder): a checkpoint every `every` steps, at the end, and on
    Ctrl-C (KeyboardInterrupt, raised again once saved). callback(step, loss, n_tokens) after
    each step (n_tokens: the tokens read, padding included). settings (JSON): kept in the
    checkpoints, for a resumed run to compare with its own. NonFinite for a NaN or infinite
    loss, naming the step; nothing saved then. batches(k) -> micro-batch k (tokens, targets,
    weights), in place of examples' (a model's own data: models/char_gpt.py's windows); total:
    the schedule's length where the run stops before its end, at `steps` (default: steps);
    min_lr, betas, decays: as cosine_lr's and adamw_update's."""
    state = state or {"step": 0, "trainable": trainable, "adam": adamw_init(trainable),
                      "losses": [], "settings": settings}
    loss_and_grad = value_and_grad_by_leaf(loss_sum)
    batches = batches or (lambda k: batch(
        [examples[i] for i in micro_batch(len(examples), batch_size, seed, k)], pad_id))
    try:
        while state["step"] < steps:
            step = state["step"]
            parts = [batches(k) for k in range(step * accumulation, (step + 1) * accumulation)]
            rngs = [np.random.default_rng([seed, k])
                    for k in range(step * accumulation, (step + 1) * accumulation)]
            loss, grads = accumulated(loss_and_grad, state["trainable"], parts, rngs)
            grads, norm = clip_by_global_norm(grads, max_grad_norm)
            if not (math.isfinite(loss) and math.isfinite(norm)):
                raise NonFinite(f"the loss became {loss} (gradient norm {norm}) at step "
                                f"{step + 1}")
            params, adam = adamw_update(state["trainable"], grads, state["adam"],
                                        lr=cosine_lr(step, lr=lr, warmup=warmup,
                                                     total=total or steps, min_lr=min_lr),
                                        betas=betas, weight_decay=weight_decay, decays=decays)
            state = {"step": step + 1, "trainable": params, "adam": adam,
                     "losses": state["losses"] + [loss], "settings": state.get("settings")}
            if out is not None and every and state["step"] % every == 0:
                save_checkpoint(out, state)
            if callback is not None:
                callback(state["step"], loss, sum(tokens.size for tokens, _, _ in parts))
    except KeyboardInterrupt:
        if out is not None and state["step"] > 0:
            save_checkpoint(out, state)
        raise
    if out is not None:
        save_checkpoint(out, state)
    return state


def accumulated(loss_and_grad, trainable, parts, rngs):
    """-> (the loss, its gradient) per counted target over all the micro-batches `parts`
    together: their sums and gradients added, then divided by their counted targets, as one
    batch of all of them would give. loss_and_grad: value_and_grad_by_leaf(loss_sum). Each
    micro-batch's rows are split over the cores, each piece on a worker thread with one BLAS
    thread (engine/threads.py: row_pieces, on_workers), its dropout drawn from its own child of the
    micro-batch's generator."""
    count = sum(int(weights.sum()) for _, _, weights in parts)
    total, grads = 0.0, None
    for part, rng in zip(parts, rngs):
        for value, g in _on_workers(loss_and_grad, trainable, part, rng):
            total += float(value)
            grads = g if grads is None else tree_map(np.add, grads, g)
    return total / count, tree_map(lambda g: g / count, grads)


def _on_workers(loss_and_grad, trainable, part, rng):
    # [(sum, gradient)] of the pieces of a micro-batch's rows, each on a worker thread
    pieces = row_pieces(part[0], len(part[0]))
    if len(pieces) == 1:
        return [loss_and_grad(trainable, part, rng)]
    rngs = [None] * len(pieces) if rng is None else rng.spawn(len(pieces))
    return on_workers(lambda i: loss_and_grad(trainable, tuple(a[pieces[i]] for a in part),
                                              rngs[i]), range(len(pieces)))


def counted_nll_vjp(wrt, g, total, logits, targets, counted):
    # d/dlogits of -sum log softmax(logits)[target] over the counted positions:
    # softmax(logits) - one_hot(target) at each, 0 elsewhere; times the scalar's gradient g.
    # Written so that no more than two [B, n, V] arrays live at once beside the logits (each is
    # 200 MB for SmolLM2 at 8 x 128): NumPy reuses an unnamed temporary for the next operator.
    one_hot = targets[..., None] == np.arange(logits.shape[-1])  # [B, n, V]
    d_logits = np.exp(logits - _log_sum_exp(logits)) - one_hot  # recomputed: the tape kept logits
    return {"logits": (np.where(counted[..., None], d_logits, 0) * g).astype(logits.dtype,
                                                                              copy=False)}


@gradient_by_hand(counted_nll_vjp)
def counted_nll_sum(logits, targets, counted):
    """[B, n, V], int [B, n], bool [B, n] -> -sum of log softmax(logits)[target] over the counted
    positions: cross_entropy's sum, with its gradient by hand, so that autograd's tape holds the
    logits alone, not the log-probabilities and the copies its own gradient would keep
    (tests/test_finetune_loop.py holds it to autograd's gradient of cross_entropy)."""
    log_probs = logits - _log_sum_exp(logits)  # [B, n, V]
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # [B, n]
    return -np.sum(np.where(counted, picked, 0))


def _log_sum_exp(x):
    # [..., V] -> [..., 1], shifted by the row's max as softmax is
    top = np.max(x, axis=-1, keepdims=True)
    return top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True))


def unembedded_nll_and_gradient(wrt, h, w, b, targets, counted):
    # -> (-sum log softmax(h w + b)[target] over the counted positions, {name: its gradient}
    # for the names in wrt): the counted positions' logits a chunk of rows at a time, each
    # chunk used for the loss and the gradient (softmax minus the one-hot) and then dropped.
    d, v = w.shape
    h_rows = np.reshape(h, (-1, d))  # [N, D]
    rows = np.flatnonzero(counted)  # the counted positions of the flattened [B * n]
    picks = np.reshape(targets, (-1,))[rows]
    total = 0.0
    d_h = np.zeros_like(h_rows) if "h" in wrt else None
    d_w = np.zeros_like(w) if "w" in wrt else None
    d_b = np.zeros_like(b) if "b" in wrt else None
    for start in range(0, len(rows), max(1, CHUNK_ELEMENTS // v)):
        chunk = rows[start:start + max(1, CHUNK_ELEMENTS // v)]
        logits = h_rows[chunk] @ w if b is None else h_rows[chunk] @ w + b  # [C, V]
        picked = np.take_along_axis(logits, picks[start:start + len(chunk), None], axis=-1)
        top = np.max(logits, axis=-1, keepdims=True)  # [C, 1], shifted as softmax is
        e = np.exp(np.subtract(logits, top, out=logits), out=logits)  # in place: one exp
        sums = np.sum(e, axis=-1, keepdims=True)  # [C, 1]
        total += float(np.sum(top + np.log(sums) - picked, dtype=np.float64))
        if wrt:
            d_logits = np.divide(e, sums, out=e)  # softmax
            d_logits[np.arange(len(chunk)), picks[start:start + len(chunk)]] -= 1
            if d_h is not None:
                d_h[chunk] = d_logits @ w.T
            if d_w is not None:
                d_w += h_rows[chunk].T @ d_logits
            if d_b is not None:
                d_b += np.sum(d_logits, axis=0)
    grads = {"h": None if d_h is None else np.reshape(d_h, np.shape(h)), "w": d_w, "b": d_b}
    return np.asarray(total, dtype=h.dtype), {name: grads[name] for name in wrt}


# The logits computed at once: 2 ** 23 elements, 32 MiB of float32 (170 rows of SmolLM2's). Each
# chunk reads the whole unembedding twice (the logits, then d_h), so fewer and larger chunks are
# faster: SmolLM2's loss and gradient at 8 x 127 took 1.19 s, against 1.54 s in chunks of 2 ** 22
# and 3.4 s of 2 ** 20 (unembedded_nll_and_gradient(("h",), ...) on random float32 arrays, one
# BLAS thread, timed twice each, 2026-11-28 12:44 UTC, load average 1.3).
CHUNK_ELEMENTS = 2 ** 23


@gradient_with_the_value(unembedded_nll_and_gradient)
def unembedded_nll_sum(h, w, b, targets, counted):
    """[B, n, D], [D, V], [V] or None, int [B, n], bool [B, n] -> counted_nll_sum(h w + b,
    targets, counted), the unembedding fused with the loss: no [B, n, V] array is made, and
    differentiated its gradient comes with its value (engine/autograd_rules.py), so that the
    tape keeps the gradient with respect to h alone (a [B, n, D] array). Only the counted
    positions are unembedded."""
    return unembedded_nll_and_gradient((), h, w, b, targets, counted)[0]


def lm_loss_sum(forward, *, fused=True):
    """forward(trainable, tokens, rng, logits_to_keep, unembed=None) -> causal_lm's output for
    the last logits_to_keep positions, unembed passed on as causal_lm's: a language model ->
    loss_sum(trainable, batch, rng), the summed cross-entropy of the counted targets. fused: the
    unembedding and the loss in one (unembedded_nll_sum, through causal_lm's unembed= hook);
    else the logits, then counted_nll_sum (for soft-capped logits: fusable). Either way only the
    positions from the first one any row counts are unembedded: the unembedding ([D, V], V =
    49,152 for SmolLM2) of every position would cost as much as a third of the model and,
    backwards, more."""
    def loss_sum(trainable, batch, rng):
        tokens, targets, weights = batch  # int [B, L], int [B, L], bool [B, L]
        first = int(np.argmax(weights.any(axis=0)))  # the first position a row counts
        targets, weights = targets[:, first:], weights[:, first:]  # [B, L - first]
        if not fused:
            logits = forward(trainable, tokens, rng, tokens.shape[-1] - first)  # [B, L - first, V]
            return counted_nll_sum(logits, targets, weights)
        return forward(trainable, tokens, rng, tokens.shape[-1] - first, unembed=lambda p, h: (
            unembedded_nll_sum(h, *unembedding(p), targets, weights)))

    return loss_sum


def fusable(config):
    """Whether lm_loss_sum(..., fused=True) computes a model of these causal_lm keywords: not
    where its logits are soft-capped after the unembedding (Gemma 2's final_logit_softcapping,
    which refuses an unembed= hook), which the fused loss does not compute."""
    return config.get("final_logit_softcapping") is None


def evaluate(loss_sum, trainable, examples, *, batch_size, pad_id):
    """The mean loss per counted target over examples (in order, batch_size at a time)."""
    parts = [batch(examples[i:i + batch_size], pad_id)
             for i in range(0, len(examples), batch_size)]
    total = sum(float(loss_sum(trainable, part, None)) for part in parts)
    return total / sum(int(weights.sum()) for _, _, weights in parts)


def save_checkpoint(folder, state):
    """Write state to folder/checkpoint.npz: a file of another name in the folder, then renamed
    over the last (engine/files.py), so a crash mid-write leaves the last checkpoint whole."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    flat = _flatten({"trainable": state["trainable"], "adam": state["adam"]})
    meta = {"step": state["step"], "losses": state["losses"], "paths": [p for p, _ in flat],
            "settings": state.get("settings")}
    arrays = {f"a{i}": np.asarray(a) for i, (_, a) in enumerate(flat)}

    def write(name):
        with open(name, "wb") as file:
            np.savez(file, meta=np.array(json.dumps(meta)), **arrays)
            file.flush()
            os.fsync(file.fileno())

    write_replacing(folder / CHECKPOINT, write)


def load_checkpoint(folder):
    """folder/checkpoint.npz -> the state train() continues from (and its "settings")."""
    with np.load(Path(folder) / CHECKPOINT) as data:
        meta = json.loads(str(data["meta"]))
        tree = _unflatten([(path, data[f"a{i}"]) for i, path in enumerate(meta["paths"])])
    return {"step": meta["step"], "trainable": tree["trainable"], "adam": tree["adam"],
            "losses": meta["losses"], "settings": meta["settings"]}


def _flatten(tree, path=()):
    # -> [(path, leaf)]: a path is the keys (str) and list indices (int) down to the leaf
    if isinstance(tree, dict):
        return [item for key in tree for item in _flatten(tree[key], path + (key,))]
    if isinstance(tree, (list, tuple)):
        return [item for i, sub in enumerate(tree) for item in _flatten(sub, path + (i,))]
    return [(list(path), tree)]


def _unflatten(items):
    root = {}
    for path, leaf in items:
        node = root
        for key, after in zip(path, path[1:]):
            node = node.setdefault(key, {})
        node[path[-1]] = leaf if np.ndim(leaf) else leaf.item()  # the step: an int again
    return _lists(root)


def _lists(node):
    # dicts whose keys are all list indices back into lists
    if not isinstance(node, dict):
        return node
    node = {key: _lists(value) for key, value in node.items()}
    if node and all(isinstance(key, int) for key in node):
        return [node[i] for i in range(len(node))]
    return node
