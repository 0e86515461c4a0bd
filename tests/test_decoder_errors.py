"""Every argument check of the decoder side (minattn/engine/decoder_checks.py), with its whole message: a catalogue of bad calls to
self_attention, decoder_block, decoder, the initialisers, causal_lm and generate. Each message
names the argument that is wrong, the layout it should have and what it got."""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
GPT, GC = ma.init_causal_lm(np.random.default_rng(0), 11, 2, 8, 2, 16, n_positions=8)
LL, LC = ma.init_causal_lm(np.random.default_rng(0), 11, 2, 8, 4, 16, position="rope",
                           norm="rms_norm", activation="swiglu", bias=False, tied=False,
                           n_kv_heads=2)
MHA = ma.init_multi_head_attention(np.random.default_rng(0), 8, 2)  # d_k = 4
BLOCK = ma.init_decoder_block(np.random.default_rng(0), 8, 2, 16)
ODD = ma.init_decoder_block(np.random.default_rng(0), 6, 2, 8)["self_attention"]  # d_k = 3
MHA4 = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2)
FF4 = ma.init_feed_forward(np.random.default_rng(0), 4, 16)
x = rng.normal(size=(2, 3, 8))
T = np.array([[1, 2, 3]])
CACHE = ma.causal_lm(GPT, T, return_cache=True, **GC)[1]  # 3 positions of 8


def _without(params, key):
    return {k: v for k, v in params.items() if k != key}


def _kv(k_shape, v_shape=None):
    return {"k": np.ones(k_shape), "v": np.ones(v_shape or k_shape)}


CASES = [
    # sa odd d_k rope
    (lambda: ma.self_attention(ODD, np.ones((1, 3, 6)), n_heads=2,
                               positions=np.arange(3)), ValueError,
     'RoPE (positions given) needs an even head width d_k, got d_k=3 (d_model=6, n_heads=2)'),
    # sa x 1d
    (lambda: ma.self_attention(MHA, np.ones(8), n_heads=2), ValueError,
     'x must have shape (..., L, d_model), got shape (8,)'),
    # sa x int
    (lambda: ma.self_attention(MHA, np.ones((3, 8), int), n_heads=2), TypeError,
     'x must be a floating-point array, got dtype int64 (convert it with x.astype(np.float32) '
     'or np.float64)'),
    # sa positions float
    (lambda: ma.self_attention(MHA, x, n_heads=2, positions=np.arange(3.0)), TypeError,
     'positions must be an integer array, got dtype float64'),
    # sa positions shape
    (lambda: ma.self_attention(MHA, x, n_heads=2, positions=np.arange(4)), ValueError,
     "positions of shape (4,) must broadcast to x's (..., L) = (2, 3)"),
    # sa mask shape
    (lambda: ma.self_attention(MHA, x, np.ones((4, 4), bool), n_heads=2), ValueError,
     'mask of shape (4, 4) does not broadcast to the per-head scores (..., H, L, L_past + L) '
     'of shape (2, 2, 3, 3)'),
    # sa mask with a cache: the keys are L_past + L
    (lambda: ma.self_attention(MHA, x, np.ones((3, 3), bool), n_heads=2,
                               cache=_kv((2, 2, 2, 4))), ValueError,
     'mask of shape (3, 3) does not broadcast to the per-head scores (..., H, L, L_past + L) '
     'of shape (2, 2, 3, 5)'),
    # sa mask head axis
    (lambda: ma.self_attention(MHA, x, np.ones((2, 3, 3), bool), n_heads=2), ValueError,
     'mask of shape (2, 3, 3) is ambiguous for the per-head scores of shape (2, 2, 3, 3): give'
     ' (L_q, L_k), or a per-batch mask with its head axis, (B, 1, L_q, L_k) (e.g. mask[:, '
     'None]), or a per-head mask or bias with its batch axis, (1, H, L_q, L_k) (e.g. '
     'mask[None])'),
    # sa bad rope_scaling
    (lambda: ma.self_attention(MHA, x, n_heads=2, positions=np.arange(3),
                               rope_scaling="linear"), ValueError,
     "rope_scaling must be None or a dict with 'rope_type' one of 'linear', 'dynamic', 'yarn',"
     " 'llama3', 'longrope', got 'str'"),
    # sa only q_norm
    (lambda: ma.self_attention({**MHA, "q_norm": {"gamma": np.ones(4)}}, x, n_heads=2), ValueError,
     "params has only one of 'q_norm' and 'k_norm' (QK-norm needs both)"),
    # sa q_norm shape
    (lambda: ma.self_attention({**MHA, "q_norm": {"gamma": np.ones(3)},
                               "k_norm": {"gamma": np.ones(4)}}, x, n_heads=2), ValueError,
     "params['q_norm']['gamma'] has shape (3,), expected (4,)"),
    # sa k_norm shape
    (lambda: ma.self_attention({**MHA, "q_norm": {"gamma": np.ones(4)},
                               "k_norm": {"gamma": np.ones(3)}}, x, n_heads=2), ValueError,
     "params['k_norm']['gamma'] has shape (3,), expected (4,)"),
    # sa sinks shape
    (lambda: ma.self_attention({**MHA, "sinks": np.ones(3)}, x, n_heads=2), ValueError,
     "params['sinks'] has shape (3,), expected (2,)"),
    # sa sinks+scalar
    (lambda: ma.self_attention({**MHA, "sinks": np.ones(2)}, x, n_heads=2,
                               query_pre_attn_scalar=4), ValueError,
     "attention sinks (params['sinks']) with query_pre_attn_scalar or attn_logit_softcapping "
     'are not supported'),
    # sa sinks+cap
    (lambda: ma.self_attention({**MHA, "sinks": np.ones(2)}, x, n_heads=2,
                               attn_logit_softcapping=50.0), ValueError,
     "attention sinks (params['sinks']) with query_pre_attn_scalar or attn_logit_softcapping "
     'are not supported'),
    # sa b_o shape
    (lambda: ma.self_attention({**MHA, "b_o": np.ones(3)}, x, n_heads=2), ValueError,
     "params['b_o'] has shape (3,), expected (8,)"),
    # sa d_k 0
    (lambda: ma.self_attention(MHA, x, n_heads=2, d_k=0), ValueError,
     'd_k must be a positive int, got 0'),
    # sa n_heads 3 d_k
    (lambda: ma.self_attention(MHA, x, n_heads=0, d_k=4), ValueError,
     'n_heads must be a positive int, got 0'),
    # sa n_heads 3
    (lambda: ma.self_attention(MHA, x, n_heads=3), ValueError,
     'd_model=8 is not divisible by n_heads=3'),
    # sa n_kv 3
    (lambda: ma.self_attention(MHA, x, n_heads=2, n_kv_heads=3), ValueError,
     'n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of n_heads // n_kv_heads'
     ' query heads)'),
    # sa cache list
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache=[1]), TypeError,
     "cache must be a dict {'k': ..., 'v': ...} of arrays [..., H_kv, L_past, d_k], got list"),
    # sa cache no v
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache={"k": np.ones((2, 2, 1, 4))}), TypeError,
     "cache must be a dict {'k': ..., 'v': ...} of arrays [..., H_kv, L_past, d_k], got a dict "
     "with keys ['k']"),
    # sa cache shape
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache=_kv((2, 2, 1, 5))), ValueError,
     "cache['k'] has shape (2, 2, 1, 5), expected (2, 2, 'L_past', 4): a cache from another "
     'model or batch?'),
    # sa cache v shape
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache=_kv((2, 2, 1, 4), (2, 3, 1, 4))),
     ValueError,
     "cache['v'] has shape (2, 3, 1, 4), expected (2, 2, 'L_past', 4): a cache from another "
     'model or batch?'),
    # sa cache ndim
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache=_kv((2, 1, 4))), ValueError,
     "cache['k'] has shape (2, 1, 4), expected (2, 2, 'L_past', 4): a cache from another model"
     ' or batch?'),
    # sa cache list k (a list is taken as an array, as everywhere)
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache={"k": [1.0], "v": np.ones((2, 2, 1, 4))}),
     ValueError,
     "cache['k'] has shape (1,), expected (2, 2, 'L_past', 4): a cache from another model or "
     'batch?'),
    # sa cache kv differ
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache=_kv((2, 2, 1, 4), (2, 2, 2, 4))),
     ValueError,
     "cache['k'] and cache['v'] differ in shape: (2, 2, 1, 4) vs (2, 2, 2, 4)"),
    # sa cache batch
    (lambda: ma.self_attention(MHA, x, n_heads=2, cache=_kv((3, 2, 1, 4))), ValueError,
     "cache['k'] has shape (3, 2, 1, 4), expected (2, 2, 'L_past', 4): a cache from another "
     'model or batch?'),
    # db x 1d
    (lambda: ma.decoder_block(BLOCK, np.ones(8), n_heads=2), ValueError,
     'x must have shape (..., L, d_model), got shape (8,)'),
    # db x int
    (lambda: ma.decoder_block(BLOCK, np.ones((3, 8), int), n_heads=2), TypeError,
     'x must be a floating-point array, got dtype int64 (convert it with x.astype(np.float32) '
     'or np.float64)'),
    # db eps
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, eps=-1.0), ValueError,
     'eps must be a non-negative, finite float, got -1.0'),
    # db n_heads
    (lambda: ma.decoder_block(BLOCK, x, n_heads=0), ValueError,
     'n_heads must be a positive int, got 0'),
    # db norm
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, norm="batch_norm"), ValueError,
     "norm must be one of 'layer_norm', 'rms_norm'; got 'batch_norm'"),
    # db activation
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, activation="tanh"), ValueError,
     "activation must be one of 'relu', 'gelu', 'gelu_tanh', 'swiglu', 'geglu_tanh'; got "
     "'tanh'"),
    # db n_kv
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, n_kv_heads=3), ValueError,
     'n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of n_heads // n_kv_heads'
     ' query heads)'),
    # db memory int
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, memory=np.ones((3, 8), int)), TypeError,
     'memory must be a floating-point array, got dtype int64 (convert it with '
     'memory.astype(np.float32) or np.float64)'),
    # db memory 1d
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, memory=np.ones(8)), ValueError,
     'memory must have shape (..., L_m, d_model), got shape (8,)'),
    # db missing cross
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, memory=x), ValueError,
     "params is missing key 'cross_attention' (expected keys: 'self_attention', "
     "'self_attention_norm', 'feed_forward', 'feed_forward_norm', 'cross_attention', "
     "'cross_attention_norm')"),
    # db missing ff
    (lambda: ma.decoder_block(_without(BLOCK, "feed_forward"), x, n_heads=2), ValueError,
     "params is missing key 'feed_forward' (expected keys: 'self_attention', "
     "'self_attention_norm', 'feed_forward', 'feed_forward_norm')"),
    # db params list
    (lambda: ma.decoder_block([1], x, n_heads=2), TypeError,
     'params must be a dict of arrays, got list'),
    # db ff shape
    (lambda: ma.decoder_block({**BLOCK, "feed_forward": FF4}, x, n_heads=2), ValueError,
     "params['feed_forward']['w_1'] has shape (4, 16), expected (8, d_ff)"),
    # db gated ff
    (lambda: ma.decoder_block(BLOCK, x, n_heads=2, activation="swiglu"), ValueError,
     "params['feed_forward'] is missing key 'w_gate' (expected keys: 'w_gate')"),
    # db norm shape
    (lambda: ma.decoder_block({**BLOCK, "feed_forward_norm": {"gamma": np.ones(8)}}, x, n_heads=2),
     ValueError,
     "params['feed_forward_norm'] is missing key 'beta' (expected keys: 'gamma', 'beta')"),
    # db post norm shape
    (lambda: ma.decoder_block({**BLOCK, "post_feed_forward_norm": {
        "gamma": np.ones(4), "beta": np.ones(8)}}, x, n_heads=2, norm_first=True), ValueError,
     "params['post_feed_forward_norm']['gamma'] has shape (4,), expected (8,)"),
    # db post sa norm shape
    (lambda: ma.decoder_block({**BLOCK, "post_self_attention_norm": {
        "gamma": np.ones(4), "beta": np.ones(8)}}, x, n_heads=2, norm_first=True), ValueError,
     "params['post_self_attention_norm']['gamma'] has shape (4,), expected (8,)"),
    # db cross shape
    (lambda: ma.decoder_block({**BLOCK, "cross_attention": MHA4,
                                "cross_attention_norm": BLOCK["feed_forward_norm"]}, x, memory=x,
                               n_heads=2), ValueError,
     "params['cross_attention']['w_q'] has shape (4, 4), expected (8, 8)"),
    # db cross norm shape
    (lambda: ma.decoder_block({**BLOCK, "cross_attention": MHA, "cross_attention_norm": {
        "gamma": np.ones(4), "beta": np.ones(8)}}, x, memory=x, n_heads=2), ValueError,
     "params['cross_attention_norm']['gamma'] has shape (4,), expected (8,)"),
    # dec params
    (lambda: ma.decoder([1], x, n_heads=2), ValueError,
     "params must be a dict with key 'layers' holding a list of block params"),
    # dec layers not list
    (lambda: ma.decoder({"layers": BLOCK}, x, n_heads=2), ValueError,
     "params must be a dict with key 'layers' holding a list of block params"),
    # dec mask list
    (lambda: ma.decoder({"layers": [BLOCK, BLOCK]}, x, [None], n_heads=2), ValueError,
     'mask is a list of 1 (one per layer), but params has 2 layers'),
    # dec config list
    (lambda: ma.decoder({"layers": [BLOCK, BLOCK]}, x, n_heads=[2, 2, 2]), ValueError,
     'n_heads is a list of 3 (one per layer), but params has 2 layers'),
    # dec cache len
    (lambda: ma.decoder({"layers": [BLOCK, BLOCK]}, x, n_heads=2, cache=({},)), ValueError,
     "cache must be a tuple with one {'k', 'v'} dict per layer (2 layers), got 1"),
    # dec cache type
    (lambda: ma.decoder({"layers": [BLOCK, BLOCK]}, x, n_heads=2, cache={}), ValueError,
     "cache must be a tuple with one {'k', 'v'} dict per layer (2 layers), got dict"),
    # init n_layers
    (lambda: ma.init_decoder(rng, 0, 8, 2, 16), ValueError,
     'n_layers must be a positive int, got 0'),
    # init d_model
    (lambda: ma.init_decoder_block(rng, 0, 2, 16), ValueError,
     'd_model must be a positive int, got 0'),
    # init vocab
    (lambda: ma.init_causal_lm(rng, 0, 1, 8, 2, 16), ValueError,
     'vocab_size must be a positive int, got 0'),
    # init n_positions
    (lambda: ma.init_causal_lm(rng, 11, 1, 8, 2, 16, n_positions=0), ValueError,
     'n_positions must be a positive int, got 0'),
    # init position
    (lambda: ma.init_causal_lm(rng, 11, 1, 8, 2, 16, position="alibi"), ValueError,
     "position must be one of 'learned', 'rope'; got 'alibi'"),
    # init norm
    (lambda: ma.init_decoder_block(rng, 8, 2, 16, norm="batch_norm"), ValueError,
     "norm must be one of 'layer_norm', 'rms_norm'; got 'batch_norm'"),
    # init activation
    (lambda: ma.init_decoder_block(rng, 8, 2, 16, activation="tanh"), ValueError,
     "activation must be one of 'relu', 'gelu', 'gelu_tanh', 'swiglu', 'geglu_tanh'; got "
     "'tanh'"),
    # init n_kv
    (lambda: ma.init_decoder_block(rng, 8, 2, 16, n_kv_heads=3), ValueError,
     'n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of n_heads // n_kv_heads'
     ' query heads)'),
    # init n_kv with a head width of its own (d_k=6, not d_model / n_heads)
    (lambda: ma.init_decoder_block(rng, 8, 2, 16, d_k=6, n_kv_heads=3), ValueError,
     'n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of n_heads // n_kv_heads '
     'query heads)'),
    # init d_k
    (lambda: ma.init_decoder_block(rng, 8, 2, 16, d_k=0), ValueError,
     'd_k must be a positive int, got 0'),
    # init n_heads div
    (lambda: ma.init_decoder_block(rng, 8, 3, 16), ValueError,
     'd_model=8 is not divisible by n_heads=3'),
    # lm position
    (lambda: ma.causal_lm(GPT, T, **{**GC, "position": "alibi"}), ValueError,
     "position must be one of 'learned', 'rope'; got 'alibi'"),
    # lm n_heads
    (lambda: ma.causal_lm(GPT, T, **{**GC, "n_heads": 0}), ValueError,
     'n_heads must be a positive int, got 0'),
    # lm n_heads that do not divide d_model (no d_k to compare with params)
    (lambda: ma.causal_lm(GPT, T, **{**GC, "n_heads": 3}), ValueError,
     'd_model=8 is not divisible by n_heads=3'),
    # lm norm
    (lambda: ma.causal_lm(GPT, T, **{**GC, "norm": "x"}), ValueError,
     "norm must be one of 'layer_norm', 'rms_norm'; got 'x'"),
    # lm params list
    (lambda: ma.causal_lm([1], T, **GC), ValueError,
     "params must be a dict with keys 'token_embedding', 'layers', 'final_norm', "
     "'position_embedding' (and 'lm_head' unless the embeddings are tied)"),
    # lm params missing pe
    (lambda: ma.causal_lm(_without(GPT, "position_embedding"), T, **GC), ValueError,
     "params must be a dict with keys 'token_embedding', 'layers', 'final_norm', "
     "'position_embedding' (and 'lm_head' unless the embeddings are tied); position='learned' "
     "(the default) needs 'position_embedding', a model with RoPE passes position='rope'"),
    # lm rope params missing
    (lambda: ma.causal_lm(_without(LL, "final_norm"), T, **LC), ValueError,
     "params must be a dict with keys 'token_embedding', 'layers', 'final_norm' (and 'lm_head'"
     ' unless the embeddings are tied)'),
    # lm rope params list
    (lambda: ma.causal_lm([1], T, **LC), ValueError,
     "params must be a dict with keys 'token_embedding', 'layers', 'final_norm' (and 'lm_head'"
     ' unless the embeddings are tied)'),
    # lm embedding 1d
    (lambda: ma.causal_lm({**GPT, "token_embedding": np.ones(8)}, T, **GC), ValueError,
     "params['token_embedding'] has shape (8,), expected (V, D)"),
    # lm tokens float
    (lambda: ma.causal_lm(GPT, T * 1.0, **GC), TypeError,
     'tokens must be an integer array, got dtype float64'),
    # lm tokens 1d
    (lambda: ma.causal_lm(GPT, T[0], **GC), ValueError,
     'tokens must have shape (B, L) with L >= 1, got (3,)'),
    # lm tokens empty
    (lambda: ma.causal_lm(GPT, np.zeros((1, 0), int), **GC), ValueError,
     'tokens must have shape (B, L) with L >= 1, got (1, 0)'),
    # lm tokens big
    (lambda: ma.causal_lm(GPT, np.array([[1, 11]]), **GC), ValueError,
     'tokens must lie in [0, vocab_size=11), got min 1, max 11'),
    # lm tokens neg
    (lambda: ma.causal_lm(GPT, np.array([[-1, 5]]), **GC), ValueError,
     'tokens must lie in [0, vocab_size=11), got min -1, max 5'),
    # lm cache not dicts
    (lambda: ma.causal_lm(GPT, T, cache=([1], [1]), **GC), TypeError,
     "cache must be a tuple of dicts ({'k', 'v'}, or an attention variant's), one per layer"),
    # lm cache len
    (lambda: ma.causal_lm(GPT, T, cache=({},), **GC), ValueError,
     "cache must be a tuple with one {'k', 'v'} dict per layer (2 layers), got 1"),
    # lm too long
    (lambda: ma.causal_lm(GPT, np.ones((1, 9), int), **GC), ValueError,
     "tokens reach position 8 (cache 0 + tokens 9), but params['position_embedding'] has only "
     '8 positions'),
    # lm too long cache
    (lambda: ma.causal_lm(GPT, np.ones((1, 6), int), cache=CACHE, **GC), ValueError,
     "tokens reach position 8 (cache 3 + tokens 6), but params['position_embedding'] has only "
     '8 positions'),
    # lm lm_head shape
    (lambda: ma.causal_lm({**GPT, "lm_head": np.ones((8, 10))}, T, **GC), ValueError,
     "params['lm_head'] has shape (8, 10), expected (8, 11)"),
    # lm mask float
    (lambda: ma.causal_lm(GPT, T, np.ones((1, 3)), **GC), TypeError,
     'attention_mask must be int or bool (1 = real token, 0 = padding), got dtype float64'),
    # lm mask shape
    (lambda: ma.causal_lm(GPT, T, np.ones((1, 4), int), **GC), ValueError,
     'attention_mask has shape (1, 4), expected (B, L_past + L) = (1, 3)'),
    # lm mask shape cache
    (lambda: ma.causal_lm(GPT, T, np.ones((1, 3), int), cache=CACHE, **GC), ValueError,
     'attention_mask has shape (1, 3), expected (B, L_past + L) = (1, 6)'),
    # lm mask str
    (lambda: ma.causal_lm(GPT, T, "abc", **GC), TypeError,
     'attention_mask must be an array, got str'),
    # fits position
    (lambda: ma.causal_lm(GPT, T, **{**GC, "position": "rope"}), ValueError,
     "position='rope' contradicts params: params has 'position_embedding' (learned positions)"),
    # fits norm
    (lambda: ma.causal_lm(GPT, T, **{**GC, "norm": "rms_norm"}), ValueError,
     "norm='rms_norm' contradicts params: params['final_norm'] has keys ['beta', 'gamma']"),
    # fits norm2
    (lambda: ma.causal_lm(LL, T, **{**LC, "norm": "layer_norm"}), ValueError,
     "norm='layer_norm' contradicts params: params['final_norm'] has keys ['gamma']"),
    # fits activation
    (lambda: ma.causal_lm(GPT, T, **{**GC, "activation": "swiglu"}), ValueError,
     "activation='swiglu' contradicts params: the feed-forward has keys ['b_1', 'b_2', 'w_1', "
     "'w_2'] (a gated one, swiglu, geglu_tanh, has w_gate, w_up, w_down)"),
    # fits activation2
    (lambda: ma.causal_lm(LL, T, **{**LC, "activation": "gelu"}), ValueError,
     "activation='gelu' contradicts params: the feed-forward has keys ['w_down', 'w_gate', "
     "'w_up'] (a gated one, swiglu, geglu_tanh, has w_gate, w_up, w_down)"),
    # fits d_k
    (lambda: ma.causal_lm(GPT, T, **{**GC, "n_heads": 4, "d_k": 4}), ValueError,
     'd_k=4 contradicts params: w_q has shape (8, 8), not (D, n_heads * d_k) with n_heads=4 '
     '(d_k defaults to d_model / n_heads)'),
    # fits n_kv
    (lambda: ma.causal_lm(LL, T, **{**LC, "n_kv_heads": None}), ValueError,
     'n_kv_heads=None contradicts params: w_k has shape (8, 4), not (D, n_kv_heads * d_k) with'
     ' d_k=2 (n_kv_heads defaults to n_heads)'),
    # fits n_kv 1
    (lambda: ma.causal_lm(LL, T, **{**LC, "n_kv_heads": 1}), ValueError,
     'n_kv_heads=1 contradicts params: w_k has shape (8, 4), not (D, n_kv_heads * d_k) with '
     'd_k=2 (n_kv_heads defaults to n_heads)'),
    # gen n_new float
    (lambda: ma.generate(GPT, T, 2.0, **GC), TypeError,
     'n_new must be a non-negative int, got 2.0'),
    # gen n_new bool
    (lambda: ma.generate(GPT, T, True, **GC), TypeError,
     'n_new must be a non-negative int, got True'),
    # gen n_new neg
    (lambda: ma.generate(GPT, T, -1, **GC), TypeError,
     'n_new must be a non-negative int, got -1'),
    # gen temp neg
    (lambda: ma.generate(GPT, T, 2, temperature=-1.0, **GC), ValueError,
     'temperature must be a number >= 0 (0: greedy), got -1.0'),
    # gen temp nan
    (lambda: ma.generate(GPT, T, 2, temperature=float("nan"), **GC), ValueError,
     'temperature must be a number >= 0 (0: greedy), got nan'),
    # gen temp bool
    (lambda: ma.generate(GPT, T, 2, temperature=True, **GC), ValueError,
     'temperature must be a number >= 0 (0: greedy), got True'),
    # gen temp str
    (lambda: ma.generate(GPT, T, 2, temperature="1", **GC), ValueError,
     "temperature must be a number >= 0 (0: greedy), got '1'"),
    # gen top_k 0
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_k=0, rng=rng, **GC), TypeError,
     'top_k must be None or a positive int, got 0'),
    # gen top_k bool
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_k=True, rng=rng, **GC), TypeError,
     'top_k must be None or a positive int, got True'),
    # gen top_k float
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_k=2.0, rng=rng, **GC), TypeError,
     'top_k must be None or a positive int, got 2.0'),
    # gen top_p 0
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_p=0, rng=rng, **GC), ValueError,
     'top_p must be None or a number in (0, 1], got 0'),
    # gen top_p 1.5
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_p=1.5, rng=rng, **GC), ValueError,
     'top_p must be None or a number in (0, 1], got 1.5'),
    # gen top_p bool
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_p=True, rng=rng, **GC), ValueError,
     'top_p must be None or a number in (0, 1], got True'),
    # gen top_p str
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_p="0.5", rng=rng, **GC), ValueError,
     "top_p must be None or a number in (0, 1], got '0.5'"),
    # gen top_p nan
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, top_p=float("nan"),
                             rng=rng, **GC), ValueError,
     'top_p must be None or a number in (0, 1], got nan'),
    # gen rng
    (lambda: ma.generate(GPT, T, 2, temperature=1.0, **GC), ValueError,
     'temperature=1.0 samples: it needs rng, a np.random.Generator (nothing here seeds a '
     'global RNG)'),
    # gen rng int
    (lambda: ma.generate(GPT, T, 2, temperature=0.5, rng=3, **GC), ValueError,
     'temperature=0.5 samples: it needs rng, a np.random.Generator (nothing here seeds a '
     'global RNG)'),
    # gen tokens float
    (lambda: ma.generate(GPT, T * 1.0, 2, **GC), TypeError,
     'tokens must be an integer array, got dtype float64'),
    # gen tokens 1d
    (lambda: ma.generate(GPT, T[0], 2, **GC), ValueError,
     'tokens must have shape (B, L) with L >= 1, got (3,)'),
    # gen tokens empty
    (lambda: ma.generate(GPT, np.zeros((1, 0), int), 2, **GC), ValueError,
     'tokens must have shape (B, L) with L >= 1, got (1, 0)'),
    # gen mask shape
    (lambda: ma.generate(GPT, T, 2, np.ones((1, 4), int), **GC), ValueError,
     'attention_mask has shape (1, 4), expected (B, L_past + L) = (1, 3)'),
    # gen mask float
    (lambda: ma.generate(GPT, T, 2, np.ones((1, 3)), **GC), TypeError,
     'attention_mask must be int or bool (1 = real token, 0 = padding), got dtype float64'),
    # gen mask str
    (lambda: ma.generate(GPT, T, 2, "abc", **GC), TypeError,
     'attention_mask must be an array, got str'),
    # gen eos float
    (lambda: ma.generate(GPT, T, 2, eos_token_id=1.5, pad_token_id=0, **GC), TypeError,
     'eos_token_id must be an integer array, got dtype float64'),
    # gen eos pad bool
    (lambda: ma.generate(GPT, T, 2, eos_token_id=1, pad_token_id=True, **GC), ValueError,
     'eos_token_id=1 needs pad_token_id, the int that fills a row after its end (default: the '
     'first eos token), got True'),
    # gen too long
    (lambda: ma.generate(GPT, T, 7, **GC), ValueError,
     "n_new=7 after 3 tokens needs 9 positions, but params['position_embedding'] has 8"),
    # gen rope with pe
    (lambda: ma.generate(GPT, T, 20, **{**GC, "position": "rope"}), ValueError,
     "position='rope' contradicts params: params has 'position_embedding' (learned positions)"),
    # gen params list
    (lambda: ma.generate(["position_embedding"], T, 2, **GC), ValueError,
     "params must be a dict with keys 'token_embedding', 'layers', 'final_norm', "
     "'position_embedding' (and 'lm_head' unless the embeddings are tied)"),
    # gen params list rope
    (lambda: ma.generate(["position_embedding"], T, 2, **LC), ValueError,
     "params must be a dict with keys 'token_embedding', 'layers', 'final_norm' (and 'lm_head'"
     ' unless the embeddings are tied)'),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_the_whole_message(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_rms_norm_refuses_a_layer_norms_params_by_name_instead_of_ignoring_beta():
    block = ma.init_decoder_block(np.random.default_rng(0), 4, 2, 8)  # LayerNorm: gamma, beta
    x = np.random.default_rng(1).normal(size=(3, 4))
    with pytest.raises(ValueError) as error:
        ma.decoder_block(block, x, n_heads=2, norm="rms_norm")
    assert str(error.value) == ("norm='rms_norm' contradicts params['self_attention_norm'], "
                                "which has 'beta' (a LayerNorm's shift): pass norm='layer_norm'")
    rms = {**block, **{key: {"gamma": block[key]["gamma"]}
                       for key in ("self_attention_norm", "feed_forward_norm")}}
    ma.decoder_block(rms, x, n_heads=2, norm="rms_norm")  # gamma alone: accepted
