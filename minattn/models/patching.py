"""Where a model carries a feature: the logit lens, activation patching and attribution
patching on a loaded model (walkthrough.md, "Patching: where *plural* travels"), built on
causal_lm's hooks= (minattn/hooks.py).

    lm = load_language_model()                                   # SmolLM2-135M-Instruct
    clean, corrupted = prompt_pair(lm, "The keys to the cabinet", "The key to the cabinet")
    answer, wrong = one_token(lm, " are", "answer"), one_token(lm, " is", "wrong")
    lens = logit_lens(lm, clean, [answer, wrong])      # logits and ranks layer by layer
    result = activation_patching(lm, clean, corrupted, answer, wrong)
    estimate = attribution_patching(lm, clean, corrupted, answer, wrong)

The metric is the logit difference at the last position, d = logit(answer) - logit(wrong).
Patching runs the corrupted prompt with one activation taken from the clean run (denoising),
and reports (d_patched - d_corrupted) / (d_clean - d_corrupted): 0 where the activation
carries nothing of the difference, 1 where it alone restores the clean run's. Every patch
leaves the layers before it as the corrupted run computed them, so a layer's patches run from
that layer on, from the corrupted run's cache of its residual stream, all of them at once
(one batch row each). Attribution patching estimates each head's patch to first order,
(z_clean - z_corrupted) . d(d)/dz at the corrupted run: one forward and one backward pass.
"""
import numpy as np

from ..hooks import kept, replaced, run_with_cache
from ..language_model import causal_lm, final_logits
from ..transformer_decoder import layer_config


def one_token(lm, text, name="answer"):
    """-> the id of text in lm's vocabulary, refused (ValueError saying how it splits) unless
    it is exactly one token. name: what the text is, for the message."""
    ids = lm.tokenizer.encode(text)
    if len(ids) != 1:
        pieces = [lm.tokenizer.decode([i]) for i in ids]
        raise ValueError(f"the {name} {text!r} is {len(ids)} tokens, {pieces}: it must be one "
                         "token (a word with its leading space, as ' are')")
    return ids[0]


def spacing_warning(lm, text, prompt, name="answer"):
    """-> a warning (a str) where text, a one-token answer, has no leading space though the
    prompt ends inside no word and the tokenizer has the word with its space as one token: the
    token that follows a word (' are') is then not the one measured ('are', which continues a
    word); else None."""
    if not text or text[0].isspace() or not prompt or prompt[-1].isspace():
        return None
    if len(lm.tokenizer.encode(" " + text)) != 1:
        return None
    return (f"{name} {text!r} has no leading space: after {prompt[-20:]!r} the next word is "
            f"the token {' ' + text!r}, and {text!r} is another token (one that continues a "
            f"word); give {name} {' ' + text!r} to measure the next word")


def prompt_pair(lm, clean, corrupted):
    """-> (clean, corrupted) int tokens [1, L] each, refused (ValueError showing both
    tokenizations) unless they have the same number of tokens."""
    a, b = lm.tokenizer.encode(clean), lm.tokenizer.encode(corrupted)
    if len(a) != len(b) or not a:
        split = lambda ids: [lm.tokenizer.decode([i]) for i in ids]  # noqa: E731
        raise ValueError(f"the clean and corrupted prompts must have the same number of tokens "
                         f"(at least one), got {len(a)} {split(a)} and {len(b)} {split(b)}")
    return np.array([a]), np.array([b])


def logit_difference(logits, answer, wrong):
    """logits [..., L, V] -> [...]: logit(answer) - logit(wrong) at the last position."""
    return logits[..., -1, answer] - logits[..., -1, wrong]


def logit_lens(lm, tokens, ids):
    """tokens [1, L], token ids [n] -> {"logits", "ranks": [n_layers + 1, n]}: at the last
    position, the residual stream entering layer 0 (the embeddings, row 0) and leaving each
    layer (row l + 1) read through the model's own final norm and unembedding (final_logits);
    rank 0 = the most likely token."""
    n = len(lm.params["layers"])
    _, cache = run_with_cache(lm.params, tokens, names=("resid_pre", "resid_post"), **lm.config)
    streams = [cache["resid_pre", 0]] + [cache["resid_post", layer] for layer in range(n)]
    stream = np.concatenate(streams)[:, -1:]  # the last position, [n + 1, 1, D]
    logits = final_logits(lm.params, stream, **lm.config)[:, -1]  # [n + 1, V]
    chosen = logits[:, ids]  # [n + 1, len(ids)]
    ranks = (logits[:, None, :] > chosen[:, :, None]).sum(-1)
    return {"logits": chosen, "ranks": ranks}


def activation_patching(lm, clean, corrupted, answer, wrong, progress=None):
    """clean, corrupted tokens [1, L] -> {"clean", "corrupted": the logit differences;
    "resid": [n_layers, L] (resid_pre of (layer, position) patched), "attn_out", "mlp_out":
    [n_layers], "heads": [n_layers, H] (each head's z, every position)}, each patch's
    (d - d_corrupted) / (d_clean - d_corrupted) (module docstring). progress(): after each
    layer."""
    _check_pair(clean, corrupted)
    n, length, n_heads = len(lm.params["layers"]), clean.shape[1], lm.config["n_heads"]
    names = ("resid_pre", "attn_out", "z", "mlp_out")
    clean_logits, clean_cache = run_with_cache(lm.params, clean, names=names, logits_to_keep=1,
                                               **lm.config)
    bad_logits, bad_cache = run_with_cache(lm.params, corrupted, names=("resid_pre",),
                                           logits_to_keep=1, **lm.config)
    d_clean, d_bad = _differences(clean_logits, bad_logits, answer, wrong)
    rows = length + n_heads + 2  # positions, then heads, then attn_out, then mlp_out
    out = {"clean": d_clean, "corrupted": d_bad, "resid": np.zeros((n, length)),
           "heads": np.zeros((n, n_heads)), "attn_out": np.zeros(n), "mlp_out": np.zeros(n)}
    for layer in range(n):
        stream = np.where(_positions(rows, length), clean_cache["resid_pre", layer],
                          bad_cache["resid_pre", layer])  # [rows, L, D]
        hooks = {("resid_pre", 0): replaced(stream),
                 ("z", 0): _heads(clean_cache["z", layer], length, rows),
                 ("attn_out", 0): replaced(clean_cache["attn_out", layer], batch=rows - 2),
                 ("mlp_out", 0): replaced(clean_cache["mlp_out", layer], batch=rows - 1)}
        d = logit_difference(_run_from(lm, layer, np.repeat(corrupted, rows, axis=0), hooks),
                             answer, wrong)  # [rows]
        score = (d - d_bad) / (d_clean - d_bad)
        out["resid"][layer], out["heads"][layer] = score[:length], score[length:-2]
        out["attn_out"][layer], out["mlp_out"][layer] = score[-2], score[-1]
        if progress:
            progress()
    return out


def _positions(rows, length):
    # [rows, L, 1]: row p < L takes position p from the clean run
    selected = np.zeros((rows, length, 1), dtype=bool)
    selected[np.arange(length), np.arange(length)] = True
    return selected


def _heads(clean_z, first, rows):
    # z [rows, H, L, d] with row first + h taking head h from the clean run (clean_z [1, H, L, d])
    n_heads = clean_z.shape[1]
    selected = np.zeros((rows, n_heads, 1, 1), dtype=bool)
    selected[first + np.arange(n_heads), np.arange(n_heads)] = True
    return lambda z: np.where(selected, clean_z, z)


def attribution_patching(lm, clean, corrupted, answer, wrong):
    """-> [n_layers, H]: each head's patch estimated to first order, (z_clean - z_corrupted)
    . d(logit difference)/dz at the corrupted run, summed over positions and features, scaled
    as activation_patching's scores. One forward and one backward pass of the corrupted run
    (and one forward of the clean)."""
    from autograd import value_and_grad
    from autograd.tracer import getval

    _check_pair(clean, corrupted)
    n = len(lm.params["layers"])
    clean_logits, clean_cache = run_with_cache(lm.params, clean, names=("z",), logits_to_keep=1,
                                               **lm.config)
    bad_z = {}
    keep = [kept(bad_z, layer) for layer in range(n)]  # the corrupted run's z, layer by layer

    def difference(deltas):  # deltas [n_layers] of [1, H, L, d], zero: the corrupted run
        hooks = {("z", layer): (lambda z, layer=layer: keep[layer](z) + deltas[layer])
                 for layer in range(n)}
        logits = causal_lm(lm.params, corrupted, hooks=hooks, logits_to_keep=1, **lm.config)
        return logit_difference(logits, answer, wrong)[0]

    zeros = [np.zeros_like(clean_cache["z", layer]) for layer in range(n)]
    d_bad, grads = value_and_grad(difference)(zeros)
    d_clean = float(logit_difference(clean_logits, answer, wrong)[0])
    _check_differences(d_clean, float(d_bad))
    estimate = [np.sum((clean_cache["z", layer] - getval(bad_z[layer])) * grads[layer],
                       axis=(0, 2, 3)) for layer in range(n)]  # [H] each
    return np.array(estimate, dtype=float) / (d_clean - float(d_bad))


def _check_pair(clean, corrupted):
    if np.shape(clean) != np.shape(corrupted) or np.ndim(clean) != 2 or np.shape(clean)[0] != 1:
        raise ValueError(f"clean and corrupted must be int tokens [1, L] of the same length, got "
                         f"shapes {np.shape(clean)} and {np.shape(corrupted)}")


def _differences(clean_logits, corrupted_logits, answer, wrong):
    # -> (d_clean, d_corrupted), refused where they are equal: no difference to restore
    d = [float(logit_difference(x, answer, wrong)[0]) for x in (clean_logits, corrupted_logits)]
    _check_differences(*d)
    return d


def _check_differences(d_clean, d_corrupted):
    if d_clean == d_corrupted:
        raise ValueError(f"the clean and corrupted runs give the same logit difference "
                         f"({d_clean}): there is no difference for a patch to restore")


def _run_from(lm, layer, tokens, hooks):
    # causal_lm on layers layer.. only (hooks numbered from there): the logits of the last
    # position [B, 1, V]; a resid_pre hook on its layer 0 brings in what the layers before made.
    params = {**lm.params, "layers": lm.params["layers"][layer:]}
    return causal_lm(params, tokens, hooks=hooks, logits_to_keep=1,
                     **layer_config(lm.config, slice(layer, None)))


def patching_report(lm, clean, corrupted, answer=" are", wrong=" is", progress=None):
    """The experiment of `python -m minattn patch` on two texts -> a dict: "tokens" (each
    prompt's, as text), "answer", "wrong" (their ids), "lens" (logit_lens of the clean prompt),
    activation_patching's scores ("clean", "corrupted", "resid", "attn_out", "mlp_out",
    "heads"), "attribution" [n_layers, H] and "correlation" (Pearson's, between the heads'
    patching scores and their attribution estimates). Bad texts refused before any pass
    (ValueError: one_token, prompt_pair). progress(): after each layer's patches and after the
    attribution pass."""
    answer_id, wrong_id = one_token(lm, answer, "answer"), one_token(lm, wrong, "wrong token")
    clean_tokens, corrupted_tokens = prompt_pair(lm, clean, corrupted)
    report = activation_patching(lm, clean_tokens, corrupted_tokens, answer_id, wrong_id,
                                 progress)
    report["attribution"] = attribution_patching(lm, clean_tokens, corrupted_tokens, answer_id,
                                                 wrong_id)
    if progress:
        progress()
    report["correlation"] = float(np.corrcoef(report["heads"].ravel(),
                                              report["attribution"].ravel())[0, 1])
    report["lens"] = logit_lens(lm, clean_tokens, [answer_id, wrong_id])
    report.update(answer=answer_id, wrong=wrong_id, tokens=[
        [lm.tokenizer.decode([t]) for t in tokens[0]] for tokens in (clean_tokens,
                                                                     corrupted_tokens)])
    return report


def top_heads(scores, k):
    """scores [n_layers, H] -> the k (layer, head) pairs of largest |score|, largest first."""
    order = np.argsort(-np.abs(scores), axis=None, kind="stable")[:k]
    return [tuple(int(i) for i in np.unravel_index(j, scores.shape)) for j in order]
