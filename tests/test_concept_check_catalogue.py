"""A catalogue of bad calls to the concepts' argument checks (feed-forward networks, multi-head
attention and its params inside an encoder block, RoPE scalings) with the WHOLE message each
raises, written from what a user should read: the argument's name (its path in nested params),
the layout it should have and what it got. Then the boundaries: calls at the edge of each
condition that must NOT raise."""
import numpy as np
import pytest

import minattn as ma
from minattn.position_wise import (feed_forward, gated_feed_forward, init_feed_forward,
                                   init_gated_feed_forward)
from minattn.rope_scaling import rope_frequencies

x = np.random.default_rng(0).normal(size=(2, 3, 4))  # [B, L, D]
GFF = init_gated_feed_forward(np.random.default_rng(0), 4, 8)
FF = init_feed_forward(np.random.default_rng(0), 4, 8)
MHA = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2)
MQA = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2, n_kv_heads=1)  # K, V [4, 2]
BLOCK = ma.init_encoder_block(np.random.default_rng(0), 4, 2, 8)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}


def _rng():
    return np.random.default_rng(0)


def _with(params, **changes):
    return {**params, **changes}


CASES = [
    # init_feed_forward, init_gated_feed_forward: each size named
    (lambda: init_feed_forward(_rng(), 0, 8), ValueError, "d_model must be a positive int, got 0"),
    (lambda: init_feed_forward(_rng(), 4, 0), ValueError, "d_ff must be a positive int, got 0"),
    (lambda: init_feed_forward(_rng(), 4.0, 8), TypeError,
     "d_model must be a positive int, got 4.0"),
    (lambda: init_gated_feed_forward(_rng(), 0, 8), ValueError,
     "d_model must be a positive int, got 0"),
    (lambda: init_gated_feed_forward(_rng(), 4, 0), ValueError,
     "d_ff must be a positive int, got 0"),
    (lambda: init_gated_feed_forward(_rng(), 4, 8.0), TypeError,
     "d_ff must be a positive int, got 8.0"),
    # gated_feed_forward (SwiGLU): x, then params and each weight named, d_ff by name when free
    (lambda: gated_feed_forward(GFF, x.astype(int)), TypeError,
     "x must be a floating-point array, got dtype int64 (convert it with x.astype(np.float32) "
     "or np.float64)"),
    (lambda: gated_feed_forward(GFF, np.array(1.0)), ValueError,
     "x must have shape (..., D), got shape ()"),
    (lambda: gated_feed_forward([GFF], x), TypeError, "params must be a dict of arrays, got list"),
    (lambda: gated_feed_forward(_with(GFF, w_gate=np.ones(4)), x), ValueError,
     "params['w_gate'] has shape (4,), expected (4, d_ff)"),
    (lambda: gated_feed_forward(_with(GFF, w_gate=np.ones((3, 8))), x), ValueError,
     "params['w_gate'] has shape (3, 8), expected (4, d_ff)"),
    (lambda: gated_feed_forward(_with(GFF, w_up=np.ones((4, 7))), x), ValueError,
     "params['w_up'] has shape (4, 7), expected (4, 8)"),
    (lambda: gated_feed_forward({"w_up": GFF["w_up"]}, x), ValueError,
     "params is missing key 'w_gate' (expected keys: 'w_gate')"),
    # feed_forward: the same words
    (lambda: feed_forward(_with(FF, w_1=np.ones(4)), x), ValueError,
     "params['w_1'] has shape (4,), expected (4, d_ff)"),
    (lambda: feed_forward(_with(FF, b_1=np.ones(7)), x), ValueError,
     "params['b_1'] has shape (7,), expected (8,)"),
    # multi_head_attention: K and V's width is n_kv_heads * d_k, an int
    (lambda: ma.multi_head_attention(_with(MHA, w_k=np.ones((4, 3))), x, x, x, n_heads=2),
     ValueError, "params['w_k'] has shape (4, 3), expected (4, 4)"),
    (lambda: ma.multi_head_attention(_with(MQA, w_v=np.ones((4, 4))), x, x, x, n_heads=2,
                                     n_kv_heads=1),
     ValueError, "params['w_v'] has shape (4, 4), expected (4, 2)"),
    (lambda: ma.multi_head_attention(_with(MHA, sinks=np.zeros(3)), x, x, x, n_heads=2),
     ValueError, "params['sinks'] has shape (3,), expected (2,)"),
    # an encoder block's attention params, named by their path in the block's params
    (lambda: ma.encoder_block(_with(BLOCK, self_attention=[]), x, n_heads=2), TypeError,
     "params['self_attention'] must be a dict of arrays, got list"),
    (lambda: ma.encoder_block(_with(BLOCK, self_attention=_with(
        BLOCK["self_attention"], sinks=np.zeros((1, 2)))), x, n_heads=2), ValueError,
     "params['self_attention']['sinks'] has shape (1, 2), expected (2,)"),
    (lambda: ma.encoder_block(_with(BLOCK, self_attention=_with(
        BLOCK["self_attention"], w_q=np.ones((4, 3)))), x, n_heads=2), ValueError,
     "params['self_attention']['w_q'] has shape (4, 3), expected (4, 4)"),
    # RoPE scalings: an unknown type refused by name, each llama3 value named
    (lambda: rope_frequencies(8, np.arange(4), scaling={"rope_type": "ntk"}), ValueError,
     "rope_scaling must be None or a dict with 'rope_type' one of 'linear', 'dynamic', 'yarn', "
     "'llama3', 'longrope', got 'ntk'"),
    (lambda: rope_frequencies(8, np.arange(4), scaling={"factor": 2.0}), ValueError,
     "rope_scaling must be None or a dict with 'rope_type' one of 'linear', 'dynamic', 'yarn', "
     "'llama3', 'longrope', got None"),
    (lambda: rope_frequencies(8, np.arange(4), scaling=_with(LLAMA3, low_freq_factor=-1.0)),
     ValueError, "rope_scaling['low_freq_factor'] must be a non-negative, finite float, got -1.0"),
    (lambda: rope_frequencies(8, np.arange(4), scaling=_with(LLAMA3, low_freq_factor="1")),
     TypeError, "rope_scaling['low_freq_factor'] must be a positive float, got '1' (str)"),
    (lambda: rope_frequencies(8, np.arange(4), scaling=_with(LLAMA3, high_freq_factor=0.0)),
     ValueError, "rope_scaling['high_freq_factor'] must be a positive, finite float, got 0.0"),
    (lambda: rope_frequencies(8, np.arange(4), scaling=_with(LLAMA3, high_freq_factor=1.0)),
     ValueError, "rope_scaling['high_freq_factor'] must be greater than low_freq_factor (the ramp "
     "between them divides by their difference), got 1.0 and 1.0"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_whole_message(call, error, message):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message


BOUNDARIES = [
    # x needs one dim (D), not two: a single token is a valid input
    (lambda: gated_feed_forward(GFF, x[0, 0]), (4,)),
    (lambda: feed_forward(FF, x[0, 0]), (4,)),
    # sizes of 1 are positive ints
    (lambda: init_gated_feed_forward(_rng(), 1, 1)["w_down"].shape, None),
    # low_freq_factor 0 is allowed (only high - low is divided by): no pair is then "slow"
    (lambda: rope_frequencies(8, np.arange(4), scaling=_with(LLAMA3, low_freq_factor=0.0))[0],
     (4,)),
]


@pytest.mark.parametrize("call, shape", BOUNDARIES)
def test_boundary_does_not_raise(call, shape):
    result = call()
    if shape is not None:
        assert result.shape == shape


def test_wrong_sinks_in_an_encoder_are_refused_where_they_are():
    # The block's check knows n_heads: the message names the sinks' own place, before computing.
    block = ma.init_encoder_block(np.random.default_rng(0), 8, 2, 16)
    block["self_attention"]["sinks"] = np.zeros(3)
    with pytest.raises(ValueError, match=r"^params\['self_attention'\]\['sinks'\] has shape "
                                         r"\(3,\), expected \(2,\)$"):
        ma.encoder_block(block, np.ones((1, 3, 8)), n_heads=2)
    stack = ma.init_encoder(np.random.default_rng(0), 2, 8, 2, 16)
    stack["layers"][1]["self_attention"]["sinks"] = np.zeros(3)
    with pytest.raises(ValueError, match=r"^params\['layers'\]\[1\]\['self_attention'\]\['sinks'\] "
                                         r"has shape \(3,\), expected \(2,\)$"):
        ma.encoder(stack, np.ones((1, 3, 8)), n_heads=2)
