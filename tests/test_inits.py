"""Every initialiser of the decoder-side concepts draws what its docstring says, checked leaf by
leaf and statistically: weights w_* [d_in, d_out] uniform on ±1/sqrt(d_in) (torch.nn.Linear's
bound; its biases too in the feed-forward; Xavier for nn.MultiheadAttention's q, k, v), biases and LayerNorm's beta zero, gammas one, DiffLlama's λ vectors N(0, lambda_std),
embeddings N(0, 0.02) (positions 0.01); a leaf no rule knows fails the test, so a new parameter
cannot slip past. dtype=float32 gives the float64 draw rounded once (drawn in float64, then cast),
and biases appear exactly where the config asks for them.
(test_mutants_core.py and test_mutants_position_wise.py do the same for multi-head attention and
the feed-forwards, whose bounds follow torch's modules.)"""
import math

import numpy as np
import pytest

import minattn as ma
from minattn.differential import init_differential_attention, lambda_init
from minattn.mla import init_latent_attention

D, H = 48, 4  # large enough that every matrix has hundreds of entries


def leaves(params, path=""):
    if isinstance(params, dict):
        for key, value in params.items():
            yield from leaves(value, f"{path}/{key}")
    elif isinstance(params, (list, tuple)):
        for i, value in enumerate(params):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path, params


def uniform(fan_in=None, bound=None):
    def check(name, w):
        b = bound or 1 / math.sqrt(fan_in or w.shape[0])
        uniform_within(name, np.asarray(w, np.float64), b)
    return check


def uniform_within(name, w, bound):
    assert np.max(np.abs(w)) <= bound * (1 + 1e-6), f"{name} exceeds {bound}"
    assert np.max(w) > 0.8 * bound and np.min(w) < -0.8 * bound, f"{name} does not fill ±bound"
    # U(-b, b): mean 0, standard deviation b / sqrt(3)
    assert abs(np.mean(w)) < 5 * bound / math.sqrt(3 * w.size), name
    # 5 standard errors of a sample's standard deviation (0.45 / sqrt(n) for a uniform one)
    assert np.std(w) == pytest.approx(bound / math.sqrt(3), rel=2.25 / math.sqrt(w.size)), name


def normal(std):
    def check(name, a):
        a = np.asarray(a, np.float64).ravel()
        assert abs(np.mean(a)) < 5 * std / math.sqrt(a.size), f"{name}: mean {np.mean(a)}"
        assert np.std(a) == pytest.approx(std, rel=5 / math.sqrt(2 * a.size)), name  # 5 SE
    return check


def constant(value):
    def check(name, a):
        assert np.all(np.asarray(a) == value), f"{name} is not all {value}"
    return check


def rule(path, lambda_std=0.1, layer_index=None):
    name = path.rsplit("/", 1)[-1]
    if "/feed_forward/" in path and name in ("b_1", "b_2"):  # torch.nn.Linear's biases
        return uniform(fan_in=D if name == "b_1" else 96)
    if "/cross_attention/" in path and name in ("w_q", "w_k", "w_v"):
        return uniform(bound=math.sqrt(6 / (D + 3 * D)))  # Xavier on torch's packed [3D, D]
    if name.startswith("w_"):
        return uniform()
    if name.startswith("b_") or name == "beta":
        return constant(0.0)
    if name.startswith("gamma"):
        return constant(1.0)
    if name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
        return normal(lambda_std)
    if name == "lambda_init":
        return constant(lambda_init(layer_index))
    if name in ("token_embedding", "lm_head"):
        return normal(0.02)
    if name == "position_embedding":
        return normal(0.01)
    raise AssertionError(f"no rule for the parameter {path}: add one to tests/test_inits.py")


MLA = dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=12)
INITS = {  # name -> (init(rng, dtype), keywords for the rules, the keys its params must have)
    "latent attention": (
        lambda rng, dtype: init_latent_attention(rng, D, H, **MLA, dtype=dtype), {},
        {"w_q", "w_kv_a", "w_kv_b", "w_o", "gamma_kv_a"}),
    "latent attention, query bottleneck, biases": (
        lambda rng, dtype: init_latent_attention(rng, D, H, **MLA, q_lora_rank=24, bias=True,
                                                 dtype=dtype), {},
        {"w_q_a", "w_q_b", "w_kv_a", "w_kv_b", "w_o", "gamma_kv_a", "gamma_q_a",
         "b_q_a", "b_kv_a", "b_o"}),  # where DeepSeek-V3's attention_bias puts them
    "latent attention, no bottleneck, biases": (
        lambda rng, dtype: init_latent_attention(rng, D, H, **MLA, bias=True, dtype=dtype), {},
        {"w_q", "w_kv_a", "w_kv_b", "w_o", "gamma_kv_a", "b_kv_a", "b_o"}),
    "differential attention": (
        lambda rng, dtype: init_differential_attention(rng, D, H, layer_index=2, dtype=dtype),
        {"layer_index": 2},
        {"w_q", "w_k", "w_v", "w_o", "lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2",
         "lambda_init"}),
    "differential attention, lambda_std 0.5, GQA": (
        lambda rng, dtype: init_differential_attention(rng, D, H, layer_index=0, n_kv_heads=2,
                                                       lambda_std=0.5, dtype=dtype),
        {"layer_index": 0, "lambda_std": 0.5},
        {"w_q", "w_k", "w_v", "w_o", "lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2",
         "lambda_init"}),
    "decoder block, head width 16, RMSNorm, QK-norm, no biases": (
        lambda rng, dtype: ma.init_decoder_block(rng, D, H, 96, d_k=16, n_kv_heads=2,
                                                 norm="rms_norm", qk_norm=True, bias=False,
                                                 activation="swiglu", dtype=dtype), {}, None),
    "decoder block with cross-attention": (
        lambda rng, dtype: ma.init_decoder_block(rng, D, H, 96, d_k=16, cross_attention=True,
                                                 dtype=dtype), {}, None),
    "causal LM, GPT-2 style": (
        lambda rng, dtype: ma.init_causal_lm(rng, 200, 1, D, H, 96, n_positions=300, d_k=16,
                                             dtype=dtype)[0], {}, None),
    "causal LM, Llama style, untied": (
        lambda rng, dtype: ma.init_causal_lm(rng, 200, 1, D, H, 96, position="rope", tied=False,
                                             norm="rms_norm", activation="swiglu", bias=False,
                                             d_k=16, dtype=dtype)[0], {}, None),
}


@pytest.mark.parametrize("name", INITS)
def test_every_parameter_is_drawn_as_documented(name):
    init, keywords, keys = INITS[name]
    params = init(np.random.default_rng(0), np.float64)
    if keys is not None:
        assert set(params) == keys
    for path, a in leaves(params):
        assert a.dtype == np.float64, path
        rule(path, **keywords)(path, a)


@pytest.mark.parametrize("name", INITS)
def test_float32_is_the_float64_draw_rounded_once(name):
    init = INITS[name][0]
    wide = dict(leaves(init(np.random.default_rng(1), np.float64)))
    narrow = dict(leaves(init(np.random.default_rng(1), np.float32)))
    assert set(narrow) == set(wide)
    for path, a in narrow.items():
        assert a.dtype == np.float32, path
        np.testing.assert_array_equal(a, wide[path].astype(np.float32))


@pytest.mark.parametrize("name", INITS)
def test_each_weight_is_drawn_on_its_own(name):
    init = INITS[name][0]
    first = dict(leaves(init(np.random.default_rng(2), np.float64)))
    again = dict(leaves(init(np.random.default_rng(2), np.float64)))
    other = dict(leaves(init(np.random.default_rng(3), np.float64)))
    random = [p for p, a in first.items() if np.unique(a).size > 1]
    assert random, "nothing random"
    for path in random:
        np.testing.assert_array_equal(first[path], again[path])  # the rng decides everything
        assert not np.array_equal(first[path], other[path]), path
    weights = [first[p].ravel() for p in random]
    for i in range(len(weights)):
        for j in range(i):
            n = min(weights[i].size, weights[j].size)
            assert not np.allclose(weights[i][:n], weights[j][:n]), "two weights share one draw"


def test_biases_follow_the_bias_flag_and_the_default_is_none_for_latent_attention():
    rng = np.random.default_rng(0)
    assert not any(k.startswith("b_") for k in init_latent_attention(rng, D, H, **MLA))
    for flag in (True, False):
        block = ma.init_decoder_block(rng, D, H, 96, bias=flag)
        assert any(k.startswith("b_") for k in block["self_attention"]) == flag
