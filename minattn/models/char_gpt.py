"""nanoGPT's "baby GPT" on minattn: a character-level GPT that learns to write Shakespeare.

The model is minattn's causal_lm as GPT-2 builds it (learned positions, pre-norm blocks with
causal self-attention and a GELU MLP four times as wide, a final LayerNorm, the unembedding tied
to the token embedding), drawn as nanoGPT's model.py draws it: N(0, 0.02) weights and
embeddings, the two projections back into the residual stream N(0, 0.02 / sqrt(2 n_layers)),
zero biases. It trains as nanoGPT's train.py trains it: random windows of `context`
characters, AdamW (betas 0.9, 0.99; weight decay 0.1 on the matrices and embeddings only),
gradients clipped to norm 1, the learning rate warmed up then decayed along a cosine to a
tenth of itself. The loop, the optimizer and the checkpoints are minattn/training/'s. Where it
differs from nanoGPT: biases in every linear map and LayerNorm (model.py's default, GPT-2's;
train.py turns them off), the warm-up from 0 as transformers' (training/optimizer.py), and the
evaluations on the same windows each time.

    BABY                             nanoGPT's CPU config of shakespeare_char
    Characters(text)                 the vocabulary: encode, decode
    init_char_gpt(rng, vocab_size)   -> (params, config) for minattn.causal_lm
    window_batch(ids, ...)           micro-batch k: batch_size random windows, stateless
    train_char_gpt(...)              training with evaluations on both splits
    sample(params, config, ...)      continue a prompt, the context cropped as nanoGPT's

`python -m minattn shakespeare` runs it (minattn/cli/shakespeare.py); walkthrough.md, "Train
it: a GPT that learns to write"; tests/test_char_gpt.py holds it to a torch reference written
from torch.nn, step for step, in float64.
"""
import itertools
import math

import numpy as np

from ..language_model import causal_lm, init_causal_lm
from ..training import checkpoints, losses, loop
from ..training.optimizer import adamw_init

# nanoGPT's README, "baby GPT" on a CPU: --block_size=64 --batch_size=12 --n_layer=4
# --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0, and
# config/train_shakespeare_char.py's learning rates, warm-up and beta2.
BABY = {"n_layers": 4, "n_heads": 4, "d_model": 128, "context": 64, "batch_size": 12,
        "steps": 2000, "lr": 1e-3, "min_lr": 1e-4, "warmup": 100, "weight_decay": 0.1,
        "betas": (0.9, 0.99), "max_grad_norm": 1.0, "eval_every": 250, "eval_batches": 20}


class Characters:
    """The vocabulary of a text: its distinct characters, sorted; encode(str) -> int [n],
    decode(ids) -> str."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, text):
        return np.array([self.index[c] for c in text], dtype=np.int64)

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)


def split(ids, fraction=0.9):
    """-> (train, validation): the first 90% of the text and the last 10%, as nanoGPT's
    prepare.py."""
    cut = int(len(ids) * fraction)
    return ids[:cut], ids[cut:]


def init_char_gpt(rng, vocab_size, *, n_layers=4, n_heads=4, d_model=128, context=64,
                  dtype=np.float64):
    """-> (params, config): causal_lm's GPT-2 form (learned positions for `context`
    characters, exact GELU, d_ff = 4 d_model, biases, tied unembedding), drawn as nanoGPT's."""
    params, config = init_causal_lm(rng, vocab_size, n_layers, d_model, n_heads, 4 * d_model,
                                    n_positions=context, activation="gelu", dtype=dtype)
    residual = 0.02 / math.sqrt(2 * n_layers)  # w_o and w_2 write into the residual stream

    def draw(name, a):
        if name.startswith("b_"):
            return np.zeros_like(a)
        if name in ("gamma", "beta"):
            return a  # ones, zeros
        std = residual if name in ("w_o", "w_2") else 0.02
        return (std * rng.normal(size=a.shape)).astype(dtype)

    return _named_map(draw, params), config


def _named_map(f, tree, name=None):
    # f(the leaf's own key, leaf) over a nested dict/list tree
    if isinstance(tree, dict):
        return {k: _named_map(f, v, k) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_named_map(f, v, name) for v in tree]
    return f(name, tree)


def decays(array):
    """Whether AdamW decays this weight: the matrices and embeddings, not the biases and
    norms (nanoGPT's configure_optimizers: every parameter of 2 or more dimensions)."""
    return np.ndim(array) >= 2


def window_batch(ids, *, context, batch_size, seed, k):
    """Micro-batch k of a run: batch_size windows of context + 1 characters at offsets drawn
    from default_rng([seed, k]) -> (tokens, targets, counted) [B, context] each, the targets
    the tokens shifted by one. Stateless: a resumed run draws the same windows."""
    starts = np.random.default_rng([seed, k]).integers(len(ids) - context, size=batch_size)
    rows = np.stack([ids[s:s + context + 1] for s in starts])  # [B, context + 1]
    return rows[:, :-1], rows[:, 1:], np.ones((batch_size, context), dtype=bool)


def loss_sum(config):
    """-> loss_sum(params, batch, rng): the summed cross-entropy of every target (the
    unembedding fused with the loss: training/losses.py)."""
    return losses.lm_loss_sum(lambda params, tokens, rng, n, unembed=None: causal_lm(
        params, tokens, logits_to_keep=n, unembed=unembed, **config))


def evaluate(params, config, ids, *, context, batch_size, batches, seed):
    """The mean loss per character over `batches` windows batches of ids, drawn from
    (seed, 10 ** 9 + j): the same windows at every evaluation, so that a curve's points differ
    by the model alone (nanoGPT's estimate_loss draws new ones)."""
    parts = [window_batch(ids, context=context, batch_size=batch_size, seed=seed,
                          k=10 ** 9 + j) for j in range(batches)]
    total = sum(float(loss_sum(config)(params, part, None)) for part in parts)
    return total / (batches * batch_size * context)


def train_char_gpt(params, config, train_ids, val_ids, *, steps, context, batch_size, lr,
                   min_lr, warmup, weight_decay, betas, max_grad_norm, eval_every,
                   eval_batches, seed=0, out=None, state=None, settings=None, callback=None,
                   on_eval=None):
    """Train -> the final state (training/loop.py's, with "evals": [(step, train loss,
    validation loss)]). Evaluates both splits at step 0, every eval_every steps and at the
    end, then calls on_eval(state) (a sample, a progress line); a checkpoint in `out` after
    each evaluation (and on Ctrl-C: loop.train's, at the last step; Ctrl-C during an
    evaluation leaves the one before). NonFinite where a step's loss or an evaluation is NaN
    or infinite; the last checkpoint is then the last finite evaluation's.
    state: a checkpoint's to continue from (its "evals" in its settings)."""
    state = state or {"step": 0, "trainable": params, "adam": adamw_init(params),
                      "losses": [], "settings": {**(settings or {}), "evals": []}}
    first = -(-state["step"] // eval_every) * eval_every  # the evaluations still to come
    for stop in itertools.chain(range(first, steps, eval_every), [steps]):
        state = loop.train(loss_sum(config), None, None, steps=stop, total=steps,
                           batch_size=batch_size, pad_id=None, lr=lr, min_lr=min_lr,
                           warmup=warmup, weight_decay=weight_decay, betas=betas,
                           decays=decays, max_grad_norm=max_grad_norm, seed=seed, state=state,
                           out=out, at_end=False,
                           callback=callback, batches=lambda k: window_batch(
                               train_ids, context=context, batch_size=batch_size, seed=seed,
                               k=k))
        if state["settings"]["evals"] and state["settings"]["evals"][-1][0] == stop:
            continue  # resumed at an evaluation already made
        split_losses = [evaluate(state["trainable"], config, ids, context=context,
                                 batch_size=batch_size, batches=eval_batches, seed=seed)
                        for ids in (train_ids, val_ids)]
        if not all(map(math.isfinite, split_losses)):  # (the weights, not only the batches)
            raise loop.NonFinite(f"the evaluation's loss became {split_losses[0]} (training "
                                 f"split) and {split_losses[1]} (validation) at step {stop}")
        state["settings"]["evals"].append([stop, *split_losses])
        if out is not None:  # a checkpoint once its evaluation is finite
            checkpoints.save_checkpoint(out, state)
        if on_eval is not None:
            on_eval(state)
    return state


def sample(params, config, prompt_ids, n_new, *, context, rng, temperature=1.0, top_k=None):
    """Continue prompt_ids (int [n]) by n_new characters -> int [n + n_new]: each drawn from
    softmax(logits / temperature) of the last `context` characters (the model has no
    positions beyond them), restricted to the top_k most likely where given. A temperature
    near 0 draws the most likely character."""
    if not temperature >= np.finfo(np.float64).tiny:  # (a subnormal one: 0 to some CPUs)
        raise ValueError(f"temperature must be > 0 and at least the smallest normal float64, "
                         f"2.2e-308, got {temperature!r}")
    ids = list(prompt_ids)
    for _ in range(n_new):
        window = np.asarray(ids[-context:])[None]  # [1, <= context]
        logits = causal_lm(params, window, logits_to_keep=1, **config)[0, -1]
        if not np.all(np.isfinite(logits)):
            raise ValueError("the model's logits are not finite (its weights hold NaN or "
                             "infinite values): nothing to sample")
        if top_k is not None:
            logits = np.where(logits < np.sort(logits)[-top_k], -np.inf, logits)
        with np.errstate(over="ignore", divide="ignore"):  # a small temperature: -inf, 0 there
            p = np.exp((logits.astype(np.float64) - logits.max()) / temperature)
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return np.array(ids)
