"""LoRA (minattn.lora) on minattn's own models: the formula, the init, merge, the refusals. Its
gradients and adapters against PEFT's: tests/test_lora_peft.py."""
import autograd
import numpy as np
import pytest

import minattn as ma
from minattn import lora as L

V, N_LAYERS, D, H, F = 40, 2, 16, 4, 24


def llama_like(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return ma.init_causal_lm(rng, V, N_LAYERS, D, H, F, position="rope", norm="rms_norm",
                             activation="swiglu", bias=False, n_kv_heads=2, dtype=dtype)


def with_random_b(lora, seed=1):
    rng = np.random.default_rng(seed)
    return {"alpha": lora["alpha"],
            "layers": [{t: {"A": p["A"], "B": rng.normal(size=p["B"].shape)}
                        for t, p in layer.items()} for layer in lora["layers"]]}


def loop_reference(params, lora, alpha):
    # the adapted model as a plain one, W + (alpha / r) A B written out weight by weight
    params = {**params, "layers": [
        {k: dict(v) if isinstance(v, dict) else v for k, v in layer.items()}
        for layer in params["layers"]]}
    for layer, adapters in zip(params["layers"], lora["layers"]):
        for t, pair in adapters.items():
            sublayer, key = {"q": ("self_attention", "w_q"), "k": ("self_attention", "w_k"),
                             "v": ("self_attention", "w_v"), "o": ("self_attention", "w_o"),
                             "gate": ("feed_forward", "w_gate"), "up": ("feed_forward", "w_up"),
                             "down": ("feed_forward", "w_down")}[t]
            r = pair["A"].shape[1]
            w = layer[sublayer][key].copy()
            for i in range(w.shape[0]):
                for j in range(w.shape[1]):
                    w[i, j] += alpha / r * sum(pair["A"][i, m] * pair["B"][m, j] for m in range(r))
            layer[sublayer][key] = w
    return params


def test_a_b_start_at_zero_and_a_inside_peft_bound():
    params, _ = llama_like()
    lora = L.init_lora(np.random.default_rng(0), params, targets=L.TARGETS, rank=4)
    for layer in lora["layers"]:
        assert set(layer) == set(L.TARGETS)
        for t, pair in layer.items():
            d_in = pair["A"].shape[0]
            assert np.all(pair["B"] == 0)
            assert np.abs(pair["A"]).max() <= 1 / np.sqrt(d_in)  # kaiming_uniform_(a=sqrt(5))
            assert np.abs(pair["A"]).max() > 0.8 / np.sqrt(d_in)  # uniform: it reaches near it


def test_the_model_at_init_is_the_base_model_exactly():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (2, 6))
    lora = L.init_lora(np.random.default_rng(0), params, targets=L.TARGETS, rank=4)
    np.testing.assert_array_equal(ma.causal_lm(params, tokens, lora=lora, **config),
                                  ma.causal_lm(params, tokens, **config))


@pytest.mark.parametrize("targets", [("q",), ("o",), ("down",), L.TARGETS])
def test_adapted_model_equals_the_merged_weights_written_out(targets):
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (2, 5))
    lora = with_random_b(L.init_lora(np.random.default_rng(0), params, targets=targets, rank=2,
                                     alpha=6.0))
    reference = ma.causal_lm(loop_reference(params, lora, 6.0), tokens, **config)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, lora=lora, **config),
                               reference, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ma.causal_lm(L.merge(params, lora), tokens, **config),
                               reference, rtol=1e-10, atol=1e-12)


def test_merge_then_unmerge_gives_the_weights_back_and_changes_no_input():
    params, _ = llama_like()
    lora = with_random_b(L.init_lora(np.random.default_rng(0), params, targets=L.TARGETS, rank=3))
    before = params["layers"][0]["self_attention"]["w_q"].copy()
    back = L.unmerge(L.merge(params, lora), lora)
    for mine, theirs in zip(back["layers"], params["layers"]):
        for sublayer in ("self_attention", "feed_forward"):
            for key, w in theirs[sublayer].items():
                np.testing.assert_allclose(mine[sublayer][key], w, rtol=0, atol=1e-13)
    np.testing.assert_array_equal(params["layers"][0]["self_attention"]["w_q"], before)


def test_gradient_reaches_only_the_adapter_and_is_zero_for_a_at_init():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 6))
    lora = L.init_lora(np.random.default_rng(0), params, targets=("q", "v"), rank=2)

    def loss(layers):
        logits = ma.causal_lm(params, tokens, lora={"alpha": 16, "layers": layers}, **config)
        return ma.cross_entropy(logits[:, :-1], tokens[:, 1:])

    grads = autograd.grad(loss)(lora["layers"])
    assert grads[0]["q"]["A"].shape == (D, 2)
    assert np.all(grads[1]["v"]["A"] == 0)  # B = 0: nothing flows back to A
    assert np.abs(grads[1]["v"]["B"]).max() > 0


def test_float32_model_and_adapter_stay_float32():
    params, config = llama_like(dtype=np.float32)
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    lora = L.init_lora(np.random.default_rng(0), params, rank=2)
    assert lora["layers"][0]["q"]["A"].dtype == np.float32
    assert ma.causal_lm(params, tokens, lora=lora, **config).dtype == np.float32
    grads = autograd.grad(lambda layers: np.sum(ma.causal_lm(
        params, tokens, lora={**lora, "layers": layers}, **config)))(lora["layers"])
    assert grads[1]["v"]["A"].dtype == grads[1]["v"]["B"].dtype == np.float32


def test_dropout_draws_from_rng_and_without_rng_is_refused():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    lora = with_random_b(L.init_lora(np.random.default_rng(0), params, rank=2))
    run = lambda seed: ma.causal_lm(params, tokens, lora=lora, lora_dropout=0.5,  # noqa: E731
                                    rng=np.random.default_rng(seed), **config)
    np.testing.assert_array_equal(run(0), run(0))
    assert not np.allclose(run(0), run(1))
    with pytest.raises(TypeError, match="lora_dropout=0.5 needs rng"):
        ma.causal_lm(params, tokens, lora=lora, lora_dropout=0.5, **config)


def test_lora_none_is_the_base_model():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    np.testing.assert_array_equal(ma.causal_lm(params, tokens, lora=None, **config),
                                  ma.causal_lm(params, tokens, **config))


@pytest.mark.parametrize("call, error, message", [
    (lambda p: L.init_lora(np.random.default_rng(0), p, rank=0), ValueError,
     r"rank must be in \[1, min\(d_in, d_out\)\] = \[1, 16\] for q's projection"),
    (lambda p: L.init_lora(np.random.default_rng(0), p, rank=9), ValueError,
     r"= \[1, 8\] for v's projection \[16, 8\], got rank=9"),
    (lambda p: L.init_lora(np.random.default_rng(0), p, rank=2.0), TypeError,
     "rank must be a positive int"),
    (lambda p: L.init_lora(np.random.default_rng(0), p, targets=("q_proj",)), ValueError,
     r"unknown LoRA target\(s\) \['q_proj'\]: the targets are 'q', 'k', 'v', 'o', 'gate', 'up', "
     "'down'"),
    (lambda p: L.init_lora(np.random.default_rng(0), p, targets="q"), TypeError,
     "targets must be a non-empty list or tuple"),
    (lambda p: L.init_lora(0, p), TypeError, "rng must be a np.random.Generator"),
    (lambda p: L.init_lora(np.random.default_rng(0), {"layers": [{"self_attention": {}}]}),
     ValueError, r"adapts params\['layers'\]\[0\]\['self_attention'\]\['w_q'\], which this model "
                 "does not have"),
    (lambda p: L.init_lora(np.random.default_rng(0), p, alpha=0), ValueError, "alpha must be"),
    (lambda p: L.merge(p, {**L.init_lora(np.random.default_rng(0), p), "alpha": -1.0}),
     ValueError, r"lora\['alpha'\] must be"),
])
def test_bad_init_and_merge_arguments_are_refused_by_name(call, error, message):
    params, _ = llama_like()
    with pytest.raises(error, match=message):
        call(params)


def _adapter(params, **kwargs):
    return L.init_lora(np.random.default_rng(0), params, **kwargs)


@pytest.mark.parametrize("change, error, message", [
    (lambda lora, p: {**lora, "layers": lora["layers"][:1]}, ValueError,
     "lora has 1 layers, the model 2: an adapter made for another model"),
    (lambda lora, p: {**lora, "layers": [{"q": {"A": np.zeros((D + 1, 2)),
                                                "B": np.zeros((2, D))}}] * 2},
     ValueError, r"lora\['layers'\]\[0\]\['q'\]\['A'\] has shape \(17, 2\), expected"),
    (lambda lora, p: {**lora, "layers": [{"q": {"A": np.zeros((D, 2)),
                                                "B": np.zeros((3, D))}}] * 2},
     ValueError, r"lora\['layers'\]\[0\]\['q'\]\['B'\] has shape \(3, 16\), expected"),
    (lambda lora, p: {**lora, "layers": [{"qq": lora["layers"][0]["q"]}] * 2}, ValueError,
     r"unknown LoRA target\(s\) \['qq'\]"),
    (lambda lora, p: {**lora, "layers": [{"q": {k: a.astype(np.float32) for k, a in
                                                lora["layers"][0]["q"].items()}}] * 2},
     TypeError, "is float32, the model's weight float64"),
    (lambda lora, p: lora["layers"], ValueError, r"lora must be a dict \{'alpha'"),
    (lambda lora, p: {"layers": lora["layers"]}, ValueError, r"lora must be a dict \{'alpha'"),
])
def test_an_adapter_of_another_model_is_refused_by_name(change, error, message):
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    lora = change(_adapter(params, rank=2), params)
    with pytest.raises(error, match=message):
        ma.causal_lm(params, tokens, lora=lora, **config)


@pytest.mark.parametrize("alpha, settings, error, message", [
    (0, {}, ValueError, r"lora\['alpha'\]"),
    (-1.0, {}, ValueError, r"lora\['alpha'\]"),
    ("16", {}, TypeError, r"lora\['alpha'\] must be a positive number"),
    (16, {"lora_dropout": 1.0}, ValueError, r"lora_dropout must be a float in \[0, 1\)"),
    (16, {"lora_dropout": -0.1}, ValueError, r"lora_dropout must be a float in \[0, 1\)"),
])
def test_bad_lora_settings_are_refused_by_name(alpha, settings, error, message):
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    with pytest.raises(error, match=message):
        ma.causal_lm(params, tokens, lora={**_adapter(params, rank=2), "alpha": alpha},
                     **settings, **config)


def test_a_model_whose_attention_computes_its_own_projections_is_refused():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    with pytest.raises(ValueError, match="the attention .* computes its own: leave lora out"):
        ma.causal_lm(params, tokens, lora=_adapter(params, rank=2),
                     attention=ma.self_attention, **config)


def test_feed_forward_targets_on_a_gpt2_style_model_are_refused_by_name():
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 1, D, H, F)
    with pytest.raises(ValueError, match=r"\['feed_forward'\]\['w_gate'\], which this model does "
                                         "not have"):
        L.init_lora(np.random.default_rng(0), params, targets=("gate",))


def test_a_head_mask_with_an_adapted_output_projection_is_refused():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    with pytest.raises(ValueError, match="head_mask scales w_o's rows"):
        ma.causal_lm(params, tokens, lora=_adapter(params, targets=("o",), rank=2),
                     head_mask=np.ones((N_LAYERS, H)), **config)
    lora = with_random_b(_adapter(params, targets=("q",), rank=2))
    mask = np.array([[1.0, 0.0, 1.0, 1.0], [0.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(  # q's path: the same whether the head mask or LoRA comes first
        ma.causal_lm(params, tokens, lora=lora, head_mask=mask, **config),
        ma.causal_lm(L.merge(params, lora), tokens, head_mask=mask, **config),
        rtol=1e-12, atol=1e-12)


def test_generation_through_the_cache_with_lora_equals_the_merged_models():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (2, 5))
    lora = with_random_b(_adapter(params, targets=L.TARGETS, rank=2, alpha=8))
    merged = ma.generate(L.merge(params, lora), tokens, 6, **config)
    assert not np.array_equal(merged, ma.generate(params, tokens, 6, **config))
    np.testing.assert_array_equal(
        ma.generate(params, tokens, 6, lora=lora, **config), merged)


def test_lora_alpha_beside_the_adapter_is_refused_naming_where_alpha_lives():
    params, config = llama_like()
    tokens = np.random.default_rng(2).integers(0, V, (1, 4))
    with pytest.raises(TypeError, match=r"the adapter carries its alpha, lora\['alpha'\]"):
        ma.causal_lm(params, tokens, lora=_adapter(params, rank=2), lora_alpha=8, **config)


def test_the_adapters_placed_in_the_params_hold_arrays_only():
    # no settings, no Generator: alpha / r is in B, each projection's dropout an array of its own
    params, _ = llama_like()
    lora = with_random_b(_adapter(params, targets=L.TARGETS, rank=2, alpha=6.0))
    placed = L._placed(lora["layers"][0], 6.0, 0.25, np.random.default_rng(0), (2, 3))
    for target, pair in placed.items():
        assert set(pair) == {"A", "B", "keep"}
        assert all(isinstance(a, np.ndarray) for a in pair.values())
        np.testing.assert_array_equal(pair["B"], lora["layers"][0][target]["B"] * 3.0)
        assert pair["keep"].shape == (2, 3, pair["A"].shape[0])
        assert set(np.unique(pair["keep"])) <= {0.0, 1 / 0.75}
    assert not np.array_equal(placed["q"]["keep"], placed["k"]["keep"])
