"""Every bad call of differential_attention (minattn.differential) and its whole error message:
the argument that is wrong is named (not its neighbour), with the layout it should have and what
it got. Raised before anything is computed (tests/test_error_messages.py does the same for the
core)."""
import numpy as np
import pytest

from minattn.differential import differential_attention, init_differential_attention

# d_model 8, 2 heads of width d = 4
P = init_differential_attention(np.random.default_rng(0), 8, 2, layer_index=0)
X = np.random.default_rng(1).normal(size=(2, 3, 8))  # [B, L, D]


def call(params=P, x=X, mask=None, **changes):
    return differential_attention(params, x, mask, **{"n_heads": 2, **changes})


def without(params, key):
    return {k: v for k, v in params.items() if k != key}


CASES = [
    # x
    (lambda: call(x=X.astype(int)), TypeError, "x must be a floating-point array, got dtype "
     "int64 (convert it with x.astype(np.float32) or np.float64)"),
    (lambda: call(x="abc"), TypeError, "x must be an array, got str"),
    (lambda: call(x=X[0, 0]), ValueError, "x must have shape (..., L, d_model), got shape (8,)"),
    # heads
    (lambda: call(n_heads=0), TypeError, "n_heads must be a positive int, got 0"),
    (lambda: call(n_heads=3), ValueError, "d_model=8 is not divisible by n_heads=3"),
    (lambda: call(n_heads=4, n_kv_heads=3), ValueError, "n_kv_heads=3 must divide n_heads=4 "
     "(each kv head serves a group of n_heads // n_kv_heads query heads)"),
    (lambda: call(n_kv_heads=1), ValueError,
     "differential attention pairs heads: n_heads=2 and n_kv_heads=1 must both be even"),
    (lambda: differential_attention(
        init_differential_attention(np.random.default_rng(0), 12, 6, n_kv_heads=3, layer_index=0),
        X[..., :6].repeat(2, -1), n_heads=6, n_kv_heads=3), ValueError,
     "differential attention pairs heads: n_heads=6 and n_kv_heads=3 must both be even"),
    # numbers
    (lambda: call(eps=-1.0), ValueError, "eps must be a non-negative, finite float, got -1.0"),
    (lambda: call(eps="1e-5"), TypeError, "eps must be a positive float, got '1e-5' (str)"),
    (lambda: call(rope_base="10000"), TypeError,
     "rope_base must be a positive float, got '10000' (str)"),
    (lambda: call(rope_base=True, positions=np.arange(3)), TypeError,
     "rope_base must be a positive float, got True (bool)"),
    (lambda: call(rope_base=0, positions=np.arange(3)), ValueError,
     "rope_base must be a positive float, got 0.0"),
    # keywords of other attention variants (a decoder block passes them all)
    (lambda: call(d_k=4, rope_scaling={"rope_type": "yarn"}), ValueError,
     "differential_attention does not support d_k, rope_scaling (got d_k=4, "
     "rope_scaling={'rope_type': 'yarn'})"),
    # params
    (lambda: call(params=[P]), TypeError, "params must be a dict of arrays, got list"),
    (lambda: call(params=without(P, "w_v")), ValueError,
     "params is missing key 'w_v' (expected keys: 'w_q', 'w_k', 'w_v', 'w_o')"),
    (lambda: call(params=without(P, "lambda_k2")), ValueError,
     "params is missing key 'lambda_k2' (expected keys: 'lambda_q1', 'lambda_k1', 'lambda_q2', "
     "'lambda_k2', 'lambda_init')"),
    (lambda: call(params={**P, "lambda_q1": np.ones(3)}), ValueError,
     "params['lambda_q1'] has shape (3,), expected (4,)"),
    (lambda: call(params={**P, "lambda_init": np.ones(1)}), ValueError,
     "params['lambda_init'] has shape (1,), expected ()"),
    (lambda: call(params={**P, "lambda_init": 0.2}), TypeError,
     "params['lambda_init'] must be an array, got float"),
    # positions
    (lambda: call(positions=np.arange(3.0)), TypeError,
     "positions must be an integer array, got dtype float64"),
    (lambda: call(positions="abc"), TypeError, "positions must be an array, got str"),
    (lambda: call(positions=np.arange(4)), ValueError,
     "positions of shape (4,) must broadcast to x's (..., L) = (2, 3)"),
    (lambda: differential_attention(
        init_differential_attention(np.random.default_rng(0), 6, 2, layer_index=0),
        X[..., :6], n_heads=2, positions=np.arange(3)), ValueError,
     "RoPE (positions given) needs an even head width d = d_model / n_heads, got d=3 "
     "(d_model=6, n_heads=2)"),
    # cache: [..., H_kv, L_past, d] for k and v
    (lambda: call(cache=[1]), TypeError,
     "cache must be a dict {'k': ..., 'v': ...} of arrays [..., H_kv, L_past, d_k], got list"),
    (lambda: call(cache={"k": np.zeros((2, 2, 1, 3)), "v": np.zeros((2, 2, 1, 3))}), ValueError,
     "cache['k'] has shape (2, 2, 1, 3), expected (2, 2, 'L_past', 4): a cache from another "
     "model or batch?"),
    (lambda: call(cache={"k": np.zeros((2, 2, 1, 4)), "v": np.zeros((2, 2, 2, 4))}), ValueError,
     "cache['k'] and cache['v'] differ in shape: (2, 2, 1, 4) vs (2, 2, 2, 4)"),
    # mask: over the per-head scores, L_past + L keys
    (lambda: call(mask=np.ones((3, 4), bool)), ValueError, "mask of shape (3, 4) does not "
     "broadcast to the per-head scores (..., H, L, L_past + L) of shape (2, 2, 3, 3)"),
    (lambda: call(mask=np.ones((3, 3), bool),
                  cache={"k": np.zeros((2, 2, 1, 4)), "v": np.zeros((2, 2, 1, 4))}),
     ValueError, "mask of shape (3, 3) does not broadcast to the per-head scores "
                 "(..., H, L, L_past + L) of shape (2, 2, 3, 4)"),
    (lambda: call(mask=np.ones((2, 3, 3), bool)), ValueError,
     "mask of shape (2, 3, 3) is ambiguous for the per-head scores of shape (2, 2, 3, 3): give "
     "(L_q, L_k), or a per-batch mask with its head axis, (B, 1, L_q, L_k) (e.g. mask[:, None]), "
     "or a per-head mask or bias with its batch axis, (1, H, L_q, L_k) (e.g. mask[None])"),
]


@pytest.mark.parametrize("bad_call, error, message", CASES)
def test_a_bad_call_names_the_argument_exactly(bad_call, error, message):
    with pytest.raises(error) as caught:
        bad_call()
    assert str(caught.value) == message
