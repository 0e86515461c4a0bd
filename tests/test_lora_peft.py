"""minattn.lora against PEFT on transformers' models built from a config (random weights, nothing
downloaded), float64: the gradients with respect to the LoRA matrices, every target alone and all
together, for Llama (SmolLM2's GQA and tied embeddings), Qwen3 (QK-norm), Gemma 2 (sandwich norms,
soft-capping, sliding layers) and Qwen2 (attention biases); and adapters both ways, PEFT's files
read by minattn and minattn's read by peft.PeftModel.from_pretrained."""
import json

import autograd
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity with PEFT needs torch")
transformers = pytest.importorskip("transformers", reason="parity with PEFT needs transformers")
peft = pytest.importorskip("peft", reason="parity with PEFT needs peft")
pytest.importorskip("safetensors", reason="adapters are safetensors files")

import minattn as ma  # noqa: E402
from minattn import lora as L  # noqa: E402
from minattn.interop import from_hf  # noqa: E402

from .test_hf_families import _build  # noqa: E402

# PEFT 0.21 asks transformers 5's model a deprecated property (PEFT's code, not minattn's)
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

MODELS = {
    "llama_gqa_tied": ("llama", {"tie_word_embeddings": True}),
    "qwen3_qk_norm": ("qwen3", {"head_dim": 12}),
    "gemma2": ("gemma2", {"head_dim": 12, "sliding_window": 3, "attn_logit_softcapping": 1.5,
                          "final_logit_softcapping": 2.0, "query_pre_attn_scalar": 20,
                          "attn_implementation": "eager"}),
    "qwen2_biases": ("qwen2", {}),
}
PEFT_NAMES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj",
              "up": "up_proj", "down": "down_proj"}
RANK, ALPHA = 3, 5.0


def _tokens(seed=0, b=2, length=7):
    return np.random.default_rng(seed).integers(3, 37, size=(b, length))


def _models(name, targets, seed=0):
    """(transformers' model, its PEFT model with random A and B, minattn's params and config,
    the same A and B as minattn's lora)."""
    family, overrides = MODELS[name]
    model = _build(family, torch.float64, **overrides)
    params, config = from_hf(model)
    params = _copied(params)  # (PEFT wraps the model's modules; its weights stay minattn's)
    peft_model = peft.get_peft_model(model, peft.LoraConfig(
        r=RANK, lora_alpha=ALPHA, lora_dropout=0.0,
        target_modules=[PEFT_NAMES[t] for t in targets])).to(torch.float64)
    rng = np.random.default_rng(seed)
    lora = {"alpha": ALPHA, "layers": []}
    for layer in peft_model.base_model.model.model.layers:
        mine = {}
        for t in targets:
            module = getattr(layer.self_attn if t in "qkvo" else layer.mlp, PEFT_NAMES[t])
            a = 0.3 * rng.normal(size=module.lora_A["default"].weight.shape)  # [r, d_in]
            b = 0.3 * rng.normal(size=module.lora_B["default"].weight.shape)  # [d_out, r]: not 0
            with torch.no_grad():
                module.lora_A["default"].weight.copy_(torch.from_numpy(a))
                module.lora_B["default"].weight.copy_(torch.from_numpy(b))
            mine[t] = {"A": a.T.copy(), "B": b.T.copy()}
        lora["layers"].append(mine)
    return peft_model, params, config, lora


def _copied(tree):
    if isinstance(tree, dict):
        return {k: _copied(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_copied(v) for v in tree]
    return np.array(tree) if isinstance(tree, np.ndarray) else tree


def _peft_gradients(peft_model, tokens, weights):
    # d sum(logits * weights) / d every lora_A, lora_B, in minattn's layout [d_in, r], [r, d_out]
    peft_model.zero_grad()
    logits = peft_model(torch.from_numpy(tokens),
                        attention_mask=torch.ones(tokens.shape, dtype=torch.long)).logits
    (logits * torch.from_numpy(weights)).sum().backward()
    grads = {name: p.grad.numpy().T for name, p in peft_model.named_parameters() if "lora_" in name}
    return grads, logits.detach().numpy()


def _name(i, target, which):
    module = f"{'self_attn' if target in 'qkvo' else 'mlp'}.{PEFT_NAMES[target]}"
    return f"base_model.model.model.layers.{i}.{module}.lora_{which}.default.weight"


@pytest.mark.parametrize("targets", [(t,) for t in L.TARGETS] + [L.TARGETS],
                         ids=lambda t: "+".join(t))
@pytest.mark.parametrize("name", MODELS)
def test_gradients_with_respect_to_the_lora_matrices_equal_pefts(name, targets, float64_islands):
    peft_model, params, config, lora = _models(name, targets)
    tokens = _tokens()
    weights = np.random.default_rng(1).normal(size=(2, 7, 37))
    theirs, their_logits = _peft_gradients(peft_model, tokens, weights)

    def loss(layers):
        return np.sum(ma.causal_lm(params, tokens, lora={"alpha": ALPHA, "layers": layers},
                                   **config) * weights)

    np.testing.assert_allclose(
        ma.causal_lm(params, tokens, lora=lora, **config), their_logits,
        rtol=0, atol=1e-10)
    mine = autograd.grad(loss)(lora["layers"])
    assert len(theirs) == 2 * len(targets) * len(lora["layers"])
    for i, layer in enumerate(mine):
        for target, pair in layer.items():
            for which in ("A", "B"):
                reference = theirs[_name(i, target, which)]
                error = np.abs(pair[which] - reference).max() / np.abs(reference).max()
                assert error <= 1e-8, (i, target, which, error)


def test_init_draws_a_within_the_bound_pefts_own_init_reaches_and_b_zero():
    # (a seed cannot reproduce torch's generator: the bound and the zeros are what must agree)
    model = _build("llama", torch.float64)
    params, _ = from_hf(model)
    peft_model = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=list(
        PEFT_NAMES.values())))
    mine = L.init_lora(np.random.default_rng(0), params, targets=L.TARGETS, rank=4)
    for i, layer in enumerate(peft_model.base_model.model.model.layers):
        for t in L.TARGETS:
            module = getattr(layer.self_attn if t in "qkvo" else layer.mlp, PEFT_NAMES[t])
            theirs_a = module.lora_A["default"].weight.detach().numpy()  # [r, d_in]
            bound = 1 / np.sqrt(theirs_a.shape[1])
            assert 0.75 * bound < np.abs(theirs_a).max() <= bound  # PEFT's: U(-bound, bound)
            assert 0.75 * bound < np.abs(mine["layers"][i][t]["A"]).max() <= bound
            assert mine["layers"][i][t]["A"].shape == theirs_a.T.shape
            assert not module.lora_B["default"].weight.detach().numpy().any()
            assert not mine["layers"][i][t]["B"].any()


@pytest.mark.parametrize("name", ["llama_gqa_tied", "gemma2"])
def test_pefts_from_pretrained_reads_a_minattn_adapter_to_the_same_logits(name, tmp_path,
                                                                         float64_islands):
    family, overrides = MODELS[name]
    model = _build(family, torch.float64, **overrides)
    params, config = from_hf(model)
    params = _copied(params)
    lora = L.init_lora(np.random.default_rng(0), params, targets=("q", "v", "o", "down"), rank=2)
    lora = {"alpha": 7.0,
            "layers": [{t: {"A": p["A"], "B": np.random.default_rng(i).normal(size=p["B"].shape)}
                        for t, p in layer.items()} for i, layer in enumerate(lora["layers"])]}
    L.save_adapter(tmp_path, lora, base_model_name_or_path="a-test-model")
    peft_model = peft.PeftModel.from_pretrained(model, str(tmp_path)).to(torch.float64)
    tokens = _tokens()
    with torch.no_grad():
        theirs = peft_model(torch.from_numpy(tokens),
                            attention_mask=torch.ones(tokens.shape, dtype=torch.long)).logits
    mine = ma.causal_lm(params, tokens, lora=lora, **config)
    base = ma.causal_lm(params, tokens, **config)
    assert np.abs(mine - base).max() > 1e-3  # the adapter changes the logits
    np.testing.assert_allclose(mine, theirs.numpy(), rtol=0, atol=1e-10)


def test_an_adapter_peft_saves_loads_in_minattn_to_the_same_logits(tmp_path, float64_islands):
    targets = ("k", "o", "gate", "up")
    peft_model, params, config, _ = _models("qwen3_qk_norm", targets)
    peft_model.save_pretrained(str(tmp_path))
    tokens = _tokens(seed=3)
    with torch.no_grad():
        theirs = peft_model(torch.from_numpy(tokens),
                            attention_mask=torch.ones(tokens.shape, dtype=torch.long)).logits
    lora = L.load_adapter(tmp_path, params, config)
    assert lora["alpha"] == ALPHA and set(lora["layers"][1]) == set(targets)
    np.testing.assert_allclose(ma.causal_lm(params, tokens, lora=lora, **config),
                               theirs.numpy(), rtol=0, atol=1e-10)
    merged = ma.causal_lm(L.merge(params, lora), tokens, **config)
    np.testing.assert_allclose(merged, theirs.numpy(), rtol=0, atol=1e-10)


def test_minattn_writes_the_tensor_names_and_shapes_peft_writes(tmp_path, float64_islands):
    from safetensors.numpy import load_file

    peft_model, params, config, lora = _models("llama_gqa_tied", L.TARGETS)
    peft_model.save_pretrained(str(tmp_path / "peft"))
    L.save_adapter(tmp_path / "minattn", lora)
    theirs = load_file(str(tmp_path / "peft" / "adapter_model.safetensors"))
    mine = load_file(str(tmp_path / "minattn" / "adapter_model.safetensors"))
    assert {k: v.shape for k, v in mine.items()} == {k: v.shape for k, v in theirs.items()}
    for key in mine:
        np.testing.assert_array_equal(mine[key], theirs[key])
    their_config = json.loads((tmp_path / "peft" / "adapter_config.json").read_text())
    my_config = json.loads((tmp_path / "minattn" / "adapter_config.json").read_text())
    for key in ("peft_type", "r", "lora_alpha", "bias", "fan_in_fan_out", "use_rslora",
                "use_dora"):
        assert my_config[key] == their_config[key], key
    assert sorted(my_config["target_modules"]) == sorted(their_config["target_modules"])


def _peft_adapter(tmp_path, name="llama_gqa_tied", targets=("q", "v"), **settings):
    peft_model, params, config, _ = _models(name, targets)
    peft_model.save_pretrained(str(tmp_path))
    if settings:
        file = tmp_path / "adapter_config.json"
        file.write_text(json.dumps({**json.loads(file.read_text()), **settings}))
    return params, config


def test_an_adapter_of_a_model_of_other_shapes_is_refused_by_name(tmp_path, float64_islands):
    _peft_adapter(tmp_path)  # d_model 32
    params, _ = from_hf(_build("llama", torch.float64, hidden_size=48))
    with pytest.raises(ValueError, match=r"adapter_model.safetensors: tensor 'base_model\.model"
                                         r"\.model\.layers\.0\.self_attn\.q_proj\.lora_A"
                                         r"\.weight' has shape \[3, 32\], expected \[3 x 48\]"):
        L.load_adapter(tmp_path, params)


def test_an_adapter_of_a_model_with_more_layers_is_refused_by_name(tmp_path, float64_islands):
    _peft_adapter(tmp_path)  # 2 layers
    params, _ = from_hf(_build("llama", torch.float64, num_hidden_layers=1))
    with pytest.raises(ValueError, match="adapts layer 1, the model has 1 layers: an adapter "
                                         "made for another model"):
        L.load_adapter(tmp_path, params)


def test_an_adapter_of_a_model_with_fewer_layers_is_refused_by_name(tmp_path, float64_islands):
    _peft_adapter(tmp_path)  # 2 layers
    params, _ = from_hf(_build("llama", torch.float64, num_hidden_layers=3))
    with pytest.raises(ValueError, match=r"layer 2 has LoRA weights for \[\]"):
        L.load_adapter(tmp_path, params)


def test_an_adapter_for_another_base_model_is_refused_by_name(tmp_path, float64_islands):
    params, _ = _peft_adapter(tmp_path, base_model_name_or_path="org/another-model")
    with pytest.raises(ValueError, match="made for 'org/another-model', not 'org/this-model'"):
        L.load_adapter(tmp_path, params, base_model="org/this-model")


@pytest.mark.parametrize("settings, message", [
    ({"use_dora": True}, "use_dora=True is not supported"),
    ({"use_rslora": True}, "use_rslora=True is not supported"),
    ({"bias": "all"}, "bias='all' is not supported"),
    ({"peft_type": "IA3"}, "peft_type='IA3' is not supported"),
    ({"layer_replication": [[0, 2], [1, 2]]}, "layer_replication=.* is not supported"),
    ({"target_modules": ["c_attn"]}, r"target_modules=\['c_attn'\]; minattn reads a list of "
                                     "q_proj, k_proj"),
    ({"target_modules": ["q_proj", "k_proj", "v_proj"]},
     r"layer 0 has LoRA weights for \['self_attn.q_proj', 'self_attn.v_proj'\] \(whole\), "
     r"target_modules of adapter_config.json says \['self_attn.k_proj', 'self_attn.q_proj', "
     r"'self_attn.v_proj'\]"),
    ({"r": 4}, r"tensor '[^']*layers\.0\.self_attn\.q_proj\.lora_A\.weight' has shape "
               r"\[3, 32\], expected \[4 x 32\] \(r=4 of adapter_config.json"),
    ({"lora_alpha": 0}, "lora_alpha"),
])
def test_an_adapter_minattn_would_compute_otherwise_is_refused_by_name(tmp_path, settings,
                                                                       message, float64_islands):
    params, config = _peft_adapter(tmp_path, **settings)
    with pytest.raises(ValueError, match=message):
        L.load_adapter(tmp_path, params, config)
