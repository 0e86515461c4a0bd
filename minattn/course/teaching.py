"""Teaching forms: each concept of walkthrough.md's first reading as the formula alone.

minattn's own functions carry what production code needs besides the math: argument checks,
float16 computed in float32, hand-written gradients, one BLAS thread, other array libraries
(walkthrough.md's appendix "The production functions"). The walkthrough shows these plain forms
first, in plain NumPy, with the same names and arguments (for what they cover), and
tests/test_teaching_forms*.py check that each one computes what minattn's function computes, on
random inputs, masks and fully masked rows included. They check no arguments: give them what
the production function accepts. They call nothing of minattn's own: a plain form is built from
plain NumPy and the plain forms before it.
"""
import math

import numpy as np


def softmax(x, axis=-1):
    # The math alone; minattn's computes the same, faster, and takes section 4's mask.
    # [..., n] -> [..., n]: weights >= 0 that sum to 1 along axis
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))  # the largest is exp(0) = 1: no overflow
    return e / np.sum(e, axis=axis, keepdims=True)


def masked_softmax(x, mask, axis=-1):
    # The math alone, as minattn's softmax(x, axis, mask).
    # [..., n], bool [..., n] -> [..., n]: weight 0 where mask is False; a row with nothing kept: 0s
    x = np.where(mask, x, -np.inf)  # a masked entry: exp(-inf) = 0
    x_max = np.max(x, axis=axis, keepdims=True)  # -inf where every entry is masked
    e = np.exp(x - np.where(np.isfinite(x_max), x_max, 0.0))  # such a row: shift by 0, all 0s
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)  # 0 / 1 = 0, not 0 / 0, where nothing is kept


def scaled_dot_product_attention(q, k, v, mask=None, *, scale=None):
    # The math alone; minattn's computes the same, faster, after checking its arguments.
    # [..., L_q, d_k], [..., L_k, d_k], [..., L_k, d_v] -> [..., L_q, d_v], [..., L_q, L_k]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale  # [..., L_q, L_k]: each query against each key
    weights = softmax(scores) if mask is None else masked_softmax(scores, mask)  # rows sum to 1
    return weights @ v, weights  # [..., L_q, d_v]: each query's weighted average of the values


def causal_mask(n_q, n_k=None, *, align="top_left", window=None):
    # The math alone; minattn's adds argument checks and works on GPU arrays too.
    # -> bool [n_q, n_k]: True where query i may attend to key j
    n_k = n_q if n_k is None else n_k
    offset = n_k - n_q if align == "bottom_right" else 0  # the queries are the last n_q keys
    query = np.arange(n_q)[:, None] + offset  # [n_q, 1]: each query's position
    key = np.arange(n_k)[None, :]  # [1, n_k]
    mask = query >= key  # no key from the future
    return mask if window is None else mask & (key > query - window)


def padding_mask(lengths, n):
    # The math alone; minattn's adds argument checks and works on GPU arrays too.
    # int [B] -> bool [B, 1, 1, n]: key j is real when j < the sequence's length
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, None, :]


def split_heads(x, n_heads):
    # The math alone; minattn's checks its arguments first (D divisible by H, and so on).
    # [..., L, D] -> [..., H, L, d_k]: head h gets features h d_k .. (h + 1) d_k of every token
    *lead, length, d_model = x.shape
    x = np.reshape(x, (*lead, length, n_heads, d_model // n_heads))  # [..., L, H, d_k]
    return np.swapaxes(x, -3, -2)  # [..., H, L, d_k]: a bare reshape would mix the tokens


def merge_heads(x):
    # The math alone; minattn's checks its argument first.
    # [..., H, L, d_k] -> [..., L, H * d_k]: each token's heads side by side again
    *lead, n_heads, length, d_k = x.shape
    return np.reshape(np.swapaxes(x, -3, -2), (*lead, length, n_heads * d_k))


def grouped_attention(q, k, v, mask=None):
    # The plain form: minattn's broadcasts K and V over the group axis instead of copying them.
    # [..., H, L_q, d_k], [..., H_kv, L_k, d_k] x 2 -> [..., H, L_q, d_k], [..., H, L_q, L_k]
    group = q.shape[-3] // k.shape[-3]  # G = H / H_kv query heads share each kv head
    k = np.repeat(k, group, axis=-3)  # [..., H, L_k, d_k]: query head h reads kv head h // G
    v = np.repeat(v, group, axis=-3)
    return scaled_dot_product_attention(q, k, v, mask)


def linear(x, w, b):
    # The math alone; minattn's adds a speed-up (one matrix product) and its own gradient.
    # [..., d_in], [d_in, d_out], [d_out] -> [..., d_out]
    return x @ w + b


def layer_norm(x, gamma, beta, eps=1e-5):
    # The math alone; minattn's computes the same, after checking its arguments.
    # [..., D], [D], [D] -> [..., D]: biased variance, eps inside the square root
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def rms_norm(x, gamma, eps=1e-6):
    # The math alone; minattn's adds its own gradient and dtype handling.
    # [..., D], [D] -> [..., D]: no centering, no beta
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma


def gelu(x):
    # The plain form: minattn's single-precision GELU is a polynomial fit, computed in chunks.
    # x Φ(x), Φ the standard normal's cumulative distribution, through erf
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def positional_encoding(n_positions, d_model):
    # The math alone; minattn's adds argument checks and works on GPU arrays too.
    # -> [n_positions, d_model]: PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(same)
    position = np.arange(n_positions)[:, None]  # [L, 1]
    pair = np.arange(d_model) // 2  # features 2i and 2i + 1 share frequency i
    angle = position / 10000.0 ** (2.0 * pair / d_model)  # [L, D]
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))


def apply_rope(x, positions, *, base=10000.0):
    # The math alone; minattn's adds a speed-up: cos and sin once per step for all layers.
    # [..., L, d], int [..., L] -> [..., L, d]: pair (x_i, x_{i + d/2}) turns by the angle m θ_i
    d = x.shape[-1]
    theta = base ** (-np.arange(0, d, 2) / d)  # [d/2]: θ_i = base^(-2i/d)
    angles = positions[..., None] * theta  # [..., L, d/2]: m θ_i
    cos, sin = np.cos(angles), np.sin(angles)
    x1, x2 = x[..., :d // 2], x[..., d // 2:]  # "rotate half": feature i pairs with i + d/2
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def cross_entropy(logits, targets):
    # The math alone; minattn's picks the targets in a form its gradient can go through.
    # [..., V], int [...] -> the mean of -log p(target)
    shifted = logits - np.max(logits, axis=-1, keepdims=True)  # as in softmax
    log_probs = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))  # [..., V]
    return -np.mean(np.take_along_axis(log_probs, targets[..., None], axis=-1))


def next_token(logits, temperature=0.0, top_k=None, top_p=None, rng=None):
    # The plain form: minattn's divides in double precision, so a tiny temperature keeps its limit.
    # [B, V] -> int [B]: greedy, or a sample from softmax(logits / T) among the top_k / top_p
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    logits = (logits - np.max(logits, axis=-1, keepdims=True)) / temperature
    if top_k is not None:  # keep the top_k largest logits of each row
        kth = np.sort(logits, axis=-1)[:, -top_k][:, None]
        logits = np.where(logits >= kth, logits, -np.inf)
    if top_p is not None:  # keep the most likely tokens until their probabilities reach top_p
        p = softmax(logits)
        order = np.argsort(logits, axis=-1, kind="stable")  # least likely first
        cumulative = np.cumsum(np.take_along_axis(p, order, axis=-1), axis=-1)
        keep = cumulative > 1 - top_p
        keep[:, -1] = True  # the most likely token always stays
        logits = np.where(np.take_along_axis(keep, np.argsort(order, axis=-1), axis=-1),
                          logits, -np.inf)
    cdf = np.cumsum(np.exp(logits - np.max(logits, axis=-1, keepdims=True)), axis=-1)
    cdf = cdf / cdf[:, -1:]  # [B, V], ending at exactly 1
    u = rng.random((logits.shape[0], 1))  # one uniform number per row
    return np.sum(cdf <= u, axis=-1)  # the first token whose cdf exceeds u


def generate(params, tokens, n_new, *, n_heads, temperature=0.0, top_k=None, rng=None):
    # The math alone; minattn's adds top-p, stopping at end of text and unequal prompts.
    # int [B, L] -> int [B, L + n_new]: the prompt once, then one token at a time through the cache
    cache, new = empty_cache(params, tokens.shape[0], n_heads), tokens
    for _ in range(n_new):
        logits, cache = cached_language_model(params, new, cache, n_heads=n_heads)
        new = next_token_top_k(logits[:, -1], temperature, top_k, rng)[:, None]  # [B, 1]
        tokens = np.concatenate([tokens, new], axis=1)
    return tokens


def softmax_vjp(y, g, axis=-1):
    # The math alone; minattn's sits beside its softmax, as that softmax's own gradient.
    # y = softmax(x), g = dL/dy -> dL/dx = y ⊙ (g - Σ g ⊙ y), the sum along axis
    return y * (g - np.sum(g * y, axis=axis, keepdims=True))


def attention_vjp(q, k, v, g, mask=None):
    # The math alone: attention's backward pass, its VJP, by the chain rule one step at a time.
    # g = dL/dO [..., L_q, d_v] -> dL/dq, dL/dk, dL/dv, each of its input's shape
    scale = 1.0 / math.sqrt(q.shape[-1])
    _, p = scaled_dot_product_attention(q, k, v, mask)  # [..., L_q, L_k]: the forward again
    dv = np.swapaxes(p, -1, -2) @ g  # O = P V: [..., L_k, d_v]
    dp = g @ np.swapaxes(v, -1, -2)  # [..., L_q, L_k]
    ds = softmax_vjp(p, dp)  # P = softmax(S), row by row; a masked entry gets 0
    dq = ds @ k * scale  # S = Q K^T scale: [..., L_q, d_k]
    dk = np.swapaxes(ds, -1, -2) @ q * scale  # [..., L_k, d_k]
    return dq, dk, dv


# -- The first reading's forms of the composite concepts: one model style each, no
# family options. Each is tested equal to minattn's function with the matching arguments.

def project(x, params, name):
    # [..., d_in] -> [..., d_out]: x W, plus b where the params hold a bias
    return x @ params["w_" + name] + params.get("b_" + name, 0.0)


def multi_head_attention(params, query, key, value, mask=None, *, n_heads):
    # [..., L_q, D], [..., L_k, D], [..., L_k, D] -> [..., L_q, D], weights [..., H, L_q, L_k]
    q = split_heads(project(query, params, "q"), n_heads)  # [..., H, L_q, d_k]
    k = split_heads(project(key, params, "k"), n_heads)  # [..., H, L_k, d_k]
    v = split_heads(project(value, params, "v"), n_heads)  # [..., H, L_k, d_k]
    heads, weights = scaled_dot_product_attention(q, k, v, mask)  # all heads at once
    return project(merge_heads(heads), params, "o"), weights  # [..., L_q, D]


def encoder_block(params, x, mask=None, *, n_heads, norm_first=False, eps=1e-5):
    # [..., L, D] -> [..., L, D]; post-norm: x = norm(x + f(x)), pre-norm: x = x + f(norm(x))
    def attend(h):  # tokens exchange information
        return multi_head_attention(params["self_attention"], h, h, h, mask, n_heads=n_heads)[0]

    def feed(h):  # each token on its own
        return feed_forward(params["feed_forward"], h)

    for name, sublayer in (("self_attention_norm", attend), ("feed_forward_norm", feed)):
        gamma, beta = params[name]["gamma"], params[name]["beta"]
        if norm_first:  # pre-norm
            x = x + sublayer(layer_norm(x, gamma, beta, eps))
        else:  # post-norm
            x = layer_norm(x + sublayer(x), gamma, beta, eps)
    return x


def self_attention(params, x, mask=None, *, n_heads, positions):
    # [..., L, D] -> [..., L, D]: multi-head attention, its queries and keys turned by RoPE
    q, k, v = (split_heads(project(x, params, name), n_heads) for name in "qkv")  # [.., H, L, d_k]
    q, k = apply_rope(q, positions), apply_rope(k, positions)  # turned by their positions
    heads, _ = scaled_dot_product_attention(q, k, v, mask)  # [..., H, L, d_k]
    return project(merge_heads(heads), params, "o")  # [..., L, D]


def decoder_block(params, x, mask=None, *, n_heads, positions, eps=1e-6):
    # [..., L, D] -> [..., L, D]: pre-norm, RMSNorm and SwiGLU
    h = rms_norm(x, params["self_attention_norm"]["gamma"], eps)
    x = x + self_attention(params["self_attention"], h, mask, n_heads=n_heads, positions=positions)
    h = rms_norm(x, params["feed_forward_norm"]["gamma"], eps)
    return x + gated_feed_forward(params["feed_forward"], h)  # each sublayer adds to x


def language_model(params, tokens, *, n_heads, eps=1e-6):
    # int [B, L] -> logits [B, L, V]: embed, the blocks under a causal mask, unembed
    length = tokens.shape[-1]
    positions, mask = np.arange(length), causal_mask(length)  # [L], [L, L]
    x = params["token_embedding"][tokens]  # [B, L, D]
    for layer in params["layers"]:
        x = decoder_block(layer, x, mask, n_heads=n_heads, positions=positions, eps=eps)
    x = rms_norm(x, params["final_norm"]["gamma"], eps)
    return x @ params["token_embedding"].T  # [B, L, V]: the embedding, tied


def cached_self_attention(params, x, mask, *, n_heads, positions, cache):
    # [..., L, D], cache {"k", "v": [..., H, L_past, d_k]} -> [..., L, D] and the grown cache
    q, k, v = (split_heads(project(x, params, name), n_heads) for name in "qkv")  # [.., H, L, d_k]
    positions = positions[..., None, :]  # [L] or [B, L] -> [..., 1, L]: one row for all heads
    q, k = apply_rope(q, positions), apply_rope(k, positions)
    k = np.concatenate([cache["k"], k], axis=-2)  # new: [..., H, L_past + L, d_k]
    v = np.concatenate([cache["v"], v], axis=-2)  # new: the values alike
    heads, _ = scaled_dot_product_attention(q, k, v, mask)  # [..., H, L, d_k]
    return project(merge_heads(heads), params, "o"), {"k": k, "v": v}


def empty_cache(params, batch, n_heads):
    # -> one cache per layer, each {"k", "v": [B, H, 0, d_k]}: no token yet
    d_k = params["token_embedding"].shape[-1] // n_heads
    empty = np.zeros((batch, n_heads, 0, d_k))
    return [{"k": empty, "v": empty} for _ in params["layers"]]


def cached_decoder_block(params, x, mask, *, n_heads, positions, cache, eps=1e-6):
    # decoder_block, passing the layer's cache to the attention and its grown cache back
    h = rms_norm(x, params["self_attention_norm"]["gamma"], eps)
    attended, cache = cached_self_attention(params["self_attention"], h, mask, n_heads=n_heads,
                                            positions=positions, cache=cache)
    x = x + attended
    h = rms_norm(x, params["feed_forward_norm"]["gamma"], eps)
    return x + gated_feed_forward(params["feed_forward"], h), cache


def cached_language_model(params, tokens, cache, *, n_heads, eps=1e-6):
    # int [B, L] after L_past cached tokens -> logits [B, L, V] and the cache of L_past + L
    past, length = cache[0]["k"].shape[-2], tokens.shape[-1]
    positions = np.arange(past, past + length)  # [L]: where the new tokens stand
    mask = causal_mask(length, past + length, align="bottom_right")  # [L, L_past + L]
    x, new_cache = params["token_embedding"][tokens], []  # [B, L, D]
    for layer, layer_cache in zip(params["layers"], cache):
        x, layer_cache = cached_decoder_block(layer, x, mask, n_heads=n_heads,
                                              positions=positions, cache=layer_cache, eps=eps)
        new_cache.append(layer_cache)
    x = rms_norm(x, params["final_norm"]["gamma"], eps)
    return x @ params["token_embedding"].T, new_cache  # [B, L, V]


def next_token_top_k(logits, temperature=0.0, top_k=None, rng=None):
    # [B, V] -> int [B]: greedy, or a sample from softmax(logits / T) among the top_k
    if temperature == 0:
        return np.argmax(logits, axis=-1)  # greedy: the most likely token
    logits = (logits - np.max(logits, axis=-1, keepdims=True)) / temperature
    if top_k is not None:  # only the top_k largest logits of each row stay
        kth = np.sort(logits, axis=-1)[:, -top_k][:, None]
        logits = np.where(logits >= kth, logits, -np.inf)
    cdf = np.cumsum(np.exp(logits), axis=-1)  # [B, V]: exp(-inf) = 0 adds nothing
    cdf = cdf / cdf[:, -1:]  # ending at exactly 1
    u = rng.random((logits.shape[0], 1))  # one uniform number per row
    return np.sum(cdf <= u, axis=-1)  # the first token whose cdf exceeds u


def feed_forward(params, x):
    # [..., D] -> [..., F] -> [..., D]: two projections, ReLU between them, on every token alone
    hidden = np.maximum(x @ params["w_1"] + params["b_1"], 0.0)  # [..., F]
    return hidden @ params["w_2"] + params["b_2"]  # [..., D]


def gated_feed_forward(params, x):
    # [..., D] -> [..., F] -> [..., D]: SwiGLU, SiLU(x W_gate) scaling x W_up feature by feature
    gate, up = x @ params["w_gate"], x @ params["w_up"]  # [..., F] each
    hidden = gate / (1.0 + np.exp(-gate)) * up  # SiLU(g) = g * sigmoid(g)
    return hidden @ params["w_down"]  # [..., D]


def encoder(params, x, mask=None, *, n_heads, norm_first=False, eps=1e-5):
    # [..., L, D] -> [..., L, D]: the blocks one after the other, then a final norm if any
    for layer in params["layers"]:
        x = encoder_block(layer, x, mask, n_heads=n_heads, norm_first=norm_first, eps=eps)
    if "final_norm" in params:
        x = layer_norm(x, params["final_norm"]["gamma"], params["final_norm"]["beta"], eps)
    return x
