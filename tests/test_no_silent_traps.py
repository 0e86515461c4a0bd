"""What a kernel author checking a Llama block against minattn gets wrong without a word, each
either refused naming the keyword or said where the default is documented:

- a RoPE schedule given without positions (RoPE would be off): refused, naming positions;
- grouped-query weights given without n_kv_heads: the error names the n_kv_heads they hold;
- positions=None is the documented "no RoPE" (a NoPE layer), whatever rope_base says (the
  course's properties hold self_attention to taking a base without positions): the same as a
  block whose attention has no rotation.
"""
import numpy as np
import pytest

import minattn as ma

rng = np.random.default_rng(0)
D, H, H_KV, F = 32, 4, 2, 48
LLAMA = dict(norm="rms_norm", activation="swiglu", norm_first=True, eps=1e-6)
BLOCK = ma.init_decoder_block(rng, D, H, F, n_kv_heads=H_KV, norm="rms_norm",
                              activation="swiglu", bias=False)
X = rng.normal(size=(2, 5, D))


@pytest.mark.parametrize("call", [
    lambda: ma.decoder_block(BLOCK, X, n_heads=H, **LLAMA),
    lambda: ma.self_attention(BLOCK["self_attention"], X, n_heads=H),
    lambda: ma.multi_head_attention(ma.init_multi_head_attention(rng, D, H, n_kv_heads=H_KV),
                                    X, X, X, n_heads=H),
])
def test_grouped_query_weights_without_n_kv_heads_name_the_keyword_and_its_value(call):
    with pytest.raises(ValueError, match=r"w_k'\] has shape \(32, 16\), expected \(32, 32\); "
                                         r"w_k holds 2 heads of d_k=8: a grouped-query model's, "
                                         r"give n_kv_heads=2"):
        call()


def test_weights_of_no_whole_head_count_get_no_hint():
    odd = {**BLOCK["self_attention"], "w_k": np.ones((D, 12)), "w_v": np.ones((D, 12))}
    with pytest.raises(ValueError) as error:
        ma.self_attention(odd, X, n_heads=H)
    assert "n_kv_heads=" not in str(error.value)


def test_a_rope_schedule_without_positions_is_refused_naming_positions():
    with pytest.raises(ValueError, match=r"rope_scaling=.* set RoPE, which rotates q and k only "
                                         r"where positions are given: pass positions"):
        ma.decoder_block(BLOCK, X, n_heads=H, n_kv_heads=H_KV, **LLAMA,
                         rope_scaling={"rope_type": "linear", "factor": 2.0})


def test_positions_none_is_no_rope_as_documented():
    # positions=None: no rotation at all, the same as rotating every position by 0
    out = ma.decoder_block(BLOCK, X, n_heads=H, n_kv_heads=H_KV, **LLAMA)
    at_zero = ma.decoder_block(BLOCK, X, n_heads=H, n_kv_heads=H_KV, positions=np.zeros(5, int),
                               **LLAMA)
    np.testing.assert_allclose(out, at_zero, rtol=0, atol=1e-12)
    rotated = ma.decoder_block(BLOCK, X, n_heads=H, n_kv_heads=H_KV, positions=np.arange(5),
                               **LLAMA)
    assert np.abs(rotated - out).max() > 1e-3
    assert "positions" in ma.self_attention.__doc__ and "no RoPE" in ma.decoder_block.__doc__


def test_a_per_head_bias_is_refused_in_self_attention_with_the_shape_that_works():
    attention = BLOCK["self_attention"]
    bias = rng.normal(size=(H, 5, 5))  # [H, L_q, L_k]: one additive bias per head (ALiBi's kind)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5, 5\) is ambiguous .* or a "
                                         r"per-head mask or bias with its batch axis, \(1, H, "
                                         r"L_q, L_k\) \(e.g. mask\[None\]\)"):
        ma.self_attention(attention, X, bias, n_heads=H, n_kv_heads=H_KV)
    out, _ = ma.self_attention(attention, X, bias[None], n_heads=H, n_kv_heads=H_KV)
    # the same computation written out: project, split, grouped attention with the bias, merge
    q, k, v = (ma.split_heads(X @ attention[f"w_{p}"], n) for p, n in (("q", H), ("k", H_KV),
                                                                         ("v", H_KV)))
    heads, _ = ma.grouped_attention(q, k, v, bias)
    np.testing.assert_allclose(out, ma.merge_heads(heads) @ attention["w_o"], rtol=0, atol=1e-12)
