"""The training loop, for any trainable tree (the LoRA matrices, a whole small GPT) and any loss
(losses.py).

loss_sum(trainable, batch, rng) -> the SUM of the loss over the batch's counted targets (a
scalar autograd can differentiate); batch = (tokens, targets, weights) from chat_data.batch. An
optimizer step takes `accumulation` micro-batches of `batch_size` examples: their sums and
gradients are added, then divided by the number of counted targets of all of them, so the step
is the one a single batch of batch_size * accumulation examples would take (each assistant
token weighs the same wherever it falls). Then the gradients are clipped by their global norm,
and AdamW steps at the schedule's learning rate (optimizer.py); the last sum, the division,
the clip and AdamW computed leaf by leaf in fewer arrays (step_tail.py: the same bits, where
it applies, else optimizer.py's functions as written). Each micro-batch's rows are
split over the cores: the pieces after the first on a worker process forked for the run where
the process policy applies (engine/processes.py: Linux, a run of two or more steps, NumPy
weights), else on worker threads (engine/threads.py); the same bits either way.

Deterministic for a seed, and stateless: micro-batch k of the run holds positions
k * batch_size ... of a sequence of permutations of the examples (one per pass over the data,
drawn from the seed and the pass's number), and its dropout draws from (seed, k). So a run
resumed from a checkpoint at step s takes the very batches the uninterrupted run took, to the
same bits. The checkpoint (the trainable tree, AdamW's state, the step, the losses) is written
to a temporary file in its folder and renamed over the last: an interrupted write leaves the
last one whole. Ctrl-C saves one at the last finished step; a loss or gradient that is not
finite stops the run (NonFinite) and leaves the last checkpoint as it was (checkpoints.py).
"""
import functools
import math

import numpy as np

from ..engine.autograd_rules import value_and_grad_by_leaf
from ..engine.processes import worker_processes
from ..engine.threads import on_workers, one_blas_thread, row_pieces
from ..engine.trees import leaves
from .chat_data import batch
from .checkpoints import save_checkpoint
from .optimizer import adamw_init, adamw_update, clip_by_global_norm, cosine_lr
from .step_tail import clip_then_adamw, summed


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
          min_lr=0.0, betas=(0.9, 0.999), decays=None, at_end=True):
    """Train -> the final state {"step", "trainable", "adam", "losses"}. examples: [(ids, keep)]
    (chat_data.encode). state: a checkpoint's (load_checkpoint) to continue from, else a fresh
    one from trainable. out (a folder): a checkpoint every `every` steps, at the end, and on
    Ctrl-C (KeyboardInterrupt, raised again once saved). callback(step, loss, n_tokens) after
    each step (n_tokens: the tokens read, padding included). settings (JSON): kept in the
    checkpoints, for a resumed run to compare with its own. NonFinite for a NaN or infinite
    loss, or weights that an update made NaN or infinite (checked before each checkpoint and at
    the end), naming the step; nothing saved then. batches(k) -> micro-batch k (tokens, targets,
    weights), in place of examples' (a model's own data: models/char_gpt.py's windows); total:
    the schedule's length where the run stops before its end, at `steps` (default: steps);
    min_lr, betas, decays: as cosine_lr's and adamw_update's. at_end=False: no checkpoint at the
    end (the caller writes it once it has checked the state: char_gpt's evaluations)."""
    state = state or {"step": 0, "trainable": trainable, "adam": adamw_init(trainable),
                      "losses": [], "settings": settings}
    loss_and_grad = value_and_grad_by_leaf(loss_sum)
    batches = batches or (lambda k: batch(
        [examples[i] for i in micro_batch(len(examples), batch_size, seed, k)], pad_id))
    with worker_processes(loss_and_grad, (steps - state["step"]) * accumulation) as processes:
        return _steps(loss_and_grad, state, processes, batches, steps=steps, seed=seed,
                      accumulation=accumulation, warmup=warmup, weight_decay=weight_decay,
                      max_grad_norm=max_grad_norm, out=out, every=every, callback=callback,
                      total=total, lr=lr, min_lr=min_lr, betas=betas, decays=decays,
                      at_end=at_end)


def _steps(loss_and_grad, state, processes, batches, *, steps, seed, accumulation, warmup,
           weight_decay, max_grad_norm, out, every, callback, total, lr, min_lr, betas, decays,
           at_end):
    # train's steps (its docstring), each micro-batch's row pieces on the run's worker
    # processes where the process policy applies (engine/processes.py), else on worker threads
    try:
        while state["step"] < steps:
            step = state["step"]
            parts = [batches(k) for k in range(step * accumulation, (step + 1) * accumulation)]
            rngs = [np.random.default_rng([seed, k])
                    for k in range(step * accumulation, (step + 1) * accumulation)]
            squares = []
            loss, grads = accumulated(loss_and_grad, state["trainable"], parts, rngs,
                                      processes, squares)

            def finite(norm, loss=loss, step=step):
                if not (math.isfinite(loss) and math.isfinite(norm)):
                    raise NonFinite(f"the loss became {loss} (gradient norm {norm}) at step "
                                    f"{step + 1}")

            # clip_by_global_norm, then adamw_update (optimizer.py), leaf by leaf: step_tail
            params, adam, _ = clip_then_adamw(state["trainable"], grads, state["adam"],
                                              max_norm=max_grad_norm, before_update=finite,
                                              squares=squares, overwrite_grads=True,
                                              clip=clip_by_global_norm, update=adamw_update,
                                              lr=cosine_lr(step, lr=lr, warmup=warmup,
                                                           total=total or steps, min_lr=min_lr),
                                              betas=betas, weight_decay=weight_decay,
                                              decays=decays)
            state = {"step": step + 1, "trainable": params, "adam": adam,
                     "losses": state["losses"] + [loss], "settings": state.get("settings")}
            if out is not None and every and state["step"] % every == 0:
                save_checkpoint(out, _with_finite_weights(state))
            if callback is not None:
                callback(state["step"], loss, sum(tokens.size for tokens, _, _ in parts))
    except KeyboardInterrupt:
        if out is not None and state["step"] > 0 and _finite(state["trainable"]):
            save_checkpoint(out, state)
        raise
    _with_finite_weights(state)  # (the last step's update: no loss of the step after it reads it)
    if out is not None and at_end:
        save_checkpoint(out, state)
    return state


def _finite(trainable):
    return all(bool(np.isfinite(leaf).all()) for leaf in leaves(trainable))


def _with_finite_weights(state):
    # state, where its weights are all finite; else NonFinite naming its step: no checkpoint
    # holds the NaN an update wrote, and no run ends with it (a loss reads the weights only at
    # the next step)
    if not _finite(state["trainable"]):
        raise NonFinite(f"the weights became NaN or infinite at step {state['step']}")
    return state


def accumulated(loss_and_grad, trainable, parts, rngs, processes=None, squares=None):
    """-> (the loss, its gradient) per counted target over all the micro-batches `parts`
    together: their sums and gradients added, then divided by their counted targets, as one
    batch of all of them would give. loss_and_grad: value_and_grad_by_leaf(loss_sum). Each
    micro-batch's rows are split over the cores, each piece on a worker thread with one BLAS
    thread (engine/threads.py: row_pieces, on_workers), its dropout drawn from its own child of the
    micro-batch's generator; processes (a run's engine/processes.WorkerProcesses, made for
    loss_and_grad): the pieces after the first on its worker processes where it applies, the
    first here (the same bits; the last micro-batch's worker gradients read in their shared
    memory, not copied out: summed adds them before the next map). The gradients are added and
    divided leaf by leaf (step_tail.summed: the same bits as tree by tree); squares (a list):
    each leaf's share of the gradient's global norm appended, for step_tail.clip_then_adamw."""
    count = sum(int(weights.sum()) for _, _, weights in parts)
    total = 0.0

    def gradients():
        nonlocal total
        for i, (part, rng) in enumerate(zip(parts, rngs)):
            for value, g in _on_workers(loss_and_grad, trainable, part, rng, processes,
                                        borrow=i == len(parts) - 1):
                total += float(value)
                yield g

    grads = summed(gradients(), count, squares)
    return total / count, grads


def _on_workers(loss_and_grad, trainable, part, rng, processes=None, borrow=False):
    # [(sum, gradient)] of the pieces of a micro-batch's rows, each on a worker thread, or
    # all but the first on the run's worker processes (borrow: their gradients as views of
    # the shared memory that the next map writes over, processes.WorkerProcesses.map)
    pieces = row_pieces(part[0], len(part[0]))
    if len(pieces) == 1:
        return [loss_and_grad(trainable, part, rng)]
    rngs = [None] * len(pieces) if rng is None else rng.spawn(len(pieces))

    def on_threads():
        return on_workers(lambda i: loss_and_grad(trainable, tuple(a[pieces[i]] for a in part),
                                                  rngs[i]), range(len(pieces)))

    if processes is None:
        return on_threads()
    return processes.map(trainable, [(tuple(a[piece] for a in part), piece_rng)
                                     for piece, piece_rng in zip(pieces, rngs)],
                         here=one_blas_thread(), otherwise=on_threads, borrow=borrow)


def evaluate(loss_sum, trainable, examples, *, batch_size, pad_id):
    """The mean loss per counted target over examples (in order, batch_size at a time)."""
    parts = [batch(examples[i:i + batch_size], pad_id)
             for i in range(0, len(examples), batch_size)]
    total = sum(float(loss_sum(trainable, part, None)) for part in parts)
    return total / sum(int(weights.sum()) for _, _, weights in parts)
