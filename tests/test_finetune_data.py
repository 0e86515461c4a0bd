"""Chat examples for `finetune`: every kind of bad file refused naming the file and the line, and
the loss mask held to the template's own text: on SmolLM2 the counted tokens are, decoded, each
assistant reply followed by its end-of-turn token, and nothing else."""
import json

import numpy as np
import pytest

from minattn.training.chat_data import DataError, batch, check_lengths, encode, read_examples

GOOD = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]}


def _write(tmp_path, lines, name="data.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join((line if isinstance(line, bytes) else
                               (line if isinstance(line, str) else json.dumps(line)).encode())
                              + b"\n" for line in lines))
    return path


def test_a_good_file_reads_as_its_line_numbers_and_messages(tmp_path):
    system = {"messages": [{"role": "system", "content": "Be brief."}, *GOOD["messages"],
                           {"role": "user", "content": "And?"},
                           {"role": "assistant", "content": "Done."}]}
    path = _write(tmp_path, [GOOD, "", system])
    assert read_examples(path) == [(1, GOOD["messages"]), (3, system["messages"])]


@pytest.mark.parametrize("lines, says", [
    ([], "is empty"),
    (["", "  "], "is empty"),
    ([GOOD, "{not json"], "line 2: not JSON"),
    ([GOOD, GOOD, "[1, 2]"], 'line 3: no "messages"'),
    ([{"conversation": []}], 'line 1: no "messages"'),
    ([{"messages": "Hi"}], 'line 1: "messages" must be a list'),
    ([{"messages": [{"role": "user", "text": "Hi"}]}], 'line 1: "messages" must be a list'),
    ([{"messages": [{"role": "user", "content": 3}]}], 'line 1: "messages" must be a list'),
    ([{"messages": []}], "line 1: roles out of order, got none"),
    ([{"messages": [GOOD["messages"][1], GOOD["messages"][0]]}],
     "line 1: roles out of order, got assistant, user"),
    ([{"messages": GOOD["messages"][:1]}], "line 1: roles out of order, got user:"),
    ([{"messages": GOOD["messages"] * 2 + GOOD["messages"][1:]}], "roles out of order"),
    ([{"messages": [GOOD["messages"][0]] + [{"role": "system", "content": "x"}] +
      GOOD["messages"][1:]}], "roles out of order, got user, system, assistant"),
    ([{"messages": [{"role": "tool", "content": "x"}, *GOOD["messages"]]}], "roles out of order"),
    ([GOOD, b'{"messages": "caf\xe9"}'], r"line 2: not valid UTF-8 text \(byte b'\\xe9'"),
])
def test_a_bad_file_is_refused_naming_its_line(tmp_path, lines, says):
    path = _write(tmp_path, lines)
    with pytest.raises(DataError, match=says) as error:
        read_examples(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_missing_file_is_refused_by_name(tmp_path):
    with pytest.raises(DataError, match=r"data file '.*nothing.jsonl' does not exist"):
        read_examples(tmp_path / "nothing.jsonl")


def test_examples_longer_than_max_length_are_refused_with_their_count_and_the_longest():
    encoded = [(1, np.arange(5), None), (2, np.arange(9), None), (4, np.arange(7), None)]
    check_lengths("d.jsonl", encoded, 9)
    with pytest.raises(DataError, match=r"2 of 3 examples are longer than --max-length 6 tokens "
                                        r"\(the longest, line 2, has 9\)"):
        check_lengths("d.jsonl", encoded, 6)


def test_a_batch_is_padded_on_the_right_and_shifted_by_one():
    tokens, targets, weights = batch([(np.array([5, 6, 7]), np.array([False, True, True])),
                                      (np.array([8, 9]), np.array([False, True]))], pad_id=0)
    np.testing.assert_array_equal(tokens, [[5, 6], [8, 9]])  # 9 predicts padding: not counted
    np.testing.assert_array_equal(targets, [[6, 7], [9, 0]])
    np.testing.assert_array_equal(weights, [[True, True], [True, False]])


@pytest.fixture(scope="module")
def smollm2():
    # The tokenizer and the chat template of SmolLM2's GGUF, without its weights.
    for module in ("gguf", "tokenizers", "jinja2"):
        pytest.importorskip(module)
    import gguf

    from minattn.cli.model_file import gguf_header
    from minattn.models import chat_model

    try:
        path = chat_model.default_model_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    tokenizer, special, bos, eos = chat_model._gguf_tokenizer(gguf.GGUFReader(path), path)
    template = chat_model._compile_template(gguf_header(path)["tokenizer.chat_template"], path)
    return chat_model.LanguageModel({}, {}, tokenizer, eos, bos, 8192, template, special, path)


@pytest.mark.parametrize("system", [False, True])
def test_the_counted_tokens_are_the_assistants_replies_and_their_end_of_turn(smollm2, system):
    messages = [{"role": "user", "content": "The keys to the cabinet ___ here. is or are?"},
                {"role": "assistant", "content": "are"},
                {"role": "user", "content": "And: the key to the cabinets ___ here."},
                {"role": "assistant", "content": "It is *is*.\nDone"}]
    if system:
        messages.insert(0, {"role": "system", "content": "Answer with one word."})
    ids, keep = encode(smollm2, messages)
    text = smollm2.chat_prompt(messages, add_generation_prompt=False)
    assert smollm2.tokenizer.decode(ids) == text  # every token, in order
    assert smollm2.tokenizer.decode(ids[keep]) == "are<|im_end|>It is *is*.\nDone<|im_end|>"
    # What is left out: the system prompt, the user's words and every header; in the template's
    # text each reply is "<|im_start|>assistant\n" + reply + "<|im_end|>\n".
    expected = text
    for m in messages:
        if m["role"] == "assistant":
            reply = f"assistant\n{m['content']}<|im_end|>\n"
            expected = expected.replace(reply, "assistant\n\n", 1)
    assert smollm2.tokenizer.decode(ids[~keep]) == expected
