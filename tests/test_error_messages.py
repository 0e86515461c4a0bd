"""The whole error message, for every argument check: it names the argument that is wrong (not
its neighbour), the layout it should have and what it got. test_errors.py checks that the right
error is raised early; this module pins the exact words a reader will see."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
q = rng.normal(size=(2, 3, 4))  # [B, L, D] or [B, L, d_k]
x = q
q3 = rng.normal(size=(3, 3, 4))  # a batch of 3, which does not broadcast against 2
MHA = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2)
BLOCK = ma.init_encoder_block(np.random.default_rng(0), 4, 2, 8)
FF_D3 = ma.init_feed_forward(np.random.default_rng(0), 3, 8)  # for d_model 3, not 4
DBLOCK = ma.init_decoder_block(np.random.default_rng(0), 4, 2, 8)  # no cross-attention
# blocks under the old, torch-style names: every sublayer's params, keyed attention/norm1/...
OLD_BLOCK = {"attention": BLOCK["self_attention"], "norm1": BLOCK["self_attention_norm"],
             "feed_forward": BLOCK["feed_forward"], "norm2": BLOCK["feed_forward_norm"]}
OLD_DBLOCK = {"self_attention": DBLOCK["self_attention"], "norm1": DBLOCK["self_attention_norm"],
              "feed_forward": DBLOCK["feed_forward"], "norm3": DBLOCK["feed_forward_norm"]}


def _float_message(name):
    return (f"{name} must be a floating-point array, got dtype int64 "
            f"(convert it with {name}.astype(np.float32) or np.float64)")


CASES = [
    # scaled_dot_product_attention: q, k, v named in every check
    (lambda: ma.scaled_dot_product_attention(q.astype(int), q, q), TypeError, _float_message("q")),
    (lambda: ma.scaled_dot_product_attention(q, q.astype(int), q), TypeError, _float_message("k")),
    (lambda: ma.scaled_dot_product_attention(q, q, q.astype(int)), TypeError, _float_message("v")),
    (lambda: ma.scaled_dot_product_attention("abc", q, q), TypeError,
     "q must be an array, got str"),
    (lambda: ma.scaled_dot_product_attention(memoryview(b"ab"), q, q), TypeError,
     "q must be an array, got memoryview"),  # it has a shape, but no dtype
    (lambda: ma.scaled_dot_product_attention(q[0, 0], q, q), ValueError,
     "q must have shape (..., L_q, d_k), got shape (4,)"),
    (lambda: ma.scaled_dot_product_attention(q, q[0, 0], q), ValueError,
     "k must have shape (..., L_k, d_k), got shape (4,)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q[0, 0]), ValueError,
     "v must have shape (..., L_k, d_v), got shape (4,)"),
    (lambda: ma.scaled_dot_product_attention(q, q3, q), ValueError,
     "the leading (batch/head) dims of q, k, v do not broadcast: q (2,), k (3,), v (2,)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, "abc"), TypeError,
     "mask must be a boolean or floating-point array, got str"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, np.ones((3, 3), int)), TypeError,
     "mask must be boolean (True = may attend) or floating (added to the scores), got dtype int64"),
    (lambda: ma.softmax(q[0], mask=np.ones(5, bool)), ValueError,
     "mask of shape (5,) does not broadcast to x of shape (3, 4)"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=True, rng=rng), TypeError,
     "dropout must be a float in [0, 1], got True"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout="0.1", rng=rng), TypeError,
     "dropout must be a float in [0, 1], got '0.1'"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1), ValueError,
     "dropout=0.1 needs an rng (np.random.Generator), e.g. rng=np.random.default_rng(0); "
     "nothing here seeds a global RNG"),
    (lambda: ma.scaled_dot_product_attention(q, q, q, dropout=0.1, rng=42), TypeError,
     "rng must be a np.random.Generator (e.g. np.random.default_rng(0)), got int"),
    # heads
    (lambda: ma.split_heads(x, 0), TypeError, "n_heads must be a positive int, got 0"),
    (lambda: ma.split_heads(x, True), TypeError, "n_heads must be a positive int, got True"),
    (lambda: ma.split_heads(x[0, 0], 2), ValueError,
     "x must have shape (..., L, D), got shape (4,)"),
    (lambda: ma.merge_heads(x[0]), ValueError,
     "x must have shape (..., H, L, d_k), got shape (3, 4)"),
    # multi_head_attention: query, key, value named in every check
    (lambda: ma.multi_head_attention(MHA, x.astype(int), x, x, n_heads=2), TypeError,
     _float_message("query")),
    (lambda: ma.multi_head_attention(MHA, x, x.astype(int), x, n_heads=2), TypeError,
     _float_message("key")),
    (lambda: ma.multi_head_attention(MHA, x, x, x.astype(int), n_heads=2), TypeError,
     _float_message("value")),
    (lambda: ma.multi_head_attention(MHA, x[0, 0], x, x, n_heads=2), ValueError,
     "query must have shape (..., L_q, d_model), got shape (4,)"),
    (lambda: ma.multi_head_attention(MHA, x, x[0, 0], x, n_heads=2), ValueError,
     "key must have shape (..., L_k, d_model), got shape (4,)"),
    (lambda: ma.multi_head_attention(MHA, x, x, x[0, 0], n_heads=2), ValueError,
     "value must have shape (..., L_k, d_model), got shape (4,)"),
    (lambda: ma.multi_head_attention(MHA, x, q3, q3, n_heads=2), ValueError,
     "the batch dims of query, key, value do not broadcast: query (2,), key (3,), value (3,)"),
    (lambda: ma.multi_head_attention(MHA, x, x, x, np.ones((3, 3, 3), bool), n_heads=2),
     ValueError, "mask of shape (3, 3, 3) does not broadcast to the per-head scores "
                 "(..., H, L_q, L_k) of shape (2, 2, 3, 3)"),
    (lambda: ma.multi_head_attention([MHA], x, x, x, n_heads=2), TypeError,
     "params must be a dict of arrays, got list"),
    (lambda: ma.multi_head_attention({k: v for k, v in MHA.items() if k != "w_v"}, x, x, x,
                                     n_heads=2), ValueError,
     "params is missing key 'w_v' (expected keys: 'w_q', 'w_k', 'w_v', 'w_o', 'b_q', 'b_k', "
     "'b_v', 'b_o')"),
    # layer_norm and feed_forward
    (lambda: ma.layer_norm(x.astype(int), np.ones(4), np.zeros(4)), TypeError,
     _float_message("x")),
    (lambda: ma.layer_norm(np.array(1.0), np.ones(4), np.zeros(4)), ValueError,
     "x must have shape (..., D), got shape ()"),
    (lambda: ma.layer_norm(x, np.ones(4, int), np.zeros(4)), TypeError, _float_message("gamma")),
    (lambda: ma.layer_norm(x, np.ones(4), np.zeros(3)), ValueError,
     "beta has shape (3,), expected (4,)"),
    (lambda: ma.feed_forward(BLOCK["feed_forward"], x.astype(int)), TypeError,
     _float_message("x")),
    (lambda: ma.feed_forward(BLOCK["feed_forward"], np.array(1.0)), ValueError,
     "x must have shape (..., D), got shape ()"),
    # encoder_block and encoder: nested params are named by their path
    (lambda: ma.encoder_block(BLOCK, x.astype(int), n_heads=2), TypeError, _float_message("x")),
    (lambda: ma.encoder({"layers": [BLOCK]}, x.astype(int), n_heads=2), TypeError,
     _float_message("x")),
    (lambda: ma.encoder_block(BLOCK, x[0, 0], n_heads=2), ValueError,
     "x must have shape (..., L, d_model), got shape (4,)"),
    (lambda: ma.encoder_block(BLOCK, x, n_heads=2, activation="swish"), ValueError,
     "activation must be one of 'relu', 'gelu', 'gelu_tanh'; got 'swish'"),
    (lambda: ma.encoder({"layers": [BLOCK, 5]}, x, n_heads=2), TypeError,
     "params['layers'][1] must be a dict of arrays, got int"),
    (lambda: ma.encoder({"layers": [BLOCK, {}]}, x, n_heads=2), ValueError,
     "params['layers'][1] is missing key 'self_attention' (expected keys: 'self_attention', "
     "'self_attention_norm', 'feed_forward', 'feed_forward_norm')"),
    # the old, torch-style names (attention, norm1, norm2, norm3) are refused, naming the new key
    (lambda: ma.encoder_block(OLD_BLOCK, x, n_heads=2), ValueError,
     "params has key(s) 'attention', 'norm1', 'norm2', the old names of a block's params; they "
     "are now 'attention' -> 'self_attention'; 'norm1' -> 'self_attention_norm'; 'norm2' -> "
     "'feed_forward_norm (encoder) or cross_attention_norm (decoder)'"),
    (lambda: ma.decoder_block(OLD_DBLOCK, x, n_heads=2), ValueError,
     "params has key(s) 'norm1', 'norm3', the old names of a block's params; they are now "
     "'norm1' -> 'self_attention_norm'; 'norm3' -> 'feed_forward_norm'"),
    (lambda: ma.decoder_block({**DBLOCK, "cross_attention": MHA,
                               "norm2": DBLOCK["self_attention_norm"]}, x, memory=x, n_heads=2),
     ValueError,
     "params has key(s) 'norm2', the old names of a block's params; they are now 'norm2' -> "
     "'feed_forward_norm (encoder) or cross_attention_norm (decoder)'"),
    (lambda: ma.encoder_block({**BLOCK, "feed_forward": FF_D3}, x, n_heads=2), ValueError,
     "params['feed_forward']['w_1'] has shape (3, 8), expected (4, d_ff)"),
    (lambda: ma.encoder_block({**BLOCK, "feed_forward": {**BLOCK["feed_forward"], "b_2": None}},
                              x, n_heads=2), TypeError,
     "params['feed_forward']['b_2'] must be an array, got NoneType"),
    (lambda: ma.encoder({"blocks": [BLOCK]}, x, n_heads=2), ValueError,
     "params must be a dict with key 'layers' holding a list of block params"),
    (lambda: ma.encoder({"layers": [BLOCK], "final_norm": {"gamma": np.ones(3),
                                                            "beta": np.zeros(4)}}, x, n_heads=2),
     ValueError, "params['final_norm']['gamma'] has shape (3,), expected (4,)"),
    # masks
    (lambda: ma.causal_mask(True), TypeError, "n_q must be a non-negative int, got True"),
    (lambda: ma.causal_mask(3, -1), TypeError, "n_k must be a non-negative int, got -1"),
    (lambda: ma.padding_mask(np.array([1]), -1), TypeError, "n must be a non-negative int, got -1"),
    (lambda: ma.padding_mask(np.array([1.0]), 3), TypeError,
     "lengths must be an integer array, got float64"),
    (lambda: ma.padding_mask("ab", 3), TypeError, "lengths must be an integer array, got str"),
    (lambda: ma.padding_mask(np.array([[1]]), 3), ValueError,
     "lengths must have shape (B,), got shape (1, 1)"),
    # blockwise_attention: the same checks as scaled_dot_product_attention, and key_mask's
    (lambda: ma.blockwise_attention(q, q.astype(int), q), TypeError, _float_message("k")),
    (lambda: ma.blockwise_attention(q, q, q.astype(int)), TypeError, _float_message("v")),
    (lambda: ma.blockwise_attention(q, q[0, 0], q), ValueError,
     "k must have shape (..., L_k, d_k), got shape (4,)"),
    (lambda: ma.blockwise_attention(q, q, q[0, 0]), ValueError,
     "v must have shape (..., L_k, d_v), got shape (4,)"),
    (lambda: ma.blockwise_attention(q, q3, q), ValueError,
     "the leading (batch/head) dims of q, k, v do not broadcast: q (2,), k (3,), v (2,)"),
    (lambda: ma.blockwise_attention(q, q, q, key_mask=5), TypeError,
     "key_mask must be a boolean array (True = may be attended), got int"),
    (lambda: ma.blockwise_attention(q, q, q, key_mask=np.ones(3)), TypeError,
     "key_mask must be a boolean array (True = may be attended), got float64"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_error_message_names_the_argument_exactly(call, error, message):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message


@pytest.mark.parametrize("old, new", [("attention", "self_attention"),
                                      ("norm1", "self_attention_norm"),
                                      ("norm2", "feed_forward_norm"),
                                      ("norm3", "feed_forward_norm"),
                                      ("post_norm1", "post_self_attention_norm"),
                                      ("post_norm3", "post_feed_forward_norm")])
def test_a_leftover_old_block_key_is_refused_naming_its_new_name(old, new):
    # Params with every new key and one old one must not run with the old one ignored (a Gemma
    # sandwich norm left as post_norm1 would silently not be applied).
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 3, 8))
    encoder_params = ma.init_encoder_block(rng, 8, 2, 16)
    decoder_params = ma.init_decoder_block(rng, 8, 2, 16)
    for params, call in ((encoder_params, lambda p: ma.encoder_block(p, x, n_heads=2)),
                         (decoder_params, lambda p: ma.decoder_block(p, x, n_heads=2))):
        leftover = {**params, old: params["feed_forward_norm"]}
        with pytest.raises(ValueError, match=f"{old!r}.*{new}"):
            call(leftover)
