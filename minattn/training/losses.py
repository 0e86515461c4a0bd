"""The losses of a training run: the summed cross-entropy of a language model's counted
targets, with its gradient by hand, and the unembedding fused with it so that no [B, n, V]
array of logits is kept (its gradient computed with its value, engine/autograd_rules.py).

    counted_nll_sum(logits, targets, counted)          -sum log softmax(logits)[target]
    unembedded_nll_sum(h, w, b, targets, counted)      the same of h w + b, fused
    lm_loss_sum(forward)                               a language model -> loss_sum(trainable,
                                                       batch, rng), as loop.train takes it
"""
import numpy as np

from ..engine.autograd_rules import gradient_by_hand, gradient_with_the_value
from ..engine.reductions import row_max
from ..language_model import unembedding


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
    top = row_max(x)
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
    every = len(rows) == len(h_rows)  # every position counted (a training batch's windows)
    for start in range(0, len(rows), max(1, CHUNK_ELEMENTS // v)):
        chunk = rows[start:start + max(1, CHUNK_ELEMENTS // v)]
        if every:  # the same rows as a slice: h's rows read where they are, not copied twice
            chunk = slice(start, start + len(chunk))
        logits = h_rows[chunk] @ w if b is None else h_rows[chunk] @ w + b  # [C, V]
        picked = np.take_along_axis(logits, picks[start:start + len(logits), None], axis=-1)
        top = row_max(logits)  # [C, 1], shifted as softmax is
        e = np.exp(np.subtract(logits, top, out=logits), out=logits)  # in place: one exp
        sums = np.sum(e, axis=-1, keepdims=True)  # [C, 1]
        total += float(np.sum(top + np.log(sums) - picked, dtype=np.float64))
        if wrt:
            d_logits = np.divide(e, sums, out=e)  # softmax
            d_logits[np.arange(len(d_logits)), picks[start:start + len(d_logits)]] -= 1
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
# faster (docs/benchmarks.md, "The fused loss's chunks").
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
