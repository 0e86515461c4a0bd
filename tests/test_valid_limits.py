"""Issue #24's first class, swept: every numeric argument of every public function at its limits.

A limit that is mathematically defined (and that torch or transformers accept) is accepted and
equals the reference: dropout = 1 (every entry dropped), eps = 0, a window of 1 or of at least
L, block_size 1 or beyond L, n_kv_heads = n_heads or 1, d_k = 1, a RoPE base <= 1, a schedule's
factor of 1, top_k beyond the vocabulary, top_p = 1, a temperature too small for float32,
query_pre_attn_scalar = inf, an empty batch or sequence. A value where the math is undefined is
refused by a ValueError that names the argument, before computing: never NumPy's own error, a
NaN, or a warning (which the test settings turn into errors). scale = 0 and its refusals are in
test_edge_classes.py; the positive sizes' refusals (0, -1, 2.5, ...) in test_bad_inputs.py.

The first test checks that the catalogue names every numeric argument of every public function.
"""
import inspect
import numbers

import numpy as np
import pytest

import minattn as ma
from minattn.interop import from_torch

torch = pytest.importorskip("torch")
F = torch.nn.functional

PUBLIC = {name: getattr(ma, name) for name in ma.__all__}
# Numeric arguments that default to None (or have no default): named here; the others are found
# by their numeric default.
NUMERIC_NAMES = {"scale", "n_heads", "n_kv_heads", "d_k", "d_model", "d_ff", "n_layers",
                 "vocab_size", "n_q", "n_k", "n", "n_positions", "window", "top_k", "top_p",
                 "n_new", "embedding_scale", "query_pre_attn_scalar", "attn_logit_softcapping",
                 "final_logit_softcapping", "rope_scaling", "scaling", "chunk_size",
                 "eps"}  # eps: a number where given (a block's default None: each norm's own)

# (function, argument) -> the test below that takes it to its limits
COVERED = {
    **{(f, "dropout"): "test_dropout_one_drops_everything_as_torch" for f in (
        "scaled_dot_product_attention", "multi_head_attention", "grouped_attention",
        "feed_forward", "encoder_block", "encoder")},
    **{(f, "eps"): "test_eps_zero_is_the_limit_and_refused_where_it_is_0_over_0" for f in (
        "layer_norm", "rms_norm", "encoder_block", "encoder", "self_attention", "decoder_block",
        "causal_lm")},
    **{(f, "scale"): "test_edge_classes.py" for f in (
        "scaled_dot_product_attention", "blockwise_attention", "delta_rule")},
    ("l2_normalize", "eps"): "test_eps_zero_is_the_limit_and_refused_where_it_is_0_over_0",
    **{(f, "chunk_size"): "test_delta_rule.py, test_linear_attention.py: chunks of 1 and beyond L"
       for f in ("linear_attention", "delta_rule")},
    ("blockwise_attention", "block_size"): "test_block_sizes_of_one_and_beyond_the_length",
    ("softmax", "axis"): "test_every_axis_of_softmax_as_torch",
    **{(f, a): "test_empty_sizes_give_empty_results" for f, a in (
        ("causal_mask", "n_q"), ("causal_mask", "n_k"), ("padding_mask", "n"),
        ("positional_encoding", "n_positions"), ("generate", "n_new"))},
    **{(f, a): "test_sizes_of_one_build_a_model_that_runs" for f, a in (
        ("init_multi_head_attention", "d_model"), ("init_layer_norm", "d_model"),
        ("init_feed_forward", "d_model"), ("init_feed_forward", "d_ff"),
        ("init_encoder_block", "d_model"), ("init_encoder_block", "d_ff"),
        ("init_encoder", "n_layers"), ("init_encoder", "d_model"), ("init_encoder", "d_ff"),
        ("init_gated_feed_forward", "d_model"), ("init_gated_feed_forward", "d_ff"),
        ("init_decoder_block", "d_model"), ("init_decoder_block", "d_ff"),
        ("init_decoder", "n_layers"), ("init_decoder", "d_model"), ("init_decoder", "d_ff"),
        ("init_causal_lm", "vocab_size"), ("init_causal_lm", "n_layers"),
        ("init_causal_lm", "d_model"), ("init_causal_lm", "d_ff"),
        ("init_causal_lm", "n_positions"), ("positional_encoding", "d_model"))},
    **{(f, "n_heads"): "test_one_feature_per_head_as_torch" for f in (
        "split_heads", "init_multi_head_attention", "multi_head_attention", "init_encoder_block",
        "encoder_block", "init_encoder", "encoder", "self_attention", "init_decoder_block",
        "decoder_block", "init_decoder", "init_causal_lm", "causal_lm")},
    **{(f, "d_k"): "test_one_feature_per_head_as_torch" for f in (
        "self_attention", "init_decoder_block", "decoder_block", "causal_lm")},
    **{(f, "n_kv_heads"): "test_n_kv_heads_of_n_heads_and_of_one" for f in (
        "init_multi_head_attention", "multi_head_attention", "self_attention",
        "init_decoder_block", "decoder_block", "causal_lm")},
    **{(f, "window"): "test_windows_of_one_and_beyond_the_length" for f in (
        "causal_mask", "causal_lm")},
    **{(f, a): "test_rope_bases_at_and_below_one_as_transformers" for f, a in (
        ("apply_rope", "base"), ("self_attention", "rope_base"), ("decoder_block", "rope_base"),
        ("causal_lm", "rope_base"))},
    **{(f, a): "test_a_schedule_with_factor_one_is_default_rope" for f, a in (
        ("apply_rope", "scaling"), ("self_attention", "rope_scaling"),
        ("decoder_block", "rope_scaling"), ("causal_lm", "rope_scaling"))},
    **{("generate", a): "test_sampling_limits_as_transformers" for a in (
        "temperature", "top_k", "top_p")},
    **{(f, a): "test_gemma_scalars_at_their_limits" for f, a in (
        ("self_attention", "query_pre_attn_scalar"), ("self_attention", "attn_logit_softcapping"),
        ("causal_lm", "query_pre_attn_scalar"), ("causal_lm", "attn_logit_softcapping"),
        ("causal_lm", "final_logit_softcapping"), ("causal_lm", "embedding_scale"))},
}


def test_the_catalogue_covers_every_numeric_argument_of_the_public_api():
    numeric = set()
    for name, f in PUBLIC.items():
        for argument, p in inspect.signature(f).parameters.items():
            default = p.default
            if argument in NUMERIC_NAMES or (isinstance(default, numbers.Real)
                                             and not isinstance(default, bool)):
                numeric.add((name, argument))
    assert numeric == set(COVERED)


rng0 = np.random.default_rng(0)
X = rng0.normal(size=(2, 3, 4))
t = lambda a: torch.from_numpy(np.ascontiguousarray(a))


# --- dropout = 1: every entry dropped, as torch's p = 1 ---

def _torch_module(module):
    module = module.double().train()  # training mode: torch applies its dropout
    params, config = from_torch(module)
    return module, params, config


def _dropout_cases():
    torch.manual_seed(0)
    mha, mha_params, _ = _torch_module(torch.nn.MultiheadAttention(4, 2, dropout=1.0,
                                                                   batch_first=True))
    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=1.0, batch_first=True)
    layer, layer_params, layer_config = _torch_module(layer)
    stack = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(4, 2, 8, dropout=1.0, batch_first=True), 2,
        enable_nested_tensor=False)
    stack, stack_params, stack_config = _torch_module(stack)
    ff = ma.init_feed_forward(np.random.default_rng(1), 4, 8)
    rng = np.random.default_rng(2)
    return {  # name -> (minattn with dropout=1, torch's result with p=1)
        "scaled_dot_product_attention": (
            lambda: ma.scaled_dot_product_attention(X, X, X, dropout=1.0, rng=rng)[0],
            lambda: F.scaled_dot_product_attention(t(X), t(X), t(X), dropout_p=1.0)),
        "grouped_attention": (  # X as 2 query heads over 1 kv head: torch's enable_gqa
            lambda: ma.grouped_attention(X, X[:1], X[1:], dropout=1.0, rng=rng)[0],
            lambda: F.scaled_dot_product_attention(t(X), t(X[:1]), t(X[1:]), dropout_p=1.0,
                                                   enable_gqa=True)),
        "multi_head_attention": (
            lambda: ma.multi_head_attention(mha_params, X, X, X, n_heads=2, dropout=1.0,
                                            rng=rng)[0],
            lambda: mha(t(X), t(X), t(X), need_weights=False)[0]),
        "feed_forward": (
            lambda: ma.feed_forward(ff, X, dropout=1.0, rng=rng),
            lambda: F.linear(F.dropout(F.relu(F.linear(t(X), t(ff["w_1"].T), t(ff["b_1"]))),
                                       p=1.0), t(ff["w_2"].T), t(ff["b_2"]))),
        "encoder_block": (
            lambda: ma.encoder_block(layer_params, X, dropout=1.0, rng=rng, **layer_config),
            lambda: layer(t(X))),
        "encoder": (
            lambda: ma.encoder(stack_params, X, dropout=1.0, rng=rng, **stack_config),
            lambda: stack(t(X))),
    }


DROPOUT = _dropout_cases()


@pytest.mark.parametrize("name", DROPOUT)
def test_dropout_one_drops_everything_as_torch(name):
    ours, theirs = DROPOUT[name]
    with torch.no_grad():
        expected = theirs().numpy()
    np.testing.assert_allclose(ours(), expected, rtol=1e-12, atol=1e-12)


def test_dropout_one_of_attention_gives_zero_weights():
    weights = ma.scaled_dot_product_attention(X, X, X, dropout=1.0,
                                              rng=np.random.default_rng(0))[1]
    np.testing.assert_array_equal(weights, 0.0)


# --- eps = 0: the norm without eps where it is defined; refused where it would be 0 / 0 ---

GAMMA, BETA = rng0.normal(size=4), rng0.normal(size=4)
LN_BLOCK = ma.init_encoder_block(np.random.default_rng(3), 4, 2, 8)
LN_STACK = ma.init_encoder(np.random.default_rng(4), 2, 4, 2, 8)
QK = ma.init_decoder_block(np.random.default_rng(5), 4, 2, 8, qk_norm=True, bias=False,
                           norm="rms_norm", activation="swiglu")
LM, LM_CONFIG = ma.init_causal_lm(np.random.default_rng(6), 7, 1, 4, 2, 8, position="rope",
                                  norm="rms_norm", activation="swiglu", bias=False)
LM_ZERO = {**LM, "token_embedding": np.concatenate([np.zeros((1, 4)), LM["token_embedding"][1:]])}
NORMS = {  # name -> f(x, eps) for x [2, 3, 4]
    "layer_norm": lambda x, eps: ma.layer_norm(x, GAMMA, BETA, eps),
    "rms_norm": lambda x, eps: ma.rms_norm(x, GAMMA, eps),
    "encoder_block": lambda x, eps: ma.encoder_block(LN_BLOCK, x, n_heads=2, eps=eps,
                                                     norm_first=True),
    "encoder": lambda x, eps: ma.encoder(LN_STACK, x, n_heads=2, eps=eps, norm_first=True),
    "self_attention": lambda x, eps: ma.self_attention(QK["self_attention"], x, n_heads=2,
                                                       eps=eps)[0],
    "decoder_block": lambda x, eps: ma.decoder_block(QK, x, n_heads=2, eps=eps, norm="rms_norm",
                                                     activation="swiglu", norm_first=True),
    "l2_normalize": lambda x, eps: ma.l2_normalize(x, eps),
    "causal_lm": lambda x, eps: ma.causal_lm(  # x picks the tokens: a zero row is token 0
        LM_ZERO, np.where(np.all(x[..., :1] == 0, -1), 0, 1 + np.arange(3) % 6)[:1], eps=eps,
        **LM_CONFIG),
}


def test_eps_zero_of_the_norms_equals_torch():
    np.testing.assert_allclose(NORMS["layer_norm"](X, 0.0), F.layer_norm(
        t(X), (4,), t(GAMMA), t(BETA), eps=0.0).numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(NORMS["rms_norm"](X, 0.0), F.rms_norm(
        t(X), (4,), t(GAMMA), eps=0.0).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NORMS)
def test_eps_zero_is_the_limit_and_refused_where_it_is_0_over_0(name):
    f = NORMS[name]
    # Where every row has a spread, eps = 0 is the limit of a tiny eps (which leaves var + eps
    # unchanged in float64).
    np.testing.assert_array_equal(f(X, 0.0), f(X, 1e-300))
    x = X.copy()
    x[0, 0] = 0.0  # a row of zeros: variance and mean square 0, norm 0 / 0 (torch: NaN)
    assert np.all(np.isfinite(f(x, 1e-6)))
    with pytest.raises(ValueError, match=r"^eps=0 leaves the norm undefined \(0 / 0\)"):
        f(x, 0.0)


def test_eps_zero_refuses_a_constant_row_of_layer_norm_but_not_of_rms_norm():
    x = np.full((1, 4), 3.0)  # variance 0, mean square 9
    with pytest.raises(ValueError, match="whose variance is 0"):
        ma.layer_norm(x, GAMMA, BETA, 0.0)
    np.testing.assert_allclose(ma.rms_norm(x, GAMMA, 0.0), F.rms_norm(
        t(x), (4,), t(GAMMA), eps=0.0).numpy(), rtol=1e-15)


@pytest.mark.parametrize("eps", [1e-5, 0.0])
def test_norms_of_an_empty_feature_axis_are_empty_as_torch(eps):
    from autograd import grad, numpy as anp
    x = np.ones((2, 0))
    np.testing.assert_array_equal(ma.layer_norm(x, np.ones(0), np.zeros(0), eps),
                                  F.layer_norm(t(x), (0,), eps=eps).numpy())
    np.testing.assert_array_equal(ma.rms_norm(x, np.ones(0), eps),
                                  F.rms_norm(t(x), (0,), eps=eps).numpy())
    assert grad(lambda x: anp.sum(ma.layer_norm(x, np.ones(0), np.zeros(0), eps)))(x).shape \
        == (2, 0)
    assert grad(lambda g: anp.sum(ma.rms_norm(x, g, eps)))(np.ones(0)).shape == (0,)


# --- sizes at their limits ---

@pytest.mark.parametrize("block_size", [1, 2, 3, 4, 100])
def test_block_sizes_of_one_and_beyond_the_length(block_size):
    q, k, v = rng0.normal(size=(2, 3, 4)), rng0.normal(size=(2, 5, 4)), rng0.normal(size=(2, 5, 3))
    expected = F.scaled_dot_product_attention(t(q), t(k), t(v)).numpy()
    np.testing.assert_allclose(ma.blockwise_attention(q, k, v, block_size=block_size), expected,
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("axis", [-3, -2, -1, 0, 1, 2])
def test_every_axis_of_softmax_as_torch(axis):
    np.testing.assert_allclose(ma.softmax(X, axis=axis), torch.softmax(t(X), dim=axis).numpy(),
                               rtol=1e-12, atol=1e-15)


def test_empty_sizes_give_empty_results():
    assert ma.causal_mask(0).shape == (0, 0) and ma.causal_mask(0, 3).shape == (0, 3)
    assert ma.causal_mask(3, 0).shape == (3, 0)
    assert ma.padding_mask(np.array([0, 0]), 0).shape == (2, 1, 1, 0)
    np.testing.assert_array_equal(ma.positional_encoding(0, 4), ma.positional_encoding(3, 4)[:0])
    tokens = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(ma.generate(LM, tokens, 0, **LM_CONFIG), tokens)
    empty = np.zeros((0, 3), int)  # an empty batch: a model of any size gives nothing
    assert ma.causal_lm(LM, empty, **LM_CONFIG).shape == (0, 3, 7)
    assert ma.generate(LM, empty, 2, **LM_CONFIG).shape == (0, 5)


def test_sizes_of_one_build_a_model_that_runs():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 3, 1))
    assert ma.multi_head_attention(ma.init_multi_head_attention(rng, 1, 1), x, x, x,
                                   n_heads=1)[0].shape == x.shape
    assert ma.layer_norm(x, **ma.init_layer_norm(1)).shape == x.shape  # one feature: beta
    assert ma.feed_forward(ma.init_feed_forward(rng, 1, 1), x).shape == x.shape
    assert ma.gated_feed_forward(ma.init_gated_feed_forward(rng, 1, 1), x).shape == x.shape
    assert ma.encoder(ma.init_encoder(rng, 1, 1, 1, 1), x, n_heads=1).shape == x.shape
    assert ma.encoder_block(ma.init_encoder_block(rng, 1, 1, 1), x, n_heads=1).shape == x.shape
    assert ma.decoder(ma.init_decoder(rng, 1, 1, 1, 1), x, n_heads=1).shape == x.shape
    assert ma.decoder_block(ma.init_decoder_block(rng, 1, 1, 1), x, n_heads=1).shape == x.shape
    lm, config = ma.init_causal_lm(rng, 1, 1, 1, 1, 1, n_positions=1)
    np.testing.assert_array_equal(ma.generate(lm, np.array([[0]]), 0, **config), [[0]])
    assert ma.causal_lm(lm, np.array([[0]]), **config).shape == (1, 1, 1)
    assert ma.positional_encoding(3, 1).shape == (3, 1)


def test_one_feature_per_head_as_torch():
    torch.manual_seed(1)
    mha = torch.nn.MultiheadAttention(4, 4, batch_first=True).double().eval()  # d_k = 1
    params, config = from_torch(mha)
    with torch.no_grad():
        expected = mha(t(X), t(X), t(X))[0].numpy()
    np.testing.assert_allclose(ma.multi_head_attention(params, X, X, X, **config)[0], expected,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ma.split_heads(X, 4), np.transpose(X[..., None], (0, 2, 1, 3)))
    layer = torch.nn.TransformerEncoderLayer(4, 4, 8, dropout=0.0, batch_first=True)
    layer = layer.double().eval()
    params, config = from_torch(layer)
    with torch.no_grad():
        expected = layer(t(X)).numpy()
    np.testing.assert_allclose(ma.encoder_block(params, X, **config), expected, rtol=1e-10,
                               atol=1e-12)
    # d_k = 1 given by hand in a decoder: the same as d_model / n_heads = 1.
    block = ma.init_decoder_block(np.random.default_rng(8), 4, 4, 8)
    np.testing.assert_array_equal(ma.decoder_block(block, X, n_heads=4, d_k=1),
                                  ma.decoder_block(block, X, n_heads=4))
    lm, config = ma.init_causal_lm(np.random.default_rng(9), 7, 1, 4, 4, 8)
    tokens = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(ma.causal_lm(lm, tokens, **{**config, "d_k": 1}),
                                  ma.causal_lm(lm, tokens, **config))


def _repeat_kv(params, n_heads, n_kv_heads, d_k):
    # K and V weights of n_kv_heads heads -> of n_heads heads (HF's repeat_kv, on the weights).
    group = n_heads // n_kv_heads
    tile = lambda w: np.repeat(w.reshape(*w.shape[:-1], n_kv_heads, d_k), group,
                               axis=-2).reshape(*w.shape[:-1], n_heads * d_k)
    return {**params, **{key: tile(params[key]) for key in ("w_k", "w_v", "b_k", "b_v")
                         if key in params}}


def test_n_kv_heads_of_n_heads_and_of_one():
    rng = np.random.default_rng(10)
    mqa = ma.init_multi_head_attention(rng, 4, 2, n_kv_heads=1)
    assert mqa["w_k"].shape == (4, 2)
    mha = ma.init_multi_head_attention(np.random.default_rng(10), 4, 2, n_kv_heads=2)
    assert mha["w_k"].shape == (4, 4)
    np.testing.assert_allclose(
        ma.multi_head_attention(mqa, X, X, X, n_heads=2, n_kv_heads=1)[0],
        ma.multi_head_attention(_repeat_kv(mqa, 2, 1, 2), X, X, X, n_heads=2)[0], rtol=1e-12)
    for a, b in zip(ma.multi_head_attention(mha, X, X, X, n_heads=2, n_kv_heads=2),
                    ma.multi_head_attention(mha, X, X, X, n_heads=2)):
        np.testing.assert_array_equal(a, b)
    block = ma.init_decoder_block(rng, 4, 2, 8, n_kv_heads=1)
    full = {**block, "self_attention": _repeat_kv(block["self_attention"], 2, 1, 2)}
    np.testing.assert_allclose(ma.decoder_block(block, X, n_heads=2, n_kv_heads=1),
                               ma.decoder_block(full, X, n_heads=2), rtol=1e-12)
    np.testing.assert_allclose(
        ma.self_attention(block["self_attention"], X, n_heads=2, n_kv_heads=1)[0],
        ma.self_attention(full["self_attention"], X, n_heads=2)[0], rtol=1e-12)
    lm, config = ma.init_causal_lm(rng, 7, 1, 4, 2, 8, n_kv_heads=1)
    tokens = np.array([[1, 2, 3]])
    lm_full = {**lm, "layers": [{**layer, "self_attention": _repeat_kv(
        layer["self_attention"], 2, 1, 2)} for layer in lm["layers"]]}
    np.testing.assert_allclose(ma.causal_lm(lm, tokens, **config),
                               ma.causal_lm(lm_full, tokens, **{**config, "n_kv_heads": 2}),
                               rtol=1e-12)


@pytest.mark.parametrize("window", [1, 2, 5, 6, 100])
def test_windows_of_one_and_beyond_the_length(window):
    n = 5
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    np.testing.assert_array_equal(ma.causal_mask(n, window=window), (j <= i) & (j > i - window))
    tokens = np.array([[1, 2, 3, 4, 5]])
    windowed = ma.causal_lm(LM, tokens, window=window, **LM_CONFIG)
    if window >= n:  # every key is in the window: no window at all
        np.testing.assert_array_equal(windowed, ma.causal_lm(LM, tokens, **LM_CONFIG))
    if window == 1:  # each token sees itself only, with weight 1: as a sequence of one token
        for p in range(n):  # (its position does not matter: RoPE leaves q_p . k_p unchanged)
            alone = ma.causal_lm(LM, tokens[:, p:p + 1], **LM_CONFIG)
            np.testing.assert_allclose(windowed[:, p], alone[:, 0], rtol=1e-12, atol=1e-14)


# --- RoPE ---

def _rope_as_transformers(x, positions, base):
    # Llama's rotary embedding, in torch: inv_freq = 1 / base^(2i/d) (any base > 0: rope_theta
    # = 1 runs there too), x * cos + rotate_half(x) * sin.
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.from_numpy(positions).double()[:, None] * inv_freq[None]
    emb = torch.cat([angles, angles], -1)
    x = t(x)
    rotate_half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return (x * emb.cos() + rotate_half * emb.sin()).numpy()


@pytest.mark.parametrize("base", [1.0, 0.5, 2.0, 1e4, np.inf])
def test_rope_bases_at_and_below_one_as_transformers(base):
    x, positions = rng0.normal(size=(5, 4)), np.arange(5)
    np.testing.assert_allclose(ma.apply_rope(x, positions, base=base),
                               _rope_as_transformers(x, positions, base), rtol=1e-12, atol=1e-12)
    block = ma.init_decoder_block(np.random.default_rng(11), 4, 2, 8)
    y = ma.decoder_block(block, X, n_heads=2, positions=np.arange(3), rope_base=base)
    sa = ma.self_attention(block["self_attention"], X, n_heads=2, positions=np.arange(3),
                           rope_base=base)[0]
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(sa))
    assert np.all(np.isfinite(ma.causal_lm(LM, np.array([[1, 2, 3]]), rope_base=base,
                                           **LM_CONFIG)))


@pytest.mark.parametrize("base", [0.0, -1.0, np.nan, "1e4"])
def test_rope_bases_without_frequencies_are_refused_by_name(base):
    with pytest.raises((ValueError, TypeError), match="^base must be a positive float"):
        ma.apply_rope(X, np.arange(3), base=base)
    with pytest.raises((ValueError, TypeError), match="^rope_base must be a positive float"):
        ma.causal_lm(LM, np.array([[1, 2, 3]]), rope_base=base, **LM_CONFIG)  # its keyword


FACTOR_ONE = [
    {"rope_type": "linear", "factor": 1.0},
    {"rope_type": "dynamic", "factor": 1.0, "max_position_embeddings": 16},
    {"rope_type": "yarn", "factor": 1.0, "original_max_position_embeddings": 8},
    {"rope_type": "llama3", "factor": 1.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8},
]


@pytest.mark.parametrize("scaling", FACTOR_ONE, ids=lambda s: s["rope_type"])
def test_a_schedule_with_factor_one_is_default_rope(scaling):
    x, positions = rng0.normal(size=(2, 6, 8)), np.arange(6)
    plain = ma.apply_rope(x, positions)
    np.testing.assert_allclose(ma.apply_rope(x, positions, scaling=scaling), plain, rtol=1e-12,
                               atol=1e-14)
    block = ma.init_decoder_block(np.random.default_rng(12), 8, 2, 8)
    call = lambda f, **kw: f(block if f is ma.decoder_block else block["self_attention"],
                             x, n_heads=2, positions=positions, **kw)
    for f in (ma.decoder_block, ma.self_attention):
        np.testing.assert_allclose(_first(call(f, rope_scaling=scaling)), _first(call(f)),
                                   rtol=1e-12, atol=1e-14)
    tokens = np.array([[1, 2, 3]])
    np.testing.assert_allclose(ma.causal_lm(LM, tokens, rope_scaling=scaling, **LM_CONFIG),
                               ma.causal_lm(LM, tokens, **LM_CONFIG), rtol=1e-12, atol=1e-14)


def _first(result):
    return result[0] if isinstance(result, tuple) else result


@pytest.mark.parametrize("scaling, message", [
    ({"rope_type": "linear", "factor": 0.0}, r"scaling\['factor'\] must be a positive"),
    ({"rope_type": "linear", "factor": -2.0}, r"scaling\['factor'\] must be a positive"),
    ({"rope_type": "linear", "factor": np.nan}, r"scaling\['factor'\] must be a positive"),
    ({"rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 0},
     r"scaling\['max_position_embeddings'\] must be a positive"),
    ({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 0},
     r"scaling\['original_max_position_embeddings'\] must be a positive"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8},
     r"scaling\['high_freq_factor'\] must be greater than low_freq_factor"),
])
def test_a_schedule_that_divides_by_zero_is_refused_by_name(scaling, message):
    with pytest.raises(ValueError, match=message):
        ma.apply_rope(X, np.arange(3), scaling=scaling)
    with pytest.raises(ValueError, match=message.replace("scaling", "rope_scaling", 1)):
        ma.causal_lm(LM, np.array([[1, 2, 3]]), rope_scaling=scaling, **LM_CONFIG)


# --- generation ---

def test_sampling_limits_as_transformers():
    transformers = pytest.importorskip("transformers")
    tokens = np.array([[1, 2, 3], [4, 5, 6]])
    sample = lambda **kw: ma.generate(LM, tokens, 4, rng=np.random.default_rng(13), **kw,
                                      **LM_CONFIG)
    # top_k beyond the vocabulary keeps every token (transformers' TopKLogitsWarper clamps it).
    logits = torch.from_numpy(rng0.normal(size=(2, 7)))
    assert torch.isfinite(transformers.TopKLogitsWarper(100)(None, logits)).all()
    np.testing.assert_array_equal(sample(temperature=1.0, top_k=100), sample(temperature=1.0))
    np.testing.assert_array_equal(sample(temperature=1.0, top_k=7), sample(temperature=1.0))
    # top_p = 1 keeps every token (so does transformers' TopPLogitsWarper).
    assert torch.isfinite(transformers.TopPLogitsWarper(1.0)(None, logits)).all()
    np.testing.assert_array_equal(sample(temperature=1.0, top_p=1.0), sample(temperature=1.0))
    # A temperature too small for float32 (1e-300 is 0 there): its limit, greedy decoding.
    lm32 = {key: value.astype(np.float32) if hasattr(value, "astype") else value
            for key, value in LM.items()}
    greedy = ma.generate(lm32, tokens, 4, **LM_CONFIG)
    for temperature in (1e-300, 5e-324, np.float32(1e-30)):
        np.testing.assert_array_equal(ma.generate(lm32, tokens, 4, temperature=temperature,
                                                  rng=np.random.default_rng(0), **LM_CONFIG),
                                      greedy)
    # An infinite temperature: every token equally likely (the logits divided to 0).
    assert sample(temperature=np.inf).shape == (2, 7)


@pytest.mark.parametrize("temperature", [-1e-9, np.nan, -np.inf])
def test_a_temperature_without_a_distribution_is_refused(temperature):
    with pytest.raises(ValueError, match="^temperature must be a number >= 0"):
        ma.generate(LM, np.array([[1, 2]]), 1, temperature=temperature,
                    rng=np.random.default_rng(0), **LM_CONFIG)


# --- Gemma's scalars ---

UNDEFINED = {  # the values where each scalar's formula has no value (inf, 0: tests below)
    "query_pre_attn_scalar": [0.0, -1.0, np.nan, -np.inf],  # scale = s^-1/2
    "attn_logit_softcapping": [0.0, -1.0, np.nan, np.inf],  # cap tanh(s / cap)
    "final_logit_softcapping": [0.0, -1.0, np.nan, np.inf],
    "embedding_scale": [-1.0, np.nan, np.inf],  # inf * an embedding of 0: NaN
}


@pytest.mark.parametrize("argument, bad", [(a, b) for a, values in UNDEFINED.items()
                                           for b in values])
def test_gemma_scalars_at_their_limits(argument, bad):
    tokens = np.array([[1, 2, 3]])
    call = lambda value: ma.causal_lm(LM, tokens, **{argument: value}, **LM_CONFIG)
    with pytest.raises(ValueError, match=f"^{argument} must be a"):
        call(bad)
    if argument in ("query_pre_attn_scalar", "attn_logit_softcapping"):
        with pytest.raises(ValueError, match=f"^{argument} must be a"):
            ma.self_attention(QK["self_attention"], X, n_heads=2, **{argument: bad})


def test_an_infinite_query_pre_attn_scalar_is_scale_zero_as_transformers():
    # transformers: scaling = query_pre_attn_scalar ** -0.5 = 0 for inf: uniform weights, as
    # scaled_dot_product_attention's scale = 0.
    sa = QK["self_attention"]
    q = ma.rms_norm(ma.split_heads(X @ sa["w_q"], 2), sa["q_norm"]["gamma"], 1e-6)
    k = ma.rms_norm(ma.split_heads(X @ sa["w_k"], 2), sa["k_norm"]["gamma"], 1e-6)
    v = ma.split_heads(X @ sa["w_v"], 2)
    heads = F.scaled_dot_product_attention(t(q), t(k), t(v), scale=0.0).numpy()
    expected = ma.merge_heads(heads) @ sa["w_o"]
    np.testing.assert_allclose(ma.self_attention(sa, X, n_heads=2,
                                                 query_pre_attn_scalar=np.inf)[0],
                               expected, rtol=1e-12, atol=1e-14)
    assert np.all(np.isfinite(ma.causal_lm(LM, np.array([[1, 2, 3]]),
                                           query_pre_attn_scalar=np.inf, **LM_CONFIG)))


def test_an_embedding_scale_of_zero_zeroes_the_embeddings():
    # Every embedding 0: each sublayer of a bias-free pre-norm model maps 0 to 0, so do the
    # final norm and the unembedding.
    logits = ma.causal_lm(LM, np.array([[1, 2, 3]]), embedding_scale=0.0, **LM_CONFIG)
    np.testing.assert_array_equal(logits, 0.0)
