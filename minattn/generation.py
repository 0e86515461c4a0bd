"""Generation: extend a sequence one token at a time with a causal language model, through
its KV cache; greedy, or sampled with a temperature, top-k and top-p (the nucleus)."""
import autograd.numpy as np
import numpy

from .engine.decoder_checks import _check_generate
from .language_model import causal_lm


def generate(params, tokens, n_new, attention_mask=None, *, temperature=0.0, top_k=None,
             top_p=None, rng=None, eos_token_id=None, pad_token_id=None, use_cache=True,
             progress=None, **config):
    """Extend int tokens [B, L] by n_new tokens -> [B, L + n_new], or fewer when every row has
    ended (model.generate's semantics). Greedy (the argmax, temperature=0) by default;
    temperature > 0 samples from softmax(logits / temperature), restricted to the top_k most
    likely tokens and then to the nucleus (the most likely tokens whose probabilities add up to
    top_p) if given, with the np.random.Generator rng. attention_mask: as causal_lm (left
    padding). eos_token_id (an int or a list): a row that produced one has ended, and continues
    with pad_token_id (default: the first eos token, as model.generate). use_cache=True feeds one token per step through the KV cache;
    use_cache=False reruns the whole sequence every step (same tokens, quadratic cost).
    progress: an optional callable wrapping the step range (e.g. tqdm.trange's iterator).
    config as causal_lm."""
    # int [B, L] -> int [B, L + n_new]
    n_new, tokens, attention_mask, eos, pad_token_id = _check_generate(
        params, tokens, n_new, attention_mask, temperature, top_k, top_p, rng, eos_token_id,
        pad_token_id, config)
    steps = range(n_new) if progress is None else progress(range(n_new))
    cache, new = None, tokens
    ended = np.zeros_like(tokens[:, 0], dtype=bool)  # [B]
    for _ in steps:
        logits, cache = _forward(params, tokens, new, attention_mask, cache, use_cache, config)
        new = _next_token(logits[:, -1], temperature, top_k, top_p, rng)  # [B]
        new, ended = _pad_ended(new, ended, eos, pad_token_id)  # [B, 1], [B]
        tokens, attention_mask = _extend(tokens, attention_mask, new)  # [B, L + 1]
        if eos is not None and bool(np.all(ended)):
            break
    return tokens


def _forward(params, tokens, new, attention_mask, cache, use_cache, config):
    # -> (the logits of the last position [B, 1, V], the new cache). With the cache only the new
    # tokens go through the model, the past's keys and values being cached; without it, all.
    if use_cache:
        return causal_lm(params, new, attention_mask, cache=cache, return_cache=True,
                         logits_to_keep=1, **config)
    return causal_lm(params, tokens, attention_mask, logits_to_keep=1, **config), None


def _pad_ended(new, ended, eos, pad_token_id):
    # int [B], bool [B] -> int [B, 1], bool [B]: a row that has ended continues with padding
    if eos is not None:
        new = np.where(ended, pad_token_id, new)
        ended = ended | np.isin(new, eos)
    return new[:, None], ended


def _extend(tokens, attention_mask, new):
    # [B, L], [B, L] or None, [B, 1] -> [B, L + 1] each (numpy's own concatenate: the arrays'
    # library)
    tokens = numpy.concatenate([tokens, new], axis=1)
    if attention_mask is not None:
        attention_mask = numpy.concatenate([attention_mask, np.ones_like(new, dtype=bool)], 1)
    return tokens, attention_mask


def _next_token(logits, temperature, top_k, top_p, rng):
    # [B, V] -> int [B]
    if temperature == 0:
        return np.argmax(logits, axis=-1)  # the first maximum on ties, as torch.argmax
    # Shifted by the row max and divided in float64: a temperature too small for float32 (1e-300
    # is 0 there) still gives its limit, -inf (weight 0) to every token but the most likely.
    shifted = (logits - np.max(logits, axis=-1, keepdims=True)).astype(numpy.float64)
    with numpy.errstate(over="ignore"):
        logits = shifted / temperature
    if top_k is not None:  # keep the top_k largest logits of each row
        kth = np.sort(logits, axis=-1)[:, -min(top_k, logits.shape[-1])][:, None]  # as HF
        logits = np.where(logits >= kth, logits, -np.inf)
    if top_p is not None:
        logits = np.where(_nucleus(logits, top_p), logits, -np.inf)
    p = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    cdf = np.cumsum(p, axis=-1)  # [B, V]
    cdf = cdf / cdf[:, -1:]  # ends at exactly 1: every u in [0, 1) falls on a token
    u = rng.random((logits.shape[0], 1))  # inverse-CDF sampling, one uniform per row
    return np.sum(cdf <= u, axis=-1)  # the first token whose cdf exceeds u, never one of weight 0


def _nucleus(logits, top_p):
    # [B, V] -> bool [B, V]: the most likely tokens whose probabilities reach top_p (Holtzman et
    # al. 2019), as transformers' TopPLogitsWarper: drop, from the least likely up, the tokens
    # whose cumulative probability stays <= 1 - top_p; the most likely token always stays.
    p = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    p = p / np.sum(p, axis=-1, keepdims=True)
    order = np.argsort(logits, axis=-1, kind="stable")  # least likely first
    cumulative = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
    keep = (cumulative > 1 - top_p) | (np.arange(p.shape[-1], like=p) == p.shape[-1] - 1)
    return np.take_along_axis(keep, np.argsort(order, axis=-1), axis=-1)
