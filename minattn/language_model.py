"""A causal language model: token embeddings, a stack of pre-norm decoder blocks under a
causal mask, the final norm and the unembedding; int tokens [B, L] -> logits [B, L, V] for the
next token at every position. GPT-2 and Llama style (and the families from_hf loads) by
keyword."""
import autograd.numpy as np

from .engine import checks
from .engine.decoder_checks import POSITIONS, _check_causal_lm
from .kv_cache import self_attention
from .masks import causal_mask
from .softcap import soft_cap
from .transformer_decoder import decoder, init_decoder


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


def causal_lm(params, tokens, attention_mask=None, *, n_heads, n_kv_heads=None, d_k=None,
              norm="layer_norm", activation="gelu_tanh", eps=1e-5, position="learned",
              rope_base=10000.0, rope_scaling=None, partial_rotary_factor=None, window=None,
              parallel=False, embedding_scale=None, query_pre_attn_scalar=None,
              attn_logit_softcapping=None, final_logit_softcapping=None, attention=self_attention,
              cache=None, return_cache=False, logits_to_keep=None,
              head_mask=None):
    """A decoder-only language model: int tokens [B, L] -> logits [B, L, V] for the NEXT token
    at every position (pre-norm blocks, a causal mask, the final norm, then the unembedding:
    params["lm_head"], or the token embedding transposed when tied; plus
    params["lm_head_bias"] [V] where given, Phi). With a cache (or
    return_cache=True, starting empty) -> (logits, new cache): the tokens continue the cached
    sequence at positions L_past .. L_past + L - 1.
    attention_mask (int or bool [B, L_past + L], Hugging Face's convention: 1 = real token,
    0 = padding, padding on the left): no query attends to padding, and each row's positions
    count its real tokens from 0. Config: n_heads, n_kv_heads (grouped-query), d_k (head
    width), norm ("layer_norm", "rms_norm"), activation ("relu", "gelu", "gelu_tanh",
    "swiglu"), eps, position ("learned", "rope"), rope_base, rope_scaling (a schedule of
    minattn.rope_scaling), partial_rotary_factor (RoPE on the first int(d_k * factor) features
    of each head), window (a sliding window of that many keys; a list: one per layer,
    None for a global layer); rope_base and rope_scaling may be lists too (a layer whose
    rope_base is None has no RoPE: SmolLM3). parallel: GPT-NeoX's
    parallel residual (minattn.transformer_decoder.decoder_block). Gemma:
    embedding_scale (the embeddings times sqrt(D)), query_pre_attn_scalar,
    attn_logit_softcapping, final_logit_softcapping (minattn.softcap on the logits).
    attention: the self-attention sublayer (minattn.mla's latent_attention, minattn.differential's
    differential_attention, as from_hf sets it); each layer's cache is what it returns, starting
    from {} (empty). logits_to_keep=n: the logits of the last n positions only, [B, n, V]
    (generate needs the last one: the unembedding is the largest product of a long prompt).
    head_mask [n_layers, H] (float): each head's output (its softmax-weighted values) times
    head_mask[layer, head] before the output projection, as transformers' head_mask did;
    0 ablates a head."""
    # int [B, L] -> [B, L, V]
    params, tokens, attention_mask, past, embedding_scale, final_logit_softcapping, head_mask = \
        _check_causal_lm(params, tokens, attention_mask, n_heads, n_kv_heads, d_k, norm,
                         activation, position, cache, embedding_scale, final_logit_softcapping,
                         logits_to_keep, head_mask)
    length = tokens.shape[-1]
    x = params["token_embedding"][tokens]  # [B, L, D]
    if embedding_scale is not None:
        x = x * embedding_scale
    positions = _positions(attention_mask, past, length, tokens)  # [L], or [B, L] with padding
    if position == "learned":
        x = x + params["position_embedding"][positions]

    def mask(window):  # [L, L_past + L], and not to padding: [B, 1, L, L_past + L]
        if length == 1 and window is None and attention_mask is None:
            return None  # one new token, the last position, sees every key: nothing to hide
        # The new tokens are the LAST L of L_past + L positions: bottom-right alignment.
        causal = causal_mask(length, past + length, align="bottom_right", window=window,
                             like=tokens)
        return causal if attention_mask is None else causal & attention_mask[:, None, None, :]

    masks = [mask(w) for w in window] if isinstance(window, list) else mask(window)
    rotated = positions if position == "rope" else None
    if isinstance(rope_base, list):  # a layer without a base rotates nothing (SmolLM3's NoPE)
        rotated = [None if base is None else rotated for base in rope_base]
    if cache is None and return_cache:
        cache = tuple({} for _ in params["layers"])  # empty: each layer fills its own
    out = decoder({"layers": params["layers"], "final_norm": params["final_norm"]}, x, masks,
                  cache=cache, n_heads=n_heads, n_kv_heads=n_kv_heads, d_k=d_k, norm_first=True,
                  norm=norm, activation=activation, eps=eps,
                  positions=rotated, rope_base=rope_base,
                  rope_scaling=rope_scaling, partial_rotary_factor=partial_rotary_factor,
                  parallel=parallel,
                  query_pre_attn_scalar=query_pre_attn_scalar,
                  attn_logit_softcapping=attn_logit_softcapping, attention=attention,
                  **({} if head_mask is None else {"head_mask": list(head_mask)}))  # row i: layer i
    h, new_cache = out if cache is not None else (out, None)
    if logits_to_keep is not None:
        h = h[..., -logits_to_keep:, :]  # [B, n, D]
    unembedding = params["lm_head"] if "lm_head" in params else params["token_embedding"].T
    logits = h @ unembedding  # [B, L, V]
    if "lm_head_bias" in params:  # Phi's unembedding has a bias
        logits = logits + params["lm_head_bias"]
    if final_logit_softcapping is not None:
        logits = soft_cap(logits, final_logit_softcapping)
    return logits if cache is None else (logits, new_cache)


def _positions(attention_mask, past, length, like):
    # -> int [L], or [B, L] with an attention_mask [B, L_past + L]: as transformers' generate,
    # a row's positions count its real tokens (cumsum - 1), padding at position 0.
    if attention_mask is None:
        return np.arange(past, past + length, like=like)
    counted = np.cumsum(attention_mask, axis=-1) - 1  # [B, L_past + L]
    return np.where(attention_mask, counted, 0)[:, past:]
