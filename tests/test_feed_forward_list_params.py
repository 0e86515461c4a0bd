"""Params given as nested lists are taken as arrays (checks.as_array's rule for every array
argument), in both feed-forward networks and in a decoder block with a gated (SwiGLU) MLP:
the same result as with the arrays."""
import numpy as np
import pytest

import minattn as ma
from minattn.position_wise import (feed_forward, gated_feed_forward, init_feed_forward,
                                   init_gated_feed_forward)

x = np.random.default_rng(1).normal(size=(2, 3, 4))


def _lists(params):
    return {k: _lists(v) if isinstance(v, dict) else v.tolist() for k, v in params.items()}


@pytest.mark.parametrize("init, call", [(init_feed_forward, feed_forward),
                                        (init_gated_feed_forward, gated_feed_forward)])
def test_feed_forward_takes_lists(init, call):
    params = init(np.random.default_rng(0), 4, 8)
    np.testing.assert_array_equal(call(_lists(params), x), call(params, x))


def test_decoder_block_gated_feed_forward_takes_lists():
    params = ma.init_decoder_block(np.random.default_rng(0), 4, 2, 8, activation="swiglu",
                                   norm="rms_norm", bias=False)
    as_lists = {**params, "feed_forward": _lists(params["feed_forward"])}
    config = dict(n_heads=2, activation="swiglu", norm="rms_norm", norm_first=True)
    np.testing.assert_array_equal(ma.decoder_block(as_lists, x, **config),
                                  ma.decoder_block(params, x, **config))
