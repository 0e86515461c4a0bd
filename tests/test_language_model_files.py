"""GGUF files and folders written here, small: a random-weight Llama written with
gguf.GGUFWriter (as llama.cpp's converter writes one: Q and K rows reordered, weights quantized)
read by transformers and by minattn, and every kind of bad file refused by name before any long
computation."""
import json

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed: pip install '.[chat]'")
for _module in ("tokenizers", "jinja2", "safetensors"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn.pretrained import load_language_model  # noqa: E402

D, F, H, H_KV, N_LAYERS = 32, 64, 2, 1, 2  # Q8_0 blocks hold 32 weights: rows of 32 and 64
BYTES = [chr(c) for c in range(ord("!"), ord("~") + 1)] + ["Ġ"]  # a byte-alphabet vocabulary
TOKENS = ["<|endoftext|>", "<|im_end|>"] + BYTES + ["Ġt", "he", "Ġthe"]
MERGES = ["Ġ t", "h e", "Ġt he"]
TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


def permute(w, n_heads):
    # llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: each head's rows interleaved, so
    # that its RoPE, which rotates adjacent pairs, rotates what transformers' rotates by halves.
    return (w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


# transformers' name in a layer -> llama.cpp's (gguf's TensorNameMap, written out here)
GGUF_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
              "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def hf_tensors(rng, tied=True):
    """transformers' names -> float32 weights [d_out, d_in], a random 2-layer Llama."""
    d_k = D // H
    t = {"model.embed_tokens.weight": rng.normal(size=(len(TOKENS), D)),
         "model.norm.weight": 1 + 0.1 * rng.normal(size=D)}
    if not tied:
        t["lm_head.weight"] = rng.normal(size=(len(TOKENS), D))
    shapes = {"self_attn.q_proj": (H * d_k, D), "self_attn.k_proj": (H_KV * d_k, D),
              "self_attn.v_proj": (H_KV * d_k, D), "self_attn.o_proj": (D, H * d_k),
              "mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)}
    for i in range(N_LAYERS):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            t[f"model.layers.{i}.{norm}.weight"] = 1 + 0.1 * rng.normal(size=D)
        for name, shape in shapes.items():
            t[f"model.layers.{i}.{name}.weight"] = rng.normal(size=shape) / np.sqrt(D)
    return {name: w.astype(np.float32) for name, w in t.items()}


def llama_tensors(rng, tied=True):
    """The same weights under llama.cpp's names, w_q's and w_k's rows reordered as its
    converter reorders them."""
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
           "output_norm.weight", "lm_head.weight": "output.weight"}
    out = {}
    for name, w in hf_tensors(rng, tied).items():
        if name in top:
            out[top[name]] = w
            continue
        _, _, i, *rest = name.split(".")
        base = ".".join(rest[:-1])
        if base == "self_attn.q_proj":
            w = permute(w, H)
        if base == "self_attn.k_proj":
            w = permute(w, H_KV)
        out[f"blk.{i}.{GGUF_NAMES[base]}.weight"] = w
    return out


def write_folder(path, tensors, tied=True):
    """A save_pretrained-style folder: config.json, model.safetensors, tokenizer.json."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": D, "num_hidden_layers": N_LAYERS,
        "num_attention_heads": H, "num_key_value_heads": H_KV, "intermediate_size": F,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 64,
        "tie_word_embeddings": tied, "eos_token_id": 1, "hidden_act": "silu"}))
    save_file(tensors, str(path / "model.safetensors"))
    backend = Tokenizer(models.BPE({t: i for i, t in enumerate(TOKENS)},
                                   [tuple(m.split(" ")) for m in MERGES]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.save(str(path / "tokenizer.json"))
    return path


def write_gguf(path, tensors, quantize=None, arch="llama", tokenizer_model="gpt2", extra=None):
    """A Llama GGUF with the given tensors; quantize: a GGMLQuantizationType for the 2-D ones."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(N_LAYERS)
    writer.add_context_length(64)
    writer.add_embedding_length(D)
    writer.add_feed_forward_length(F)
    writer.add_head_count(H)
    writer.add_head_count_kv(H_KV)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(D // H)
    writer.add_tokenizer_model(tokenizer_model)
    writer.add_tokenizer_pre("gpt-2")  # as llama.cpp's converter names GPT-2's rule
    writer.add_token_list(TOKENS)
    writer.add_token_merges(MERGES)
    writer.add_token_types([3, 3] + [1] * (len(TOKENS) - 2))
    writer.add_eos_token_id(1)
    writer.add_chat_template(TEMPLATE)
    for key, value in (extra or {}).items():
        writer.add_string(key, value)
    for name, w in tensors.items():
        if quantize is not None and w.ndim == 2:
            writer.add_tensor(name, gguf.quants.quantize(w, quantize), raw_dtype=quantize)
        else:
            writer.add_tensor(name, w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def tiny(tmp_path):
    return write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))


@pytest.mark.parametrize("quantize, tied", [(None, True),
                                            (gguf.GGMLQuantizationType.Q8_0, False),
                                            (gguf.GGMLQuantizationType.Q4_1, True)],
                         ids=["f32_tied", "q8_0_untied", "q4_1_tied"])
def test_a_llama_gguf_written_here_reads_as_transformers_reads_it(tmp_path, quantize, tied):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(1), tied),
                      quantize)
    ours = load_language_model(path, dtype=np.float64)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, gguf_file=path.name, dtype=torch.float64).eval()
    assert ("lm_head" in ours.params) != tied
    ids = np.random.default_rng(2).integers(0, len(TOKENS), size=(1, 12))
    with torch.no_grad():
        reference = theirs(torch.from_numpy(ids)).logits.numpy()
    # the stock reference (float32 RMSNorm and rotary tables): float32 tolerance
    np.testing.assert_allclose(ma.causal_lm(ours.params, ids, **ours.config), reference,
                               rtol=0, atol=1e-4)


def test_the_q_and_k_rows_are_put_back_in_transformers_order(tiny):
    rows = llama_tensors(np.random.default_rng(0))["blk.0.attn_q.weight"]  # as in the file
    model = load_language_model(tiny)
    w_q = model.params["layers"][0]["self_attention"]["w_q"]  # [D, H d_k]
    d_k = D // H
    # head 0's row i of the file is its row i // 2 (even i) or d_k / 2 + i // 2 (odd i)
    for i in range(d_k):
        original = i // 2 if i % 2 == 0 else d_k // 2 + i // 2
        np.testing.assert_array_equal(w_q[:, original], rows[i])


@pytest.mark.parametrize("tied", [True, False])
def test_a_folder_and_a_gguf_of_the_same_weights_compute_the_same(tmp_path, tied):
    # the GGUF holds w_q and w_k in llama.cpp's row order, the folder in transformers'
    gguf_model = load_language_model(write_gguf(
        tmp_path / "m.gguf", llama_tensors(np.random.default_rng(3), tied)), dtype=np.float64)
    folder = load_language_model(write_folder(
        tmp_path / "m", hf_tensors(np.random.default_rng(3), tied), tied), dtype=np.float64)
    ids = np.random.default_rng(4).integers(0, len(TOKENS), size=(1, 10))
    np.testing.assert_allclose(ma.causal_lm(folder.params, ids, **folder.config),
                               ma.causal_lm(gguf_model.params, ids, **gguf_model.config),
                               rtol=0, atol=1e-10)


def test_an_untied_folder_without_lm_head_is_refused(tmp_path):
    path = write_folder(tmp_path / "m", hf_tensors(np.random.default_rng(3), tied=True),
                        tied=False)
    with pytest.raises(ValueError, match="no tensor 'lm_head.weight'.*tie_word_embeddings is false"):
        load_language_model(path)


def test_tokenizer_and_template_come_from_the_metadata(tiny):
    model = load_language_model(tiny)
    ids = model.tokenizer.encode("the the<|im_end|>")
    # BPE by the merges "h e", "Ġ t", "Ġt he": "the" has no "t he", so it stays two tokens
    assert [model.tokenizer.decode([i]) for i in ids] == ["t", "he", " the", "<|im_end|>"]
    assert model.chat_prompt([{"role": "user", "content": "hi"}]) == "user: hi\n"
    assert model.eos_token_id == 1


# -- bad files, refused by name -----------------------------------------------------------

def test_a_missing_path_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.gguf' does not exist"):
        load_language_model(tmp_path / "nothing.gguf")


@pytest.mark.parametrize("cut", [100, 2000, -40])
def test_a_truncated_gguf_is_refused_naming_the_file(tiny, cut):
    data = tiny.read_bytes()
    tiny.write_bytes(data[:cut])
    with pytest.raises(ValueError, match=r"tiny.gguf cannot be read as GGUF \(truncated"):
        load_language_model(tiny)


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    path = tmp_path / "notes.gguf"
    path.write_text("hello")
    with pytest.raises(ValueError, match="notes.gguf cannot be read as GGUF"):
        load_language_model(path)


@pytest.mark.parametrize("arch", ["gpt2", "bert", "mamba"])
def test_an_unsupported_architecture_is_refused_by_name(tmp_path, arch):
    path = write_gguf(tmp_path / "other.gguf", {"token_embd.weight": np.zeros((4, D), "f4")},
                      arch=arch)
    with pytest.raises(ValueError, match=f"architecture '{arch}' is not supported"):
        load_language_model(path)


def test_an_unsupported_tensor_type_is_refused_by_name(tmp_path):
    tensors = llama_tensors(np.random.default_rng(0))
    tensors["blk.0.attn_v.weight"] = tensors["blk.0.attn_v.weight"].astype(np.float64)
    path = write_gguf(tmp_path / "f64.gguf", tensors)
    with pytest.raises(ValueError, match="'blk.0.attn_v.weight' has type F64, not supported"):
        load_language_model(path)


def test_a_tensor_outside_the_layout_is_refused_by_name(tmp_path):
    tensors = {**llama_tensors(np.random.default_rng(0)), "blk.0.ffn_gate_inp.weight":
               np.ones((4, D), "f4")}
    with pytest.raises(ValueError, match="a llama model with this config does not have: "
                                         "blk.0.ffn_gate_inp.weight"):
        load_language_model(write_gguf(tmp_path / "x.gguf", tensors))


def test_a_missing_tensor_is_refused_by_its_gguf_name_and_the_file(tmp_path):
    tensors = llama_tensors(np.random.default_rng(0))
    del tensors["blk.1.ffn_up.weight"]
    with pytest.raises(ValueError, match=r"x.gguf: has no tensor 'blk.1.ffn_up.weight' "
                                         r"\(transformers: model.layers.1.mlp.up_proj.weight\)"):
        load_language_model(write_gguf(tmp_path / "x.gguf", tensors))


def test_an_unsupported_tokenizer_is_refused_by_name(tmp_path):
    path = write_gguf(tmp_path / "t5.gguf", llama_tensors(np.random.default_rng(0)),
                      tokenizer_model="t5")
    with pytest.raises(ValueError, match="tokenizer.ggml.model 't5' is not supported"):
        load_language_model(path)


def test_rope_scaling_is_refused_by_name(tmp_path):
    path = write_gguf(tmp_path / "yarn.gguf", llama_tensors(np.random.default_rng(0)),
                      extra={"llama.rope.scaling.type": "dynamic"})
    with pytest.raises(ValueError, match="rope.scaling.type 'dynamic' is not supported"):
        load_language_model(path)


def test_a_bad_dtype_is_refused(tiny):
    with pytest.raises(ValueError, match="dtype must be float32 or float64, got float16"):
        load_language_model(tiny, dtype=np.float16)


def test_a_folder_without_config_json_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="it has no config.json"):
        load_language_model(tmp_path)


def _config(**changes):
    return json.dumps({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 8,
                       "num_attention_heads": 2, "rope_theta": 10000.0, **changes})


def test_a_folder_without_a_tokenizer_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(_config())
    (tmp_path / "model.safetensors").write_bytes(b"")  # weights first (tests/test_cli_newcomer)
    with pytest.raises(FileNotFoundError, match="has no tokenizer.json"):
        load_language_model(tmp_path)


def test_a_folder_of_another_architecture_is_refused_by_name(tmp_path):
    (tmp_path / "config.json").write_text(_config(model_type="bert"))
    with pytest.raises(ValueError, match="model_type 'bert' is not supported"):
        load_language_model(tmp_path)


def test_a_folder_without_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(_config())
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        load_language_model(tmp_path)


def test_a_corrupt_config_json_is_refused_naming_it(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json cannot be read as JSON"):
        load_language_model(tmp_path)


@pytest.mark.parametrize("model_type", ["llama", "mistral"])
def test_a_folder_without_max_position_embeddings_gets_its_config_class_default_context(
        tmp_path, model_type):
    # (the context a prompt and its reply may fill: transformers' default for the family, never
    # one number for every family)
    transformers = pytest.importorskip("transformers")
    path = write_folder(tmp_path / "model", hf_tensors(np.random.default_rng(0)))
    config = json.loads((path / "config.json").read_text())
    del config["max_position_embeddings"]
    (path / "config.json").write_text(json.dumps({**config, "model_type": model_type}))
    expected = transformers.AutoConfig.for_model(model_type).max_position_embeddings
    assert load_language_model(path).context_length == expected
