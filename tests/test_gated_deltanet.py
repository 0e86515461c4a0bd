"""The pieces of Qwen3-Next's layers on their own (their parity with transformers is in
tests/test_qwen3_next.py): the causal convolution against a loop and in pieces, partial RoPE,
the Gated DeltaNet layer's cache and padding, gradients, and bad input named."""
import numpy as np
import pytest
from autograd.test_util import check_grads

import minattn as ma
from minattn.gated_attention import gated_attention
from minattn.gated_deltanet import causal_conv1d, gated_deltanet
from minattn.rope import apply_partial_rope

from .strategies import tolerance

H_K, H_V, D_K, D_V, D, K = 2, 4, 3, 2, 6, 4
C = 2 * H_K * D_K + H_V * D_V


def _params(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"w_qkv": (D, C), "conv": (K, C), "w_z": (D, H_V * D_V), "w_b": (D, H_V),
              "w_a": (D, H_V), "dt_bias": (H_V,), "A_log": (H_V,), "gamma": (D_V,),
              "w_out": (H_V * D_V, D)}
    return {name: rng.normal(size=shape) for name, shape in shapes.items()}


def test_causal_conv1d_equals_a_loop_and_continues_from_its_state():
    rng = np.random.default_rng(1)
    x, weight = rng.normal(size=(2, 7, 5)), rng.normal(size=(3, 5))
    expected = np.zeros_like(x)
    for t in range(7):
        for j in range(3):  # tap j reads the input K - 1 - j steps back (zero before the start)
            if t - 2 + j >= 0:
                expected[:, t] += weight[j] * x[:, t - 2 + j]
    out, state = causal_conv1d(x, weight)
    np.testing.assert_allclose(out, expected, **tolerance(np.float64))
    np.testing.assert_array_equal(state, x[:, -2:])
    first, middle = causal_conv1d(x[:, :4], weight)
    second, _ = causal_conv1d(x[:, 4:], weight, middle)
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), expected,
                               **tolerance(np.float64))


def test_partial_rope_rotates_the_first_features_and_passes_the_rest():
    rng = np.random.default_rng(2)
    x, positions = rng.normal(size=(2, 5, 8)), np.arange(5)
    out = apply_partial_rope(x, positions, 0.5, base=100.0)
    np.testing.assert_allclose(out[..., :4], ma.apply_rope(x[..., :4], positions, base=100.0),
                               **tolerance(np.float64))
    np.testing.assert_array_equal(out[..., 4:], x[..., 4:])


def test_the_layer_token_by_token_through_its_cache_equals_the_whole_sequence():
    params, x = _params(), np.random.default_rng(3).normal(size=(2, 6, D))
    kwargs = {"n_key_heads": H_K, "n_value_heads": H_V}
    whole, end = gated_deltanet(params, x, **kwargs)
    cache, steps = {}, []
    for t in range(6):
        out, cache = gated_deltanet(params, x[:, t:t + 1], cache=cache, **kwargs)
        steps.append(out)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), whole, **tolerance(np.float64))
    for key in ("conv", "state"):
        np.testing.assert_allclose(cache[key], end[key], **tolerance(np.float64))
    assert end["state"].shape == (2, H_V, D_K, D_V) and end["conv"].shape == (2, K - 1, C)


def test_a_padded_token_writes_nothing():
    # A left-padded row (causal_lm's mask: padding's query sees nothing) equals the row alone.
    params, x = _params(), np.random.default_rng(4).normal(size=(1, 5, D))
    real = np.array([False, False, True, True, True])
    mask = np.tril(np.ones((5, 5), bool)) & real[None, :] & real[:, None]
    padded, _ = gated_deltanet(params, x, mask[None, None], n_key_heads=H_K, n_value_heads=H_V)
    alone, _ = gated_deltanet(params, x[:, 2:], n_key_heads=H_K, n_value_heads=H_V)
    np.testing.assert_allclose(padded[:, 2:], alone, **tolerance(np.float64))


def test_gradients_equal_finite_differences():
    params, x = _params(5), np.random.default_rng(6).normal(size=(1, 4, D))
    r = np.random.default_rng(7).normal(size=(1, 4, D))

    def loss(x, w_qkv, conv, w_a, a_log):
        p = {**params, "w_qkv": w_qkv, "conv": conv, "w_a": w_a, "A_log": a_log}
        return np.sum(gated_deltanet(p, x, n_key_heads=H_K, n_value_heads=H_V,
                                     chunk_size=2)[0] * r)

    check_grads(loss, modes=["rev"], order=1)(x, params["w_qkv"], params["conv"], params["w_a"],
                                              params["A_log"])


X = np.ones((1, 3, D))
BAD = [
    (lambda: gated_deltanet(_params(), X, n_key_heads=3, n_value_heads=4), ValueError,
     "n_value_heads=4 must be a multiple of n_key_heads=3 (each key head serves a group of "
     "value heads)"),
    (lambda: gated_deltanet(_params(), X, n_key_heads=3, n_value_heads=3), ValueError,
     "params['w_qkv'] has 20 columns, not 2 n_key_heads d_k + n_value_heads d_v with "
     "n_key_heads=3, n_value_heads=3, d_v=2 (params['gamma']) and an integer d_k >= 1"),
    (lambda: gated_deltanet({**_params(), "w_a": np.ones((D, 3))}, X, n_key_heads=H_K,
                            n_value_heads=H_V), ValueError,
     "params['w_a'] has shape (6, 3), expected (6, 4)"),
    (lambda: gated_deltanet(_params(), X, n_key_heads=H_K, n_value_heads=H_V,
                            cache={"k": np.ones(1)}), ValueError,
     "cache must be None, {} (a new sequence) or the {'conv', 'state'} a previous call "
     "returned, got dict with keys ['k']"),
    (lambda: gated_deltanet(_params(), X, n_key_heads=H_K, n_value_heads=H_V,
                            cache={"conv": np.ones((1, 3, C)), "state": np.ones((1, 4, 2, 2))}),
     ValueError, "cache['state'] has shape (1, 4, 2, 2), expected (1, 4, 3, 2)"),
    (lambda: gated_deltanet(_params(), X, np.ones((3, 3)), n_key_heads=H_K, n_value_heads=H_V),
     ValueError, "mask must be boolean [L, L_past + L] or [B, 1, L, L_past + L] (a causal LM's, "
     "True = may attend) with L = 3, got float64 of shape (3, 3)"),
    (lambda: causal_conv1d(np.ones((4, 5)), np.ones((3, 4))), ValueError,
     "weight has shape (3, 4), expected (K, 5)"),
    (lambda: causal_conv1d(np.ones((4, 5)), np.ones((3, 5)), np.ones((1, 5))), ValueError,
     "state has shape (1, 5), expected (..., K - 1, C) = (2, 5): the last K - 1 inputs of the "
     "same batch"),
    (lambda: gated_attention({"w_q": np.ones((4, 4))}, np.ones((2, 4)), n_heads=2), ValueError,
     "params must be a dict with 'w_gate' (the output gate's projection), 'q_norm' and "
     "'k_norm' besides self-attention's 'w_q', 'w_k', 'w_v', 'w_o'"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_a_bad_call_raises_this_whole_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_softplus_is_torchs_on_both_sides_of_its_threshold():
    torch = pytest.importorskip("torch")
    from minattn.gated_deltanet import softplus

    x = np.array([-30.0, -1.0, 0.0, 3.0, 19.99, 20.0, 20.01, 40.0])
    np.testing.assert_allclose(softplus(x), torch.nn.functional.softplus(torch.from_numpy(x)),
                               rtol=1e-15, atol=0)
