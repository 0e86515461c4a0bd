"""Multi-head latent attention (minattn.mla): the naive and absorbed forms are one function, both
equal a slow per-head loop of the paper's equations, and decoding through the latent cache
equals the full pass."""
import numpy as np
import pytest
from autograd.test_util import check_grads
from hypothesis import given
from hypothesis import strategies as st

import minattn as ma
from minattn.mla import empty_latent_cache, init_latent_attention, latent_attention


@st.composite
def mla_configs(draw):
    sizes = {"n_heads": draw(st.integers(1, 4)), "qk_nope_head_dim": draw(st.integers(0, 5)),
             "qk_rope_head_dim": 2 * draw(st.integers(1, 3)), "v_head_dim": draw(st.integers(1, 5))}
    ranks = {"kv_lora_rank": draw(st.integers(1, 9)),
             "q_lora_rank": draw(st.one_of(st.none(), st.integers(1, 9)))}
    return sizes, ranks, draw(st.integers(0, 2 ** 31)), draw(st.booleans())


def _setup(sizes, ranks, seed, bias=False, d_model=12, length=5):
    rng = np.random.default_rng(seed)
    widths = {k: v for k, v in sizes.items() if k != "n_heads"}
    params = init_latent_attention(rng, d_model, sizes["n_heads"], bias=bias, **ranks, **widths)
    # Non-trivial norms and biases, so a lost one shows.
    params = {k: a + 0.3 * rng.normal(size=a.shape) for k, a in params.items()}
    x = rng.normal(size=(2, length, d_model))
    return params, x, rng.integers(0, 50, size=length)


def _loop_reference(params, x, positions, n_heads, qk_nope_head_dim, qk_rope_head_dim,
                    v_head_dim, eps=1e-6, base=10000.0):
    # The equations of DeepSeek-V2 §2.1, head by head and query by query, with NumPy.
    rms = lambda a, g: a / np.sqrt(np.mean(a * a, -1, keepdims=True) + eps) * g
    lin = lambda a, n: a @ params[f"w_{n}"] + params.get(f"b_{n}", 0.0)
    dn, dr, dv, r = qk_nope_head_dim, qk_rope_head_dim, v_head_dim, params["gamma_kv_a"].shape[0]
    q = (rms(lin(x, "q_a"), params["gamma_q_a"]) @ params["w_q_b"] if "w_q_a" in params
         else x @ params["w_q"])
    latent = lin(x, "kv_a")
    c_kv = rms(latent[..., :r], params["gamma_kv_a"])
    k_rope = ma.apply_rope(latent[..., r:], positions, base=base)
    out = np.zeros(x.shape[:-1] + (n_heads * dv,))
    for h in range(n_heads):
        q_h = q[..., h * (dn + dr):(h + 1) * (dn + dr)]
        q_h = np.concatenate([q_h[..., :dn], ma.apply_rope(q_h[..., dn:], positions, base=base)],
                             -1)
        kv_h = c_kv @ params["w_kv_b"][:, h * (dn + dv):(h + 1) * (dn + dv)]
        k_h, v_h = np.concatenate([kv_h[..., :dn], k_rope], -1), kv_h[..., dn:]
        for b in range(x.shape[0]):
            for i in range(x.shape[1]):
                s = np.array([q_h[b, i] @ k_h[b, j] for j in range(i + 1)]) / np.sqrt(dn + dr)
                p = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                out[b, i, h * dv:(h + 1) * dv] = p @ v_h[b, :i + 1]
    return lin(out, "o")


@given(mla_configs())
def test_naive_and_absorbed_forms_agree_with_the_loop(config):
    sizes, ranks, seed, bias = config
    params, x, positions = _setup(sizes, ranks, seed, bias)
    mask = ma.causal_mask(x.shape[1])
    naive, _ = latent_attention(params, x, mask, positions=positions, **sizes)
    absorbed, _ = latent_attention(params, x, mask, positions=positions, absorb=True, **sizes)
    np.testing.assert_allclose(absorbed, naive, rtol=0, atol=1e-12)
    np.testing.assert_allclose(naive, _loop_reference(params, x, positions, **sizes),
                               rtol=0, atol=1e-12)


@given(mla_configs(), st.lists(st.integers(1, 3), min_size=1, max_size=4))
def test_cached_decoding_equals_the_full_pass(config, chunks):
    sizes, ranks, seed, absorb = config
    length = sum(chunks)
    params, x, _ = _setup(sizes, ranks, seed, length=length)
    positions = np.arange(length)
    full, full_cache = latent_attention(params, x, ma.causal_mask(length), positions=positions,
                                        **sizes)
    cache, outputs, start = empty_latent_cache(x, ranks["kv_lora_rank"],
                                               sizes["qk_rope_head_dim"]), [], 0
    for n in chunks:  # a chunk at a time, each attending to the cache and itself
        mask = ma.causal_mask(n, start + n, align="bottom_right")
        out, cache = latent_attention(params, x[:, start:start + n], mask,
                                      positions=positions[start:start + n], cache=cache,
                                      absorb=absorb, **sizes)
        outputs.append(out)
        start += n
    np.testing.assert_allclose(np.concatenate(outputs, axis=1), full, rtol=0, atol=1e-12)
    # The cache holds kv_lora_rank + qk_rope_head_dim numbers per token, whatever the heads.
    assert cache["c_kv"].shape == (2, length, ranks["kv_lora_rank"])
    assert cache["k_rope"].shape == (2, length, sizes["qk_rope_head_dim"])
    np.testing.assert_allclose(cache["c_kv"], full_cache["c_kv"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("absorb", [False, True])
def test_gradients_match_finite_differences(absorb):
    sizes = {"n_heads": 2, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 3}
    params, x, positions = _setup(sizes, {"kv_lora_rank": 3, "q_lora_rank": 4}, 0, length=3,
                                  d_model=4)
    loss = lambda x, params: np.sum(np.sin(latent_attention(
        params, x, ma.causal_mask(3), positions=positions, absorb=absorb, **sizes)[0]))
    check_grads(loss, argnum=0, modes=["rev"], order=1)(x, params)
    check_grads(loss, argnum=1, modes=["rev"], order=1)(x, params)


def test_float32_stays_float32():
    sizes = {"n_heads": 2, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 3}
    params, x, positions = _setup(sizes, {"kv_lora_rank": 3, "q_lora_rank": None}, 1)
    params = {k: a.astype(np.float32) for k, a in params.items()}
    for absorb in (False, True):
        out, cache = latent_attention(params, x.astype(np.float32), positions=positions,
                                      absorb=absorb, **sizes)
        assert out.dtype == cache["c_kv"].dtype == cache["k_rope"].dtype == np.float32


def test_bad_inputs_are_refused_by_name():
    sizes = {"n_heads": 2, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 3}
    params, x, positions = _setup(sizes, {"kv_lora_rank": 3, "q_lora_rank": None}, 2)
    with pytest.raises(ValueError, match=r"params\['w_kv_b'\] has shape \(3, 10\), expected \(3, 12\)"):
        latent_attention(params, x, positions=positions, **{**sizes, "v_head_dim": 4})
    with pytest.raises(ValueError, match="rope_scaling of rope_type 'yarn' takes .*missing: "
                                         "\\['factor', 'original_max_position_embeddings'\\]"):
        latent_attention(params, x, positions=positions, rope_scaling={"rope_type": "yarn"},
                         d_k=None, **sizes)
    with pytest.raises(ValueError, match="latent_attention does not support window"):
        latent_attention(params, x, positions=positions, window=3, **sizes)
    with pytest.raises(ValueError, match="qk_rope_head_dim must be even"):
        latent_attention(params, x, positions=positions, **{**sizes, "qk_rope_head_dim": 3})
    cache = {"c_kv": np.zeros((2, 4, 5)), "k_rope": np.zeros((2, 4, 2))}
    with pytest.raises(ValueError, match=r"cache\['c_kv'\] has shape \(2, 4, 5\)"):
        latent_attention(params, x, positions=positions, cache=cache, **sizes)


SIZES = {"n_heads": 2, "qk_nope_head_dim": 3, "qk_rope_head_dim": 4, "v_head_dim": 3}
RANKS = {"kv_lora_rank": 4, "q_lora_rank": 5}  # with the query bottleneck: two latent norms


@pytest.mark.parametrize("absorb", [False, True])
def test_rope_base_and_latent_eps_reach_every_rope_and_norm(absorb):
    # A far-off base and a large eps change the result, so one left at its default shows: the
    # query's and the key's RoPE, the query's and the latent's RMSNorm.
    params, x, positions = _setup(SIZES, RANKS, 3)
    out, _ = latent_attention(params, x, ma.causal_mask(5), positions=positions, rope_base=500.0,
                              latent_eps=0.5, absorb=absorb, **SIZES)
    np.testing.assert_allclose(out, _loop_reference(params, x, positions, eps=0.5, base=500.0,
                                                    **SIZES), rtol=0, atol=1e-12)
    # rope_base is any positive number: one close to 1 as well
    out, _ = latent_attention(params, x, ma.causal_mask(5), positions=positions, rope_base=1.5,
                              absorb=absorb, **SIZES)
    np.testing.assert_allclose(out, _loop_reference(params, x, positions, base=1.5, **SIZES),
                               rtol=0, atol=1e-12)
    # latent_eps=0 is allowed: a plain RMS
    out, _ = latent_attention(params, x, ma.causal_mask(5), positions=positions, latent_eps=0.0,
                              absorb=absorb, **SIZES)
    np.testing.assert_allclose(out, _loop_reference(params, x, positions, eps=0.0, **SIZES),
                               rtol=0, atol=1e-12)


def test_defaults_are_the_documented_ones():
    # rope_base 10000 (transformers' default rope_theta), latent_eps 1e-6 (DeepSeek-V2/V3's
    # rms_norm_eps), the naive form (absorb=False: the same function, but not the same
    # rounding), and eps unused.
    params, x, positions = _setup(SIZES, RANKS, 4)
    call = lambda **kw: latent_attention(params, x, ma.causal_mask(5), positions=positions,
                                         **SIZES, **kw)[0]
    default = call()
    np.testing.assert_array_equal(default, call(rope_base=10000.0, latent_eps=1e-6, absorb=False))
    np.testing.assert_array_equal(default, call(eps=0.5))
    np.testing.assert_allclose(default, _loop_reference(params, x, positions, eps=1e-6,
                                                        base=10000.0, **SIZES),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("absorb", [False, True])
@pytest.mark.parametrize("n_heads", [2, 3])  # as many heads as batch rows, and not
def test_batched_positions_equal_one_call_per_row(absorb, n_heads):
    # positions [B, L]: row b of the batch rotates by positions[b] (a left-padded batch).
    sizes = {**SIZES, "n_heads": n_heads}
    params, x, _ = _setup(sizes, RANKS, 5)
    positions = np.array([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    out, cache = latent_attention(params, x, ma.causal_mask(5), positions=positions,
                                  absorb=absorb, **sizes)
    for b in range(2):
        row, row_cache = latent_attention(params, x[b:b + 1], ma.causal_mask(5),
                                          positions=positions[b], absorb=absorb, **sizes)
        np.testing.assert_allclose(out[b:b + 1], row, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cache["k_rope"][b:b + 1], row_cache["k_rope"], rtol=0,
                                   atol=1e-12)


def test_unbatched_x_equals_a_batch_of_one():
    # x [L, D] (no batch axis), with a cache [L_past, r] and a mask over L_past + L keys.
    params, x, positions = _setup(SIZES, RANKS, 6)
    mask = ma.causal_mask(3, 5, align="bottom_right")
    _, cache = latent_attention(params, x[:1, :2], positions=positions[:2], **SIZES)
    batched, _ = latent_attention(params, x[:1, 2:], mask, positions=positions[2:], cache=cache,
                                  **SIZES)
    single_cache = {key: a[0] for key, a in cache.items()}
    single, new_cache = latent_attention(params, x[0, 2:], mask, positions=positions[2:],
                                         cache=single_cache, **SIZES)
    assert single.shape == (3, 12) and new_cache["c_kv"].shape == (5, 4)
    np.testing.assert_allclose(single, batched[0], rtol=0, atol=1e-12)
