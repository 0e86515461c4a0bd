"""A catalogue of bad values thrown at every argument of every public function: each must raise
a ValueError or TypeError whose message names the argument, before computing, and leave the
caller's inputs unchanged. (The exact wording of the main messages is pinned in
test_error_messages.py; this file is about the breadth of the rule.)"""
import copy

import numpy as np
import pytest

import minattn as ma

torch = pytest.importorskip("torch")

rng0 = np.random.default_rng(0)
X = rng0.normal(size=(2, 3, 4))
MHA = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2)
Q4, KV2 = rng0.normal(size=(2, 4, 3, 4)), rng0.normal(size=(2, 2, 3, 4))  # 4 query, 2 kv heads
FF = ma.init_feed_forward(np.random.default_rng(0), 4, 8)
BLOCK = ma.init_encoder_block(np.random.default_rng(0), 4, 2, 8)
ENC = ma.init_encoder(np.random.default_rng(0), 1, 4, 2, 8)

NOT_ARRAYS = ["text", None, 3, 1.5, {"a": 1}, torch.ones(2, 3, 4)]
NOT_FLOAT = [X.astype(int), X.astype(complex), X.astype(object), X > 0, [[1, 2], [3, 4]]]
ARRAYS = NOT_ARRAYS + NOT_FLOAT + [np.float64(1.0), [[1.0, 2.0], [3.0]]]
MASKS = ["text", 3, np.ones((3, 3), int), np.ones((5, 5), bool), torch.ones(3, 3, dtype=torch.bool),
         np.tril(np.ones((3, 3))), np.ones((3, 3), complex)]
POSITIVE_REALS = ["1", 1j, np.nan, np.inf, -1.0, True, np.array([1.0, 2.0]), None]
SIZES = [0, -1, 2.5, "4", True, None, np.array(4.0)]
N_HEADS = [0, -1, 2.0, "2", True, None, 3]
DROPOUTS = [-0.1, 1.5, "0.1", np.nan, True, None]
RNGS = [42, "rng", np.random, object()]
ACTIVATIONS = ["tanh", None, 1, np.array(["relu"])]
DTYPES = [int, "int32", complex, "no such dtype", bool]

# function name -> (call taking keyword overrides, {argument: bad values})
SDPA = lambda **a: ma.scaled_dot_product_attention(
    a.get("q", X), a.get("k", X), a.get("v", X), a.get("mask"), scale=a.get("scale"),
    dropout=a.get("dropout", 0.0), rng=a.get("rng"))
CASES = {
    "softmax": (lambda **a: ma.softmax(a.get("x", X), axis=a.get("axis", -1), mask=a.get("mask")),
                {"x": ARRAYS, "axis": [3, -4, 1.0, "a", None], "mask": MASKS[:-2] + [np.ones((2, 3, 4))]}),
    "scaled_dot_product_attention": (SDPA, {
        "q": ARRAYS, "k": ARRAYS, "v": ARRAYS, "mask": MASKS, "scale": POSITIVE_REALS[:-1],
        "dropout": DROPOUTS}),
    "scaled_dot_product_attention rng": (
        lambda **a: SDPA(dropout=0.5, **a), {"rng": RNGS + [None]}),
    "split_heads": (lambda **a: ma.split_heads(a.get("x", X), a.get("n_heads", 2)),
                    {"x": ARRAYS, "n_heads": N_HEADS}),
    "merge_heads": (lambda **a: ma.merge_heads(a.get("x", X[None])), {"x": ARRAYS}),
    "multi_head_attention": (lambda **a: ma.multi_head_attention(
        a.get("params", MHA), a.get("query", X), a.get("key", X), a.get("value", X), a.get("mask"),
        n_heads=a.get("n_heads", 2), dropout=a.get("dropout", 0.0), rng=a.get("rng"),
        average_weights=False), {
        "params": [None, [], {"w_q": MHA["w_q"]}, {**MHA, "w_q": "text"}, {**MHA, "b_o": [1.0]},
                   {**MHA, "w_k": torch.ones(4, 4)}],
        "query": ARRAYS, "key": ARRAYS, "value": ARRAYS, "mask": MASKS + [np.ones((2, 3, 3), bool)],
        "n_heads": N_HEADS, "dropout": DROPOUTS}),
    "grouped_attention": (lambda **a: ma.grouped_attention(
        a.get("q", Q4), a.get("k", KV2), a.get("v", KV2), a.get("mask"),
        dropout=a.get("dropout", 0.0), rng=a.get("rng")), {
        "q": ARRAYS + [np.ones((2, 4, 3, 5))], "k": ARRAYS + [np.ones((2, 3, 3, 4)), np.ones((2, 2, 3, 5))],
        "v": ARRAYS + [np.ones((2, 2, 4, 4))], "mask": MASKS, "dropout": DROPOUTS}),
    "layer_norm": (lambda **a: ma.layer_norm(a.get("x", X), a.get("gamma", np.ones(4)),
                                             a.get("beta", np.zeros(4)), a.get("eps", 1e-5)),
                   {"x": ARRAYS, "gamma": ARRAYS + [np.ones(3)], "beta": ARRAYS + [np.ones(5)],
                    "eps": POSITIVE_REALS}),
    "rms_norm": (lambda **a: ma.rms_norm(a.get("x", X), a.get("gamma", np.ones(4)), a.get("eps", 1e-6)),
                 {"x": ARRAYS, "gamma": ARRAYS + [np.ones(3)], "eps": POSITIVE_REALS}),
    "feed_forward": (lambda **a: ma.feed_forward(
        a.get("params", FF), a.get("x", X), activation=a.get("activation", "relu"),
        dropout=a.get("dropout", 0.0), rng=a.get("rng")), {
        "params": [None, {}, {**FF, "w_2": FF["w_2"][:3]}, {**FF, "b_1": "text"}],
        "x": ARRAYS, "activation": ACTIVATIONS, "dropout": DROPOUTS}),
    "encoder_block": (lambda **a: ma.encoder_block(
        a.get("params", BLOCK), a.get("x", X), a.get("mask"), n_heads=a.get("n_heads", 2),
        activation=a.get("activation", "relu"), eps=a.get("eps", 1e-5),
        dropout=a.get("dropout", 0.0), rng=a.get("rng")), {
        "params": [None, {}, {**BLOCK, "self_attention_norm": None}, {**BLOCK, "self_attention": {}}],
        "x": ARRAYS, "mask": MASKS, "n_heads": N_HEADS, "activation": ACTIVATIONS,
        "eps": POSITIVE_REALS, "dropout": DROPOUTS}),
    "encoder": (lambda **a: ma.encoder(
        a.get("params", ENC), a.get("x", X), a.get("mask"), n_heads=a.get("n_heads", 2),
        eps=a.get("eps", 1e-5)), {
        "params": [None, {}, {"layers": None}, {"layers": [None]}, {**ENC, "final_norm": {}}],
        "x": ARRAYS, "mask": MASKS, "n_heads": N_HEADS, "eps": POSITIVE_REALS}),
    "blockwise_attention": (lambda **a: ma.blockwise_attention(
        a.get("q", X), a.get("k", X), a.get("v", X), key_mask=a.get("key_mask"),
        scale=a.get("scale"), block_size=a.get("block_size", 2)), {
        "q": ARRAYS, "k": ARRAYS, "v": ARRAYS, "scale": POSITIVE_REALS[:-1],
        "key_mask": ["text", np.ones(3, int), np.ones(5, bool), torch.ones(3, dtype=torch.bool)],
        "block_size": SIZES}),
    "causal_mask": (lambda **a: ma.causal_mask(a.get("n_q", 3), a.get("n_k", 3)),
                    {"n_q": [-1, 2.5, "3", True, None], "n_k": [-1, 2.5, "3", True]}),
    "padding_mask": (lambda **a: ma.padding_mask(a.get("lengths", np.array([1, 3])), a.get("n", 3)),
                     {"lengths": ["text", np.array([1.0, 2.0]), np.array([4]), np.array([-1]),
                                  np.ones((2, 2), int), torch.tensor([1, 2])],
                      "n": [-1, 2.5, "3", True, None]}),
    "positional_encoding": (lambda **a: ma.positional_encoding(a.get("n_positions", 3),
                                                               a.get("d_model", 4)),
                            {"n_positions": SIZES[1:], "d_model": SIZES}),  # 0: empty
    "init_multi_head_attention": (lambda **a: ma.init_multi_head_attention(
        a.get("rng", np.random.default_rng(0)), a.get("d_model", 4), a.get("n_heads", 2),
        dtype=a.get("dtype", np.float64)),
        {"rng": RNGS + [None], "d_model": SIZES, "n_heads": N_HEADS, "dtype": DTYPES}),
    "init_layer_norm": (lambda **a: ma.init_layer_norm(a.get("d_model", 4), dtype=a.get("dtype", float)),
                        {"d_model": SIZES, "dtype": DTYPES}),
    "init_feed_forward": (lambda **a: ma.init_feed_forward(
        a.get("rng", np.random.default_rng(0)), a.get("d_model", 4), a.get("d_ff", 8),
        dtype=a.get("dtype", np.float64)),
        {"rng": RNGS + [None], "d_model": SIZES, "d_ff": SIZES, "dtype": DTYPES}),
    "init_encoder_block": (lambda **a: ma.init_encoder_block(
        a.get("rng", np.random.default_rng(0)), a.get("d_model", 4), a.get("n_heads", 2),
        a.get("d_ff", 8), dtype=a.get("dtype", np.float64)),
        {"rng": RNGS + [None], "d_model": SIZES, "n_heads": N_HEADS, "d_ff": SIZES, "dtype": DTYPES}),
    "init_encoder": (lambda **a: ma.init_encoder(
        a.get("rng", np.random.default_rng(0)), a.get("n_layers", 1), 4, 2, 8,
        final_norm=a.get("final_norm", False)),
        {"rng": RNGS + [None], "n_layers": SIZES, "final_norm": [1, "yes", None]}),
}


# --- the decoder ---
TOKENS = np.array([[1, 2, 3], [4, 5, 6]])
GFF = ma.init_gated_feed_forward(np.random.default_rng(0), 4, 8)
DBLOCK = ma.init_decoder_block(np.random.default_rng(0), 4, 2, 8, cross_attention=True)
DEC = ma.init_decoder(np.random.default_rng(0), 1, 4, 2, 8)
LM, _ = ma.init_causal_lm(np.random.default_rng(0), 11, 1, 4, 2, 8, n_positions=8)
_, LM_CACHE = ma.causal_lm(LM, TOKENS, n_heads=2, return_cache=True)
# (an int list is converted, the README rule for lists: [0.5, 1, 2] is the bad list)
POSITIONS = ["text", np.arange(3.0), np.arange(4), np.zeros((3, 3), int), [0.5, 1, 2]]
TOKEN_VALUES = ["text", TOKENS.astype(float), np.array([1, 2]), np.array([[1, 11]]),
                np.array([[-1, 0]]), np.zeros((2, 0), int)]
CASES.update({
    "apply_rope": (lambda **a: ma.apply_rope(a.get("x", X), a.get("positions", np.arange(3)),
                                             base=a.get("base", 10000.0)),
                   {"x": ARRAYS + [X[..., :3]], "positions": POSITIONS,
                    "base": [0.0, -1.0, "1e4", True]}),
    "gated_feed_forward": (lambda **a: ma.gated_feed_forward(a.get("params", GFF), a.get("x", X)),
                           {"params": [None, {}, {**GFF, "w_up": GFF["w_up"][:3]}], "x": ARRAYS}),
    "init_gated_feed_forward": (lambda **a: ma.init_gated_feed_forward(
        a.get("rng", np.random.default_rng(0)), a.get("d_model", 4), a.get("d_ff", 8),
        dtype=a.get("dtype", np.float64)),
        {"rng": RNGS + [None], "d_model": SIZES, "d_ff": SIZES, "dtype": DTYPES}),
    "self_attention": (lambda **a: ma.self_attention(
        a.get("params", MHA), a.get("x", X), a.get("mask"), n_heads=a.get("n_heads", 2),
        n_kv_heads=a.get("n_kv_heads"), positions=a.get("positions"), cache=a.get("cache")), {
        "params": [None, {}, {**MHA, "w_k": MHA["w_k"][:, :2]}], "x": ARRAYS, "mask": MASKS,
        "n_heads": N_HEADS, "n_kv_heads": [3, 0, 1.0, True], "positions": POSITIONS,
        "cache": [{"k": np.zeros((2, 2, 1, 3))}, "text",
                  {"k": np.zeros((2, 2, 1, 3)), "v": np.zeros((2, 2, 1, 3))},
                  {"k": np.zeros((1, 2, 1, 2)), "v": np.zeros((1, 2, 1, 2))}]}),
    "init_decoder_block": (lambda **a: ma.init_decoder_block(
        a.get("rng", np.random.default_rng(0)), a.get("d_model", 4), a.get("n_heads", 2),
        a.get("d_ff", 8), n_kv_heads=a.get("n_kv_heads"), norm=a.get("norm", "layer_norm"),
        activation=a.get("activation", "relu")),
        {"rng": RNGS + [None], "d_model": SIZES, "n_heads": N_HEADS, "d_ff": SIZES,
         "n_kv_heads": [3, 0], "norm": ["batch_norm", None], "activation": ACTIVATIONS}),
    "decoder_block": (lambda **a: ma.decoder_block(
        a.get("params", DBLOCK), a.get("x", X), a.get("mask"), memory=a.get("memory", X),
        n_heads=a.get("n_heads", 2), norm=a.get("norm", "layer_norm"),
        activation=a.get("activation", "relu"), eps=a.get("eps", 1e-5)), {
        "params": [None, {}, {**DBLOCK, "feed_forward_norm": None}, {**DBLOCK, "cross_attention": {}}],
        "x": ARRAYS, "mask": MASKS, "memory": ARRAYS[:1] + ARRAYS[2:], "n_heads": N_HEADS,
        "norm": ["batch_norm", None], "activation": ACTIVATIONS, "eps": POSITIVE_REALS[:-1]}),
    "init_decoder": (lambda **a: ma.init_decoder(
        a.get("rng", np.random.default_rng(0)), a.get("n_layers", 1), 4, 2, 8),
        {"rng": RNGS + [None], "n_layers": SIZES}),
    "decoder": (lambda **a: ma.decoder(
        a.get("params", DEC), a.get("x", X), a.get("mask"), n_heads=a.get("n_heads", 2),
        cache=a.get("cache")), {
        "params": [None, {}, {"layers": None}, {"layers": [None]}], "x": ARRAYS, "mask": MASKS,
        "n_heads": N_HEADS, "cache": [(), "text", LM_CACHE * 2]}),
    "init_causal_lm": (lambda **a: ma.init_causal_lm(
        a.get("rng", np.random.default_rng(0)), a.get("vocab_size", 11), 1, 4, 2, 8,
        position=a.get("position", "learned"), n_positions=a.get("n_positions", 8)),
        {"rng": RNGS + [None], "vocab_size": SIZES, "position": ["sinusoidal", None],
         "n_positions": SIZES}),
    "causal_lm": (lambda **a: ma.causal_lm(
        a.get("params", LM), a.get("tokens", TOKENS), n_heads=a.get("n_heads", 2),
        cache=a.get("cache"), position=a.get("position", "learned")), {
        "params": [None, {}, {**LM, "token_embedding": "text"}, {**LM, "lm_head": np.ones((4, 3))}],
        "tokens": TOKEN_VALUES + [np.ones((2, 9), int)], "n_heads": N_HEADS,
        "cache": [(), "text", LM_CACHE * 2, tuple({**c, "k": c["k"][:1]} for c in LM_CACHE)],
        "position": ["sinusoidal", None]}),
    "generate": (lambda **a: ma.generate(
        a.get("params", LM), a.get("tokens", TOKENS), a.get("n_new", 2), n_heads=2,
        temperature=a.get("temperature", 0.0), top_k=a.get("top_k"), rng=a.get("rng")), {
        "tokens": TOKEN_VALUES, "n_new": [-1, 1.5, "2", True, None, 7],
        "temperature": [-1.0, "1", None, True], "top_k": [0, 1.5, "3", True]}),
    "linear_attention": (lambda **a: ma.linear_attention(
        a.get("q", X), a.get("k", X), a.get("v", X), chunk_size=a.get("chunk_size")), {
        "q": ARRAYS, "k": ARRAYS, "v": ARRAYS, "chunk_size": [0, -1, 2.5, "4", True]}),
    "delta_rule": (lambda **a: ma.delta_rule(
        a.get("q", X), a.get("k", X), a.get("v", X), a.get("beta", np.ones((2, 3))), a.get("g"),
        scale=a.get("scale"), initial_state=a.get("initial_state"),
        chunk_size=a.get("chunk_size"), return_state=a.get("return_state", False)), {
        "q": ARRAYS, "k": ARRAYS, "v": ARRAYS, "beta": ARRAYS + [np.ones((2, 4))],
        "g": ARRAYS[:1] + ARRAYS[2:] + [np.ones((2, 3)), np.zeros(4)],
        "scale": POSITIVE_REALS[:-1], "initial_state": ARRAYS[:1] + ARRAYS[2:] + [np.ones((3, 4))],
        "chunk_size": [0, -1, 2.5, "4", True], "return_state": [1, "yes", None]}),
    "l2_normalize": (lambda **a: ma.l2_normalize(a.get("x", X), a.get("eps", 1e-6)),
                     {"x": ARRAYS, "eps": POSITIVE_REALS}),
    "generate rng": (lambda **a: ma.generate(LM, TOKENS, 2, n_heads=2, temperature=1.0,
                                             rng=a.get("rng")), {"rng": [42, "rng", None]}),
    "cross_entropy": (lambda **a: ma.cross_entropy(
        a.get("logits", np.zeros((2, 3, 11))), a.get("targets", TOKENS)), {
        "logits": ["text", np.zeros((2, 3, 11), int), np.zeros((2, 4, 11)), np.zeros((2, 3, 0)),
                   np.zeros((2, 3, 5))],
        "targets": ["text", TOKENS.astype(float), TOKENS[:, :2], np.array([[1, 2, 11], [0, 0, 0]]),
                    np.array([[-1, 0, 0], [0, 0, 0]])]}),
})


def test_every_public_function_is_in_the_catalogue():
    covered = {name.split()[0] for name in CASES}
    assert set(ma.__all__) <= covered, sorted(set(ma.__all__) - covered)


def _params():
    for function, (call, arguments) in CASES.items():
        for argument, values in arguments.items():
            for i, value in enumerate(values):
                yield pytest.param(function, argument, i, id=f"{function}-{argument}-{i}")


def _snapshot(value):
    try:
        return copy.deepcopy(value)
    except Exception:  # modules and such: nothing to compare
        return None


@pytest.mark.parametrize("function, argument, index", list(_params()))
def test_bad_value_raises_an_error_naming_the_argument(function, argument, index):
    call, arguments = CASES[function]
    value = arguments[argument][index]
    before, originals = _snapshot(value), [_snapshot(a) for a in (X, MHA, FF, BLOCK, ENC)]
    with pytest.raises((ValueError, TypeError)) as error:
        call(**{argument: value})
    assert argument in str(error.value), f"{type(error.value).__name__}: {error.value}"
    assert type(error.value).__module__ == "builtins" and not isinstance(
        error.value, np.exceptions.AxisError)
    for now, then in zip((X, MHA, FF, BLOCK, ENC), originals):  # the module's inputs untouched
        assert _same(now, then)
    if before is not None and not isinstance(value, torch.Tensor):
        assert _same(value, before)


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (
            a.dtype == object or np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    return True


def test_lists_are_accepted_everywhere_an_array_is():
    # The one rule for Python lists: converted with np.array, for data, masks and params alike.
    as_lists = lambda tree: {k: as_lists(v) for k, v in tree.items()} if isinstance(tree, dict) \
        else tree.tolist()
    mask = ma.causal_mask(3)
    np.testing.assert_array_equal(ma.softmax(X.tolist()), ma.softmax(X))
    np.testing.assert_array_equal(ma.split_heads(X.tolist(), 2), ma.split_heads(X, 2))
    np.testing.assert_array_equal(ma.merge_heads(X[None].tolist()), ma.merge_heads(X[None]))
    np.testing.assert_array_equal(
        ma.multi_head_attention(as_lists(MHA), X.tolist(), X.tolist(), X.tolist(), mask.tolist(),
                                n_heads=2)[0],
        ma.multi_head_attention(MHA, X, X, X, mask, n_heads=2)[0])
    block_lists = {k: as_lists(v) for k, v in BLOCK.items()}
    np.testing.assert_array_equal(ma.encoder_block(block_lists, X.tolist(), mask.tolist(), n_heads=2),
                                  ma.encoder_block(BLOCK, X, mask, n_heads=2))
    np.testing.assert_array_equal(ma.feed_forward(as_lists(FF), X.tolist()), ma.feed_forward(FF, X))
    np.testing.assert_array_equal(ma.layer_norm(X.tolist(), [1.0] * 4, [0.0] * 4),
                                  ma.layer_norm(X, np.ones(4), np.zeros(4)))
    np.testing.assert_array_equal(ma.padding_mask([1, 3], 3), ma.padding_mask(np.array([1, 3]), 3))
    np.testing.assert_array_equal(ma.blockwise_attention(X.tolist(), X, X, key_mask=[True] * 3),
                                  ma.blockwise_attention(X, X, X))


def test_a_torch_tensor_gets_advice_not_a_dtype_error():
    with pytest.raises(TypeError, match=r"x is a torch tensor.*x\.detach\(\)\.cpu\(\)\.numpy\(\)"):
        ma.softmax(torch.ones(2, 3))


def test_a_float_zero_one_mask_is_refused_with_advice():
    keep = np.tril(np.ones((3, 3)))  # a common habit: 1 = keep
    with pytest.raises(ValueError, match=r"only 0s and 1s.*mask\.astype\(bool\)"):
        ma.scaled_dot_product_attention(X, X, X, keep)
    # an additive float mask (0 and -inf), or all zeros, is still added
    additive = np.where(keep > 0, 0.0, -np.inf)
    np.testing.assert_array_equal(ma.scaled_dot_product_attention(X, X, X, additive)[0],
                                  ma.scaled_dot_product_attention(X, X, X, keep > 0)[0])
    np.testing.assert_array_equal(ma.scaled_dot_product_attention(X, X, X, np.zeros((3, 3)))[0],
                                  ma.scaled_dot_product_attention(X, X, X)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_init_dtype_gives_params_of_that_dtype(dtype):
    for params in (ma.init_encoder(np.random.default_rng(0), 2, 4, 2, 8, final_norm=True, dtype=dtype),
                   ma.init_multi_head_attention(np.random.default_rng(0), 4, 2, dtype=dtype)):
        leaves = []
        from .strategies import tree_map
        tree_map(leaves.append, params)
        assert {leaf.dtype for leaf in leaves} == {np.dtype(dtype)}
    # the same draws, rounded: a float32 model is the float64 model in float32
    p64 = ma.init_feed_forward(np.random.default_rng(1), 4, 8)
    p32 = ma.init_feed_forward(np.random.default_rng(1), 4, 8, dtype=dtype)
    np.testing.assert_array_equal(p32["w_1"], p64["w_1"].astype(dtype))
