"""A model that learns: a tiny encoder trained with autograd and Adam (the package's one AdamW,
minattn.training.optimizer, with no weight decay).

The task, "count": for every token, output how many times it occurs in its sequence.
Attention is the only sublayer that moves information between tokens, so it must gather it.
The task is permutation equivariant, so no positional encoding is needed; without positions,
equal tokens get equal attention rows (walkthrough.md, section 20).
"""
import autograd.numpy as np
from autograd import value_and_grad

from ..engine.threads import training_step
from ..transformer_encoder import encoder, init_encoder
from ..linear import linear
from ..loss import cross_entropy
from ..training.optimizer import adamw_init, adamw_update

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# The tour's task and model: sequences of 10 tokens over 5 letters; one block, 4 heads.
LENGTH, VOCAB_SIZE, N_HEADS = 10, 5, 4


def make_count_task(rng, n_sequences, length, vocab_size):
    """The count task: rng, N, L, V -> tokens int [N, L] from a vocabulary of V, and targets int
    [N, L], targets[n, i] = (how often tokens[n, i] occurs in sequence n) - 1."""
    # -> tokens int [N, L], targets int [N, L]: targets[n, i] = (count of tokens[n, i]) - 1,
    # a class index in [0, L).
    tokens = rng.integers(0, vocab_size, size=(n_sequences, length))
    counts = (tokens[:, :, None] == tokens[:, None, :]).sum(-1)
    return tokens, counts - 1


def init_count_model(rng, vocab_size, length, d_model=32, n_heads=N_HEADS, d_ff=64, n_layers=1):
    """Params of the count model (embedding, an encoder, a linear head), drawn from the Generator
    rng."""
    # -> {"embedding": [V, D], "encoder": {...}, "head": {"w": [D, L], "b": [L]}}
    return {
        "embedding": rng.normal(0.0, 1.0, size=(vocab_size, d_model)),
        "encoder": init_encoder(rng, n_layers, d_model, n_heads, d_ff),
        "head": {"w": rng.normal(0.0, d_model ** -0.5, size=(d_model, length)), "b": np.zeros(length)},
    }


def count_model(params, tokens, *, n_heads=N_HEADS, return_weights=False):
    """int tokens [N, L] -> logits [N, L, L] over the possible counts (and the encoder's weights
    with return_weights=True). No positional encoding: counting needs none."""
    # int [N, L] -> logits [N, L, C] (and per-layer weights [N, H, L, L]).
    x = params["embedding"][tokens]  # [N, L, D]
    x, weights = encoder(params["encoder"], x, n_heads=n_heads, return_weights=True)
    logits = linear(x, params["head"]["w"], params["head"]["b"])  # [N, L, C]
    return (logits, weights) if return_weights else logits


def accuracy(params, tokens, targets, *, n_heads=N_HEADS):
    """The fraction of tokens whose count the model predicts exactly (a Python float)."""
    return float(np.mean(np.argmax(count_model(params, tokens, n_heads=n_heads), -1) == targets))


def train_count_model(seed=0, steps=1000, batch_size=64, length=LENGTH, vocab_size=VOCAB_SIZE,
                      n_heads=N_HEADS, d_model=32, d_ff=64, lr=5e-3, callback=None, to_device=None):
    """Train the count model with autograd and Adam -> params. Deterministic for a given seed;
    callback(step, loss) is called after every step."""
    # Deterministic for a given seed: one np.random.Generator drives data and initialisation.
    # callback(step, loss) is called after every step (the CLI's progress bar). to_device(tree)
    # moves params and batches to a device (e.g. CuPy arrays); the data is drawn on the host.
    put = to_device or (lambda tree: tree)
    rng = np.random.default_rng(seed)
    params = put(init_count_model(rng, vocab_size, length, d_model, n_heads, d_ff))
    state = adamw_init(params)
    loss_and_grad = training_step(value_and_grad(  # on the BLAS threads timed fastest
        lambda p, tok, tgt: cross_entropy(count_model(p, tok, n_heads=n_heads), tgt)))
    for step in range(steps):
        tokens, targets = put(make_count_task(rng, batch_size, length, vocab_size))
        loss, grads = loss_and_grad(params, tokens, targets)
        # Cosine decay of the step size: large steps early, fine ones to settle at the end.
        lr_now = lr * 0.5 * (1.0 + np.cos(np.pi * step / steps))
        params, state = adamw_update(params, grads, state, lr=lr_now, weight_decay=0.0)
        if callback is not None:
            callback(step, float(loss))
    return params


def most_readable_head(weights, tokens):
    """weights [H, L, L], tokens int [L] -> the head that puts the most weight on equal tokens (for
    display)."""
    # [H, L, L], int [L] -> the head that puts the most weight on equal tokens.
    equal = tokens[:, None] == tokens[None, :]
    return int(np.argmax(np.sum(np.where(equal, weights, 0.0), axis=(-2, -1))))
