"""Decoder options against the slow loops (tests/reference.py, tests/test_decoder_reference.py),
each option where it changes the result: a RoPE frequency schedule in self_attention, one
position for every token, decoder_block's post-norm default (torch's), the final norm's eps,
and the logits at left padding (padding at position 0, as transformers' generate:
`position_ids.masked_fill(attention_mask == 0, 0)` in generation/utils.py); and decoder_block
refuses a bad n_kv_heads itself, whatever attention sublayer it is given."""
import numpy as np
import pytest

import minattn as ma

from .reference import encoder_block_loop
from .strategies import perturbed
from .test_decoder_reference import D, DEFAULTS, _attention_loop, _causal_lm_loop, _model, _norm


def _attention(seed):
    rng = np.random.default_rng(seed)
    p = perturbed(ma.init_decoder_block(rng, D, 4, 12, n_kv_heads=2)["self_attention"], seed)
    return p, rng.normal(size=(2, 6, D))


@pytest.mark.parametrize("factor", [2.0, 8.0])
def test_self_attention_with_linear_rope_scaling_rotates_by_positions_over_factor(factor):
    # Position interpolation (Chen et al. 2023): every angle divided by factor, as if the
    # positions were m / factor.
    p, x = _attention(1)
    positions = np.arange(10, 16)
    out, _ = ma.self_attention(p, x, ma.causal_mask(6), n_heads=4, n_kv_heads=2,
                               positions=positions, rope_base=100.0,
                               rope_scaling={"rope_type": "linear", "factor": factor})
    for b in range(2):
        expected = _attention_loop(p, list(x[b]), lambda i, j: j <= i, positions / factor,
                                   n_heads=4, n_kv_heads=2, d_k=2, base=100.0, eps=1e-6)
        np.testing.assert_allclose(out[b], expected, rtol=1e-9, atol=1e-13)
        unscaled = _attention_loop(p, list(x[b]), lambda i, j: j <= i, positions, n_heads=4,
                                   n_kv_heads=2, d_k=2, base=100.0, eps=1e-6)
        assert not np.allclose(expected, unscaled, atol=1e-3)  # the schedule matters here


def test_one_position_for_every_token_leaves_the_scores_unrotated():
    # positions broadcasts to (..., L): one 0-d int array puts every token there, and q and k
    # rotated by the same angle keep their dot products, so the output is RoPE-free.
    p, x = _attention(2)
    out, _ = ma.self_attention(p, x, ma.causal_mask(6), n_heads=4, n_kv_heads=2,
                               positions=np.array(7))
    for b in range(2):
        expected = _attention_loop(p, list(x[b]), lambda i, j: j <= i, [7] * 6, n_heads=4,
                                   n_kv_heads=2, d_k=2, base=10000.0, eps=1e-6)
        np.testing.assert_allclose(out[b], expected, rtol=1e-9, atol=1e-13)
    plain, _ = ma.self_attention(p, x, ma.causal_mask(6), n_heads=4, n_kv_heads=2)
    np.testing.assert_allclose(out, plain, rtol=1e-9, atol=1e-13)


def test_decoder_block_defaults_to_torch_post_norm_relu_block():
    # torch.nn.TransformerDecoderLayer's defaults: norm_first=False (x = norm(x + sublayer(x))),
    # relu, LayerNorm eps 1e-5; without memory, an encoder block under a causal mask.
    rng = np.random.default_rng(3)
    p = perturbed(ma.init_decoder_block(rng, D, 2, 12), 4)
    x = rng.normal(size=(5, D))
    keep = np.tril(np.ones((5, 5), bool))
    got = ma.decoder_block(p, x, keep, n_heads=2)
    np.testing.assert_allclose(got, encoder_block_loop(p, x, 2, keep=keep.tolist()),
                               rtol=1e-9, atol=1e-12)
    assert not np.allclose(got, encoder_block_loop(p, x, 2, keep=keep.tolist(), norm_first=True),
                           atol=1e-3)


def test_decoder_block_refuses_a_bad_n_kv_heads_whatever_its_attention():
    # The block checks its config before any sublayer runs: an attention variant that ignores
    # n_kv_heads does not make n_kv_heads=3 (not dividing n_heads=4) acceptable.
    p = ma.init_decoder_block(np.random.default_rng(0), D, 4, 12)
    ignores_it = lambda params, x, mask=None, **config: (x, {})
    with pytest.raises(ValueError) as info:
        ma.decoder_block(p, np.ones((3, D)), n_heads=4, n_kv_heads=3, attention=ignores_it)
    assert str(info.value) == ("n_kv_heads=3 must divide n_heads=4 (each kv head serves a group "
                               "of n_heads // n_kv_heads query heads)")


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_the_final_norm_takes_the_eps_given_to_decoder(norm):
    rng = np.random.default_rng(6)
    params = perturbed(ma.init_decoder(rng, 2, D, 2, 12, final_norm=True, norm=norm), 7)
    x = 0.1 * rng.normal(size=(2, 4, D))
    got = ma.decoder(params, x, ma.causal_mask(4), n_heads=2, norm=norm, eps=0.5)
    h = ma.decoder({"layers": params["layers"]}, x, ma.causal_mask(4), n_heads=2, norm=norm,
                   eps=0.5)
    expected = np.array([[_norm(v, params["final_norm"], norm, 0.5) for v in row] for row in h])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    assert not np.allclose(expected, [[_norm(v, params["final_norm"], norm, 1e-5) for v in row]
                                      for row in h], atol=1e-3)


@pytest.mark.parametrize("cached", [False, True])
def test_the_logits_at_left_padding_are_those_of_position_0(cached):
    # A padding query sees no key (every key before it is padding too): its logits are its
    # token's at position 0 (learned positions) with a zero attention output.
    params, config = _model("gpt2")
    tokens = np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]])
    mask = np.array([[1] * 6, [0, 0, 0, 1, 1, 1]])
    if cached:  # the padding in the cache, the last tokens fed one step later
        first, cache = ma.causal_lm(params, tokens[:, :4], mask[:, :4], return_cache=True,
                                    **config)
        rest, _ = ma.causal_lm(params, tokens[:, 4:], mask, cache=cache, **config)
        got = np.concatenate([first, rest], axis=1)
    else:
        got = ma.causal_lm(params, tokens, mask, **config)
    expected = _causal_lm_loop(params, tokens, mask, {**DEFAULTS, **config})
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)  # padding rows included
