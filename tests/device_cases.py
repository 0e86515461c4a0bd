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


@case("init_layer_norm")
def init_layer_norm(put, dtype):
    return put(_cast(ma.init_layer_norm(D), dtype))


@case("layer_norm")
def layer_norm(put, dtype):
    x, gamma, beta = _normal(B, L, D, dtype=dtype), _normal(D, dtype=dtype, seed=1), \
        _normal(D, dtype=dtype, seed=2)
    return ma.layer_norm(put(x), put(gamma), put(beta))


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
