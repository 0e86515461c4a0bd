"""Three classes of edge cases, each checked across the whole public API rather than at the one
function where it was found:

1. a valid limit is accepted: scale = 0 (uniform weights, as torch), while negative, NaN and
   infinite scales are refused, in every function that takes a scale;
2. an additive (floating) mask in another dtype than the inputs is cast to the inputs' dtype
   first, in every entry point that takes a mask (or it is refused, where masks are boolean);
3. a gradient that is first-order only says so by name when differentiated again, and every
   other differentiable function gives second derivatives equal to finite differences.

Each test first checks that its catalogue covers every public function with such an argument,
so a new function cannot slip past the class.
"""
import inspect

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

import minattn as ma

torch = pytest.importorskip("torch")

PUBLIC = {name: getattr(ma, name) for name in ma.__all__}


def _takes(argument):
    return {name for name, f in PUBLIC.items()
            if argument in inspect.signature(f).parameters}


def _takes_a_mask():
    return {name for name, f in PUBLIC.items()
            if any(p.endswith("mask") for p in inspect.signature(f).parameters)}


# --- 1. scale = 0 is the uniform average; negative, NaN and inf are refused ---

rng0 = np.random.default_rng(0)
Q, K, V = rng0.normal(size=(2, 3, 4)), rng0.normal(size=(2, 5, 4)), rng0.normal(size=(2, 5, 3))
KEEP = np.array([True, True, False, True, False])  # keys 2 and 4 hidden from every query

SCALED = {  # every public function with a scale: f(q, k, v, scale, keep) -> output
    "scaled_dot_product_attention":
        lambda q, k, v, scale, keep: ma.scaled_dot_product_attention(q, k, v, keep,
                                                                     scale=scale)[0],
    "blockwise_attention":
        lambda q, k, v, scale, keep: ma.blockwise_attention(
            q, k, v, key_mask=keep, scale=scale, block_size=2),
}


def test_the_scale_catalogue_covers_every_function_with_a_scale():
    # delta_rule's scale multiplies the queries of a recurrence, no softmax: its own test below
    assert _takes("scale") - {"delta_rule"} == set(SCALED)


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_the_delta_rules_scale_multiplies_its_output_and_zero_gives_zeros(chunk_size):
    k, v, beta = ma.l2_normalize(K[:, :3]), V[:, :3], np.full(Q.shape[:-1], 0.5)  # one per query
    one = ma.delta_rule(Q, k, v, beta, scale=1.0, chunk_size=chunk_size)
    for scale in (0.0, 0, np.array(0.0), 2.5):
        np.testing.assert_allclose(
            ma.delta_rule(Q, k, v, beta, scale=scale, chunk_size=chunk_size),
            float(scale) * one, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="scale must be a non-negative, finite float"):
        ma.delta_rule(Q, k, v, beta, scale=np.nan, chunk_size=chunk_size)


@pytest.mark.parametrize("name", SCALED)
@pytest.mark.parametrize("zero", [0.0, 0, np.float64(0.0), -0.0, np.array(0.0)])
def test_scale_zero_gives_the_mean_of_the_visible_values_as_torch(name, zero):
    out = SCALED[name](Q, K, V, zero, KEEP)
    mean = V[:, KEEP].mean(axis=1, keepdims=True)  # every visible key weighs the same
    np.testing.assert_allclose(out, np.broadcast_to(mean, out.shape), rtol=1e-12, atol=1e-15)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))
    expected = torch.nn.functional.scaled_dot_product_attention(
        t(Q), t(K), t(V), attn_mask=t(KEEP), scale=0.0).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", SCALED)
def test_scale_zero_keeps_float32_and_has_the_gradient_of_the_limit(name):
    f32 = [a.astype(np.float32) for a in (Q, K, V)]
    assert SCALED[name](*f32, 0.0, KEEP).dtype == np.float32
    # d out / d scale at 0 exists (the scale enters smoothly): equal to finite differences.
    r = np.random.default_rng(1).normal(size=(2, 3, 3))
    loss = lambda s: anp.sum(SCALED[name](Q, K, V, s, KEEP) * r)
    h = 1e-5  # one-sided (a negative scale is refused), second order in h
    expected = (-3 * loss(0.0) + 4 * loss(h) - loss(2 * h)) / (2 * h)
    np.testing.assert_allclose(grad(loss)(0.0), expected, rtol=1e-6)


@pytest.mark.parametrize("name", SCALED)
@pytest.mark.parametrize("bad", [-1.0, -1e-300, np.nan, np.inf, -np.inf, np.float32(-0.5),
                                 np.array(np.nan)])
def test_negative_nan_and_infinite_scales_are_refused_by_name(name, bad):
    with pytest.raises(ValueError, match=r"^scale must be a non-negative, finite float, got"):
        SCALED[name](Q, K, V, bad, KEEP)


# --- 2. an additive mask is cast to the inputs' dtype first ---

D, H, L, L_M = 4, 2, 3, 2
BLOCK = ma.init_encoder_block(np.random.default_rng(1), D, H, 8)
ENC = ma.init_encoder(np.random.default_rng(2), 2, D, H, 8)
MHA = ma.init_multi_head_attention(np.random.default_rng(3), D, H)
DEC = ma.init_decoder_block(np.random.default_rng(4), D, H, 8, cross_attention=True)
DECODER = ma.init_decoder(np.random.default_rng(5), 2, D, H, 8, cross_attention=True,
                          norm="rms_norm", activation="swiglu")


def _cast(tree, dtype):
    if isinstance(tree, dict):
        return {key: _cast(value, dtype) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_cast(value, dtype) for value in tree]
    return tree.astype(dtype)


# name -> f(mask, dtype): the entry point called with inputs and params in `dtype` and `mask`
# as its (self-attention) mask; memory_mask entries use a mask over the memory's keys.
X = np.random.default_rng(6).normal(size=(2, L, D))
MEMORY = np.random.default_rng(7).normal(size=(2, L_M, D))
MASKED = {
    "scaled_dot_product_attention": lambda m, dt: ma.scaled_dot_product_attention(
        X.astype(dt), X.astype(dt), X.astype(dt), m),
    "multi_head_attention": lambda m, dt: ma.multi_head_attention(
        _cast(MHA, dt), X.astype(dt), X.astype(dt), X.astype(dt), m, n_heads=H),
    "grouped_attention": lambda m, dt: ma.grouped_attention(  # X as 2 query heads, 1 kv head
        X.astype(dt), X[:1].astype(dt), X[1:].astype(dt), m),
    "encoder_block": lambda m, dt: ma.encoder_block(
        _cast(BLOCK, dt), X.astype(dt), m, n_heads=H, return_weights=True),
    "encoder": lambda m, dt: ma.encoder(
        _cast(ENC, dt), X.astype(dt), m, n_heads=H, return_weights=True),
    "self_attention": lambda m, dt: ma.self_attention(
        _cast(DEC["self_attention"], dt), X.astype(dt), m, n_heads=H)[0],
    "decoder_block": lambda m, dt: ma.decoder_block(
        _cast(DEC, dt), X.astype(dt), m, memory=MEMORY.astype(dt), n_heads=H),
    "decoder": lambda m, dt: ma.decoder(
        _cast(DECODER, dt), X.astype(dt), m, memory=MEMORY.astype(dt), n_heads=H,
        norm="rms_norm", activation="swiglu"),
}
MEMORY_MASKED = {
    "decoder_block": lambda m, dt: ma.decoder_block(
        _cast(DEC, dt), X.astype(dt), memory=MEMORY.astype(dt), memory_mask=m, n_heads=H),
    "decoder": lambda m, dt: ma.decoder(
        _cast(DECODER, dt), X.astype(dt), memory=MEMORY.astype(dt), memory_mask=m, n_heads=H,
        norm="rms_norm", activation="swiglu"),
}
LM_MASK, _ = ma.init_causal_lm(np.random.default_rng(9), 7, 1, 4, 2, 6)
BOOLEAN_ONLY = {  # masks that are boolean (or 0/1 ints) by definition: a floating one is refused
    "softmax": lambda m: ma.softmax(X[..., :L], mask=m),
    "blockwise_attention": lambda m: ma.blockwise_attention(X, X, X, key_mask=m[0]),
    "causal_lm": lambda m: ma.causal_lm(LM_MASK, np.array([[1, 2, 3]]), m[:1], n_heads=2),
    "generate": lambda m: ma.generate(LM_MASK, np.array([[1, 2, 3]]), 1, attention_mask=m[:1],
                                      n_heads=2),
}


def _mask(n_keys, dtype=np.float64):
    # -1e9 (a common way to write "masked") and finite biases; query 0 sees no key at all.
    mask = np.random.default_rng(8).normal(size=(L, n_keys))
    mask[0] = -1e9
    mask[1, 0] = -1e9
    return _astype(mask, dtype)


def _astype(mask, dtype):
    with np.errstate(over="ignore"):  # -1e9 is -inf in float16
        return mask.astype(dtype)


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [a for r in result for a in _flat(r)]
    if isinstance(result, dict):
        return [a for r in result.values() for a in _flat(r)]
    return [result]


def _assert_identical(got, expected):
    for a, b in zip(_flat(got), _flat(expected), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_the_mask_catalogue_covers_every_entry_point_with_a_mask():
    assert _takes_a_mask() == set(MASKED) | set(MEMORY_MASKED) | set(BOOLEAN_ONLY)
    assert _takes("memory_mask") == set(MEMORY_MASKED)


@pytest.mark.parametrize("name", MASKED)
@pytest.mark.parametrize("input_dtype, mask_dtype", [
    (np.float16, np.float64), (np.float16, np.float32), (np.float32, np.float64),
    (np.float32, np.float16), (np.float64, np.float16), (np.float64, np.float32)])
def test_an_additive_mask_means_what_it_means_in_the_inputs_dtype(name, input_dtype, mask_dtype):
    mask = _mask(L, mask_dtype)
    call = MASKED[name]
    _assert_identical(call(mask, input_dtype), call(_astype(mask, input_dtype), input_dtype))


@pytest.mark.parametrize("name", MEMORY_MASKED)
@pytest.mark.parametrize("input_dtype, mask_dtype", [(np.float16, np.float64),
                                                     (np.float32, np.float16)])
def test_an_additive_memory_mask_means_what_it_means_in_the_inputs_dtype(name, input_dtype,
                                                                         mask_dtype):
    mask = _mask(L_M, mask_dtype)
    call = MEMORY_MASKED[name]
    _assert_identical(call(mask, input_dtype), call(_astype(mask, input_dtype), input_dtype))


@pytest.mark.parametrize("name", MASKED)
def test_a_float64_minus_1e9_mask_on_float16_inputs_masks_as_a_boolean_mask(name):
    # -1e9 is -inf in float16: the float64 mask removes exactly the keys the boolean one does,
    # and a fully masked query gets zero weights, not the uniform weights -1e9 gives in float32.
    additive = np.where(np.tril(np.ones((L, L), bool)), 0.0, -1e9)
    additive[0] = -1e9
    keep = additive == 0
    call = MASKED[name]
    _assert_identical(call(additive, np.float16), call(keep, np.float16))


def test_a_fully_masked_float16_query_gets_zero_weights():
    mask = _mask(L)
    h = X.astype(np.float16)
    _, weights = ma.scaled_dot_product_attention(h, h, h, mask)
    np.testing.assert_array_equal(weights[:, 0], 0.0)
    np.testing.assert_array_equal(weights[:, 1, 0], 0.0)
    np.testing.assert_allclose(np.sum(weights[:, 1:].astype(np.float32), axis=-1), 1.0,
                               rtol=2e-3)


def test_the_mask_cast_is_differentiable_with_respect_to_a_float64_mask():
    # A learnable bias in float64 next to float32 inputs: the gradient reaches it through the cast.
    q = X.astype(np.float32)
    r = np.random.default_rng(9).normal(size=(2, L, D)).astype(np.float32)
    bias = np.random.default_rng(10).normal(size=(L, L))
    g = grad(lambda b: anp.sum(ma.scaled_dot_product_attention(q, q, q, b)[0] * r))(bias)
    g32 = grad(lambda b: anp.sum(ma.scaled_dot_product_attention(q, q, q, b)[0] * r))(
        bias.astype(np.float32))
    np.testing.assert_allclose(g, g32, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", BOOLEAN_ONLY)
def test_a_floating_mask_is_refused_where_masks_are_boolean(name):
    with pytest.raises(TypeError, match="mask must be boolean|key_mask must be a boolean|"
                                        "attention_mask must be int or bool"):
        BOOLEAN_ONLY[name](_mask(L))


def test_the_callers_mask_is_not_changed():
    mask = _mask(L)
    before = mask.copy()
    MASKED["scaled_dot_product_attention"](mask, np.float16)
    np.testing.assert_array_equal(mask, before)
    assert mask.dtype == np.float64


# --- 3. second derivatives: equal to finite differences, or refused by name ---

rng3 = np.random.default_rng(11)
X3 = rng3.normal(size=(2, 3, 4))
KV3 = rng3.normal(size=(2, 3, 4))
GATED = ma.init_gated_feed_forward(np.random.default_rng(12), 4, 6)
FF = ma.init_feed_forward(np.random.default_rng(13), 4, 6)
LM, _ = ma.init_causal_lm(np.random.default_rng(14), 7, 1, 4, 2, 6)
TOKENS = np.array([[1, 2, 3]])
CAUSAL = ma.causal_mask(3)

# name -> f(x) for a float64 x of X3's shape: the public function, differentiated through x.
DIFFERENTIABLE = {
    "softmax": lambda x: ma.softmax(x, mask=ma.causal_mask(3, 4)),
    "scaled_dot_product_attention": lambda x: ma.scaled_dot_product_attention(x, KV3, KV3,
                                                                              CAUSAL)[0],
    "split_heads": lambda x: ma.split_heads(x, 2) ** 2,
    "merge_heads": lambda x: ma.merge_heads(x[None]) ** 2,
    "multi_head_attention": lambda x: ma.multi_head_attention(MHA, x, KV3, x, n_heads=2)[0],
    "grouped_attention": lambda x: ma.grouped_attention(x, KV3[:1], x[:1] ** 2, CAUSAL)[0],
    "layer_norm": lambda x: ma.layer_norm(x, KV3[0, 0], KV3[1, 1]),
    "rms_norm": lambda x: ma.rms_norm(x, KV3[0, 0]),
    "feed_forward": lambda x: sum(ma.feed_forward(FF, x, activation=a)
                                  for a in ("relu", "gelu", "gelu_tanh")),
    "gated_feed_forward": lambda x: ma.gated_feed_forward(GATED, x),
    "encoder_block": lambda x: ma.encoder_block(BLOCK, x, CAUSAL, n_heads=2, activation="gelu"),
    "encoder": lambda x: ma.encoder(ENC, x, n_heads=2, norm_first=True),
    "apply_rope": lambda x: ma.apply_rope(x, np.arange(3)) ** 2,
    "self_attention": lambda x: ma.self_attention(DEC["self_attention"], x, CAUSAL, n_heads=2,
                                                  positions=np.arange(3))[0],
    "decoder_block": lambda x: ma.decoder_block(DEC, x, CAUSAL, memory=KV3, n_heads=2),
    "decoder": lambda x: ma.decoder(DECODER, x, CAUSAL, memory=KV3, n_heads=2, norm="rms_norm",
                                    activation="swiglu"),
    "cross_entropy": lambda x: ma.cross_entropy(x, np.array([[0, 3, 1], [2, 2, 0]])),
    "linear_attention": lambda x: ma.linear_attention(x, KV3, x) + ma.linear_attention(
        KV3, x, x, chunk_size=2),
    "delta_rule": lambda x: sum(ma.delta_rule(  # q, k (unit rows) and v, both forms
        x, ma.l2_normalize(x[:, ::-1]), x ** 2, np.full((2, 3), 0.5), np.full((2, 3), -0.2),
        chunk_size=chunk_size) for chunk_size in (None, 2)),
    "l2_normalize": lambda x: ma.l2_normalize(x),
    "causal_lm": lambda x: ma.causal_lm(  # through the first 6 of the 7 token embeddings
        {**LM, "token_embedding": anp.concatenate([anp.reshape(x, (6, 4)),
                                                   LM["token_embedding"][6:]])},
        TOKENS, n_heads=2),
}
FIRST_ORDER_ONLY = {
    "blockwise_attention": [
        lambda x: ma.blockwise_attention(x, KV3, KV3, block_size=2),
        lambda x: ma.blockwise_attention(KV3, x, KV3, causal=True, block_size=2),
        lambda x: ma.blockwise_attention(KV3, KV3, x, block_size=2),
        lambda x: ma.blockwise_attention(KV3, KV3, KV3, scale=anp.sum(x) * 0.1, block_size=2),
    ],
}
NOT_DIFFERENTIABLE = {  # no floating input: built from sizes, integers or booleans; or sampling
    "causal_mask", "padding_mask", "positional_encoding", "generate",
    "init_multi_head_attention", "init_layer_norm", "init_feed_forward", "init_encoder_block",
    "init_encoder", "init_gated_feed_forward", "init_decoder_block", "init_decoder",
    "init_causal_lm",
}


def test_the_gradient_catalogue_covers_every_public_function():
    assert set(DIFFERENTIABLE) | set(FIRST_ORDER_ONLY) | NOT_DIFFERENTIABLE == set(PUBLIC)


def _loss(f, direction):
    return lambda x: anp.sum(f(x) * direction)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_second_derivatives_equal_finite_differences_of_the_gradient(name):
    f = DIFFERENTIABLE[name]
    r = np.random.default_rng(15).normal(size=np.shape(f(X3)))
    loss = _loss(f, r)
    direction = np.random.default_rng(16).normal(size=X3.shape)
    hvp = grad(lambda x: anp.sum(grad(loss)(x) * direction))(X3)  # H · direction
    h = 1e-5
    expected = (grad(loss)(X3 + h * direction) - grad(loss)(X3 - h * direction)) / (2 * h)
    np.testing.assert_allclose(hvp, expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", FIRST_ORDER_ONLY)
def test_a_first_order_only_gradient_says_so_when_differentiated_again(name):
    for f in FIRST_ORDER_ONLY[name]:
        loss = _loss(f, np.random.default_rng(17).normal(size=np.shape(f(X3))))
        grad(loss)(X3)  # the first derivative works
        with pytest.raises(NotImplementedError) as error:
            grad(lambda x: anp.sum(grad(loss)(x) ** 2))(X3)
        assert str(error.value) == (
            f"{name}'s gradient is first-order only: its hand-written backward accumulates into "
            "arrays in place, so autograd cannot differentiate it again (grad of grad). For "
            "second derivatives use scaled_dot_product_attention, which computes the same output")
