"""What the heads of a real model do: previous-token and induction heads, found by their
attention on repeated random tokens and tested by ablation (walkthrough.md, "What the heads of
a real model do"; the toy version is models/induction.py).

    lm = load_language_model()                                   # SmolLM2-135M-Instruct
    tokens = repeated_random_tokens(lm, numpy.random.default_rng(0), n=50, batch=4)  # [4, 100]
    scores = head_scores(lm, tokens)       # {"previous_token", "induction": [n_layers, H]}
    top = top_heads(scores["induction"], 5)                           # [(layer, head), ...]
    in_context_loss(lm, tokens)                                     # (first half, second half)
    in_context_loss(lm, tokens, head_mask=ablation_mask(lm, top))   # the same, those 5 removed

A sequence of n random tokens followed by the same n again: the first half is unpredictable,
the second can be copied from the first. The scores are means of the model's own attention
weights, those causal_lm computes (its scaled_dot_product_attention, read through minattn.swap;
each query head's weights, grouped-query attention included):

    previous_token[l, h] = mean over the batch and t = 1 .. 2n-1 of  w[l, h, t, t - 1]
    induction[l, h]      = mean over the batch and t = n .. 2n-1 of  w[l, h, t, t - n + 1]

Key t - n + 1 is the token after the earlier occurrence of token t: the one to copy next.
Any model with .params and .config (causal_lm's keywords) will do; its attention must call
scaled_dot_product_attention once per layer (self_attention does), or head_scores says so.
"""
import numpy as np

from ..course.swap import swap
from ..language_model import causal_lm
from ..loss import cross_entropy


def repeated_random_tokens(lm, rng, n, batch=1):
    """-> int tokens [batch, 2n]: n tokens drawn independently and uniformly from lm's vocabulary
    minus its special tokens (SmolLM2: ids 0 to 16, <|endoftext|>, <|im_start|>, ...), then the
    same n again. rng: a numpy.random.Generator."""
    # -> [B, 2n]
    allowed = _check_repeated_random_tokens(lm, rng, n, batch)
    first = allowed[rng.integers(0, len(allowed), size=(batch, n))]  # [B, n]
    return np.concatenate([first, first], axis=1)  # [B, 2n]


def head_scores(lm, tokens):
    """int tokens [B, 2n] whose second half repeats the first -> {"previous_token",
    "induction": [n_layers, H] in double precision} (module docstring): mean attention weights, over the
    batch and the query positions, of each query head of each layer."""
    # [B, 2n] -> {name: [n_layers, H]}
    n = _check_head_scores(lm, tokens)
    scores = {"previous_token": [], "induction": []}

    def score(weights):  # one layer's weights [B, H, 2n, 2n], rows: queries
        t = np.arange(1, 2 * n)  # every query with a previous token
        previous = weights[..., t, t - 1]  # [B, H, 2n - 1]
        t = np.arange(n, 2 * n)  # the queries of the repeat
        induction = weights[..., t, t - n + 1]  # [B, H, n]: after the earlier occurrence
        scores["previous_token"].append(np.mean(previous, axis=(0, -1), dtype=float))
        scores["induction"].append(np.mean(induction, axis=(0, -1), dtype=float))

    _forward(lm, tokens, score)
    return {name: np.array(rows, dtype=float) for name, rows in scores.items()}


def attention_weights(lm, tokens, head_mask=None):
    """int tokens [B, L] -> (logits [B, L, V], weights [n_layers] of [B, H, L, L]): causal_lm's
    output and each layer's attention weights, each query head's own (rows: queries)."""
    weights = []
    logits = _forward(lm, _check_tokens(lm, tokens), weights.append, head_mask)
    return logits, weights


def in_context_loss(lm, tokens, head_mask=None):
    """int tokens [B, 2n] whose second half repeats the first -> (the mean next-token loss on
    the first half, tokens 1 .. n-1; on the second half, tokens n .. 2n-1), in nats. The first
    token of the repeat (n) cannot be copied yet, the rest can. head_mask: as causal_lm's."""
    # [B, 2n] -> (float, float)
    n = _check_head_scores(lm, tokens)
    logits = causal_lm(lm.params, tokens, head_mask=head_mask, **lm.config)  # [B, 2n, V]
    first = cross_entropy(logits[:, :n - 1], tokens[:, 1:n])  # predicts tokens 1 .. n-1
    second = cross_entropy(logits[:, n - 1:-1], tokens[:, n:])  # predicts tokens n .. 2n-1
    return float(first), float(second)


def top_heads(scores, k):
    """scores [n_layers, H] -> the k (layer, head) pairs with the highest scores, best first."""
    scores = np.asarray(scores)
    order = np.argsort(-scores, axis=None, kind="stable")[:k]
    return [tuple(int(i) for i in np.unravel_index(j, scores.shape)) for j in order]


def ablation_mask(lm, heads):
    """[(layer, head), ...] -> head_mask [n_layers, H] for causal_lm: 0 at those heads, 1
    elsewhere (in the model's dtype). Raises ValueError naming a layer or head out of range."""
    n_layers, n_heads = _check_ablation_mask(lm, heads)
    mask = np.ones((n_layers, n_heads), dtype=lm.params["token_embedding"].dtype)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


def random_heads(lm, rng, k, exclude=()):
    """-> k distinct (layer, head) pairs drawn uniformly from the model's heads not in exclude:
    the control for an ablation of k chosen heads."""
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    pool = [(l, h) for l in range(n_layers) for h in range(n_heads) if (l, h) not in set(exclude)]
    if not 0 <= k <= len(pool):
        raise ValueError(f"k must be in [0, {len(pool)}] (the heads not excluded), got {k}")
    return [pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False))]


def induction_report(lm, tokens, k=5, rng=None, draws=3, progress=None):
    """The experiment of `python -m minattn heads` on tokens [B, 2n] -> a dict: "previous_token"
    and "induction" scores [n_layers][H]; the top k heads of each; the in-context loss
    (first half, second half) intact ("intact"), with the top k induction heads ablated
    ("induction_ablated") and with k random other heads ablated, `draws` times ("random_ablated",
    a list; the heads drawn from rng in "random_heads"). progress(): called after each of the
    3 + draws forward passes."""
    progress = progress or (lambda: None)
    scores = head_scores(lm, tokens)
    progress()
    top = top_heads(scores["induction"], k)
    report = {name: value.tolist() for name, value in scores.items()}
    report.update(top_previous_token=top_heads(scores["previous_token"], k), top_induction=top,
                  intact=in_context_loss(lm, tokens))
    progress()
    report["induction_ablated"] = in_context_loss(lm, tokens, ablation_mask(lm, top))
    progress()
    report["random_heads"], report["random_ablated"] = [], []
    for _ in range(draws):
        heads = random_heads(lm, rng, k, exclude=top)
        report["random_heads"].append(heads)
        report["random_ablated"].append(in_context_loss(lm, tokens, ablation_mask(lm, heads)))
        progress()
    return report


def _forward(lm, tokens, keep, head_mask=None):
    # causal_lm with its scaled_dot_product_attention watched: keep(weights [B, H, L, L]) is
    # called once per layer, in order, with the weights the model itself computed. Grouped-query
    # attention hands them over grouped, [B, H_kv, G, L, L]; query head h is group h // G, member
    # h % G, as grouped_attention numbers them, so a reshape gives [B, H, L, L].
    from .. import scaled_dot_product_attention

    batch, length = tokens.shape
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    calls = []

    def watched(*args, **kwargs):
        output, weights = scaled_dot_product_attention(*args, **kwargs)
        calls.append(weights.shape)
        if weights.size == batch * n_heads * length * length:
            keep(np.reshape(weights, (batch, n_heads, length, length)))
        return output, weights

    with swap(scaled_dot_product_attention=watched):
        logits = causal_lm(lm.params, tokens, head_mask=head_mask, **lm.config)
    if len(calls) != n_layers or any(np.prod(s) != batch * n_heads * length ** 2 for s in calls):
        raise ValueError(f"the model's attention called scaled_dot_product_attention {len(calls)}"
                         f" times with weights of shapes {calls[:3]}, not once per layer "
                         f"({n_layers}) with [B, H, L, L] = {(batch, n_heads, length, length)}: "
                         "its heads' weights cannot be read this way")
    return logits


# -- argument checks -----------------------------------------------------------------------

def _check_model(lm):
    if not (hasattr(lm, "params") and hasattr(lm, "config")):
        raise TypeError(f"lm must be a model with .params and .config (load_language_model's "
                        f"LanguageModel), got {type(lm).__name__}")


def _check_tokens(lm, tokens):
    _check_model(lm)
    tokens = np.asarray(tokens)
    if tokens.dtype.kind not in "iu" or tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"tokens must be an int array [B, L] with L >= 1, got dtype "
                         f"{tokens.dtype} and shape {tokens.shape}")
    context = getattr(lm, "context_length", None)
    if context is not None and tokens.shape[1] > context:
        raise ValueError(f"tokens has {tokens.shape[1]} positions, more than the model's context "
                         f"of {context}")
    return tokens


def _check_head_scores(lm, tokens):
    # -> n, half the length
    tokens = _check_tokens(lm, tokens)
    length = tokens.shape[1]
    if length % 2 or length < 4:
        raise ValueError(f"tokens must have an even length 2n >= 4 (n tokens, then the same n "
                         f"again), got {length}")
    n = length // 2
    differ = np.nonzero(np.any(tokens[:, :n] != tokens[:, n:], axis=0))[0]
    if differ.size:
        raise ValueError(f"tokens' second half must repeat its first (tokens[:, {n}:] == "
                         f"tokens[:, :{n}]), but they differ at position {int(differ[0])} of "
                         f"{n}")
    return n


def _check_repeated_random_tokens(lm, rng, n, batch):
    _check_model(lm)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    for name, value in (("n", n), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if n < 2:
        raise ValueError(f"n must be at least 2 (the repeat needs a token to copy), got {n}")
    context = getattr(lm, "context_length", None)
    if context is not None and 2 * n > context:
        raise ValueError(f"n={n} gives 2n = {2 * n} tokens, more than the model's context of "
                         f"{context}")
    vocab_size = lm.params["token_embedding"].shape[0]
    special = set(_special_ids(lm))
    return np.array([i for i in range(vocab_size) if i not in special])


def _special_ids(lm):
    # The tokenizer's special tokens (none without a tokenizer).
    tokenizer = getattr(lm, "tokenizer", None)
    backend = getattr(tokenizer, "backend", None)
    if backend is None:
        return []
    return sorted(i for i, token in backend.get_added_tokens_decoder().items() if token.special)


def _check_ablation_mask(lm, heads):
    _check_model(lm)
    n_layers, n_heads = len(lm.params["layers"]), lm.config["n_heads"]
    for i, pair in enumerate(heads):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in pair)):
            raise TypeError(f"heads[{i}] must be a (layer, head) pair of ints, got {pair!r}")
        layer, head = pair
        if not 0 <= layer < n_layers:
            raise ValueError(f"heads[{i}] = {tuple(pair)}: layer must be in [0, {n_layers - 1}]")
        if not 0 <= head < n_heads:
            raise ValueError(f"heads[{i}] = {tuple(pair)}: head must be in [0, {n_heads - 1}]")
    return n_layers, n_heads
