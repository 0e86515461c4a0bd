"""An induction head, grown from scratch: a two-layer, attention-only causal transformer trained
with autograd and Adam (minattn.training.optimizer's AdamW, no weight decay) on a random block
of tokens repeated twice.

The first block is unpredictable; its repeat is predictable only by looking back: "the current
token occurred before; the token that followed it then comes next". Olsson et al. (2022, "In-
context learning and induction heads") found the circuit that does this: a previous-token head
(layer 0) writes "my previous token was A" into each position, and an induction head (layer 1)
whose keys read that, K-composition, so that a query "I am A" finds the token after the earlier
A and copies it. There is no feed-forward sublayer, so the circuit is all attention.

The block length changes from batch to batch (BLOCK_LENGTHS), so "attend T - 1 positions back"
is no shortcut: a head must find the earlier occurrence by content (walkthrough.md, "What
attention learns").
"""
import autograd.numpy as np
from autograd import value_and_grad

from ..engine.threads import one_blas_thread
from ..loss import cross_entropy
from ..masks import causal_mask
from ..multi_head import init_multi_head_attention, multi_head_attention
from ..training.optimizer import adamw_init, adamw_update

VOCAB_SIZE = 32
BLOCK_LENGTHS = (8, 16)  # each batch draws its block length T from this range, inclusive
EVAL_BLOCK = 12  # the held-out sequences: 12 tokens, then the same 12 again
CONFIG = {"d_model": 64, "n_heads": 4, "n_layers": 2}
STEPS = 1000  # the CLI's default


def make_repeated_blocks(rng, n_sequences, block, vocab_size=VOCAB_SIZE):
    """-> int tokens [N, 2 T]: T distinct random tokens, then the same T tokens again."""
    keys = rng.random((n_sequences, vocab_size))
    first = np.argsort(keys, axis=1)[:, :block]  # [N, T]: distinct tokens, in random order
    return np.concatenate([first, first], axis=1)  # [N, 2T]


def init_induction_model(rng, vocab_size=VOCAB_SIZE, n_positions=2 * BLOCK_LENGTHS[1], *,
                         d_model=64, n_heads=4, n_layers=2):
    """-> {"embedding": [V, D], "positions": [L_max, D], "layers": [attention params] * n_layers,
    "unembedding": [D, V]}: learned token and position embeddings, attention without biases."""
    return {
        "embedding": rng.normal(0.0, 1.0, size=(vocab_size, d_model)),
        "positions": rng.normal(0.0, 1.0, size=(n_positions, d_model)),
        "layers": [init_multi_head_attention(rng, d_model, n_heads, bias=False)
                   for _ in range(n_layers)],
        "unembedding": rng.normal(0.0, d_model ** -0.5, size=(d_model, vocab_size)),
    }


def induction_model(params, tokens, *, n_heads, return_weights=False):
    """int tokens [N, L] -> next-token logits [N, L, V] (and per layer the weights [N, H, L, L]
    with return_weights=True). Each layer adds its attention to the residual stream; nothing
    else."""
    length = tokens.shape[-1]
    x = params["embedding"][tokens] + params["positions"][:length]  # [N, L, D]
    mask = causal_mask(length)  # [L, L]: position t sees 0..t
    weights = []
    for layer in params["layers"]:
        out, w = multi_head_attention(layer, x, x, x, mask, n_heads=n_heads)  # w [N, H, L, L]
        x = x + out  # the residual stream
        weights.append(w)
    logits = x @ params["unembedding"]  # [N, L, V]
    return (logits, weights) if return_weights else logits


def next_token_loss(params, tokens, *, n_heads):
    """The mean cross-entropy of predicting token t + 1 from tokens 0..t, over the sequence."""
    logits = induction_model(params, tokens[:, :-1], n_heads=n_heads)  # [N, 2T - 1, V]
    return cross_entropy(logits, tokens[:, 1:])


def train_induction_model(seed=0, steps=STEPS, batch_size=32, lr=3e-3, callback=None, *,
                          vocab_size=VOCAB_SIZE, block_lengths=BLOCK_LENGTHS, **config):
    """Train with autograd and Adam -> params; deterministic for a seed. Each batch's block
    length T is drawn from block_lengths (inclusive). config: d_model, n_heads, n_layers
    (CONFIG's by default). callback(step, loss) after every step."""
    config = {**CONFIG, **config}
    rng = np.random.default_rng(seed)
    params = init_induction_model(rng, vocab_size, 2 * block_lengths[1], **config)
    state = adamw_init(params)
    loss_and_grad = value_and_grad(
        lambda p, tokens: next_token_loss(p, tokens, n_heads=config["n_heads"]))
    with one_blas_thread():  # small products: a second BLAS thread costs more than it gives
        for step in range(steps):
            block = int(rng.integers(block_lengths[0], block_lengths[1] + 1))
            tokens = make_repeated_blocks(rng, batch_size, block, vocab_size)
            loss, grads = loss_and_grad(params, tokens)
            params, state = adamw_update(params, grads, state, lr=lr, weight_decay=0.0)
            if callback is not None:
                callback(step, float(loss))
    return params


def loss_per_position(params, tokens, *, n_heads):
    """int tokens [N, L] -> the loss of predicting each token from those before it, [L - 1]
    (entry t - 1 is token t's), averaged over the N sequences."""
    logits = induction_model(params, tokens[:, :-1], n_heads=n_heads)  # [N, L - 1, V]
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probs, tokens[:, 1:, None], axis=-1)[..., 0]  # [N, L - 1]
    return -np.mean(picked, axis=0)


def half_losses(params, tokens, *, n_heads):
    """-> (loss on the first block's tokens 1..T-1, loss on the repeat's tokens T..2T-1): the
    first is a guess among unseen tokens; the second can be read off the first block."""
    losses = loss_per_position(params, tokens, n_heads=n_heads)  # [2T - 1]
    block = tokens.shape[-1] // 2
    return float(np.mean(losses[:block - 1])), float(np.mean(losses[block - 1:]))


def induction_scores(weights):
    """weights [N, H, 2T, 2T] -> [H]: the mean attention from each token of the repeat (position
    i >= T) to the token after its previous occurrence (position i - T + 1)."""
    block = weights.shape[-1] // 2
    rows = np.arange(block, 2 * block)
    return np.mean(weights[..., rows, rows - block + 1], axis=(0, -1))


def previous_token_scores(weights):
    """weights [N, H, L, L] -> [H]: the mean attention from each position i >= 1 to i - 1."""
    rows = np.arange(1, weights.shape[-1])
    return np.mean(weights[..., rows, rows - 1], axis=(0, -1))


def ablate_head(params, layer, head, *, n_heads):
    """-> a copy of params in which head `head` of layer `layer` adds nothing to the residual
    stream: its d_k rows of w_o are zero (zeroing its output)."""
    w_o = params["layers"][layer]["w_o"]  # [D, D]: rows h * d_k .. (h + 1) * d_k read head h
    d_k = w_o.shape[0] // n_heads
    keep = (np.arange(w_o.shape[0]) // d_k != head)[:, None]  # [D, 1]
    layers = [dict(p) for p in params["layers"]]
    layers[layer]["w_o"] = np.where(keep, w_o, 0.0)
    return {**params, "layers": layers}


def evaluate(params, seed=0, n_sequences=200, block=EVAL_BLOCK, vocab_size=VOCAB_SIZE, *,
             n_heads):
    """Held-out sequences -> {"induction_scores", "previous_token_scores": [layer][head],
    "loss_first_half", "loss_second_half"} and the weights of the first sequence."""
    tokens = make_repeated_blocks(np.random.default_rng([seed, 1]), n_sequences, block, vocab_size)
    _, weights = induction_model(params, tokens, n_heads=n_heads, return_weights=True)
    first, second = half_losses(params, tokens, n_heads=n_heads)
    return {"induction_scores": [induction_scores(w).tolist() for w in weights],
            "previous_token_scores": [previous_token_scores(w).tolist() for w in weights],
            "loss_first_half": first, "loss_second_half": second}, tokens[0], \
        [w[0] for w in weights]


def ablation_report(params, seed=0, n_sequences=200, block=EVAL_BLOCK, vocab_size=VOCAB_SIZE,
                    *, n_heads, threshold=0.4):
    """What each head does, by removing it: the last layer's induction heads (score >=
    threshold) zeroed together, and each first-layer head zeroed alone (which heads do the
    induction heads read?) -> a dict of losses and induction scores."""
    tokens = make_repeated_blocks(np.random.default_rng([seed, 1]), n_sequences, block, vocab_size)
    last = len(params["layers"]) - 1

    def measure(p):
        _, weights = induction_model(p, tokens, n_heads=n_heads, return_weights=True)
        first, second = half_losses(p, tokens, n_heads=n_heads)
        return {"loss_first_half": first, "loss_second_half": second,
                "induction_scores": induction_scores(weights[last]).tolist()}

    intact = measure(params)
    heads = [h for h, s in enumerate(intact["induction_scores"]) if s >= threshold]
    ablated = params
    for head in heads:
        ablated = ablate_head(ablated, last, head, n_heads=n_heads)
    report = {"induction_heads": heads, "intact": intact,
              "induction_heads_ablated": measure(ablated)}
    if last > 0:
        report["first_layer_head_ablated"] = [measure(ablate_head(params, 0, h, n_heads=n_heads))
                                              for h in range(n_heads)]
    return report


def ablation_text(report):
    """ablation_report's dict -> a few lines for the terminal."""
    intact, heads = report["intact"], report["induction_heads"]
    if not heads:
        return "no head of the last layer has an induction score >= 0.4: nothing to ablate"
    off = report["induction_heads_ablated"]
    lines = [f"ablation: zeroing the output of the last layer's induction heads {heads}:",
             f"  loss on the repeat {intact['loss_second_half']:.3f} -> "
             f"{off['loss_second_half']:.3f} (first block {off['loss_first_half']:.3f})"]
    for h, r in enumerate(report.get("first_layer_head_ablated", [])):
        best = max(r["induction_scores"][i] for i in heads)
        lines.append(f"  zeroing layer 0 head {h} alone: loss on the repeat "
                     f"{r['loss_second_half']:.3f}, best induction score {best:.3f}")
    return "\n".join(lines)


def curve_text(losses, rows=12, width=40):
    """The training loss as a bar per stretch of steps, and where it fell fastest (the phase
    change) -> a string."""
    losses = np.asarray(losses, dtype=float)
    chunks = np.array_split(np.arange(len(losses)), min(rows, len(losses)))
    means = [float(np.mean(losses[c])) for c in chunks]
    top = max(means)
    lines = ["training loss (mean over each stretch of steps):"]
    for c, m in zip(chunks, means):
        bar = "█" * int(round(width * m / top))
        lines.append(f"  steps {c[0]:>5}-{c[-1]:<5} {m:6.3f} {bar}")
    window = max(1, len(losses) // 20)
    if len(losses) > 2 * window:
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")  # [n - window + 1]
        drops = smooth[:-window] - smooth[window:]  # fall over the next `window` steps
        at = int(np.argmax(drops))
        lines.append(f"fastest fall (the phase change): steps {at + window // 2} to "
                     f"{at + window + window // 2}, mean loss {smooth[at]:.2f} -> "
                     f"{smooth[at + window]:.2f}")
    return "\n".join(lines)


def composition_scores(params, *, n_heads):
    """How much each layer-1 head reads layer-0 head outputs, through its queries, keys or
    values (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"):
    {"q", "k", "v": [H_1, H_0]}, each ||W_1 · W_OV^a|| / (||W_1|| ||W_OV^a||) (Frobenius), where
    W_OV^a = W_V^a W_O^a is what head a writes, and W_1 the layer-1 head's W_Q W_K^T (Q and K)
    or W_OV (V). Random matrices of width D score about 1 / sqrt(D)."""
    def per_head(layer):
        p, d_k = layer, layer["w_q"].shape[1] // n_heads
        cols = [slice(h * d_k, (h + 1) * d_k) for h in range(n_heads)]
        qk = [p["w_q"][:, c] @ p["w_k"][:, c].T for c in cols]  # [D, D]: x_i qk x_j^T
        ov = [p["w_v"][:, c] @ p["w_o"][c, :] for c in cols]  # [D, D]: x ov is what it writes
        return qk, ov

    qk0, ov0 = per_head(params["layers"][0])
    qk1, ov1 = per_head(params["layers"][1])
    norm = np.linalg.norm

    def score(product, a, b):
        return float(norm(product) / (norm(a) * norm(b)))

    return {"q": [[score(ov0[a] @ qk1[b], ov0[a], qk1[b]) for a in range(n_heads)]
                  for b in range(n_heads)],  # a's output in the query: (x ov_a) qk x_j^T
            "k": [[score(qk1[b] @ ov0[a].T, ov0[a], qk1[b]) for a in range(n_heads)]
                  for b in range(n_heads)],  # in the key: x_i qk (x_j ov_a)^T
            "v": [[score(ov0[a] @ ov1[b], ov0[a], ov1[b]) for a in range(n_heads)]
                  for b in range(n_heads)]}  # in the value: (x ov_a) ov_b
