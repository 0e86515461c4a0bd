"""A tiny causal language model that learns to sort digit strings: trained with autograd and
Adam (minattn.training.optimizer's AdamW, no weight decay), tested on held-out strings by
generating through the KV cache.

A sequence is n digits, a separator, then the same digits sorted: 3 1 4 | 1 3 4. The model is
trained on whole sequences at once (the causal mask lets position t see tokens 0..t only, so the
logits at t predict token t + 1 from exactly what generation will have), and tested by
generating the answer one token at a time from the prompt `digits + separator`, on strings it
has (almost surely: 10^6 of them) never seen. The mask is what makes this work: trained without
it, the model learns to copy the next answer token, which it can see, instead of sorting, and
generation fails (tests/test_train_lm.py).
"""
import autograd.numpy as np
from autograd import value_and_grad

from ..engine.threads import training_step
from ..generation import generate
from ..language_model import causal_lm, init_causal_lm
from ..loss import cross_entropy
from ..training.optimizer import adamw_init, adamw_update

N_DIGITS = 6
SEPARATOR = 10  # tokens 0..9 are the digits
VOCAB_SIZE = 11
CONFIG = {"n_heads": 2, "norm": "layer_norm", "activation": "gelu_tanh", "position": "learned"}


def make_sort_task(rng, n_sequences, n_digits=N_DIGITS):
    """-> int tokens [N, 2 n + 1]: n random digits, the separator, the same digits sorted."""
    digits = rng.integers(0, 10, size=(n_sequences, n_digits))
    separator = np.full((n_sequences, 1), SEPARATOR)
    return np.concatenate([digits, separator, np.sort(digits, axis=1)], axis=1)


def answer_loss(params, tokens, n_digits=N_DIGITS):
    """Shifted targets: the logits at position t predict token t + 1; only the answer's n tokens
    (after the separator) count."""
    logits = causal_lm(params, tokens[:, :-1], **CONFIG)  # [N, 2n, V]
    return cross_entropy(logits[:, n_digits:], tokens[:, n_digits + 1:])


def sort_accuracy(params, tokens, n_digits=N_DIGITS, progress=None):
    """The fraction of sequences whose whole answer greedy generation (with the KV cache) gets
    right, from the prompt `digits + separator` (a Python float)."""
    prompt = tokens[:, :n_digits + 1]
    out = generate(params, prompt, n_digits, progress=progress, **CONFIG)
    return float(np.mean(np.all(out[:, n_digits + 1:] == tokens[:, n_digits + 1:], axis=1)))


def train_sort_model(seed=0, steps=300, batch_size=64, d_model=32, d_ff=64, n_layers=2,
                        lr=1e-2, n_digits=N_DIGITS, callback=None):
    """Train the sorting model with autograd and Adam -> params; deterministic for a seed.
    callback(step, loss) is called after every step (the CLI's progress bar)."""
    rng = np.random.default_rng(seed)
    params, _ = init_causal_lm(rng, VOCAB_SIZE, n_layers, d_model, CONFIG["n_heads"], d_ff,
                            position="learned", n_positions=2 * n_digits + 1,
                            activation=CONFIG["activation"])
    state = adamw_init(params)
    loss_and_grad = training_step(  # on the BLAS threads timed fastest
        value_and_grad(lambda p, tokens: answer_loss(p, tokens, n_digits)))
    for step in range(steps):
        loss, grads = loss_and_grad(params, make_sort_task(rng, batch_size, n_digits))
        params, state = adamw_update(params, grads, state, lr=lr, weight_decay=0.0)
        if callback is not None:
            callback(step, float(loss))
    return params
