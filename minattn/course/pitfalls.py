"""Classic attention bugs, each one a small wrong copy of a real minattn function.

Every function here has the signature of the function it stands in for and is wrong in exactly
one way, said in its docstring. They exist to be caught: swap one in for the real function and
the property test named in PITFALLS fails (tests/test_pitfalls.py checks that it does, and that
the same property passes with the real function). Optional: the core never imports this module.
Do not use these functions for anything else.
"""
import autograd.numpy as np

from ..attention import scaled_dot_product_attention, softmax
from ..blockwise import blockwise_attention
from ..transformer_decoder import decoder
from ..heads import merge_heads, split_heads
from ..masks import causal_mask
from ..multi_head import _project, grouped_attention
from ..rope import apply_rope
from ..dropout import dropout as _dropout
from ..engine.param_checks import ROPE_BASE
from ..multi_head import multi_head_attention
from ..normalization import layer_norm
from ..position_wise import feed_forward

# Each pitfall -> the property test (a pytest node id) that catches it.
PITFALLS = {
    "attention_without_scaling": "tests/test_attention.py::test_matches_loop_reference",
    "softmax_over_wrong_axis":
        "tests/test_attention.py::test_weights_nonnegative_and_rows_sum_to_one",
    "split_heads_without_transpose":
        "tests/test_heads.py::test_split_heads_takes_contiguous_feature_slices",
    "attention_with_inverted_mask":
        "tests/test_attention.py::test_masked_keys_get_zero_weight_and_do_not_matter",
    "attention_with_minus_1e9_mask":
        "tests/test_attention.py::test_masked_keys_get_zero_weight_and_do_not_matter",
    "layer_norm_over_wrong_axis": "tests/test_layer_norm.py::test_matches_loop_reference",
    "layer_norm_std_plus_eps": "tests/test_layer_norm.py::test_eps_sits_inside_the_square_root",
    "softmax_without_max_subtraction":
        "tests/test_softmax.py::test_huge_logits_give_finite_results",
    "encoder_block_without_residual":
        "tests/test_encoder.py::test_block_matches_hand_written_block",
    "causal_mask_off_by_one": "tests/test_decoder.py::test_logits_do_not_depend_on_later_tokens",
    "self_attention_with_rope_on_values":
        "tests/test_decoder.py::test_rope_attention_is_invariant_to_shifting_all_positions",
    "causal_lm_without_advancing_positions":
        "tests/test_decoder.py::test_cached_decoding_equals_the_full_forward_pass",
    # the classes of wrong answers that pass a property drawing only small, typical values
    "attention_with_scale_or_default":
        "tests/test_wrong_answer_classes.py::test_attention_uses_the_given_scale",
    "softmax_masking_after_exp":
        "tests/test_wrong_answer_classes.py::test_softmax_ignores_masked_values_however_large",
    "feed_forward_with_dropout_on_the_output":
        "tests/test_wrong_answer_classes.py::test_feed_forward_drops_hidden_units",
    "encoder_block_with_dropout_on_the_residual_sum":
        "tests/test_wrong_answer_classes.py::"
        "test_encoder_block_keeps_dropout_off_the_residual_path",
    "blockwise_attention_without_the_last_partial_block":
        "tests/test_wrong_answer_classes.py::test_blockwise_attention_reads_the_last_partial_block",
}


def attention_without_scaling(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                              sinks=None):
    """scaled_dot_product_attention without the 1/sqrt(d_k).

    Wrong because the scores q.k grow like sqrt(d_k): with wide heads the softmax saturates to
    one-hot rows, whose gradients all but vanish, so training stalls. The output still has the
    right shape and the rows still sum to one; only a comparison with the formula shows it.
    """
    return scaled_dot_product_attention(q, k, v, mask, scale=1.0 if scale is None else scale,
                                        dropout=dropout, rng=rng, sinks=sinks)


def softmax_over_wrong_axis(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                            sinks=None):
    """scaled_dot_product_attention whose softmax normalizes over the queries (axis=-2).

    Each key's column of weights sums to one instead of each query's row, so a query's output
    is no longer a weighted average of the values, and it depends on which other queries are in
    the same sequence. A square, unmasked example hides it from a glance at the shapes.
    """
    d_k = q.shape[-1]
    scores = (q @ np.swapaxes(k, -1, -2)) * (d_k ** -0.5 if scale is None else scale)
    if sinks is not None:
        raise ValueError("softmax_over_wrong_axis has no attention sinks")
    weights = softmax(scores, axis=-2, mask=mask)  # the bug: should be axis=-1, over the keys
    weights = _dropout(weights, dropout, rng)
    return weights @ v, weights


def split_heads_without_transpose(x, n_heads):
    """split_heads as a bare reshape [..., L, D] -> [..., H, L, d_k], with no transpose.

    The reshape succeeds and the shape is right, but it cuts the flat [L * D] buffer into H
    pieces: head 0 gets the first tokens' whole feature vectors, not every token's first d_k
    features. Tokens leak into each other's heads.
    """
    *lead, length, d_model = x.shape
    return np.reshape(x, (*lead, n_heads, length, d_model // n_heads))


def attention_with_inverted_mask(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                 sinks=None):
    """scaled_dot_product_attention reading a boolean mask as True = ignore.

    That is torch.nn.MultiheadAttention's convention; minattn (like torch's functional
    scaled_dot_product_attention and Flax) means True = may attend. Mixing them up makes padding
    the only thing attended to and turns a causal mask into a look-only-at-the-future mask.
    """
    if mask is not None and np.dtype(mask.dtype).kind == "b":
        mask = np.logical_not(mask)  # the bug
    return scaled_dot_product_attention(q, k, v, mask, scale=scale, dropout=dropout, rng=rng,
                                        sinks=sinks)


def attention_with_minus_1e9_mask(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                  sinks=None):
    """scaled_dot_product_attention masking by adding -1e9 to the scores instead of -inf.

    A query whose keys are all masked then gets weights over keys it must not see instead of
    zeros: uniform in float32, where s - 1e9 rounds to the same number for every modest score s
    (the mean of the padding leaks out), and in float64, where the shift cancels, the unmasked
    softmax.
    In float16 -1e9 does not exist: the cast overflows to -inf (with a RuntimeWarning), and a
    softmax without minattn's guard for empty rows then computes -inf - (-inf) = NaN there.
    """
    if mask is not None and np.dtype(mask.dtype).kind == "b":
        mask = np.where(mask, 0.0, -1e9)  # the bug: a large finite number is not -inf
    return scaled_dot_product_attention(q, k, v, mask, scale=scale, dropout=dropout, rng=rng,
                                        sinks=sinks)


def layer_norm_over_wrong_axis(x, gamma, beta, eps=1e-5):
    """layer_norm taking mean and variance over the tokens (axis=-2) instead of the features.

    That is closer to batch normalization: each token's output now depends on the other tokens
    (and on padding), and a single token normalizes to beta whatever its features were.
    """
    mean = np.mean(x, axis=-2, keepdims=True)  # the bug: should be axis=-1
    centered = x - mean
    variance = np.mean(centered * centered, axis=-2, keepdims=True)
    return centered / np.sqrt(variance + eps) * gamma + beta


def layer_norm_std_plus_eps(x, gamma, beta, eps=1e-5):
    """layer_norm dividing by (std + eps) instead of sqrt(variance + eps).

    A different function from torch.nn.LayerNorm (the Annotated Transformer's LayerNorm is a
    third one: the *unbiased* std, plus eps): close for large variances, far apart for small
    ones, so pretrained weights no longer reproduce their outputs and comparisons with torch
    fail beyond rounding.
    """
    mean = np.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    std = np.sqrt(np.mean(centered * centered, axis=-1, keepdims=True))
    return centered / (std + eps) * gamma + beta  # the bug


def softmax_without_max_subtraction(x, axis=-1, mask=None):
    """softmax computing exp(x) directly, without subtracting the row max first.

    Mathematically the same, numerically not: exp overflows to inf for logits above ~89 in
    float32 (~11 in float16, ~709 in float64), and inf / inf is NaN. Subtracting the max makes
    the largest exponent exp(0) = 1 and changes nothing else.
    """
    if mask is not None:
        x = np.where(mask, x, -np.inf)
    e = np.exp(x)  # the bug: np.exp(x - max(x)) cannot overflow
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def encoder_block_without_residual(params, x, mask=None, *, n_heads, norm_first=False,
                                   activation="relu", eps=1e-5, dropout=0.0, rng=None,
                                   return_weights=False):
    """encoder_block whose attention sublayer drops the residual connection (x = attention(x)).

    The block still runs and its output is still normalized, but each token's own features are
    replaced by a mix of the others'; the skip path that carries the input (and the gradient)
    straight through is gone, which is what makes deep stacks trainable.
    """
    def norm(h, which):
        return layer_norm(h, params[which]["gamma"], params[which]["beta"], eps)

    def ff(h):
        out = feed_forward(params["feed_forward"], h, activation=activation, dropout=dropout,
                           rng=rng)
        return _dropout(out, dropout, rng)

    h = norm(x, "self_attention_norm") if norm_first else x
    attended, weights = multi_head_attention(params["self_attention"], h, h, h, mask, n_heads=n_heads,
                                             dropout=dropout, rng=rng)
    attended = _dropout(attended, dropout, rng)
    x = attended if norm_first else norm(attended, "self_attention_norm")  # the bug: should be x + attended
    x = x + ff(norm(x, "feed_forward_norm")) if norm_first else norm(x + ff(x), "feed_forward_norm")
    return (x, weights) if return_weights else x


# --- the decoder ----------------------------------------------------------------------------

def causal_mask_off_by_one(n_q, n_k=None, *, align="top_left", window=None, like=None):
    """causal_mask that lets query i also see key i + 1 (rows + 1 >= cols instead of rows >= cols).

    Position t can then read token t + 1, the very token it is asked to predict, so the training
    loss no longer measures prediction; at generation time that token does not exist yet, and
    cached decoding no longer matches the full pass. The mask looks almost right when printed;
    a causality test (does changing a later token change an earlier logit?) shows it.
    """
    n_k = n_q if n_k is None else n_k
    rows, cols = np.arange(n_q), np.arange(n_k)
    position = rows[:, None] + (n_k - n_q if align == "bottom_right" else 0)
    mask = position + 1 >= cols[None, :]  # the bug: should be position >= cols
    return mask if window is None else mask & (cols[None, :] > position - window)


def self_attention_with_rope_on_values(params, x, mask=None, *, n_heads, n_kv_heads=None,
                                       d_k=None, positions=None, rope_base=10000.0,
                                       rope_scaling=None, partial_rotary_factor=None, eps=1e-6,
                                       query_pre_attn_scalar=None, attn_logit_softcapping=None,
                                       cache=None, head_mask=None, hooks=None):
    """self_attention that rotates the values with RoPE too, not just the queries and keys.

    RoPE belongs in the scores: rotating q and k makes q . k depend on the positions' offset only.
    The values carry content to the output; rotating them stamps each token's absolute position
    on what it passes on, so shifting every position by the same amount changes the output.
    """
    n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
    q = split_heads(_project(params, x, "q"), n_heads)
    k = split_heads(_project(params, x, "k"), n_kv_heads)
    v = split_heads(_project(params, x, "v"), n_kv_heads)
    if positions is not None:
        positions = positions[..., None, :] if positions.ndim > 1 else positions
        q, k = apply_rope(q, positions, base=rope_base), apply_rope(k, positions, base=rope_base)
        v = apply_rope(v, positions, base=rope_base)  # the bug: the values are not rotated
    if cache is not None:
        k = np.concatenate([cache["k"], k], axis=-2)
        v = np.concatenate([cache["v"], v], axis=-2)
    heads, _ = grouped_attention(q, k, v, mask)
    heads = heads if head_mask is None else heads * head_mask[:, None, None]
    return _project(params, merge_heads(heads), "o"), {"k": k, "v": v}


def causal_lm_without_advancing_positions(params, tokens, attention_mask=None, *, n_heads,
                                          n_kv_heads=None, d_k=None, norm="layer_norm",
                                          activation="gelu_tanh", eps=None, position="learned",
                                          rope_base=ROPE_BASE, rope_scaling=None,
                                          partial_rotary_factor=None, window=None,
                                          parallel=False, embedding_scale=None,
                                          query_pre_attn_scalar=None,
                                          attn_logit_softcapping=None,
                                          final_logit_softcapping=None,
                                          attention=None, cache=None,
                                          return_cache=False, logits_to_keep=None,
                                          head_mask=None, hooks=None, **block_config):
    """causal_lm that numbers the new tokens 0, 1, ... on every call, even after a cache.

    The full forward pass is right, so are the first tokens of a generation; but each token fed
    through the cache gets position 0 (learned positions or RoPE alike), as if it were the first
    of the sequence, and the cached decoding drifts away from the full pass.
    """
    if hooks is not None:  # the real signature's, which this copy does not run
        raise ValueError("causal_lm_without_advancing_positions takes no hooks")
    length = tokens.shape[-1]
    x = params["token_embedding"][tokens]
    past = 0 if not cache or not cache[0] else next(iter(cache[0].values())).shape[-2]
    positions = np.arange(length)  # the bug: should be np.arange(past, past + length)
    if position == "learned":
        x = x + params["position_embedding"][positions]
    mask = causal_mask(length, past + length, align="bottom_right")
    if cache is None and return_cache:
        d_k = x.shape[-1] // n_heads
        empty = np.zeros(x.shape[:-2] + (n_kv_heads or n_heads, 0, d_k), dtype=x.dtype)
        cache = tuple({"k": empty, "v": empty} for _ in params["layers"])
    out = decoder({"layers": params["layers"], "final_norm": params["final_norm"]}, x, mask,
                  cache=cache, n_heads=n_heads, n_kv_heads=n_kv_heads, norm_first=True,
                  norm=norm, activation=activation, eps=eps,
                  positions=positions if position == "rope" else None, rope_base=rope_base,
                  partial_rotary_factor=partial_rotary_factor, attention=attention,
                  **({} if head_mask is None else {"head_mask": list(head_mask)}), **block_config)
    h, new_cache = out if cache is not None else (out, None)
    if logits_to_keep is not None:
        h = h[..., -logits_to_keep:, :]
    unembedding = params["lm_head"] if "lm_head" in params else params["token_embedding"].T
    logits = h @ unembedding
    return logits if cache is None else (logits, new_cache)


# --- classes of wrong answers: each passes a property that draws only typical values ---------

def attention_with_scale_or_default(q, k, v, mask=None, *, scale=None, dropout=0.0, rng=None,
                                    sinks=None):
    """scaled_dot_product_attention reading its scale as `scale or 1 / sqrt(d_k)`.

    0 is falsy, so scale=0 (every key the same weight: a uniform average of the values) silently
    becomes the default. The same idiom breaks every argument whose zero means something:
    `eps or 1e-5`, `axis or -1`, `n_k or n_q`. `if scale is None` is the test for "not given".
    """
    scale = scale or q.shape[-1] ** -0.5  # the bug: should be `if scale is None`
    return scaled_dot_product_attention(q, k, v, mask, scale=scale, dropout=dropout, rng=rng,
                                        sinks=sinks)


def softmax_masking_after_exp(x, axis=-1, mask=None):
    """softmax that subtracts the max of every entry, masked ones included, and masks after exp().

    Right while the masked entries are about as large as the kept ones. When a masked entry is
    much larger (a padding position's score, a future token's), exp(kept - max) underflows to 0
    for every kept entry and the row comes out all zeros (or NaN without a guard). Mask first,
    np.where(mask, x, -inf), then take the max of what is kept.
    """
    top = np.max(x, axis=axis, keepdims=True)  # the bug: the max over the masked entries too
    e = np.exp(x - top)
    if mask is not None:
        e = np.where(mask, e, 0.0)  # the bug: masked after exp(), not before the max
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def feed_forward_with_dropout_on_the_output(params, x, *, activation="relu", dropout=0.0,
                                            rng=None):
    """feed_forward dropping its output units instead of its hidden units.

    Inverted dropout keeps the mean, so the output averaged over many tokens is still right;
    but the network trained is a different one (torch's TransformerEncoderLayer drops the hidden
    layer, then the sublayer's output, separately), and a token's output is no longer
    act(x w_1 + b_1) ⊙ m / (1 - p) w_2 + b_2 for any mask m of the hidden units.
    """
    out = feed_forward(params, x, activation=activation)
    return _dropout(out, dropout, rng)  # the bug: dropout belongs on act(x w_1 + b_1)


def encoder_block_with_dropout_on_the_residual_sum(params, x, mask=None, *, n_heads,
                                                   norm_first=False, activation="relu", eps=1e-5,
                                                   dropout=0.0, rng=None, return_weights=False):
    """encoder_block computing dropout(x + sublayer(x)) instead of x + dropout(sublayer(x)).

    The residual path must carry x through untouched: dropping it zeroes and rescales the input
    itself, so even a sublayer that outputs 0 changes the block's output, and in a deep stack the
    signal (and the gradient) that the skip connections should carry is thinned at every layer.
    """
    def norm(h, which):
        return layer_norm(h, params[which]["gamma"], params[which]["beta"], eps)

    weights = []

    def attend(h):
        out, w = multi_head_attention(params["self_attention"], h, h, h, mask, n_heads=n_heads,
                                      dropout=dropout, rng=rng)
        weights.append(w)
        return out

    def ff(h):
        return feed_forward(params["feed_forward"], h, activation=activation, dropout=dropout,
                            rng=rng)

    for sublayer, which in ((attend, "self_attention_norm"), (ff, "feed_forward_norm")):
        h = sublayer(norm(x, which) if norm_first else x)
        x = _dropout(x + h, dropout, rng)  # the bug: should be x + _dropout(h, dropout, rng)
        x = x if norm_first else norm(x, which)
    return (x, weights[0]) if return_weights else x


def blockwise_attention_without_the_last_partial_block(q, k, v, *, causal=False, key_mask=None,
                                                       scale=None, block_size=128):
    """blockwise_attention whose loop reads only the L_k // block_size whole blocks of keys.

    `for start in range(0, L_k - block_size + 1, block_size)` (or L_k // block_size
    iterations) stops before the last block when L_k is not a multiple of block_size: the last
    L_k % block_size keys are never attended, and with L_k < block_size no key is. Examples
    whose lengths are multiples of the block size (block_size=1, say) never show it.
    """
    whole = k.shape[-2] // block_size * block_size
    read = np.broadcast_to(np.arange(k.shape[-2]) < whole, k.shape[:-1])  # the bug
    key_mask = read if key_mask is None else key_mask & read
    return blockwise_attention(q, k, v, causal=causal, key_mask=key_mask, scale=scale,
                               block_size=block_size)
