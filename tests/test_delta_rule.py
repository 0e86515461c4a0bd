"""The gated delta rule (minattn.delta_rule): the loop over time and the chunked form equal
transformers' torch_recurrent_gated_delta_rule and torch_chunk_gated_delta_rule (Qwen3-Next) in
float64, outputs and final states, and a slow loop of the update written as the papers write
it; their gradients equal finite differences; the properties the walkthrough states hold."""
import numpy as np
import pytest
from autograd.test_util import check_grads
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma

from .strategies import tolerance


def _inputs(seed, batch=(2, 3), length=10, d_k=4, d_v=3, state=True):
    """q, k unit rows [..., L, d_k], v [..., L, d_v], β in (0, 1), g in (-1, 0], a state."""
    rng = np.random.default_rng(seed)
    q = ma.l2_normalize(rng.normal(size=batch + (length, d_k)))
    k = ma.l2_normalize(rng.normal(size=batch + (length, d_k)))
    v = rng.normal(size=batch + (length, d_v))
    beta = rng.uniform(0.05, 1.0, size=batch + (length,))
    g = -rng.uniform(0.0, 1.0, size=batch + (length,))
    s0 = rng.normal(size=batch + (d_k, d_v)) if state else None
    return q, k, v, beta, g, s0


def _slow_loop(q, k, v, beta, g, s0, scale):
    # The papers' form, column vectors, one (batch, head) and one token at a time:
    # M_t = e^{g_t} M_{t-1} (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ,  o_t = M_t (scale q_t), M = Sᵀ.
    out = np.zeros(v.shape)
    final = np.zeros(s0.shape)
    for b in np.ndindex(*q.shape[:-2]):
        m = s0[b].T.copy()  # [d_v, d_k]
        for t in range(q.shape[-2]):
            kt, vt = k[b][t][:, None], v[b][t][:, None]
            eye = np.eye(k.shape[-1])
            m = np.exp(g[b][t]) * m @ (eye - beta[b][t] * kt @ kt.T) + beta[b][t] * vt @ kt.T
            out[b][t] = m @ (scale * q[b][t])
        final[b] = m.T
    return out, final


# transformers' functions in float64: tests/qwen3_next_reference.py says how and why.
@pytest.fixture(scope="module")
def reference():
    from . import qwen3_next_reference as ref

    return ref


@pytest.mark.parametrize("length", [1, 10, 37])
def test_loop_equals_transformers_recurrent_in_float64(reference, length):
    q, k, v, beta, g, s0 = _inputs(0, length=length)
    expected = reference.call(reference.in_float64("torch_recurrent_gated_delta_rule"),
                              q, k, v, beta, g, s0)
    out, state = ma.delta_rule(q, k, v, beta, g, initial_state=s0, return_state=True)
    np.testing.assert_allclose(out, expected[0], **tolerance(np.float64))
    np.testing.assert_allclose(state, expected[1], **tolerance(np.float64))


@pytest.mark.parametrize("length, chunk_size", [(10, 4), (37, 8), (37, 64), (16, 16), (5, 1)])
def test_chunked_equals_transformers_chunked_in_float64(reference, length, chunk_size):
    q, k, v, beta, g, s0 = _inputs(1, length=length)
    expected = reference.call(reference.in_float64("torch_chunk_gated_delta_rule"),
                              q, k, v, beta, g, s0, chunk_size=chunk_size)
    out, state = ma.delta_rule(q, k, v, beta, g, initial_state=s0, chunk_size=chunk_size,
                               return_state=True)
    np.testing.assert_allclose(out, expected[0], **tolerance(np.float64))
    np.testing.assert_allclose(state, expected[1], **tolerance(np.float64))


@pytest.mark.parametrize("name", ["torch_recurrent_gated_delta_rule",
                                  "torch_chunk_gated_delta_rule"])
def test_the_float64_reference_is_stock_transformers_at_float32_tolerance(reference, name):
    q, k, v, beta, g, s0 = _inputs(2, length=12)
    kwargs = {"chunk_size": 4} if "chunk" in name else {}
    ours = reference.call(reference.in_float64(name), q, k, v, beta, g, s0, **kwargs)
    stock = reference.call(reference.stock(name), q, k, v, beta, g, s0, **kwargs)
    assert stock[0].dtype == np.float64  # cast back to the input's dtype, computed in float32
    for a, b in zip(ours, stock):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        assert np.abs(a - b).max() > 0  # the stock one really did round through float32


@given(st.integers(1, 9), st.integers(1, 5), st.integers(1, 4), st.integers(1, 3),
       st.integers(0, 2 ** 31), st.booleans())
def test_both_forms_equal_a_slow_loop_of_the_papers_update(length, chunk_size, d_k, d_v, seed,
                                                            decay):
    q, k, v, beta, g, s0 = _inputs(seed, batch=(2,), length=length, d_k=d_k, d_v=d_v)
    g = g if decay else None
    scale = 0.7
    expected = _slow_loop(q, k, v, beta, np.zeros_like(beta) if g is None else g, s0, scale)
    for chunks in (None, chunk_size):
        out, state = ma.delta_rule(q, k, v, beta, g, scale=scale, initial_state=s0,
                                   chunk_size=chunks, return_state=True)
        np.testing.assert_allclose(out, expected[0], **tolerance(np.float64))
        np.testing.assert_allclose(state, expected[1], **tolerance(np.float64))


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_initial_state_continues_a_sequence(chunk_size):
    q, k, v, beta, g, _ = _inputs(3, length=11)
    whole, final = ma.delta_rule(q, k, v, beta, g, chunk_size=chunk_size, return_state=True)
    first, middle = ma.delta_rule(q[..., :4, :], k[..., :4, :], v[..., :4, :], beta[..., :4],
                                  g[..., :4], chunk_size=chunk_size, return_state=True)
    second, end = ma.delta_rule(q[..., 4:, :], k[..., 4:, :], v[..., 4:, :], beta[..., 4:],
                                g[..., 4:], initial_state=middle, chunk_size=chunk_size,
                                return_state=True)
    np.testing.assert_allclose(np.concatenate([first, second], axis=-2), whole,
                               **tolerance(np.float64))
    np.testing.assert_allclose(end, final, **tolerance(np.float64))


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_beta_one_and_orthonormal_keys_give_linear_attention(chunk_size):
    # Nothing the state holds is predicted by a key orthogonal to every earlier one, so each
    # token's value is written whole: the delta rule is then plain linear attention.
    rng = np.random.default_rng(4)
    keys = np.linalg.qr(rng.normal(size=(6, 6)))[0].T  # rows orthonormal
    q, v = rng.normal(size=(6, 6)), rng.normal(size=(6, 2))
    out = ma.delta_rule(q, keys, v, np.ones(6), scale=1.0, chunk_size=chunk_size)
    np.testing.assert_allclose(out, np.tril(q @ keys.T) @ v, **tolerance(np.float64))


@pytest.mark.parametrize("chunk_size", [None, 4])
def test_a_decay_of_zero_forgets_everything(chunk_size):
    # e^g = 0 (g = -1000 underflows to exactly 0): each token sees only its own write,
    # o_t = scale (q_t · k_t) β_t v_t, and the initial state is forgotten.
    q, k, v, beta, _, s0 = _inputs(5, length=7)
    out = ma.delta_rule(q, k, v, beta, np.full_like(beta, -1000.0), initial_state=s0,
                        chunk_size=chunk_size)
    own = np.sum(q * k, axis=-1, keepdims=True) * beta[..., None] * v / 2.0  # scale 1/sqrt(4)
    np.testing.assert_allclose(out, own, **tolerance(np.float64))


def test_g_none_is_no_decay_and_the_default_scale_is_one_over_sqrt_d_k():
    q, k, v, beta, _, s0 = _inputs(6, length=5, d_k=9)
    out = ma.delta_rule(q, k, v, beta, initial_state=s0)
    expected = ma.delta_rule(q, k, v, beta, np.zeros_like(beta), scale=1 / 3,
                             initial_state=s0)
    np.testing.assert_allclose(out, expected, **tolerance(np.float64))


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_gradients_equal_finite_differences(chunk_size):
    q, k, v, beta, g, s0 = _inputs(7, batch=(2,), length=5, d_k=3, d_v=2)
    r = np.random.default_rng(8).normal(size=v.shape)
    r_state = np.random.default_rng(9).normal(size=s0.shape)

    def loss(q, k, v, beta, g, s0):
        out, state = ma.delta_rule(q, k, v, beta, g, initial_state=s0, chunk_size=chunk_size,
                                   return_state=True)
        return np.sum(out * r) + np.sum(state * r_state)

    check_grads(loss, modes=["rev"], order=1)(q, k, v, beta, g, s0)


def test_l2_normalize_equals_transformers_l2norm(reference):
    x = np.random.default_rng(10).normal(size=(3, 5, 4)) * [[[1e-4], [1], [1], [3], [0]]]
    expected = reference.stock("l2norm")(reference.torch.from_numpy(x), dim=-1, eps=1e-6)
    np.testing.assert_allclose(ma.l2_normalize(x), expected.numpy(), **tolerance(np.float64))


def test_l2_normalize_gives_unit_rows_with_eps_zero():
    x = np.random.default_rng(11).normal(size=(4, 6))
    np.testing.assert_allclose(np.linalg.norm(ma.l2_normalize(x, eps=0.0), axis=-1), 1.0,
                               **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("chunk_size", [None, 4])
def test_the_output_and_state_keep_the_inputs_dtype(dtype, chunk_size):
    q, k, v, beta, g, s0 = (a.astype(dtype) for a in _inputs(12, length=6))
    out, state = ma.delta_rule(q, k, v, beta.astype(np.float64), g, initial_state=s0,
                               chunk_size=chunk_size, return_state=True)
    assert out.dtype == state.dtype == dtype
    exact = ma.delta_rule(*(a.astype(np.float64) for a in (q, k, v, beta, g)),
                          initial_state=s0.astype(np.float64), chunk_size=chunk_size,
                          return_state=True)
    np.testing.assert_allclose(out, exact[0], **tolerance(dtype))
    np.testing.assert_allclose(state, exact[1], **tolerance(dtype))


def test_inputs_are_not_changed_and_an_empty_sequence_returns_the_initial_state():
    q, k, v, beta, g, s0 = _inputs(13, length=6)
    copies = [a.copy() for a in (q, k, v, beta, g, s0)]
    for chunk_size in (None, 4):
        ma.delta_rule(q, k, v, beta, g, initial_state=s0, chunk_size=chunk_size)
        out, state = ma.delta_rule(q[..., :0, :], k[..., :0, :], v[..., :0, :], beta[..., :0],
                                   g[..., :0], initial_state=s0, chunk_size=chunk_size,
                                   return_state=True)
        assert out.shape == (2, 3, 0, 3)
        np.testing.assert_array_equal(state, s0)
    for a, copy in zip((q, k, v, beta, g, s0), copies):
        np.testing.assert_array_equal(a, copy)


Q, K, V = np.ones((2, 5, 4)), np.ones((2, 5, 4)), np.ones((2, 5, 3))
BETA = np.ones((2, 5))

BAD = [
    (lambda: ma.delta_rule(Q, np.ones((2, 5, 3)), V, BETA), ValueError,
     "q and k must have the same feature size d_k: q (2, 5, 4), k (2, 5, 3)"),
    (lambda: ma.delta_rule(Q[:, :4], K, V, BETA), ValueError,
     "q and k must have the same length L (one query per token): q (2, 4, 4), k (2, 5, 4)"),
    (lambda: ma.delta_rule(Q, K, V[:, :4], BETA), ValueError,
     "k and v must have the same length L_k: k (2, 5, 4), v (2, 4, 3)"),
    (lambda: ma.delta_rule(Q, K, V, np.ones((2, 4))), ValueError,
     "beta of shape (2, 4) does not broadcast to the tokens' shape (..., L) = (2, 5) (one value "
     "per token)"),
    (lambda: ma.delta_rule(Q, K, V, np.ones(())), ValueError,
     "beta of shape () does not broadcast to the tokens' shape (..., L) = (2, 5) (one value "
     "per token)"),
    (lambda: ma.delta_rule(Q, K, V, BETA, np.zeros((2, 5, 1))), ValueError,
     "g of shape (2, 5, 1) does not broadcast to the tokens' shape (..., L) = (2, 5) (one value "
     "per token)"),
    (lambda: ma.delta_rule(Q, K, V, BETA, np.full((2, 5), 0.5)), ValueError,
     "g is the log of a decay and must be <= 0 (e^g <= 1), got a largest entry of 0.5: a "
     "positive g grows the state at every step"),
    (lambda: ma.delta_rule(Q, K, V, BETA, initial_state=np.zeros((2, 3, 4))), ValueError,
     "initial_state of shape (2, 3, 4) does not broadcast to the state's shape (..., d_k, d_v) "
     "= (2, 4, 3)"),
    (lambda: ma.delta_rule(Q, K, V, BETA, chunk_size=0), ValueError,
     "chunk_size must be None or a positive int, got 0"),
    (lambda: ma.delta_rule(Q, K, V, BETA, chunk_size=2.0), TypeError,
     "chunk_size must be None or a positive int, got 2.0"),
    (lambda: ma.delta_rule(Q, K, V, BETA.astype(int)), TypeError,
     "beta must be a floating-point array, got dtype int64 (convert it with "
     "beta.astype(np.float32) or np.float64)"),
    (lambda: ma.delta_rule(Q, K, V, BETA, scale=-1.0), ValueError,
     "scale must be a non-negative, finite float, got -1.0"),
    (lambda: ma.delta_rule(Q, K, V, BETA, return_state=1), TypeError,
     "return_state must be True or False, got 1"),
    (lambda: ma.l2_normalize(np.zeros((2, 3)), eps=0.0), ValueError,
     "eps=0 leaves the norm undefined (0 / 0) on a row of x (shape (2, 3)) that is all zeros; "
     "give eps > 0"),
    (lambda: ma.l2_normalize(np.array(1.0)), ValueError, "x must have shape (..., d), got shape ()"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_a_bad_call_raises_this_whole_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_g_of_zero_and_chunk_size_one_are_accepted():
    out = ma.delta_rule(Q, K, V, BETA, np.zeros((2, 5)), chunk_size=1)
    assert out.shape == (2, 5, 3)


def test_the_walkthroughs_cost_table_uses_transformers_qwen3_next_sizes():
    # walkthrough.md's cost table writes Qwen3-Next-80B-A3B's sizes out as a dict: they must be
    # transformers' Qwen3NextConfig defaults (the 80B-A3B configuration, as its docstring says).
    import ast
    import re
    from pathlib import Path

    config = pytest.importorskip("transformers").Qwen3NextConfig()
    text = (Path(__file__).resolve().parent.parent / "walkthrough.md").read_text(encoding="utf-8")
    block = re.search(r">>> qwen3_next = (\{.*?\})\n", re.sub(r"\n\.\.\. +", " ", text), re.S)
    sizes = ast.literal_eval(block[1])
    interval = sizes.pop("full_attention_interval")
    assert {name: getattr(config, name) for name in sizes} == sizes
    assert config.layer_types == ["full_attention" if (i + 1) % interval == 0 else
                                  "linear_attention" for i in range(config.num_hidden_layers)]
