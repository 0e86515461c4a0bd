"""The logit lens, activation patching and attribution patching (minattn/models/patching.py)
against independent references, float64, on a small random Llama built from a config:
TransformerLens (its TransformerBridge around the same transformers model: run_with_cache and
its patching functions), transformers' hidden states through the model's own final norm and
lm_head, torch autograd for the attribution gradient. transformers' float32 islands lifted
(the float64_islands fixture, tests/float64_peers.py)."""
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the references need torch")
transformers = pytest.importorskip("transformers", reason="the references need transformers")

from minattn.hooks import run_with_cache  # noqa: E402
from minattn.interop import from_hf  # noqa: E402
from minattn.models.patching import (activation_patching, attribution_patching,  # noqa: E402
                                     logit_difference, logit_lens)

from .test_hf_families import _build  # noqa: E402
from .test_hf_parity import V  # noqa: E402

ANSWER, WRONG, TOL = 5, 9, 1e-8


@pytest.fixture
def llama(float64_islands):
    model = _build("llama", torch.float64, attn_implementation="eager",
                   num_hidden_layers=3).eval()
    params, config = from_hf(model)
    rng = np.random.default_rng(0)
    clean = rng.integers(3, V, size=(1, 6))
    corrupted = clean.copy()
    corrupted[0, 2] = (clean[0, 2] + 7) % (V - 3) + 3  # one token changed
    return model, types.SimpleNamespace(params=params, config=config), clean, corrupted


@pytest.fixture
def bridge(llama):
    """TransformerLens's TransformerBridge around the same transformers model (a word-level
    tokenizer made here: nothing downloaded); its attention's softmax (float32 in TransformerLens
    4.3, whatever the model's dtype) computes in float64 under the float64_islands fixture that
    `llama` holds (tests/float64_peers.py)."""
    transformer_lens = pytest.importorskip("transformer_lens")
    from tokenizers import Tokenizer, models
    backend = Tokenizer(models.WordLevel({f"t{i}": i for i in range(V)}, unk_token="t0"))
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, name_or_path="minattn-test", add_bos_token=True,
        bos_token="t1", eos_token="t2", pad_token="t0", unk_token="t0")
    return transformer_lens.TransformerBridge.boot_transformers(
        "minattn-test-llama", hf_model=llama[0], tokenizer=tokenizer, dtype=torch.float64)


def test_cached_activations_equal_transformer_lens(llama, bridge):
    model, lm, clean, _ = llama
    _, theirs = bridge.run_with_cache(torch.from_numpy(clean))
    logits, ours = run_with_cache(lm.params, clean, **lm.config)
    np.testing.assert_allclose(logits, model(torch.from_numpy(clean)).logits.detach().numpy(),
                               rtol=0, atol=TOL)
    names = {"resid_pre": "hook_resid_pre", "attn_out": "hook_attn_out", "z": "attn.hook_z",
             "pattern": "attn.hook_pattern", "mlp_out": "hook_mlp_out",
             "resid_post": "hook_resid_post"}
    for layer in range(3):
        for ours_name, their_name in names.items():
            value = theirs[f"blocks.{layer}.{their_name}"].detach().numpy()
            if ours_name == "z":  # TransformerLens: [B, L, H, d]; minattn: [B, H, L, d]
                value = value.transpose(0, 2, 1, 3)
            np.testing.assert_allclose(ours[ours_name, layer], value, rtol=0, atol=TOL,
                                       err_msg=ours_name)


def test_activation_patching_equals_transformer_lens(llama, bridge):
    from transformer_lens import patching as tl_patching

    model, lm, clean, corrupted = llama
    clean_t, corrupted_t = torch.from_numpy(clean), torch.from_numpy(corrupted)
    _, clean_cache = bridge.run_with_cache(clean_t)
    d_clean, d_bad = (float(logit_difference(bridge(t).detach().numpy(), ANSWER, WRONG)[0])
                      for t in (clean_t, corrupted_t))

    def metric(logits):  # TransformerLens's patching metric: our score
        return (logits[0, -1, ANSWER] - logits[0, -1, WRONG] - d_bad) / (d_clean - d_bad)

    ours = activation_patching(lm, clean, corrupted, ANSWER, WRONG)
    assert ours["clean"] == pytest.approx(d_clean, abs=TOL)
    heads = tl_patching.get_act_patch_attn_head_out_all_pos(bridge, corrupted_t, clean_cache,
                                                            metric)
    resid = tl_patching.get_act_patch_resid_pre(bridge, corrupted_t, clean_cache, metric)
    assert np.abs(heads.numpy()).max() > 0.05  # the patches matter
    np.testing.assert_allclose(ours["heads"], heads.numpy(), rtol=0, atol=TOL)
    np.testing.assert_allclose(ours["resid"], resid.numpy(), rtol=0, atol=TOL)


def test_sublayer_patching_equals_a_torch_hook_replacing_the_output(llama):
    model, lm, clean, corrupted = llama
    ours = activation_patching(lm, clean, corrupted, ANSWER, WRONG)
    recorded = {}

    def run(tokens, module=None, hook=None):
        handle = module.register_forward_hook(hook) if module is not None else None
        with torch.no_grad():
            logits = model(torch.from_numpy(tokens)).logits.numpy()
        if handle:
            handle.remove()
        return float(logit_difference(logits, ANSWER, WRONG)[0])

    d_clean, d_bad = run(clean), run(corrupted)
    for layer in range(3):
        block = model.model.layers[layer]
        for name, module in (("attn_out", block.self_attn), ("mlp_out", block.mlp)):
            run(clean, module, lambda m, a, out, key=(name, layer): recorded.__setitem__(key, out))
            swap = lambda m, a, out, key=(name, layer): (recorded[key][0], *out[1:]) \
                if isinstance(out, tuple) else recorded[key]  # noqa: E731
            expected = (run(corrupted, module, swap) - d_bad) / (d_clean - d_bad)
            assert ours[name][layer] == pytest.approx(expected, abs=TOL), (name, layer)


def test_attribution_is_the_gradient_of_the_difference_times_the_change_in_z(llama):
    # the reference: torch autograd through transformers, z entering o_proj
    model, lm, clean, corrupted = llama
    h = lm.config["n_heads"]
    z = {}

    def run(tokens, deltas=None):
        def pre(module, args, layer):
            z[layer] = args[0]
            return (args[0] + deltas[layer],) if deltas is not None else None
        handles = [model.model.layers[l].self_attn.o_proj.register_forward_pre_hook(
            lambda m, a, l=l: pre(m, a, l)) for l in range(3)]
        logits = model(torch.from_numpy(tokens)).logits
        for handle in handles:
            handle.remove()
        return logits[0, -1, ANSWER] - logits[0, -1, WRONG]

    d_clean = float(run(clean).detach())
    z_clean = {l: v.detach() for l, v in z.items()}
    deltas = [torch.zeros_like(z_clean[l], requires_grad=True) for l in range(3)]
    d_bad = run(corrupted, deltas)
    d_bad.backward()
    expected = np.array([((z_clean[l] - z[l].detach()) * deltas[l].grad).reshape(
        1, -1, h, z[l].shape[-1] // h).sum((0, 1, 3)).numpy() for l in range(3)])
    expected /= d_clean - float(d_bad.detach())
    np.testing.assert_allclose(attribution_patching(lm, clean, corrupted, ANSWER, WRONG),
                               expected, rtol=0, atol=TOL)


def test_logit_lens_reads_each_layer_through_the_final_norm_and_the_unembedding(llama):
    model, lm, clean, _ = llama
    with torch.no_grad():
        out = model(torch.from_numpy(clean), output_hidden_states=True)
        # transformers' last hidden state is already normalised
        stream = [model.model.norm(s) for s in out.hidden_states[:-1]] + [out.hidden_states[-1]]
        logits = np.array([model.lm_head(s)[0, -1].numpy() for s in stream])  # [n + 1, V]
    lens = logit_lens(lm, clean, [ANSWER, WRONG])
    np.testing.assert_allclose(lens["logits"], logits[:, [ANSWER, WRONG]], rtol=0, atol=TOL)
    ranks = [[int((row > row[i]).sum()) for i in (ANSWER, WRONG)] for row in logits]
    np.testing.assert_array_equal(lens["ranks"], ranks)


def test_a_pair_that_cannot_be_patched_is_refused(llama):
    _, lm, clean, corrupted = llama
    with pytest.raises(ValueError, match="same logit difference"):
        activation_patching(lm, clean, clean, ANSWER, WRONG)
    with pytest.raises(ValueError, match="same logit difference"):
        attribution_patching(lm, clean, clean, ANSWER, WRONG)
    with pytest.raises(ValueError, match=r"same length, got shapes \(1, 6\) and \(1, 5\)"):
        activation_patching(lm, clean, corrupted[:, :5], ANSWER, WRONG)
