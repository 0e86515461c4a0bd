"""The decoder side's argument checks (minattn/engine/decoder_checks.py), continued from test_decoder_errors.py: one row per bad
argument with the WHOLE message a user reads, and beside each refusal the nearest call that is
valid and must run (an unbatched x, a 2-D memory, a model with no layers, a cache of empty
dicts, left padding). Then the dtype rule for the auxiliary numbers and params the checks take
in: float32 in, float32 out, whatever the dtype of a 0-d scalar or a norm's gamma."""
import re

import numpy as np
import pytest

import minattn as ma
from minattn.engine.decoder_checks import check_attention_params

rng = np.random.default_rng(0)
D, H = 8, 2  # d_k = 4
BLOCK = ma.init_decoder_block(np.random.default_rng(0), D, H, 16)
XBLOCK = ma.init_decoder_block(np.random.default_rng(1), D, H, 16, cross_attention=True)
SA = BLOCK["self_attention"]
x = rng.normal(size=(2, 3, D))  # [B, L, D]
memory = rng.normal(size=(2, 5, D))  # [B, L_m, D]
LM, LC = ma.init_causal_lm(np.random.default_rng(2), 11, 1, D, H, 16)  # GPT-2 style, 1024 pos.
T = np.array([[1, 2, 3], [4, 5, 6]])  # [B, L]
CACHE_WORDS = "cache must be a dict {'k': ..., 'v': ...} of arrays [..., H_kv, L_past, d_k], got "


def _mha_only(params, x, mask=None, *, n_heads, cache=None, **unused):
    # An attention variant without grouped-query heads: it never reads n_kv_heads.
    return ma.self_attention(params, x, mask, n_heads=n_heads, cache=cache)


def _layer(**changes):  # LM with its one layer changed (a key None: removed)
    layer = {**LM["layers"][0], **changes}
    return {**LM, "layers": [{k: v for k, v in layer.items() if v is not None}]}


def _attention(**changes):  # LM with its layer's self-attention params changed
    return _layer(self_attention={**LM["layers"][0]["self_attention"], **changes})


def _unbatched_cache(past):  # one layer's cache for an unbatched x [L, D]: [H_kv, L_past, d_k]
    return {"k": rng.normal(size=(H, past, D // H)), "v": rng.normal(size=(H, past, D // H))}


ROWS = [
    # self_attention: the scores an unbatched x [L, D] with a cache [H, L_past, d_k] gives are
    # (H, L, L_past + L), L_past read from the cache's key axis (-2), not its width.
    ("unbatched cache, mask misses the past",
     lambda: ma.self_attention(SA, x[0], np.ones((3, 3), bool), n_heads=H,
                               cache=_unbatched_cache(5)), ValueError,
     "mask of shape (3, 3) does not broadcast to the per-head scores (..., H, L, L_past + L) "
     "of shape (2, 3, 8)"),
    ("cache of an int", lambda: ma.self_attention(SA, x, n_heads=H, cache=5), TypeError,
     CACHE_WORDS + "int"),
    ("cache without 'k'",
     lambda: ma.self_attention(SA, x, n_heads=H, cache={"v": np.ones((2, H, 1, 4))}), TypeError,
     CACHE_WORDS + "a dict with keys ['v']"),
    # check_attention_params names the params by `where`, from its first check on
    ("attention params a list",
     lambda: check_attention_params([SA["w_q"]], D, H, H, 4, "params['layers'][0]"), TypeError,
     "params['layers'][0] must be a dict of arrays, got list"),
    ("attention params, one QK-norm", lambda: check_attention_params(
        {**SA, "q_norm": {"gamma": np.ones(4)}}, D, H, H, 4, "params['layers'][0]"), ValueError,
     "params['layers'][0] has only one of 'q_norm' and 'k_norm' (QK-norm needs both)"),
    # decoder_block checks n_kv_heads itself, whatever attention variant plugs in
    ("block n_kv_heads 3 of 2",
     lambda: ma.decoder_block(BLOCK, x, n_heads=H, n_kv_heads=3, attention=_mha_only),
     ValueError, "n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of "
                 "n_heads // n_kv_heads query heads)"),
    ("memory 1-D", lambda: ma.decoder_block(XBLOCK, x, memory=memory[0, 0], n_heads=H),
     ValueError, "memory must have shape (..., L_m, d_model), got shape (8,)"),
    ("memory batch 3, x batch 2",
     lambda: ma.decoder_block(XBLOCK, x, memory=np.ones((3, 5, D)), n_heads=H), ValueError,
     "the batch dims of x and memory do not broadcast: x (2,), memory (3,)"),
    ("memory_mask shape",
     lambda: ma.decoder_block(XBLOCK, x, memory=memory, memory_mask=np.ones((3, 4), bool),
                              n_heads=H), ValueError,
     "memory_mask of shape (3, 4) does not broadcast to the cross-attention scores "
     "(..., H, L, L_m) of shape (2, 2, 3, 5)"),
    ("memory_mask without memory",
     lambda: ma.decoder_block(BLOCK, x, memory_mask=np.ones((3, 5), bool), n_heads=H),
     ValueError, "memory_mask is given without memory (it masks the cross-attention to the "
                 "memory): pass memory, or leave memory_mask None"),
    # causal_lm
    ("lm n_kv_heads 3 of 2", lambda: ma.causal_lm(LM, T, **{**LC, "n_kv_heads": 3}), ValueError,
     "n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of n_heads // n_kv_heads "
     "query heads)"),
    ("position_embedding 1-D",
     lambda: ma.causal_lm({**LM, "position_embedding": np.ones(1024)}, T, **LC), ValueError,
     "params['position_embedding'] has shape (1024,), expected (n_positions, 8)"),
    ("position_embedding width 1",  # it would broadcast over the embedding's width
     lambda: ma.causal_lm({**LM, "position_embedding": np.ones((1024, 1))}, T, **LC), ValueError,
     "params['position_embedding'] has shape (1024, 1), expected (n_positions, 8)"),
    ("layer without feed_forward", lambda: ma.causal_lm(_layer(feed_forward=None), T, **LC),
     ValueError, "params is missing key 'feed_forward' (expected keys: 'self_attention', "
                 "'self_attention_norm', 'feed_forward', 'feed_forward_norm')"),
    ("layer without self_attention", lambda: ma.causal_lm(_layer(self_attention=None), T, **LC),
     ValueError, "params is missing key 'self_attention' (expected keys: 'self_attention', "
                 "'self_attention_norm', 'feed_forward', 'feed_forward_norm')"),
    ("w_q 3-D", lambda: ma.causal_lm(_attention(w_q=np.ones((D, 1, D))), T, **LC), ValueError,
     "params['w_q'] has shape (8, 1, 8), expected (8, 8)"),
    ("w_k 3-D", lambda: ma.causal_lm(_attention(w_k=np.ones((D, 1, D))), T, **LC), ValueError,
     "params['w_k'] has shape (8, 1, 8), expected (8, 8)"),
    # generate
    ("greedy with top_k", lambda: ma.generate(LM, T, 1, top_k=5, **LC), ValueError,
     "top_k=5 and top_p=None restrict sampling, and temperature=0 does not sample (greedy): "
     "pass temperature > 0 to use them (transformers warns and ignores them)"),
    ("right padding after left padding",
     lambda: ma.generate(LM, T, 1, np.array([[1, 1, 1], [0, 1, 0]]), **LC), ValueError,
     "attention_mask has padding on the right (a 0 after a 1) in rows [1]; generate continues "
     "each row from its last position, so pad on the left"),
]


@pytest.mark.parametrize("call, error, message", [row[1:] for row in ROWS],
                         ids=[row[0] for row in ROWS])
def test_whole_message(call, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()


def _embeddings_only(params, tokens):
    # A model with no layers: the embeddings, the final LayerNorm, the tied unembedding.
    h = params["token_embedding"][tokens] + params["position_embedding"][:tokens.shape[1]]
    mean = h.mean(-1, keepdims=True)
    var = ((h - mean) ** 2).mean(-1, keepdims=True)
    h = (h - mean) / np.sqrt(var + 1e-5) * params["final_norm"]["gamma"] \
        + params["final_norm"]["beta"]
    return h @ params["token_embedding"].T


def test_boundaries_that_must_run():
    # the valid neighbours of the refusals above
    past = _unbatched_cache(5)
    out, new = ma.self_attention(SA, x[0], np.ones((3, 8), bool), n_heads=H, cache=past)
    assert out.shape == (3, D) and new["k"].shape == (H, 8, 4)
    assert ma.decoder_block(XBLOCK, x[0], memory=memory[0], n_heads=H).shape == (3, D)
    assert ma.decoder_block(BLOCK, x, n_heads=H, n_kv_heads=1, attention=_mha_only).shape == \
        x.shape
    # a model with no layers, with and without a cache (then an empty tuple)
    bare = {**LM, "layers": []}
    np.testing.assert_allclose(ma.causal_lm(bare, T, **LC), _embeddings_only(LM, T),
                               rtol=1e-12, atol=1e-12)
    logits, cache = ma.causal_lm(bare, T, cache=(), **LC)
    np.testing.assert_allclose(logits, _embeddings_only(LM, T), rtol=1e-12, atol=1e-12)
    assert cache == ()
    # a cache of empty dicts holds no past: positions from 0, attention_mask [B, L]
    mask = np.array([[1, 1, 1], [0, 1, 1]])
    logits, cache = ma.causal_lm(LM, T, mask, cache=({},), **LC)
    np.testing.assert_array_equal(logits, ma.causal_lm(LM, T, mask, **LC))
    assert cache[0]["k"].shape == (2, H, 3, 4)
    # left padding after a padded first position is no right padding
    assert ma.generate(LM, T, 1, np.array([[1, 1, 1], [0, 0, 1]]), **LC).shape == (2, 4)


def _float32(tree):
    if isinstance(tree, dict):
        return {k: _float32(v) for k, v in tree.items()}
    return tree.astype(np.float32)


def test_auxiliary_numbers_and_params_keep_float32():
    # A 0-d float64 scalar, or float64 params where the checks take them in, never make a
    # float32 input's result float64 (NumPy 2 promotes float32 * a 0-d float64 array).
    x32 = x.astype(np.float32)
    sa32 = _float32(SA)
    for keyword in ("query_pre_attn_scalar", "attn_logit_softcapping"):
        out = ma.self_attention(sa32, x32, n_heads=H, **{keyword: np.array(4.0)})[0]
        assert out.dtype == np.float32, keyword
    qk64 = {**sa32, "q_norm": {"gamma": np.ones(4)}, "k_norm": {"gamma": np.ones(4)}}
    assert ma.self_attention(qk64, x32, n_heads=H)[0].dtype == np.float32
    geglu = ma.init_decoder_block(np.random.default_rng(3), D, H, 16, activation="geglu_tanh")
    geglu = {**_float32(geglu), "feed_forward": geglu["feed_forward"]}  # float64 feed-forward
    assert ma.decoder_block(geglu, x32, n_heads=H, activation="geglu_tanh").dtype == np.float32
    lm32 = _float32({k: v for k, v in LM.items() if k != "layers"})
    lm32["layers"] = [_float32(layer) for layer in LM["layers"]]
    for keyword in ("embedding_scale", "final_logit_softcapping"):
        logits = ma.causal_lm(lm32, T, **LC, **{keyword: np.array(2.0)})
        assert logits.dtype == np.float32, keyword


def test_tables_given_as_nested_lists_are_taken_as_arrays():
    # The array rule (lists become arrays) holds for the model's own tables too: the embeddings
    # as nested lists give the same logits and the same generated tokens as the arrays.
    as_lists = {**LM, "token_embedding": LM["token_embedding"].tolist(),
                "position_embedding": LM["position_embedding"].tolist()}
    np.testing.assert_array_equal(ma.causal_lm(as_lists, T, **LC), ma.causal_lm(LM, T, **LC))
    np.testing.assert_array_equal(ma.generate(as_lists, T, 2, **LC), ma.generate(LM, T, 2, **LC))


def test_a_position_table_that_is_not_an_array_is_refused_by_name_in_generate():
    with pytest.raises(TypeError, match=r"^params\['position_embedding'\] must be an array, got str$"):
        ma.generate({**LM, "position_embedding": "abc"}, T, 2, **LC)


@pytest.mark.parametrize("rope_base", [-1.0, 0.0, float("nan"), "10000"])
def test_a_bad_rope_base_is_refused_by_its_keyword(rope_base):
    # by self_attention's own check (apply_rope inside would name its argument "base")
    with pytest.raises((ValueError, TypeError), match=r"^rope_base must be a positive float"):
        ma.self_attention(SA, x, n_heads=H, positions=np.arange(3), rope_base=rope_base)


def test_arrays_read_before_the_block_checks_are_named_where_they_are():
    with pytest.raises(TypeError, match=r"^params\['layers'\]\[0\]\['self_attention'\]\['w_q'\] "
                                        r"must be an array, got str$"):
        ma.causal_lm(_attention(w_q="abc"), T, **LC)
    with pytest.raises(TypeError, match=r"^cache\['k'\] must be an array, got str$"):
        ma.self_attention(SA, x, n_heads=H, cache={"k": "abc", "v": np.zeros((2, 2, 1, 4))})


def test_generate_counts_no_positions_in_a_0d_position_table():
    with pytest.raises(ValueError, match=r"^n_new=2 after 3 tokens needs 4 positions, but "
                                         r"params\['position_embedding'\] has 0$"):
        ma.generate({**LM, "position_embedding": np.float64(1.0) * np.ones(())}, T, 2, **LC)


def test_cross_attention_sinks_are_checked_against_n_heads_before_computing():
    block = {**XBLOCK, "cross_attention": {**XBLOCK["cross_attention"], "sinks": np.zeros(3)}}
    with pytest.raises(ValueError, match=r"^params\['cross_attention'\]\['sinks'\] has shape "
                                         r"\(3,\), expected \(2,\)$"):
        ma.decoder_block(block, x, memory=memory, n_heads=H)


def test_cross_attention_params_are_taken_in_the_dtype_of_x_and_memory():
    # float32 x, float64 memory: the cross-attention computes in float64 with the float64
    # weights as given (not rounded through x's float32 first), as multi_head_attention alone;
    # the block's other params are taken in x's dtype (checks.in_dtype).
    x32 = x.astype(np.float32)
    got = ma.decoder_block(XBLOCK, x32, memory=memory, n_heads=H)
    h = ma.layer_norm(x32 + ma.self_attention(XBLOCK["self_attention"], x32, n_heads=H)[0],
                      XBLOCK["self_attention_norm"]["gamma"].astype(np.float32),
                      XBLOCK["self_attention_norm"]["beta"].astype(np.float32))
    cross = ma.multi_head_attention(XBLOCK["cross_attention"], h, memory, memory, n_heads=H)[0]
    assert cross.dtype == np.float64 and got.dtype == np.float64
    h = ma.layer_norm(h + cross, XBLOCK["cross_attention_norm"]["gamma"],
                      XBLOCK["cross_attention_norm"]["beta"])
    ff32 = {name: w.astype(np.float32) for name, w in XBLOCK["feed_forward"].items()}  # x's
    want = ma.layer_norm(h + ma.feed_forward(ff32, h, activation="relu"),
                         XBLOCK["feed_forward_norm"]["gamma"], XBLOCK["feed_forward_norm"]["beta"])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_the_checked_gated_activations_are_the_blocks_gated_feed_forwards():
    # The names are checked in engine/decoder_checks.py, the functions live in the block's module.
    from minattn.engine import decoder_checks
    from minattn import transformer_decoder
    assert tuple(transformer_decoder.GATED) == decoder_checks.GATED
