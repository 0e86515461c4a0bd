"""Issue #24's third class, swept: every limitation the documentation states fails as it says.

Each row of the table quotes a limitation from README.md, walkthrough.md or a docstring, makes a
call that runs into it, and expects the error the documentation promises: its type, its words
(by name), and raised by an argument check before any computation (the frame that raises is a
check: `check_*`, `_check_*`, `as_array`, `as_float_array`), never NumPy's error half-way
through the math, a warning, or an argument silently ignored.
"""
import re
import traceback

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

import minattn as ma
from minattn.differential import differential_attention, init_differential_attention
from minattn.mla import init_latent_attention, latent_attention

torch = pytest.importorskip("torch")

rng = np.random.default_rng(0)
X = rng.normal(size=(2, 3, 4))
RNG = np.random.default_rng(1)
MHA = ma.init_multi_head_attention(rng, 4, 2)
FF = ma.init_feed_forward(rng, 4, 8)
BLOCK = ma.init_encoder_block(rng, 4, 2, 8)
ENC = ma.init_encoder(rng, 2, 4, 2, 8)
DEC = ma.init_decoder_block(rng, 4, 2, 8, cross_attention=True)
DECODER = ma.init_decoder(rng, 2, 4, 2, 8)
SINKS = {**DEC["self_attention"], "sinks": np.zeros(2)}
LM, LM_CONFIG = ma.init_causal_lm(rng, 7, 1, 4, 2, 8, n_positions=4)
LLAMA, LLAMA_CONFIG = ma.init_causal_lm(rng, 7, 1, 4, 2, 8, position="rope", norm="rms_norm",
                                        activation="swiglu", bias=False)
TOKENS = np.array([[1, 2]])
KEEP_01 = np.tril(np.ones((3, 3)))  # a keep mask written as floats
BATCH_MASK = np.ones((2, 3, 3), bool)  # (B, L_q, L_k): B would broadcast against the heads
MLA = init_latent_attention(rng, 4, 2, kv_lora_rank=2, qk_nope_head_dim=2, qk_rope_head_dim=2,
                            v_head_dim=2)
DIFF = init_differential_attention(rng, 4, 2, layer_index=0)


def _grad_of_grad_of_blockwise():
    loss = lambda x: anp.sum(ma.blockwise_attention(x, X, X, block_size=2) ** 2)
    return grad(lambda x: anp.sum(grad(loss)(x) ** 2))(X)


# (where it is documented, what it says) -> [(call, exception, words of the error)]
LIMITATIONS = {
    ("README.md, Gradients", "blockwise_attention, whose backward is first-order only"): [
        (_grad_of_grad_of_blockwise, NotImplementedError,
         "blockwise_attention's gradient is first-order only")],
    ("README.md, Conventions", "dropout (dropout > 0) needs an rng"): [
        (lambda: ma.scaled_dot_product_attention(X, X, X, dropout=0.1), ValueError,
         "dropout=0.1 needs an rng"),
        (lambda: ma.multi_head_attention(MHA, X, X, X, n_heads=2, dropout=0.1), ValueError,
         "dropout=0.1 needs an rng"),
        (lambda: ma.feed_forward(FF, X, dropout=0.1), ValueError, "dropout=0.1 needs an rng"),
        (lambda: ma.encoder_block(BLOCK, X, n_heads=2, dropout=1.0), ValueError,
         "dropout=1.0 needs an rng"),
        (lambda: ma.encoder(ENC, X, n_heads=2, dropout=0.5), ValueError,
         "dropout=0.5 needs an rng")],
    ("README.md, Conventions", "a floating mask of only 0s and 1s ... is refused"): [
        (lambda: ma.scaled_dot_product_attention(X, X, X, KEEP_01), ValueError,
         "mask is a floating-point array of only 0s and 1s"),
        (lambda: ma.multi_head_attention(MHA, X, X, X, KEEP_01, n_heads=2), ValueError,
         "mask is a floating-point array of only 0s and 1s"),
        (lambda: ma.decoder(DECODER, X, KEEP_01, n_heads=2), ValueError,
         "mask is a floating-point array of only 0s and 1s")],
    ("README.md, Conventions", "a 3-D (B, L_q, L_k) mask is refused"): [
        (lambda: call(BATCH_MASK), ValueError, "mask of shape (2, 3, 3) is ambiguous")
        for call in (
            lambda m: ma.multi_head_attention(MHA, X, X, X, m, n_heads=2),
            lambda m: ma.encoder_block(BLOCK, X, m, n_heads=2),
            lambda m: ma.encoder(ENC, X, m, n_heads=2),
            lambda m: ma.self_attention(DEC["self_attention"], X, m, n_heads=2),
            lambda m: ma.decoder_block(DEC, X, m, memory=X, n_heads=2),
            lambda m: ma.decoder(DECODER, X, m, n_heads=2))] + [
        (lambda: ma.decoder_block(DEC, X, memory=X, memory_mask=BATCH_MASK, n_heads=2),
         ValueError, "memory_mask of shape (2, 3, 3) is ambiguous")],
    ("decoder_block's docstring", "cross-attention to memory [..., L_m, D] (with memory_mask)"): [
        (lambda: ma.decoder_block(DEC, X, memory_mask=np.ones((3, 3), bool), n_heads=2),
         ValueError, "memory_mask is given without memory"),
        (lambda: ma.decoder_block(DEC, X, memory=X[:, :2], memory_mask=np.ones((3, 3), bool),
                                  n_heads=2), ValueError,
         "memory_mask of shape (3, 3) does not broadcast to the cross-attention scores")],
    ("README.md, Conventions", "A torch tensor is refused with a hint"): [
        (lambda: ma.softmax(torch.ones(3)), TypeError, "x.detach().cpu().numpy()"),
        (lambda: ma.causal_lm(LM, torch.tensor(TOKENS), **LM_CONFIG), TypeError,
         "tokens.detach().cpu().numpy()")],
    ("walkthrough.md, Sampling", "top_p= works the same way (with temperature > 0)"): [
        (lambda: ma.generate(LM, TOKENS, 1, top_p=0.9, **LM_CONFIG), ValueError,
         "temperature=0 does not sample (greedy)"),
        (lambda: ma.generate(LM, TOKENS, 1, top_k=3, **LM_CONFIG), ValueError,
         "temperature=0 does not sample (greedy)")],
    ("generate's docstring", "attention_mask: as causal_lm (left padding)"): [
        (lambda: ma.generate(LM, np.array([[1, 2], [3, 4]]), 1,
                             attention_mask=np.array([[1, 1], [1, 0]]), **LM_CONFIG),
         ValueError, "attention_mask has padding on the right (a 0 after a 1) in rows [1]")],
    ("generate's docstring", "temperature > 0 samples ... with the np.random.Generator rng"): [
        (lambda: ma.generate(LM, TOKENS, 1, temperature=0.5, **LM_CONFIG), ValueError,
         "temperature=0.5 samples: it needs rng")],
    ("causal_lm's docstring", "position ('learned', 'rope'): learned positions, a table"): [
        (lambda: ma.causal_lm(LM, np.ones((1, 5), int), **LM_CONFIG), ValueError,
         "has only 4 positions"),
        (lambda: ma.generate(LM, TOKENS, 4, **LM_CONFIG), ValueError,
         "n_new=4 after 2 tokens needs 5 positions")],
    ("kv_cache.py, self_attention", "attention sinks with Gemma's scalars are not supported"): [
        (lambda: ma.self_attention(SINKS, X, n_heads=2, attn_logit_softcapping=50.0),
         ValueError, "attention sinks (params['sinks']) with query_pre_attn_scalar or "
                     "attn_logit_softcapping are not supported"),
        (lambda: ma.decoder_block({**DEC, "self_attention": SINKS}, X, memory=X, n_heads=2,
                                  query_pre_attn_scalar=4.0), ValueError,
         "attention sinks (params['sinks']) with query_pre_attn_scalar")],
    ("apply_rope's docstring", "x [..., L, d] (d even)"): [
        (lambda: ma.apply_rope(X[..., :3], np.arange(3)), ValueError,
         "apply_rope needs an even feature size d"),
        (lambda: ma.self_attention(ma.init_decoder_block(rng, 6, 2, 8)["self_attention"],
                                   rng.normal(size=(1, 3, 6)), n_heads=2,
                                   positions=np.arange(3)), ValueError,
         "RoPE (positions given) needs an even head width d_k, got d_k=3")],
    ("check_rope_scaling's docstring", "anything else is refused naming the type or the keyword"): [
        (lambda: ma.apply_rope(X, np.arange(3), scaling={"rope_type": "su"}), ValueError,
         "got 'su'"),
        (lambda: ma.apply_rope(X, np.arange(3), scaling={
            "rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0], "factor": 2.0,
            "original_max_position_embeddings": 2}), ValueError,
         "longrope's short_factor must hold one factor per rotated feature pair"),
        (lambda: ma.causal_lm(LLAMA, TOKENS, rope_scaling={"rope_type": "linear", "factor": 2.0,
                                                           "beta_fast": 32}, **LLAMA_CONFIG),
         ValueError,
         "unknown: ['beta_fast']")],
    ("rope_scaling.py, dynamic", "a larger base ... to the power d / (d - 2)"): [
        (lambda: ma.apply_rope(X[..., :2], np.arange(3), scaling={
            "rope_type": "dynamic", "factor": 2.0, "max_position_embeddings": 2}), ValueError,
         "it needs a feature size d > 2")],
    ("blockwise_attention's docstring", "key_mask: bool [..., L_k], a key that may be attended"): [
        (lambda: ma.blockwise_attention(X, X, X, key_mask=np.ones((3, 3), bool)), ValueError,
         "key_mask of shape (3, 3) does not broadcast to the keys' shape (..., L_k) = (2, 3)")],
    ("causal_lm's docstring", "attention_mask (int or bool [B, L_past + L])"): [
        (lambda: ma.causal_lm(LM, TOKENS, np.ones((1, 2)), **LM_CONFIG), TypeError,
         "attention_mask must be int or bool")],
    ("latent_attention's docstring", "Other keywords a decoder block passes ... must be None"): [
        (lambda: latent_attention(MLA, X, n_heads=2, qk_nope_head_dim=2, qk_rope_head_dim=2,
                                  v_head_dim=2, positions=np.arange(3), n_kv_heads=1),
         ValueError, "latent_attention does not support n_kv_heads")],
    ("differential_attention's docstring", "n_heads and n_kv_heads even"): [
        (lambda: differential_attention(DIFF, X, n_heads=2, n_kv_heads=1), ValueError,
         "must both be even")],
}

ROWS = [(where, said, i, *row) for (where, said), rows in LIMITATIONS.items()
        for i, row in enumerate(rows)]


@pytest.mark.parametrize("where, said, i, call, exception, words", ROWS,
                         ids=[f"{said[:40]}-{i}" for _, said, i, *_ in ROWS])
def test_a_documented_limitation_fails_as_documented_before_computing(where, said, i, call,
                                                                        exception, words):
    with pytest.raises(exception) as error:
        call()
    assert words in str(error.value), (where, said)
    raiser = traceback.extract_tb(error.tb)[-1].name
    raiser = re.sub(r"^x_(.*)__mutmut_\w+$", r"\1", raiser)  # mutmut's copy of a function
    assert raiser.startswith(("check", "_check")) or raiser in ("as_array", "as_float_array"), (
        f"raised in {raiser}, not in an argument check")
