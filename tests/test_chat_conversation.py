"""A chat keeps its KV cache across turns (minattn/models/conversation.py): a turn reads only
the ids past what the cache holds, and computes what reading the whole conversation afresh
computes. On a small random-weight Llama written as a GGUF file (tests/test_language_model_files)
and loaded in float64, so that the comparisons are exact to rounding."""
import numpy as np
import pytest

for _module in ("gguf", "tokenizers", "jinja2"):
    pytest.importorskip(_module, reason=f"{_module} is not installed: pip install '.[chat]'")

import minattn as ma  # noqa: E402
from minattn.models.chat_model import load_language_model  # noqa: E402
from minattn.models.conversation import ChatCache  # noqa: E402
from tests.test_language_model_files import llama_tensors, write_gguf  # noqa: E402

QUESTIONS = ["Hi there", "the", "Go on"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf",
                      llama_tensors(np.random.default_rng(3)))
    return load_language_model(path, dtype=np.float64)


def prompt_ids(model, messages):
    return model.tokenizer.encode(model.chat_prompt(messages))


def last_logits(model, ids):
    # The reference: the whole sequence read afresh, no cache -> the next id's logits [V].
    return ma.causal_lm(model.params, np.array([ids]), **model.config)[0, -1]


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def conversation(model, chat_cache, n_new=4):
    """Three turns -> [(the turn's prompt ids, its reply ids, the ids the cache held before)]."""
    messages, turns = [], []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        ids = prompt_ids(model, messages)
        held = list(chat_cache.ids) if chat_cache is not None else []
        reply = list(model.reply(ids, n_new, chat_cache=chat_cache))
        turns.append((ids, reply, held))
        messages.append({"role": "assistant", "content": model.tokenizer.decode(reply)})
    return turns


def test_replies_with_the_kept_cache_equal_replies_read_afresh(model):
    kept = conversation(model, ChatCache())
    afresh = conversation(model, None)
    assert [reply for _, reply, _ in kept] == [reply for _, reply, _ in afresh]
    assert all(len(reply) > 0 for _, reply, _ in kept)


def test_a_turn_reads_only_the_ids_past_what_the_cache_holds(model):
    chat_cache, messages, previous = ChatCache(), [], []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        ids = prompt_ids(model, messages)
        held = list(chat_cache.ids)
        reply = list(model.reply(ids, 4, chat_cache=chat_cache))
        shared = min(common_prefix(held, ids), len(ids) - 1)
        assert (chat_cache.n_cached, chat_cache.n_read) == (shared, len(ids) - shared)
        assert chat_cache.n_cached >= len(previous)  # the previous prompt is not read again
        # the cache holds the prompt, then the reply's ids as they were read: all of them after
        # the end-of-turn token, all but the last when max_new_tokens cut the reply
        assert chat_cache.ids == ids + (reply[:-1] if len(reply) == 4 else reply)
        messages.append({"role": "assistant", "content": model.tokenizer.decode(reply)})
        previous = ids


def test_the_logits_after_the_kept_cache_equal_reading_everything(model):
    first = prompt_ids(model, [{"role": "user", "content": "Hi there"}])
    second = prompt_ids(model, [{"role": "user", "content": "Hi there"},
                                {"role": "assistant", "content": "the"},
                                {"role": "user", "content": "Go on"}])
    edited = prompt_ids(model, [{"role": "user", "content": "Hi thee"}])  # differs inside
    chat_cache = ChatCache()
    for ids in (first, second, second, edited, first):  # grow, same again, cut back, grow
        rest = chat_cache.start(ids)
        assert rest == ids[len(ids) - len(rest):] and len(rest) >= 1
        logits = chat_cache.read(model.params, rest, model.config)  # [1, V]
        np.testing.assert_allclose(logits[0], last_logits(model, ids), rtol=0, atol=1e-10)
        assert chat_cache.ids == ids


def test_a_cache_cut_back_is_the_cache_of_the_prefix(model):
    ids = prompt_ids(model, [{"role": "user", "content": "Hi there, the"}])
    chat_cache = ChatCache()
    chat_cache.read(model.params, ids, model.config)
    edited = ids[:5] + [ids[5] + 1] + ids[6:]
    assert chat_cache.start(edited) == edited[5:]
    _, afresh = ma.causal_lm(model.params, np.array([ids[:5]]), return_cache=True, **model.config)
    for layer, reference in zip(chat_cache.cache, afresh):
        for name in ("k", "v"):
            np.testing.assert_allclose(layer[name], reference[name], rtol=0, atol=1e-12)


def test_a_cache_that_disagrees_with_its_ids_is_read_again_whole(model):
    # Ctrl-C between a read and its record: the ids and the cache's length differ.
    ids = prompt_ids(model, [{"role": "user", "content": "Hi there"}])
    chat_cache = ChatCache()
    chat_cache.read(model.params, ids, model.config)
    chat_cache.ids = chat_cache.ids[:-1]
    assert chat_cache.start(ids + [5]) == ids + [5]
    assert chat_cache.cache is None and chat_cache.n_cached == 0


def test_a_state_that_is_not_keys_and_values_is_never_cut(model):
    # A recurrent layer's state is not one entry per position: cutting is refused, all re-read.
    chat_cache = ChatCache()
    chat_cache.ids = [1, 2, 3]
    chat_cache.cache = ({"k": np.zeros((1, 1, 3, 4)), "v": np.zeros((1, 1, 3, 4)),
                         "state": np.zeros((1, 4, 4))},)
    assert chat_cache.start([1, 2, 9, 9]) == [1, 2, 9, 9]
    assert chat_cache.cache is None and chat_cache.ids == []
