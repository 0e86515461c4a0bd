"""Properties that mutation testing (tests/MUTANTS.md) showed the rest of the suite left open:
the initialisation ranges, where dropout acts inside a block, that eps and activation reach every
layer, the defaults, list and unbatched inputs, the scale's type, and blockwise attention's
per-query max; attention sinks with a scale, dropout or a mask per head, and causal_lm's
logits_to_keep (the variants' mutants, run 2026-11-27). Each compares against an independent
computation written out here."""
import math

import autograd.numpy as anp
import numpy as np
import pytest
from autograd.test_util import check_grads
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
from minattn.multi_head import grouped_attention

from . import reference
from .strategies import attention_inputs, float_arrays, model_sizes, perturbed, seeds, tolerance


class KeepEverything:
    """A stand-in for np.random.Generator whose draws are all 0.5: dropout with a rate below 0.5
    then keeps every entry and only rescales it, which makes its placement visible."""

    def random(self, shape):
        return np.full(shape, 0.5)


# --- initialisation: the ranges torch uses ---

def test_init_multi_head_attention_matches_torch_bounds_with_zero_biases():
    d_model = 128
    p = ma.init_multi_head_attention(np.random.default_rng(0), d_model, 4)
    # torch: xavier_uniform_ on the packed in_proj_weight [3D, D], sqrt(6 / (fan_in + fan_out)),
    # and nn.Linear's default for out_proj, U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases zero.
    bounds = {"q": math.sqrt(6 / (d_model + 3 * d_model)), "o": 1 / math.sqrt(d_model)}
    for c in "qkvo":
        bound = bounds.get(c, bounds["q"])
        w = p[f"w_{c}"]
        assert w.shape == (d_model, d_model)
        assert -bound <= w.min() < -0.99 * bound and 0.99 * bound < w.max() <= bound
        np.testing.assert_array_equal(p[f"b_{c}"], np.zeros(d_model))


def test_init_multi_head_attention_spread_matches_torch():
    torch = pytest.importorskip("torch")
    d_model = 64
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(d_model, 4)
    p = ma.init_multi_head_attention(np.random.default_rng(0), d_model, 4)
    theirs = {"qkv": mha.in_proj_weight.detach().numpy(), "o": mha.out_proj.weight.detach().numpy()}
    ours = {"qkv": np.concatenate([p["w_q"], p["w_k"], p["w_v"]], axis=1), "o": p["w_o"]}
    for part in theirs:  # same uniform law: the same extremes to within sampling error
        assert abs(np.abs(ours[part]).max() / np.abs(theirs[part]).max() - 1) < 0.01
        assert abs(ours[part].std() / theirs[part].std() - 1) < 0.05


def test_init_feed_forward_is_uniform_within_one_over_sqrt_fan_in():
    d_model, d_ff = 128, 256
    p = ma.init_feed_forward(np.random.default_rng(0), d_model, d_ff)
    # torch.nn.Linear: weight and bias both U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    for name, fan_in in (("w_1", d_model), ("b_1", d_model), ("w_2", d_ff), ("b_2", d_ff)):
        bound = 1 / math.sqrt(fan_in)
        a = p[name]
        assert -bound <= a.min() < -0.9 * bound and 0.9 * bound < a.max() <= bound, name


def test_defaults_are_a_post_norm_relu_stack_without_final_norm():
    params = ma.init_encoder(np.random.default_rng(0), 2, 4, 2, 8)
    assert "final_norm" not in params
    params = perturbed(params, 1)
    x = np.random.default_rng(2).normal(size=(3, 4))
    expected = reference.encoder_block_loop(params["layers"][1], reference.encoder_block_loop(params["layers"][0], x, 2), 2)
    np.testing.assert_allclose(ma.encoder(params, x, n_heads=2), expected, rtol=1e-8, atol=1e-8)


# --- eps, activation and dropout reach every sublayer ---

@pytest.mark.parametrize("norm_first", [False, True])
@given(sizes=model_sizes(), seed=seeds, eps=st.floats(0.01, 10.0), data=st.data())
def test_eps_and_activation_reach_every_layer_norm_and_feed_forward(norm_first, sizes, seed, eps,
                                                                      data):
    _, length, d_model, n_heads, d_ff = sizes
    p = perturbed(ma.init_encoder(np.random.default_rng(seed), 2, d_model, n_heads, d_ff,
                                   final_norm=True), seed)
    x = data.draw(float_arrays((length, d_model)))
    y = ma.encoder(p, x, n_heads=n_heads, norm_first=norm_first, eps=eps, activation="gelu")
    h = x
    for layer in p["layers"]:
        h = reference.encoder_block_loop(layer, h, n_heads, norm_first=norm_first, eps=eps, activation="gelu")
    fn = p["final_norm"]
    h = [reference.layer_norm_row(r, fn["gamma"], fn["beta"], eps) for r in h]
    np.testing.assert_allclose(y, h, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("norm_first", [False, True])
def test_dropout_acts_on_weights_attention_output_hidden_and_ff_output(norm_first):
    # As torch: on the attention weights, the attention sublayer's output, the feed-forward
    # hidden layer and the feed-forward output. KeepEverything makes each a visible rescale.
    rate = 0.2
    p = perturbed(ma.init_encoder_block(np.random.default_rng(0), 8, 2, 16), 0)
    x = np.random.default_rng(1).normal(size=(2, 5, 8))
    y, w = ma.encoder_block(p, x, n_heads=2, norm_first=norm_first, dropout=rate,
                            rng=KeepEverything(), return_weights=True)
    _, w_plain = ma.encoder_block(p, x, n_heads=2, norm_first=norm_first, return_weights=True)
    np.testing.assert_allclose(w, w_plain / (1 - rate), rtol=1e-12)
    for b in range(2):
        expected = reference.encoder_block_loop(p, x[b], 2, norm_first=norm_first, kept=1 / (1 - rate))
        np.testing.assert_allclose(y[b], expected, rtol=1e-8, atol=1e-8)


def test_multi_head_attention_passes_dropout_to_the_weights():
    rate = 0.25
    p = perturbed(ma.init_multi_head_attention(np.random.default_rng(0), 8, 2), 0)
    x = np.random.default_rng(1).normal(size=(3, 8))
    out, w = ma.multi_head_attention(p, x, x, x, n_heads=2, dropout=rate, rng=KeepEverything())
    _, w_plain = ma.multi_head_attention(p, x, x, x, n_heads=2)
    np.testing.assert_allclose(w, w_plain / (1 - rate), rtol=1e-12)
    keep = [[True] * 3] * 3
    expected = reference.multi_head_attention_loop({**p, "w_o": p["w_o"] / (1 - rate)}, x, x, x,
                                                   keep, 2)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


# --- inputs: lists, no batch dimension ---

def test_nested_lists_work_like_arrays():
    x = [[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]]
    keep = [[True, False, True], [False, False, True]]
    np.testing.assert_array_equal(ma.softmax(x, mask=keep), ma.softmax(np.array(x),
                                                                       mask=np.array(keep)))
    out, w = ma.scaled_dot_product_attention(x, x, x, [[True, False], [True, True]])
    ref_out, ref_w = reference.attention(x, x, x, keep=[[True, False], [True, True]])
    np.testing.assert_allclose(w, ref_w, **tolerance(np.float64))
    np.testing.assert_allclose(out, ref_out, **tolerance(np.float64))
    np.testing.assert_array_equal(ma.padding_mask([2, 0], 3),
                                  ma.padding_mask(np.array([2, 0]), 3))
    np.testing.assert_allclose(ma.blockwise_attention(x, x, x, key_mask=[True, False]),
                               reference.attention(x, x, x, keep=[[True, False]] * 2)[0],
                               **tolerance(np.float64))


@given(sizes=model_sizes(), seed=seeds, data=st.data())
def test_a_single_unbatched_sequence_or_token_is_accepted(sizes, seed, data):
    _, length, d_model, n_heads, d_ff = sizes
    p = perturbed(ma.init_encoder(np.random.default_rng(seed), 1, d_model, n_heads, d_ff), seed)
    block = p["layers"][0]
    x = data.draw(float_arrays((length, d_model)))  # [L, D], no batch axis
    np.testing.assert_allclose(ma.encoder_block(block, x, n_heads=n_heads),
                               reference.encoder_block_loop(block, x, n_heads), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ma.encoder(p, x, n_heads=n_heads),
                               reference.encoder_block_loop(block, x, n_heads), rtol=1e-8, atol=1e-8)
    token = x[0]  # [D]: LayerNorm and the feed-forward network work token by token
    g, b = block["self_attention_norm"]["gamma"], block["self_attention_norm"]["beta"]
    np.testing.assert_allclose(ma.layer_norm(token, g, b),
                               reference.layer_norm_row(token, g, b, 1e-5), rtol=1e-8, atol=1e-8)
    f = block["feed_forward"]
    np.testing.assert_allclose(ma.feed_forward(f, token),
                               np.maximum(token @ f["w_1"] + f["b_1"], 0) @ f["w_2"] + f["b_2"],
                               rtol=1e-10, atol=1e-12)


# --- the scale: a NumPy scalar keeps float32, an autograd box keeps its gradient ---

@pytest.mark.parametrize("attend", [
    lambda q, k, v, scale: ma.scaled_dot_product_attention(q, k, v, scale=scale)[0],
    lambda q, k, v, scale: ma.blockwise_attention(q, k, v, scale=scale, block_size=2),
], ids=["scaled_dot_product_attention", "blockwise_attention"])
def test_a_numpy_float64_scale_keeps_float32_float32(attend):
    q = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    out = attend(q, q, q, np.float64(0.5))
    assert out.dtype == np.float32
    ref_out, _ = reference.attention(q[0], q[0], q[0], scale=0.5)
    np.testing.assert_allclose(out[0], ref_out, **tolerance(np.float32))


@pytest.mark.parametrize("attend", [
    lambda q, k, v, scale: ma.scaled_dot_product_attention(q, k, v, scale=scale)[0],
    lambda q, k, v, scale: ma.blockwise_attention(q, k, v, scale=scale, block_size=2),
], ids=["scaled_dot_product_attention", "blockwise_attention"])
@given(qkv=attention_inputs())
def test_differentiable_with_respect_to_the_scale(attend, qkv):
    # A learned temperature: autograd passes the scale as a box, which must stay a box.
    q, k, v = qkv
    r = np.random.default_rng(0).normal(size=q.shape[:-1] + v.shape[-1:])
    check_grads(lambda s: anp.sum(attend(q, k, v, s) * r), modes=["rev"], order=1)(0.7)


# --- blockwise attention shifts each query by its own running max ---

def test_blockwise_shifts_each_query_by_its_own_max():
    # Query 0 scores +300 and +600, query 1 scores -300 and -600, in one tile. A max shared by
    # the tile (600) would leave query 1 with exp(-900) = 0 everywhere, a zero row.
    q = np.array([[300.0], [-300.0]])
    k = np.array([[1.0], [2.0]])
    v = np.array([[1.0, 0.0], [0.0, 1.0]])
    out = ma.blockwise_attention(q, k, v, block_size=2)
    ref_out, _ = reference.attention(q, k, v)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(out[1], [1.0, 0.0], atol=1e-12)  # exp(-300) is 1e-130


@pytest.mark.parametrize("n_kv_heads", [None, 2])
@pytest.mark.parametrize("mask", [np.array([True, False, True]), np.array(True),
                                  np.array([0.0, -np.inf, 0.5])])
def test_a_mask_over_the_keys_only_broadcasts_over_heads_and_queries(mask, n_kv_heads):
    # a mask [L_k] (or 0-d) broadcasts to the scores [..., H, L_q, L_k] as NumPy broadcasts it:
    # the same as the mask written out for every query (it raised a bare IndexError once)
    rng = np.random.default_rng(4)
    params = ma.init_multi_head_attention(rng, 16, 4, n_kv_heads=n_kv_heads)
    x, memory = rng.standard_normal((2, 5, 16)), rng.standard_normal((2, 3, 16))
    config = {"n_heads": 4, "n_kv_heads": n_kv_heads}
    out, weights = ma.multi_head_attention(params, x, memory, memory, mask, **config)
    full = np.broadcast_to(mask, (5, 3))
    expected, expected_weights = ma.multi_head_attention(params, x, memory, memory, full, **config)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(weights, expected_weights)


# --- attention sinks (minattn/sinks.py's variants, mutated since their decorators count as
# policies) and causal_lm's logits_to_keep: a scale given with sinks, dropout with sinks (plain
# and grouped), a mask per head in grouped attention with sinks. References: the sink's softmax
# written out in a loop (one more logit per row, dropped after the softmax), dropout's
# definition (each weight 0 or divided by 1 - p), and the whole model's logits. ---

S_B, S_H, S_H_KV, S_L_Q, S_L_K, S_D = 2, 4, 2, 3, 5, 6


def sink_attention_loop(q, k, v, sinks, scale, mask=None):
    # q [B, H, L_q, d], k, v [B, H, L_k, d] (one kv head per query head), sinks [H];
    # mask [S_H, L_q, L_k] of bools (True: may attend) or None
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    weights = np.zeros(q.shape[:-1] + (k.shape[-2],))
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            for i in range(q.shape[2]):
                logits = [scale * float(q[b, h, i] @ k[b, h, j]) if mask is None or mask[h, i, j]
                          else -np.inf for j in range(k.shape[2])] + [float(sinks[h])]
                e = np.exp(np.array(logits) - max(logits))
                w = e[:-1] / e.sum()
                weights[b, h, i] = w
                out[b, h, i] = w @ v[b, h]
    return out, weights


@pytest.fixture
def sink_qkv():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((S_B, S_H, S_L_Q, S_D)),
            rng.standard_normal((S_B, S_H, S_L_K, S_D)),
            rng.standard_normal((S_B, S_H, S_L_K, S_D)), rng.standard_normal(S_H))


def test_attention_with_sinks_takes_the_scale_given(sink_qkv):
    q, k, v, sinks = sink_qkv
    out, weights = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None], scale=0.3)
    ref_out, ref_weights = sink_attention_loop(q, k, v, sinks, 0.3)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)


def dropped_as_defined(weights, kept_weights, rate):
    # every weight 0 or the weight without dropout over 1 - p, with about p of them 0
    zero = weights == 0.0
    np.testing.assert_allclose(weights[~zero], kept_weights[~zero] / (1.0 - rate), rtol=1e-12)
    assert 0.3 < zero.mean() < 0.7, zero.mean()  # p = 0.5 over 120 weights


def test_attention_with_sinks_drops_weights_with_the_callers_generator(sink_qkv):
    q, k, v, sinks = sink_qkv
    _, kept = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None])
    _, dropped = ma.scaled_dot_product_attention(q, k, v, sinks=sinks[:, None], dropout=0.5,
                                                 rng=np.random.default_rng(1))
    dropped_as_defined(dropped, kept, 0.5)


def test_grouped_attention_with_sinks_drops_weights_with_the_callers_generator(sink_qkv):
    q, k, v, sinks = sink_qkv
    k, v = k[:, :S_H_KV], v[:, :S_H_KV]
    _, kept = grouped_attention(q, k, v, sinks=sinks)
    _, dropped = grouped_attention(q, k, v, sinks=sinks, dropout=0.5,
                                      rng=np.random.default_rng(2))
    dropped_as_defined(dropped, kept, 0.5)


def test_grouped_attention_with_sinks_takes_a_mask_per_head(sink_qkv):
    q, k, v, sinks = sink_qkv
    k, v = k[:, :S_H_KV], v[:, :S_H_KV]
    mask = np.random.default_rng(3).random((S_H, S_L_Q, S_L_K)) < 0.6
    mask[..., 0] = True  # every query sees a key
    out, weights = grouped_attention(q, k, v, mask, sinks=sinks)
    group = S_H // S_H_KV  # query head h reads kv head h // G
    k_per_head, v_per_head = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    ref_out, ref_weights = sink_attention_loop(q, k_per_head, v_per_head, sinks,
                                               1 / np.sqrt(S_D), mask)
    np.testing.assert_allclose(weights, ref_weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=1e-12)


# causal_lm's logits_to_keep

@pytest.fixture(scope="module")
def sink_lm():
    rng = np.random.default_rng(4)
    params, config = ma.init_causal_lm(rng, 19, 2, 16, 2, 24, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False, tied=False)
    return params, config, rng.integers(0, 19, size=(2, 7))


def test_logits_to_keep_gives_the_last_positions_logits(sink_lm):
    params, config, tokens = sink_lm
    whole = ma.causal_lm(params, tokens, **config)
    kept = ma.causal_lm(params, tokens, logits_to_keep=2, **config)
    assert kept.shape == (2, 2, 19)
    np.testing.assert_allclose(kept, whole[:, -2:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_a_logits_to_keep_that_is_not_a_positive_int_is_refused_by_name(sink_lm, bad, error):
    params, config, tokens = sink_lm
    with pytest.raises(error, match="^logits_to_keep"):
        ma.causal_lm(params, tokens, logits_to_keep=bad, **config)


@pytest.mark.parametrize("scale", [0.37, 2.5])
def test_the_gradient_by_hand_uses_the_scale_given_not_the_default(scale):
    # A custom scale's gradient against autograd through the formula written out (float64): the
    # hand VJP re-checks its arguments, and a scale lost there would give 1/sqrt(d_k)'s gradient.
    from autograd import grad

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 5, 4)) for _ in range(3))
    w = rng.standard_normal((2, 5, 4))

    def formula(q, k, v):
        s = scale * anp.matmul(q, anp.swapaxes(k, -1, -2))
        p = anp.exp(s - anp.max(s, axis=-1, keepdims=True))
        return anp.sum(anp.matmul(p / anp.sum(p, axis=-1, keepdims=True), v) * w)

    def ours(q, k, v):
        return anp.sum(ma.scaled_dot_product_attention(q, k, v, scale=scale)[0] * w)

    for argnum in range(3):
        np.testing.assert_allclose(grad(ours, argnum)(q, k, v), grad(formula, argnum)(q, k, v),
                                   rtol=1e-10, atol=1e-12)
