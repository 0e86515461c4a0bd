"""A causal language model: token embeddings, a stack of pre-norm decoder blocks under a
causal mask, the final norm and the unembedding; int tokens [B, L] -> logits [B, L, V] for the
next token at every position. GPT-2 and Llama style by keyword; a family whose model differs
(Gemma's scaled embeddings and capped logits) writes it in its own file, minattn/families/,
registered for the calls that select it (engine/variants.py)."""
import autograd.numpy as np

from .engine import checks, variants
from .engine.threads import decode_step, same_model, threads_chosen_by_timing
from .engine.decoder_checks import POSITIONS, check_causal_lm
from .engine.param_checks import ROPE_BASE
from .linear import linear, rows
from .masks import causal_mask
from .transformer_decoder import decoder, init_decoder, normalize, takers


def init_causal_lm(rng, vocab_size, n_layers, d_model, n_heads, d_ff, *, position="learned",
                   n_positions=1024, tied=True, activation="gelu_tanh", dtype=np.float64,
                   **block_config):
    """-> (params, config), the model as from_hf returns it: params {"token_embedding": [V, D],
    ("position_embedding": [n_positions, D],) "layers", "final_norm", ("lm_head": [D, V] unless
    tied)}, and config {"n_heads", "n_kv_heads", "d_k", "norm", "activation", "position"}, the
    keywords of causal_lm(params, tokens, **config) and generate. GPT-2 (position="learned",
    tied) or Llama (position="rope", norm="rms_norm", activation="swiglu", bias=False,
    tied=False) style; block_config as init_decoder_block (n_kv_heads, d_k, norm, bias,
    qk_norm)."""
    vocab_size = checks.check_size("vocab_size", vocab_size)
    dtype = checks.check_init(rng, dtype)
    checks.check_choice("position", position, POSITIONS)
    params = {"token_embedding": (0.02 * rng.normal(size=(vocab_size, d_model))).astype(dtype)}
    if position == "learned":
        n_positions = checks.check_size("n_positions", n_positions)
        params["position_embedding"] = (0.01 * rng.normal(size=(n_positions, d_model))).astype(dtype)
    params.update(init_decoder(rng, n_layers, d_model, n_heads, d_ff, final_norm=True,
                               activation=activation, dtype=dtype, **block_config))
    if not tied:
        params["lm_head"] = (0.02 * rng.normal(size=(d_model, vocab_size))).astype(dtype)
    config = {"n_heads": n_heads, "n_kv_heads": block_config.get("n_kv_heads"),
              "d_k": block_config.get("d_k"), "norm": block_config.get("norm", "layer_norm"),
              "activation": activation, "position": position}
    return params, config


# The keywords causal_lm passes on to its blocks and their attention (in **block_config).
PASSED_ON = {"norm": "layer_norm", "eps": None, "n_kv_heads": None, "d_k": None,
             "rope_base": ROPE_BASE, "rope_scaling": None, "attention": None}


@threads_chosen_by_timing(decode_step, same_model)
def causal_lm(params, tokens, attention_mask=None, *, n_heads, activation="gelu_tanh",
              position="learned", window=None, cache=None, return_cache=False,
              logits_to_keep=None, embed=None, unembed=None, **block_config):
    """A decoder-only language model: int tokens [B, L] -> logits [B, L, V] for the NEXT token
    at every position (pre-norm blocks, a causal mask, the final norm, then the unembedding:
    params["lm_head"], or the token embedding transposed when tied; plus its bias
    params["lm_head_bias"] [V] where given). With a cache (or return_cache=True, starting
    empty) -> (logits, new cache): the tokens continue the cached sequence at positions
    L_past .. L_past + L - 1. attention_mask (int or bool [B, L_past + L], Hugging Face's
    convention: 1 = real token, 0 = padding, padding on the left): no query attends to
    padding, and each row's positions count its real tokens from 0. Config: n_heads,
    activation ("relu", "gelu", "gelu_tanh", "swiglu"), position ("learned", "rope"), window
    (a sliding window of that many keys; a list: one per layer, None for a global layer);
    block_config: the blocks' and their attention's keywords (norm: "layer_norm" or
    "rms_norm", eps (None: each norm its own default, as decoder_block's), n_kv_heads, d_k,
    rope_base, rope_scaling, attention: minattn.transformer_decoder), a list holding one value
    per layer. logits_to_keep=n: the
    logits of the last n positions only, [B, n, V] (generate needs the last one: the
    unembedding is the largest product of a long prompt). embed(params, tokens) -> [B, L, D]:
    the token embedding, where a family plugs in its own; unembed(params, h) -> what the call
    returns in place of the logits, from the final hidden state h [B, n, D] (a training loss
    fused with the unembedding: minattn/training/losses.py)."""
    # int [B, L] -> [B, L, V]
    params, tokens, attention_mask, past = check_causal_lm(
        params, tokens, attention_mask, n_heads, activation, position, cache, logits_to_keep,
        block_config, takers(block_config))
    positions = _positions(attention_mask, past, tokens.shape[-1], tokens)  # [L], or [B, L]
    x = (embed or _embed)(params, tokens)  # [B, L, D]
    if position == "learned":
        x = x + rows(params["position_embedding"], positions)
    masks = _masks(window, attention_mask, past, tokens)  # [L, L_past + L], one a layer if a list
    cache = tuple({} for _ in params["layers"]) if cache is None and return_cache else cache
    out = decoder({"layers": params["layers"], "final_norm": params["final_norm"]}, x, masks,
                  cache=cache, n_heads=n_heads, norm_first=True, activation=activation,
                  positions=positions if position == "rope" else None, **block_config)
    h, new_cache = out if cache is not None else (out, None)  # [B, L, D]
    logits = (unembed or _unembed)(params, _last(h, logits_to_keep))  # [B, n, V], or the hook's
    return logits if cache is None else (logits, new_cache)


# Its variants, each in its own file, answer the calls that select them (engine/variants.py).
causal_lm = variants.dispatch(causal_lm, hooks=("embed", "unembed"), shows=PASSED_ON)


def final_logits(params, h, **config):
    """The model's last steps on a residual stream h [B, L, D] -> logits [B, L, V]: the final
    norm (params["final_norm"], config's norm and eps), then the unembedding, as causal_lm ends;
    the logit lens reads each layer's stream through it (models/patching.py). config: causal_lm's
    keywords (a family's variant reads its own: Gemma's final_logit_softcapping)."""
    # [B, L, D] -> [B, L, V]
    norm, eps = config.get("norm", PASSED_ON["norm"]), config.get("eps", PASSED_ON["eps"])
    return _unembed(params, normalize(h, params["final_norm"], norm, eps))


# Its variant (Gemma's capped logits: families/gemma.py) answers the calls that select it.
final_logits = variants.dispatch(final_logits)


def _embed(params, tokens):
    # int [B, L] -> [B, L, D]: each token's row of the embedding table
    return rows(params["token_embedding"], tokens)


def _last(h, n):
    # [B, L, D] -> the last n positions, [B, n, D] (all of them: n None or n >= L, h itself,
    # whose gradient is then not added into zeros through autograd's np.add.at)
    return h if n is None or n >= h.shape[-2] else h[..., -n:, :]


def _unembed(params, h):
    # [B, L, D] (or the last n positions, [B, n, D]) -> [B, L, V] (linear: one 2-D product over
    # all positions, forwards and backwards, not one per row of B)
    w, b = unembedding(params)
    return linear(h, w) if b is None else linear(h, w) + b


def unembedding(params):
    """-> (w [D, V], b [V] or None): params["lm_head"], or the token embedding transposed
    (tied); and the unembedding's bias params["lm_head_bias"] where params has one."""
    w = params["lm_head"] if "lm_head" in params else params["token_embedding"].T
    return w, params.get("lm_head_bias")


def _masks(window, attention_mask, past, tokens):
    # A window per layer (a list): one mask per layer; else one mask for every layer
    if isinstance(window, list):
        return [_mask(w, attention_mask, past, tokens) for w in window]
    return _mask(window, attention_mask, past, tokens)


def _mask(window, attention_mask, past, tokens):
    # -> [L, L_past + L], and not to padding: [B, 1, L, L_past + L]; None where nothing is hidden
    length = tokens.shape[-1]
    if length == 1 and window is None and attention_mask is None:
        return None  # one new token, the last position, sees every key: nothing to hide
    # The new tokens are the LAST L of L_past + L positions: bottom-right alignment.
    causal = causal_mask(length, past + length, align="bottom_right", window=window, like=tokens)
    return causal if attention_mask is None else causal & attention_mask[:, None, None, :]


def _positions(attention_mask, past, length, like):
    # -> int [L], or [B, L] with an attention_mask [B, L_past + L]: as transformers' generate,
    # a row's positions count its real tokens (cumsum - 1), padding at position 0.
    if attention_mask is None:
        return np.arange(past, past + length, like=like)
    counted = np.cumsum(attention_mask, axis=-1) - 1  # [B, L_past + L]
    return np.where(attention_mask, counted, 0)[:, past:]
