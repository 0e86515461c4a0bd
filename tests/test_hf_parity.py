"""minattn's causal_lm and generate reproduce Hugging Face transformers' Llama and GPT-2, built
from a config with random weights (nothing is downloaded), in eval mode."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity with transformers needs torch")
transformers = pytest.importorskip("transformers", reason="parity tests need transformers")

import minattn as ma  # noqa: E402
from minattn.interop import from_hf  # noqa: E402

V = 37


def _llama(dtype, n_heads=4, n_kv_heads=2, tied=False, n_layers=2, bias=False):
    config = transformers.LlamaConfig(
        vocab_size=V, hidden_size=16, intermediate_size=24, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, num_key_value_heads=n_kv_heads, max_position_embeddings=64,
        rms_norm_eps=1e-6, tie_word_embeddings=tied, attention_bias=bias,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, attn_implementation="sdpa")
    torch.manual_seed(0)
    return _randomized(transformers.LlamaForCausalLM(config), dtype)


def _gpt2(dtype, tied=True, n_layers=2):
    config = transformers.GPT2Config(
        vocab_size=V, n_positions=64, n_embd=16, n_layer=n_layers, n_head=4,
        tie_word_embeddings=tied, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        attn_implementation="sdpa")
    torch.manual_seed(0)
    return _randomized(transformers.GPT2LMHeadModel(config), dtype)


def _randomized(model, dtype):
    # Random values in every parameter (HF initialises norms to 1 and biases to 0, which would
    # hide a swapped norm or a lost bias), in the requested dtype, eval mode.
    model = model.to(dtype).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def _tokens(b=2, length=7, seed=0):
    return np.random.default_rng(seed).integers(0, V, size=(b, length))


def _hf_logits(model, tokens):
    t = torch.from_numpy(tokens)
    with torch.no_grad():  # an explicit all-ones attention_mask: no padding, and no advice logged
        return model(t, attention_mask=torch.ones_like(t)).logits.numpy()


LLAMAS = {"gqa": {}, "mqa": {"n_kv_heads": 1}, "mha": {"n_kv_heads": 4}, "tied": {"tied": True},
          "bias": {"bias": True}, "one_layer": {"n_layers": 1}}


@pytest.mark.parametrize("variant", LLAMAS)
def test_llama_logits_float64(variant, float64_islands):
    model = _llama(torch.float64, **LLAMAS[variant])
    params, kwargs = from_hf(model)
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **kwargs), _hf_logits(model, tokens),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("variant", ["gqa", "mqa", "tied"])
def test_llama_logits_float32_stock_model(variant):
    model = _llama(torch.float32, **LLAMAS[variant])
    params, kwargs = from_hf(model)
    tokens = _tokens()
    logits = ma.causal_lm(params, tokens, **kwargs)
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, _hf_logits(model, tokens), rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
@pytest.mark.parametrize("tied", [True, False])
def test_gpt2_logits(dtype, atol, tied):
    model = _gpt2(dtype, tied=tied)
    params, kwargs = from_hf(model)
    assert ("lm_head" in params) != tied
    tokens = _tokens()
    np.testing.assert_allclose(ma.causal_lm(params, tokens, **kwargs), _hf_logits(model, tokens),
                               rtol=0, atol=atol)


def _hf_generate(model, tokens, n):
    # No end-of-sequence token, so HF generates exactly n tokens (min_new_tokens would instead
    # forbid the eos token, changing the argmax), and a pad id so it does not warn.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        t = torch.from_numpy(tokens)
        out = model.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=n,
                             do_sample=False)
    return out.numpy()


@pytest.mark.parametrize("build", [lambda: _llama(torch.float64), lambda: _gpt2(torch.float64),
                                   lambda: _llama(torch.float32, n_kv_heads=1)],
                         ids=["llama64", "gpt2_64", "llama_mqa32"])
def test_greedy_generation_equals_hf_generate(build, float64_islands):
    model = build()
    params, kwargs = from_hf(model)
    tokens = _tokens(2, 5, seed=3)
    ours = ma.generate(params, tokens, 12, **kwargs)
    np.testing.assert_array_equal(ours, _hf_generate(model, tokens, 12))
    np.testing.assert_array_equal(ma.generate(params, tokens, 12, use_cache=False, **kwargs), ours)


def test_from_hf_refuses_other_models():
    with pytest.raises(TypeError, match="from_hf"):
        from_hf(torch.nn.Linear(2, 2))
