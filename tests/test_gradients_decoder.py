"""The decoder's gradients against central finite differences (autograd.test_util.check_grads),
in float64: self_attention, gated_feed_forward, decoder_block, decoder and causal_lm, with RoPE,
SwiGLU, RMSNorm and grouped-query attention (fewer kv heads than query heads), and the loss,
cross_entropy. tests/test_gradients.py does the same for the encoder side."""
import numpy as np
import pytest
from autograd.test_util import check_grads

import minattn as ma

from .strategies import perturbed

B, L, D, H, H_KV, F = 2, 5, 8, 4, 2, 12  # batch, length, d_model, n_heads, n_kv_heads, d_ff
LLAMA = dict(n_heads=H, n_kv_heads=H_KV, norm="rms_norm", activation="swiglu")
LLAMA_INIT = dict(n_kv_heads=H_KV, norm="rms_norm", activation="swiglu", bias=False)


def _rev(f, *args):
    check_grads(f, modes=["rev"], order=1)(*args)


def _projector(shape, seed):
    # A fixed random direction turns any output into a scalar loss whose gradient is non-trivial.
    return np.random.default_rng(seed).normal(size=shape)


def _x(seed=0):
    return np.random.default_rng(seed).normal(size=(B, L, D))


@pytest.mark.parametrize("rope", [False, True])
def test_self_attention_with_gqa(rope):
    params = perturbed(ma.init_multi_head_attention(np.random.default_rng(0), D, H, n_kv_heads=H_KV,
                                                    bias=False), 1)
    positions = np.arange(3, 3 + L) if rope else None
    r = _projector((B, L, D), 2)
    loss = lambda p, x: np.sum(ma.self_attention(p, x, ma.causal_mask(L), n_heads=H,
                                                 n_kv_heads=H_KV, positions=positions)[0] * r)
    _rev(loss, params, _x())


def test_self_attention_through_a_kv_cache():
    # The gradient reaches the new tokens through the cached keys and values of the past ones.
    params = perturbed(ma.init_multi_head_attention(np.random.default_rng(0), D, H, n_kv_heads=H_KV,
                                                    bias=False), 1)
    r = _projector((B, 2, D), 3)

    def loss(p, x):
        _, cache = ma.self_attention(p, x[:, :3], ma.causal_mask(3), n_heads=H, n_kv_heads=H_KV,
                                     positions=np.arange(3), cache={
                                         "k": np.zeros((B, H_KV, 0, D // H)),
                                         "v": np.zeros((B, H_KV, 0, D // H))})
        out, _ = ma.self_attention(p, x[:, 3:], ma.causal_mask(2, 5, align="bottom_right"),
                                   n_heads=H, n_kv_heads=H_KV, positions=np.arange(3, 5), cache=cache)
        return np.sum(out * r)

    _rev(loss, params, _x())


def test_gated_feed_forward():
    params = perturbed(ma.init_gated_feed_forward(np.random.default_rng(0), D, F), 1)
    r = _projector((B, L, D), 4)
    _rev(lambda p, x: np.sum(ma.gated_feed_forward(p, x) * r), params, _x())


@pytest.mark.parametrize("style", ["llama", "torch post-norm with cross-attention"])
def test_decoder_block(style):
    r = _projector((B, L, D), 5)
    if style == "llama":
        params = perturbed(ma.init_decoder_block(np.random.default_rng(0), D, H, F, **LLAMA_INIT), 1)
        loss = lambda p, x: np.sum(ma.decoder_block(p, x, ma.causal_mask(L), norm_first=True,
                                                    positions=np.arange(L), **LLAMA) * r)
    else:
        params = perturbed(ma.init_decoder_block(np.random.default_rng(0), D, 2, F,
                                                 cross_attention=True, activation="gelu"), 1)
        memory = np.random.default_rng(6).normal(size=(B, 3, D))
        loss = lambda p, x: np.sum(ma.decoder_block(p, x, ma.causal_mask(L), memory=memory,
                                                    n_heads=2, activation="gelu") * r)
    _rev(loss, params, _x() + np.arange(D))  # + arange: no flat rows for the norms


def test_decoder_stack_llama():
    params = perturbed(ma.init_decoder(np.random.default_rng(0), 2, D, H, F, final_norm=True,
                                       **LLAMA_INIT), 1)
    r = _projector((B, L, D), 7)
    loss = lambda p, x: np.sum(ma.decoder(p, x, ma.causal_mask(L), norm_first=True,
                                          positions=np.arange(L), **LLAMA) * r)
    _rev(loss, params, _x() + np.arange(D))


@pytest.mark.parametrize("style", ["llama", "gpt2"])
def test_causal_lm_loss(style):
    # The whole language-modelling loss: logits of shifted tokens, cross-entropy against the next.
    tokens = np.random.default_rng(8).integers(0, 11, size=(B, L + 1))
    if style == "llama":
        init = dict(LLAMA_INIT, position="rope", tied=False)
        config = dict(LLAMA, position="rope")
    else:
        init, config = {}, dict(n_heads=2)
    params = perturbed(ma.init_causal_lm(np.random.default_rng(0), 11, 2, D, config["n_heads"], F,
                                         n_positions=8, **init)[0], 1)
    loss = lambda p: ma.cross_entropy(ma.causal_lm(p, tokens[:, :-1], **config), tokens[:, 1:])
    _rev(loss, params)


def test_cross_entropy_gradient_and_value():
    rng = np.random.default_rng(9)
    logits, targets = rng.normal(size=(2, 3, 7)), rng.integers(0, 7, size=(2, 3))
    _rev(lambda z: ma.cross_entropy(z, targets), logits)
    # The formula, written out with a loop: -mean log softmax(z)[target].
    expected = -np.mean([z[t] - np.log(np.sum(np.exp(z))) for z, t in
                         zip(logits.reshape(-1, 7), targets.reshape(-1))])
    assert ma.cross_entropy(logits, targets) == pytest.approx(expected, rel=1e-12)
