"""decoder_block(parallel=True), GPT-NeoX's parallel residual: both sublayers read the block's
input, x + attention(norm_1(x)) + feed_forward(norm_2(x)), against the sublayers composed by
hand; the configurations it cannot honour refused by name."""
import numpy as np
import pytest

import minattn as ma


def _block(seed=0):
    rng = np.random.default_rng(seed)
    params = ma.init_decoder_block(rng, 8, 2, 12)
    for norm in ("self_attention_norm", "feed_forward_norm"):  # norms that differ
        params[norm] = {"gamma": rng.uniform(0.5, 1.5, 8), "beta": rng.normal(size=8)}
    return params, rng.normal(size=(2, 5, 8))


def test_both_sublayers_read_the_blocks_input():
    params, x = _block()
    mask = ma.causal_mask(5, 5)
    out = ma.decoder_block(params, x, mask, n_heads=2, norm_first=True, parallel=True,
                           activation="gelu")
    ln = lambda p: ma.layer_norm(x, p["gamma"], p["beta"], 1e-5)
    attended, _ = ma.multi_head_attention(params["self_attention"], *[ln(
        params["self_attention_norm"])] * 3, mask, n_heads=2)
    fed = ma.feed_forward(params["feed_forward"], ln(params["feed_forward_norm"]),
                          activation="gelu")
    np.testing.assert_allclose(out, x + attended + fed, atol=1e-12)


@pytest.mark.parametrize("change, match", [
    ({"norm_first": False}, "norm_first=False"),
    ({"memory": np.ones((2, 3, 8))}, "memory given"),
    ({"parallel": 1}, "parallel must be a bool")])
def test_what_a_parallel_block_cannot_take_is_refused_by_name(change, match):
    params, x = _block()
    config = {"n_heads": 2, "norm_first": True, "parallel": True, **change}
    with pytest.raises((ValueError, TypeError), match=match):
        ma.decoder_block(params, x, **config)


def test_a_sandwich_norm_is_refused_not_left_out():
    params, x = _block()
    params["post_feed_forward_norm"] = params["feed_forward_norm"]
    with pytest.raises(ValueError, match="post_feed_forward_norm"):
        ma.decoder_block(params, x, n_heads=2, norm_first=True, parallel=True)
