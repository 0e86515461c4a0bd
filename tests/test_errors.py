"""Bad input raises a ValueError/TypeError that names the argument and the shapes, before any
computation, never NumPy's own broadcast/matmul error."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
q = rng.normal(size=(2, 3, 4))
MHA = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2)
BLOCK = ma.init_encoder_block(np.random.default_rng(0), 4, 2, 8)
x = rng.normal(size=(2, 3, 4))


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: ma.scaled_dot_product_attention(q, q[..., :3], q), ValueError,
     r"q and k must have the same feature size d_k: q \(2, 3, 4\), k \(2, 3, 3\)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q[:, :2]), ValueError,
     r"k and v must have the same length L_k: k \(2, 3, 4\), v \(2, 2, 4\)"),
    (lambda: ma.scaled_dot_product_attention(q, q[:1].repeat(3, 0), q), ValueError,
     r"leading .* do not broadcast: q \(2,\), k \(3,\), v \(2,\)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, np.ones((3, 2), bool)), ValueError,
     r"mask of shape \(3, 2\) does not broadcast to the scores of shape \(2, 3, 3\)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, np.ones((4, 3, 3), bool)), ValueError,
     r"mask of shape \(4, 3, 3\)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, np.ones((3, 3), int)), TypeError,
     r"mask must be boolean .* got dtype int64"),
    (lambda: ma.scaled_dot_product_attention(q.astype(int), q, q), TypeError,
     r"q must be a floating-point array, got dtype int64"),
    (lambda: ma.scaled_dot_product_attention(q, q > 0, q), TypeError, r"k must be a floating"),
    (lambda: ma.scaled_dot_product_attention(q[0, 0], q, q), ValueError,
     r"q must have shape \(\.\.\., L_q, d_k\), got shape \(4,\)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=1.5, rng=rng), ValueError,
     r"dropout must be in \[0, 1\], got 1\.5"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=-0.1, rng=rng), ValueError,
     r"dropout must be in \[0, 1\]"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1), ValueError,
     r"dropout=0\.1 needs an rng"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1, rng=42), TypeError,
     r"rng must be a np.random.Generator"),
    (lambda: ma.softmax(np.arange(3)), TypeError, r"x must be a floating-point array"),
    (lambda: ma.softmax(q, mask=np.zeros((2, 3, 4))), TypeError, r"softmax's mask must be boolean"),
    (lambda: ma.split_heads(q, 3), ValueError, r"x's last dim D=4 is not divisible by n_heads=3"),
    (lambda: ma.init_multi_head_attention(rng, 6, 4), ValueError,
     r"d_model=6 is not divisible by n_heads=4"),
    (lambda: ma.multi_head_attention(MHA, x, x, x, n_heads=3), ValueError,
     r"d_model=4 is not divisible by n_heads=3"),
    (lambda: ma.multi_head_attention(MHA, x, x[..., :2], x, n_heads=2), ValueError,
     r"query, key and value must share d_model: query \(2, 3, 4\), key \(2, 3, 2\)"),
    (lambda: ma.multi_head_attention(MHA, x, x, x[:, :2], n_heads=2), ValueError,
     r"key and value must have the same length L_k"),
    (lambda: ma.multi_head_attention({k: v for k, v in MHA.items() if k != "w_v"}, x, x, x,
                                     n_heads=2), ValueError, r"params is missing key 'w_v'"),
    (lambda: ma.multi_head_attention({**MHA, "b_o": np.zeros(3)}, x, x, x, n_heads=2), ValueError,
     r"params\['b_o'\] has shape \(3,\), expected \(4,\)"),
    (lambda: ma.multi_head_attention(MHA, x, x, x, np.ones((3, 3, 3), bool), n_heads=2), ValueError,
     r"mask of shape \(3, 3, 3\) does not broadcast to the per-head scores .* \(2, 2, 3, 3\)"),
    (lambda: ma.multi_head_attention(MHA, x, x, x, np.ones((2, 3, 3), bool), n_heads=2), ValueError,
     r"mask of shape \(2, 3, 3\) is ambiguous for the per-head scores of shape \(2, 2, 3, 3\): "
     r"give \(L_q, L_k\), or a per-batch mask with its head axis, \(B, 1, L_q, L_k\)"),
    (lambda: ma.multi_head_attention(MHA, x.astype(np.int32), x, x, n_heads=2), TypeError,
     r"query must be a floating-point array, got dtype int32"),
    (lambda: ma.layer_norm(x, np.ones(3), np.zeros(4)), ValueError,
     r"gamma has shape \(3,\), expected \(4,\)"),
    (lambda: ma.feed_forward(BLOCK["feed_forward"], x, activation="swish"), ValueError,
     r"activation must be one of 'relu', 'gelu', 'gelu_tanh'; got 'swish'"),
    (lambda: ma.feed_forward({**BLOCK["feed_forward"], "b_1": np.zeros(7)}, x), ValueError,
     r"params\['b_1'\] has shape \(7,\), expected \(8,\)"),
    (lambda: ma.feed_forward(BLOCK["feed_forward"], x[..., :3]), ValueError,
     r"params\['w_1'\] has shape \(4, 8\), expected \(3, d_ff\)"),
    (lambda: ma.encoder_block({**BLOCK, "feed_forward_norm": {"gamma": np.ones(4)}}, x, n_heads=2), ValueError,
     r"params\['feed_forward_norm'\] is missing key 'beta'"),
    (lambda: ma.encoder_block({**BLOCK, "self_attention": {**MHA, "w_q": np.ones((4, 5))}}, x,
                              n_heads=2), ValueError,
     r"params\['self_attention'\]\['w_q'\] has shape \(4, 5\), expected \(4, 4\)"),
    (lambda: ma.encoder_block(BLOCK, x, n_heads=2, dropout=0.2), ValueError, r"needs an rng"),
    (lambda: ma.encoder({"layers": [BLOCK, {}]}, x, n_heads=2), ValueError,
     r"params\['layers'\]\[1\] is missing key 'self_attention'"),
    (lambda: ma.encoder({"blocks": [BLOCK]}, x, n_heads=2), ValueError, r"key 'layers'"),
    (lambda: ma.padding_mask(np.array([1.5]), 3), TypeError, r"lengths must be an integer array"),
    (lambda: ma.padding_mask(np.array([4]), 3), ValueError, r"lengths must lie in \[0, n=3\]"),
    (lambda: ma.causal_mask(-1), TypeError, r"n_q must be a non-negative int"),
    (lambda: ma.positional_encoding(4, 0), TypeError, r"d_model must be a positive int"),
])
def test_bad_input_is_named(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()
