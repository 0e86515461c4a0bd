"""Every bad call of latent_attention (minattn.mla) and its whole error message: the argument that
is wrong is named (not its neighbour), with the layout it should have and what it got. Raised
before anything is computed (tests/test_error_messages.py does the same for the core)."""
import numpy as np
import pytest

from minattn.mla import init_latent_attention, latent_attention

SIZES = {"n_heads": 2, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 3}
WIDTHS = {k: v for k, v in SIZES.items() if k != "n_heads"}
# d_model 4, kv_lora_rank 3: w_kv_a [4, 3 + 2], w_kv_b [3, 2 (2 + 3)], w_o [2 * 3, 4]
P = init_latent_attention(np.random.default_rng(0), 4, 2, kv_lora_rank=3, **WIDTHS)
# with the query bottleneck (q_lora_rank 5) and DeepSeek's attention_bias
PQ = init_latent_attention(np.random.default_rng(1), 4, 2, kv_lora_rank=3, q_lora_rank=5,
                           bias=True, **WIDTHS)
X = np.random.default_rng(2).normal(size=(2, 3, 4))  # [B, L, D]


def call(params=P, x=X, mask=None, **changes):
    return latent_attention(params, x, mask, **{**SIZES, "positions": np.arange(3), **changes})


def without(params, key):
    return {k: v for k, v in params.items() if k != key}


CACHE_WORDS = ("cache must be a dict {'c_kv': [..., L_past, kv_lora_rank], 'k_rope': [..., "
               "L_past, qk_rope_head_dim]}, got ")
CASES = [
    # x
    (lambda: call(x=X.astype(int)), TypeError, "x must be a floating-point array, got dtype "
     "int64 (convert it with x.astype(np.float32) or np.float64)"),
    (lambda: call(x="abc"), TypeError, "x must be an array, got str"),
    (lambda: call(x=X[0, 0]), ValueError, "x must have shape (..., L, d_model), got shape (4,)"),
    # sizes
    (lambda: call(n_heads=0), ValueError, "n_heads must be a positive int, got 0"),
    (lambda: call(n_heads=2.0), TypeError, "n_heads must be a positive int, got 2.0"),
    (lambda: call(qk_nope_head_dim=-1), ValueError,
     "qk_nope_head_dim must be a positive int, got -1"),
    (lambda: call(qk_rope_head_dim=0), ValueError,
     "qk_rope_head_dim must be a positive int, got 0"),
    (lambda: call(qk_rope_head_dim=3), ValueError,
     "qk_rope_head_dim must be even (RoPE rotates pairs), got 3"),
    (lambda: call(v_head_dim=0), ValueError, "v_head_dim must be a positive int, got 0"),
    # numbers
    (lambda: call(latent_eps=-1.0), ValueError,
     "latent_eps must be a non-negative, finite float, got -1.0"),
    (lambda: call(latent_eps="1e-6"), TypeError,
     "latent_eps must be a positive float, got '1e-6' (str)"),
    (lambda: call(rope_base=True), TypeError,
     "rope_base must be a positive float, got True (bool)"),
    (lambda: call(rope_base="10000"), TypeError,
     "rope_base must be a positive float, got '10000' (str)"),
    (lambda: call(rope_base=0), ValueError, "rope_base must be a positive float, got 0.0"),
    (lambda: call(rope_base=-2.0), ValueError, "rope_base must be a positive float, got -2.0"),
    # keywords of other attention variants (a decoder block passes them all)
    (lambda: call(n_kv_heads=2, d_k=3), ValueError,
     "latent_attention does not support d_k, n_kv_heads (got d_k=3, n_kv_heads=2)"),
    # head_mask is causal_lm's (minattn.head_mask scales w_o's rows), not a per-call keyword
    (lambda: call(head_mask=np.zeros(2)), ValueError,
     "latent_attention does not support head_mask (got head_mask=array([0., 0.]))"),
    # params
    (lambda: call(params=[P]), TypeError, "params must be a dict of arrays, got list"),
    (lambda: call(params=without(P, "gamma_kv_a")), ValueError,
     "params is missing key 'gamma_kv_a' (the latent's RMSNorm, [kv_lora_rank])"),
    (lambda: call(params={**P, "gamma_kv_a": np.ones((3, 1))}), ValueError,
     "params['gamma_kv_a'] has shape (3, 1), expected (kv_lora_rank,)"),
    (lambda: call(params={**P, "gamma_kv_a": np.ones(3, int)}), TypeError,
     "params['gamma_kv_a'] must be a floating-point array, got dtype int64 (convert it with "
     "params['gamma_kv_a'].astype(np.float32) or np.float64)"),
    (lambda: call(params=without(P, "w_q")), ValueError, "params is missing key 'w_q' (expected "
     "keys: 'w_kv_a', 'gamma_kv_a', 'w_kv_b', 'w_o', 'w_q')"),
    (lambda: call(params={**P, "w_kv_a": np.ones((4, 4))}), ValueError,
     "params['w_kv_a'] has shape (4, 4), expected (4, 5)"),
    (lambda: call(params={**P, "w_o": np.ones((4, 4))}), ValueError,
     "params['w_o'] has shape (4, 4), expected (6, 4)"),
    (lambda: call(params={**PQ, "w_q_a": np.ones((3, 5))}), ValueError,
     "params['w_q_a'] has shape (3, 5), expected (4, q_lora_rank)"),
    (lambda: call(params={**PQ, "w_q_a": np.ones(5)}), ValueError,
     "params['w_q_a'] has shape (5,), expected (4, q_lora_rank)"),
    (lambda: call(params={**PQ, "gamma_q_a": np.ones(4)}), ValueError,
     "params['gamma_q_a'] has shape (4,), expected (5,)"),
    (lambda: call(params={**PQ, "w_q_b": np.ones((5, 7))}), ValueError,
     "params['w_q_b'] has shape (5, 7), expected (5, 8)"),
    (lambda: call(params={**PQ, "b_q_a": np.ones(4)}), ValueError,
     "params['b_q_a'] has shape (4,), expected (5,)"),
    (lambda: call(params={**PQ, "b_kv_a": np.ones(4)}), ValueError,
     "params['b_kv_a'] has shape (4,), expected (5,)"),
    (lambda: call(params={**PQ, "b_o": np.ones(5)}), ValueError,
     "params['b_o'] has shape (5,), expected (4,)"),
    # a query-bottleneck bias without the bottleneck is refused, not ignored
    (lambda: call(params={**P, "b_q_a": np.ones(1)}), ValueError,
     "params['b_q_a'] has shape (1,), expected (0,)"),
    # positions
    (lambda: call(positions=np.arange(3.0)), TypeError,
     "positions must be an integer array, got dtype float64"),
    (lambda: call(positions="abc"), TypeError, "positions must be an array, got str"),
    (lambda: call(positions=np.arange(4)), ValueError,
     "positions of shape (4,) must broadcast to x's (..., L) = (2, 3)"),
    # cache
    (lambda: call(cache=[1]), TypeError, CACHE_WORDS + "list"),
    (lambda: call(cache={"c_kv": np.zeros((2, 0, 3))}), TypeError, CACHE_WORDS + "dict"),
    (lambda: call(cache={"k_rope": np.zeros((2, 0, 2))}), TypeError, CACHE_WORDS + "dict"),
    (lambda: call(cache={"c_kv": np.zeros((2, 1, 4)), "k_rope": np.zeros((2, 1, 2))}),
     ValueError, "cache['c_kv'] has shape (2, 1, 4), expected (2, 'L_past', 3): a cache from "
                 "another model or batch?"),
    (lambda: call(cache={"c_kv": np.zeros((2, 1, 3)), "k_rope": np.zeros((2, 2, 2))}),
     ValueError, "cache['k_rope'] has shape (2, 2, 2), expected (2, 'L_past', 2): a cache from "
                 "another model or batch?"),
    # mask: over the per-head scores, L_past + L keys
    (lambda: call(mask=np.ones((3, 4), bool)), ValueError, "mask of shape (3, 4) does not "
     "broadcast to the per-head scores (..., H, L, L_past + L) of shape (2, 2, 3, 3)"),
    (lambda: call(mask=np.ones((3, 3), bool),
                  cache={"c_kv": np.zeros((2, 1, 3)), "k_rope": np.zeros((2, 1, 2))}),
     ValueError, "mask of shape (3, 3) does not broadcast to the per-head scores "
                 "(..., H, L, L_past + L) of shape (2, 2, 3, 4)"),
    (lambda: call(mask=np.ones((2, 3, 3), bool)), ValueError,
     "mask of shape (2, 3, 3) is ambiguous for the per-head scores of shape (2, 2, 3, 3): give "
     "(L_q, L_k), or a per-batch mask with its head axis, (B, 1, L_q, L_k) (e.g. mask[:, None]), "
     "or a per-head mask or bias with its batch axis, (1, H, L_q, L_k) (e.g. mask[None])"),
    (lambda: call(mask=np.ones((3, 3), int)), TypeError, "mask must be boolean (True = may "
     "attend) or floating (added to the scores), got dtype int64"),
]


@pytest.mark.parametrize("bad_call, error, message", CASES)
def test_a_bad_call_names_the_argument_exactly(bad_call, error, message):
    with pytest.raises(error) as caught:
        bad_call()
    assert str(caught.value) == message
