"""Every public function of minattn as a case that runs once on NumPy and once on a device array
library. tests/test_array_double.py runs the cases on a CuPy test double, tests/test_cupy.py on
real CuPy. Each case is `run(put, dtype) -> result tree`: the inputs are made on the host with a
seeded Generator, and `put` moves them to the device (identity for the NumPy run)."""
import numpy as np
import pytest

import minattn as ma

B, L, D, H, F = 2, 5, 8, 2, 12  # batch, length, d_model, n_heads, d_ff
CASES = []  # pytest.param(covered public name, run)


def case(covers, name=None):
    def register(run):
        CASES.append(pytest.param(covers, run, id=name or run.__name__))
        return run
    return register


def tree_map(fn, tree):
    if isinstance(tree, dict):
        return {key: tree_map(fn, value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(fn, value) for value in tree)
    return fn(tree)


def leaves(tree):
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in leaves(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [leaf for value in tree for leaf in leaves(value)]
    return [tree]


def _normal(*shape, dtype, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def _cast(params, dtype):
    return tree_map(lambda a: a.astype(dtype), params)


def _keep():
    # bool [B, 1, L, L]: a random pattern with query 0 of batch 1 fully masked.
    keep = np.random.default_rng(9).random((B, 1, L, L)) < 0.6
    keep[1, 0, 0] = False
    return keep


def _qkv(put, dtype):  # [B, H, L, d_k] each
    return tuple(put(_normal(B, H, L, D // H, dtype=dtype, seed=s)) for s in (1, 2, 3))


@case("softmax")
def softmax(put, dtype):
    x = put(_normal(B, L, L, dtype=dtype))
    return ma.softmax(x), ma.softmax(x, mask=put(_keep()[:, 0]))


@case("scaled_dot_product_attention", "sdpa_bool_mask")
def sdpa_bool_mask(put, dtype):
    return ma.scaled_dot_product_attention(*_qkv(put, dtype), put(_keep()))


@case("scaled_dot_product_attention", "sdpa_additive_mask")
def sdpa_additive_mask(put, dtype):
    additive = np.where(_keep(), 0.0, -np.inf).astype(dtype)
    return ma.scaled_dot_product_attention(*_qkv(put, dtype), put(additive))


@case("causal_mask")
def causal_mask_like(put, dtype):
    q, k, v = _qkv(put, dtype)
    mask = ma.causal_mask(L, like=q)
    return ma.causal_mask(3, 4, like=q), ma.scaled_dot_product_attention(q, k, v, mask)


@case("padding_mask")
def padding_mask_device_lengths(put, dtype):
    q, k, v = _qkv(put, dtype)
    lengths = put(np.array([5, 3]))
    mask = ma.padding_mask(lengths, L) & ma.causal_mask(L, like=lengths)  # [B, 1, L, L]
    return mask, ma.scaled_dot_product_attention(q, k, v, mask)


@case("split_heads")
def split_heads(put, dtype):
    return ma.split_heads(put(_normal(B, L, D, dtype=dtype)), H)


@case("merge_heads")
def merge_heads(put, dtype):
    return ma.merge_heads(put(_normal(B, H, L, D // H, dtype=dtype)))


@case("init_multi_head_attention")
def init_multi_head_attention(put, dtype):
    return put(_cast(ma.init_multi_head_attention(np.random.default_rng(0), D, H), dtype))


@case("multi_head_attention")
def multi_head_attention(put, dtype):
    params = put(_cast(ma.init_multi_head_attention(np.random.default_rng(0), D, H), dtype))
    query, key = put(_normal(B, L, D, dtype=dtype, seed=1)), put(_normal(B, 4, D, dtype=dtype))
    mask = ma.causal_mask(L, 4, like=query)
    return ma.multi_head_attention(params, query, key, key, mask, n_heads=H, average_weights=True)


@case("grouped_attention")
def grouped_attention(put, dtype):
    q = put(_normal(B, 4, L, 3, dtype=dtype, seed=1))  # [B, H, L, d_k]: 4 query heads
    k, v = (put(_normal(B, 2, L, 3, dtype=dtype, seed=s)) for s in (2, 3))  # 2 kv heads
    return ma.grouped_attention(q, k, v, ma.causal_mask(L, like=q))


@case("init_layer_norm")
def init_layer_norm(put, dtype):
    return put(_cast(ma.init_layer_norm(D), dtype))


@case("layer_norm")
def layer_norm(put, dtype):
    x, gamma, beta = _normal(B, L, D, dtype=dtype), _normal(D, dtype=dtype, seed=1), \
        _normal(D, dtype=dtype, seed=2)
    return ma.layer_norm(put(x), put(gamma), put(beta))


@case("rms_norm")
def rms_norm(put, dtype):
    x, gamma = _normal(B, L, D, dtype=dtype), _normal(D, dtype=dtype, seed=1)
    return ma.rms_norm(put(x), put(gamma))


@case("init_feed_forward")
def init_feed_forward(put, dtype):
    return put(_cast(ma.init_feed_forward(np.random.default_rng(0), D, F), dtype))


for _activation in ("relu", "gelu", "gelu_tanh"):
    @case("feed_forward", f"feed_forward_{_activation}")
    def _feed_forward(put, dtype, activation=_activation):
        params = put(_cast(ma.init_feed_forward(np.random.default_rng(0), D, F), dtype))
        return ma.feed_forward(params, put(_normal(B, L, D, dtype=dtype)), activation=activation)


@case("init_encoder_block")
def init_encoder_block(put, dtype):
    return put(_cast(ma.init_encoder_block(np.random.default_rng(0), D, H, F), dtype))


@case("encoder_block")
def encoder_block(put, dtype):
    params = put(_cast(ma.init_encoder_block(np.random.default_rng(0), D, H, F), dtype))
    x = put(_normal(B, L, D, dtype=dtype))
    mask = ma.padding_mask(put(np.array([5, 2])), L)
    return ma.encoder_block(params, x, mask, n_heads=H, norm_first=True, activation="gelu",
                            return_weights=True)


@case("init_encoder")
def init_encoder(put, dtype):
    params = ma.init_encoder(np.random.default_rng(0), 2, D, H, F, final_norm=True)
    return put(_cast(params, dtype))


@case("encoder")
def encoder(put, dtype):
    params = ma.init_encoder(np.random.default_rng(0), 2, D, H, F, final_norm=True)
    x = put(_normal(B, L, D, dtype=dtype))
    return ma.encoder(put(_cast(params, dtype)), x, ma.causal_mask(L, like=x), n_heads=H,
                      return_weights=True)


@case("blockwise_attention")
def blockwise_attention(put, dtype):
    key_mask = np.random.default_rng(4).random((B, 1, L)) < 0.7
    return ma.blockwise_attention(*_qkv(put, dtype), causal=True, key_mask=put(key_mask),
                                  block_size=2)


@case("positional_encoding")
def positional_encoding_like(put, dtype):
    x = put(_normal(B, L, D, dtype=dtype))
    return x + ma.positional_encoding(L, D, dtype=dtype, like=x)


# --- gradients: every public differentiable function, w.r.t. each differentiable argument ---
GRAD_CASES = []  # pytest.param(covered public name, argument name, build)


def grad_case(covers, *arguments):
    # build(put, dtype) -> (f, args): f(*args) is the function's result tree; each argument
    # named here is differentiated alone (single-argument autograd.grad).
    def register(build):
        for index, name in arguments:
            GRAD_CASES.append(pytest.param(covers, index, build, id=f"{build.__name__}-d{name}"))
        return build
    return register


@grad_case("softmax", (0, "x"))
def grad_softmax(put, dtype):
    return (lambda x: ma.softmax(x, mask=put(_keep()[:, 0]))), [put(_normal(B, L, L, dtype=dtype))]


@grad_case("scaled_dot_product_attention", (0, "q"), (1, "k"), (2, "v"))
def grad_sdpa(put, dtype):
    return (lambda q, k, v: ma.scaled_dot_product_attention(q, k, v, put(_keep()))), list(_qkv(put, dtype))


@grad_case("split_heads", (0, "x"))
def grad_split_heads(put, dtype):
    return (lambda x: ma.split_heads(x, H)), [put(_normal(B, L, D, dtype=dtype))]


@grad_case("merge_heads", (0, "x"))
def grad_merge_heads(put, dtype):
    return ma.merge_heads, [put(_normal(B, H, L, D // H, dtype=dtype))]


@grad_case("multi_head_attention", (0, "params"), (1, "query"), (2, "key"), (3, "value"))
def grad_multi_head_attention(put, dtype):
    params = put(_cast(ma.init_multi_head_attention(np.random.default_rng(0), D, H), dtype))
    query, key, value = (put(_normal(B, n, D, dtype=dtype, seed=s)) for n, s in ((L, 1), (4, 2), (4, 3)))
    mask = ma.causal_mask(L, 4, like=query)
    return (lambda p, q, k, v: ma.multi_head_attention(p, q, k, v, mask, n_heads=H,
                                                       average_weights=True)), [params, query, key, value]


@grad_case("grouped_attention", (0, "q"), (1, "k"), (2, "v"))
def grad_grouped_attention(put, dtype):
    q = put(_normal(B, 4, L, 3, dtype=dtype, seed=1))
    k, v = (put(_normal(B, 2, L, 3, dtype=dtype, seed=s)) for s in (2, 3))
    mask = ma.causal_mask(L, like=q)
    return (lambda q, k, v: ma.grouped_attention(q, k, v, mask)), [q, k, v]


@grad_case("layer_norm", (0, "x"), (1, "gamma"), (2, "beta"))
def grad_layer_norm(put, dtype):
    return ma.layer_norm, [put(_normal(B, L, D, dtype=dtype)), put(_normal(D, dtype=dtype, seed=1)),
                           put(_normal(D, dtype=dtype, seed=2))]


@grad_case("rms_norm", (0, "x"), (1, "gamma"))
def grad_rms_norm(put, dtype):
    return ma.rms_norm, [put(_normal(B, L, D, dtype=dtype)), put(_normal(D, dtype=dtype, seed=1))]


for _activation in ("relu", "gelu", "gelu_tanh"):
    def _grad_ff(put, dtype, activation=_activation):
        params = put(_cast(ma.init_feed_forward(np.random.default_rng(0), D, F), dtype))
        return (lambda p, x: ma.feed_forward(p, x, activation=activation)), \
            [params, put(_normal(B, L, D, dtype=dtype))]
    _grad_ff.__name__ = f"grad_feed_forward_{_activation}"
    grad_case("feed_forward", (0, "params"), (1, "x"))(_grad_ff)


@grad_case("encoder_block", (0, "params"), (1, "x"))
def grad_encoder_block(put, dtype):
    params = put(_cast(ma.init_encoder_block(np.random.default_rng(0), D, H, F), dtype))
    mask = ma.padding_mask(put(np.array([5, 2])), L)
    return (lambda p, x: ma.encoder_block(p, x, mask, n_heads=H, norm_first=True, activation="gelu")), \
        [params, put(_normal(B, L, D, dtype=dtype))]


@grad_case("encoder", (0, "params"), (1, "x"))
def grad_encoder(put, dtype):
    params = put(_cast(ma.init_encoder(np.random.default_rng(0), 2, D, H, F, final_norm=True), dtype))
    x = put(_normal(B, L, D, dtype=dtype))
    return (lambda p, x: ma.encoder(p, x, ma.causal_mask(L, like=x), n_heads=H)), [params, x]


@grad_case("blockwise_attention", (0, "q"), (1, "k"), (2, "v"))
def grad_blockwise(put, dtype):
    key_mask = put(np.random.default_rng(4).random((B, 1, L)) < 0.7)
    return (lambda q, k, v: ma.blockwise_attention(q, k, v, causal=True, key_mask=key_mask,
                                                   block_size=2)), list(_qkv(put, dtype))


def run_grad(put, dtype, index, build):
    """The gradient of a fixed random projection of every output, w.r.t. argument `index`."""
    from autograd import grad

    f, args = build(put, dtype)

    def loss(arg):
        outputs = leaves(f(*args[:index], arg, *args[index + 1:]))
        total = 0.0
        for i, out in enumerate(outputs):
            direction = put(_normal(*out.shape, dtype=dtype, seed=100 + i))
            total = total + (out * direction).sum()
        return total

    return grad(loss)(args[index])


# --- the decoder ---------------------------------------------------------------------------
V = 11
LLAMA_INIT = dict(n_kv_heads=1, norm="rms_norm", activation="swiglu", bias=False)
LLAMA = dict(n_heads=H, n_kv_heads=1, norm="rms_norm", activation="swiglu", position="rope")


def _lm(put, dtype, **init):
    params, _ = ma.init_causal_lm(np.random.default_rng(0), V, 2, D, H, F, n_positions=16,
                                  **init)
    return put(_cast(params, dtype))


def _tokens(put):
    return put(np.random.default_rng(5).integers(0, V, size=(B, L)))


@case("apply_rope")
def apply_rope(put, dtype):
    return ma.apply_rope(put(_normal(B, H, L, D // H, dtype=dtype)), put(np.arange(3, 3 + L)))


@case("init_gated_feed_forward")
def init_gated_feed_forward(put, dtype):
    return put(ma.init_gated_feed_forward(np.random.default_rng(0), D, F, dtype=dtype))


@case("gated_feed_forward")
def gated_feed_forward(put, dtype):
    params = put(ma.init_gated_feed_forward(np.random.default_rng(0), D, F, dtype=dtype))
    return ma.gated_feed_forward(params, put(_normal(B, L, D, dtype=dtype)))


@case("self_attention")
def self_attention(put, dtype):
    params = put(_cast(ma.init_multi_head_attention(np.random.default_rng(0), D, H, n_kv_heads=1),
                       dtype))
    x = put(_normal(B, L, D, dtype=dtype))
    cache = {k: put(_normal(B, 1, 3, D // H, dtype=dtype, seed=s)) for s, k in ((1, "k"), (2, "v"))}
    return ma.self_attention(params, x, ma.causal_mask(L, L + 3, align="bottom_right", like=x),
                             n_heads=H, n_kv_heads=1, positions=put(np.arange(3, 3 + L)),
                             cache=cache)


@case("init_decoder_block")
def init_decoder_block(put, dtype):
    return put(ma.init_decoder_block(np.random.default_rng(0), D, H, F, cross_attention=True,
                                     dtype=dtype))


@case("decoder_block")
def decoder_block(put, dtype):
    params = put(ma.init_decoder_block(np.random.default_rng(0), D, H, F, cross_attention=True,
                                       dtype=dtype))
    x, memory = put(_normal(B, L, D, dtype=dtype)), put(_normal(B, 3, D, dtype=dtype, seed=1))
    return ma.decoder_block(params, x, ma.causal_mask(L, like=x), memory=memory, n_heads=H,
                            norm_first=True)


@case("init_decoder")
def init_decoder(put, dtype):
    return put(ma.init_decoder(np.random.default_rng(0), 2, D, H, F, final_norm=True, dtype=dtype))


@case("decoder")
def decoder(put, dtype):
    params = put(ma.init_decoder(np.random.default_rng(0), 2, D, H, F, final_norm=True,
                                 dtype=dtype, **LLAMA_INIT))
    x = put(_normal(B, L, D, dtype=dtype))
    return ma.decoder(params, x, ma.causal_mask(L, like=x), positions=put(np.arange(L)),
                      n_heads=H, n_kv_heads=1, norm="rms_norm", activation="swiglu",
                      norm_first=True)


@case("init_causal_lm")
def init_causal_lm(put, dtype):
    return _lm(put, dtype)


@case("causal_lm")
def causal_lm(put, dtype):
    params, tokens = _lm(put, dtype, position="rope", tied=False, **LLAMA_INIT), _tokens(put)
    logits, cache = ma.causal_lm(params, tokens[:, :3], return_cache=True, **LLAMA)
    return logits, ma.causal_lm(params, tokens[:, 3:], cache=cache, **LLAMA)


@case("generate")
def generate(put, dtype):
    return ma.generate(_lm(put, dtype), _tokens(put), 3, n_heads=H)


@grad_case("apply_rope", (0, "x"))
def grad_apply_rope(put, dtype):
    positions = put(np.arange(3, 3 + L))
    return (lambda x: ma.apply_rope(x, positions)), [put(_normal(B, H, L, D // H, dtype=dtype))]


@grad_case("gated_feed_forward", (0, "params"), (1, "x"))
def grad_gated_feed_forward(put, dtype):
    params = put(ma.init_gated_feed_forward(np.random.default_rng(0), D, F, dtype=dtype))
    return ma.gated_feed_forward, [params, put(_normal(B, L, D, dtype=dtype))]


@grad_case("self_attention", (0, "params"), (1, "x"))
def grad_self_attention(put, dtype):
    params = put(_cast(ma.init_multi_head_attention(np.random.default_rng(0), D, H, n_kv_heads=1),
                       dtype))
    positions = put(np.arange(L))
    return (lambda p, x: ma.self_attention(p, x, ma.causal_mask(L, like=x), n_heads=H,
                                           n_kv_heads=1, positions=positions)[0]), \
        [params, put(_normal(B, L, D, dtype=dtype))]


@grad_case("decoder_block", (0, "params"), (1, "x"))
def grad_decoder_block(put, dtype):
    params = put(ma.init_decoder_block(np.random.default_rng(0), D, H, F, cross_attention=True,
                                       dtype=dtype))
    memory = put(_normal(B, 3, D, dtype=dtype, seed=1))
    return (lambda p, x: ma.decoder_block(p, x, ma.causal_mask(L, like=x), memory=memory,
                                          n_heads=H)), [params, put(_normal(B, L, D, dtype=dtype))]


@grad_case("decoder", (0, "params"), (1, "x"))
def grad_decoder(put, dtype):
    params = put(ma.init_decoder(np.random.default_rng(0), 2, D, H, F, final_norm=True,
                                 dtype=dtype, **LLAMA_INIT))
    positions = put(np.arange(L))
    return (lambda p, x: ma.decoder(p, x, ma.causal_mask(L, like=x), positions=positions,
                                    n_heads=H, n_kv_heads=1, norm="rms_norm",
                                    activation="swiglu", norm_first=True)), \
        [params, put(_normal(B, L, D, dtype=dtype))]


@grad_case("causal_lm", (0, "params"))
def grad_causal_lm(put, dtype):
    tokens = _tokens(put)
    return (lambda p: ma.causal_lm(p, tokens, **LLAMA)), \
        [_lm(put, dtype, position="rope", tied=False, **LLAMA_INIT)]


@case("cross_entropy")
def cross_entropy(put, dtype):
    return ma.cross_entropy(put(_normal(B, L, 7, dtype=dtype)), put(np.arange(B * L).reshape(B, L) % 7))


@grad_case("cross_entropy", (0, "logits"))
def grad_cross_entropy(put, dtype):
    targets = put(np.arange(B * L).reshape(B, L) % 7)
    return (lambda logits: ma.cross_entropy(logits, targets)), [put(_normal(B, L, 7, dtype=dtype))]


# --- attention and recurrence: linear attention, the gated delta rule (both forms) ---

def _delta_inputs(put, dtype):  # unit q, k [B, H, L, d_k], v, beta, g (<= 0), a state
    q, k, v = (_normal(B, H, L, D // H, dtype=dtype, seed=s) for s in (1, 2, 3))
    q, k = (a / np.linalg.norm(a, axis=-1, keepdims=True) for a in (q, k))
    beta = np.abs(_normal(B, H, L, dtype=dtype, seed=4)) / 3
    g = -np.abs(_normal(B, H, L, dtype=dtype, seed=5))
    return tuple(put(a) for a in (q, k, v, beta, g, _normal(B, H, D // H, D // H, dtype=dtype,
                                                            seed=6)))


@case("linear_attention")
def linear_attention(put, dtype):
    q, k, v = _qkv(put, dtype)
    return ma.linear_attention(q, k, v), ma.linear_attention(q, k, v, chunk_size=2)


@case("delta_rule")
def delta_rule(put, dtype):
    q, k, v, beta, g, s0 = _delta_inputs(put, dtype)
    return (ma.delta_rule(q, k, v, beta, g, initial_state=s0, return_state=True),
            ma.delta_rule(q, k, v, beta, g, initial_state=s0, chunk_size=2, return_state=True))


@case("l2_normalize")
def l2_normalize(put, dtype):
    return ma.l2_normalize(put(_normal(B, L, D, dtype=dtype)))


@grad_case("linear_attention", (0, "q"), (2, "v"))
def grad_linear_attention(put, dtype):
    return (lambda q, k, v: (ma.linear_attention(q, k, v),
                             ma.linear_attention(q, k, v, chunk_size=2))), list(_qkv(put, dtype))


@grad_case("delta_rule", (1, "k"), (3, "beta"), (4, "g"), (5, "initial_state"))
def grad_delta_rule(put, dtype):
    return (lambda q, k, v, beta, g, s0: (
        ma.delta_rule(q, k, v, beta, g, initial_state=s0, return_state=True),
        ma.delta_rule(q, k, v, beta, g, initial_state=s0, chunk_size=2, return_state=True))), \
        list(_delta_inputs(put, dtype))


@grad_case("l2_normalize", (0, "x"))
def grad_l2_normalize(put, dtype):
    return ma.l2_normalize, [put(_normal(B, L, D, dtype=dtype))]
