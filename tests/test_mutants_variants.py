"""What the mutation run of minattn/head_mask.py showed untested (tests/MUTANTS.md): the variant
of self_attention that head_mask= selects, on its own (it was reached only by its refusals), and
causal_lm's with an attention_mask, with a float64 head_mask on a float32 model, and with a w_o
given as nested lists. The reference scales each head's rows of w_o in a loop; head_mask is never
used by it."""
import numpy as np
import pytest

import minattn as ma

D, H, H_KV, L = 24, 4, 2, 6


def scaled_rows(w_o, row):
    # w_o [H d_v, D] with head h's d_v rows times row[h], written out head by head
    d_v = len(w_o) // len(row)
    w_o = np.asarray(w_o)
    return np.concatenate([row[h] * w_o[h * d_v:(h + 1) * d_v] for h in range(len(row))])


@pytest.fixture
def attention():
    rng = np.random.default_rng(0)
    params = ma.init_decoder_block(rng, D, H, 32, n_kv_heads=H_KV, norm="rms_norm",
                                   activation="swiglu")["self_attention"]
    return params, rng.standard_normal((2, L, D)), rng.uniform(-1.0, 2.0, H)


def test_self_attentions_head_mask_scales_each_heads_rows_of_w_o(attention):
    params, x, row = attention
    config = {"n_heads": H, "n_kv_heads": H_KV, "positions": np.arange(L),
              "rope_base": 100.0}
    mask = ma.causal_mask(L)
    out, cache = ma.self_attention(params, x, mask, head_mask=row, **config)
    reference, reference_cache = ma.self_attention(
        {**params, "w_o": scaled_rows(params["w_o"], row)}, x, mask, **config)
    np.testing.assert_allclose(out, reference, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(cache["k"], reference_cache["k"])
    assert np.abs(out - ma.self_attention(params, x, mask, **config)[0]).max() > 1e-3


def test_a_float64_head_mask_keeps_a_float32_attention_in_float32(attention):
    params, x, row = attention
    params32 = {k: v.astype(np.float32) for k, v in params.items()}
    out, _ = ma.self_attention(params32, x.astype(np.float32), n_heads=H, n_kv_heads=H_KV,
                               head_mask=row)
    assert out.dtype == np.float32


@pytest.fixture
def model():
    rng = np.random.default_rng(1)
    params, config = ma.init_causal_lm(rng, 19, 2, D, H, 32, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False, tied=False,
                                       n_kv_heads=H_KV)
    return params, config, rng.uniform(-1.0, 2.0, (2, H))


def with_scaled_w_o(params, head_mask):
    layers = [{**layer, "self_attention": {**layer["self_attention"], "w_o": scaled_rows(
        layer["self_attention"]["w_o"], row)}} for layer, row in zip(params["layers"], head_mask)]
    return {**params, "layers": layers}


def test_causal_lms_head_mask_keeps_the_attention_mask(model):
    params, config, head_mask = model
    tokens = np.random.default_rng(2).integers(0, 19, size=(2, L))
    padding = np.ones((2, L), bool)
    padding[0, :2] = False  # left padding on the first row
    ours = ma.causal_lm(params, tokens, padding, head_mask=head_mask, **config)
    reference = ma.causal_lm(with_scaled_w_o(params, head_mask), tokens, padding, **config)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)
    unpadded = ma.causal_lm(params, tokens, head_mask=head_mask, **config)
    assert np.abs(ours[0] - unpadded[0]).max() > 1e-3  # the padding changed the first row


def test_a_float64_head_mask_keeps_a_float32_model_in_float32(model):
    params, config, head_mask = model
    def float32(tree):
        if isinstance(tree, dict):
            return {k: float32(v) for k, v in tree.items()}
        if isinstance(tree, list):
            return [float32(v) for v in tree]
        return np.asarray(tree, np.float32)

    tokens = np.arange(L)[None] % 19
    assert ma.causal_lm(float32(params), tokens, head_mask=head_mask, **config).dtype == \
        np.float32


def test_a_w_o_given_as_nested_lists_is_scaled_as_the_array(model):
    params, config, head_mask = model
    tokens = np.arange(L)[None] % 19
    as_lists = with_scaled_w_o(params, np.ones_like(head_mask))  # a copy
    as_lists["layers"][0]["self_attention"]["w_o"] = params["layers"][0]["self_attention"][
        "w_o"].tolist()
    np.testing.assert_allclose(ma.causal_lm(as_lists, tokens, head_mask=head_mask, **config),
                               ma.causal_lm(params, tokens, head_mask=head_mask, **config),
                               rtol=0, atol=1e-12)


def test_a_model_whose_embedding_is_not_float_is_refused_naming_it(model):
    params, config, head_mask = model
    bad = {**params, "token_embedding": params["token_embedding"].astype(np.int64)}
    with pytest.raises(TypeError, match=r"^params\['token_embedding'\] must be a floating-point"):
        ma.causal_lm(bad, np.arange(L)[None] % 19, head_mask=head_mask, **config)
