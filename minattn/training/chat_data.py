"""Chat examples for fine-tuning: a JSONL file, one conversation a line,

    {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}

(a "system" message may come first; then user and assistant take turns, the last one the
assistant's), checked line by line, rendered by the model's own chat template, tokenized, and
marked: the loss counts the assistant's tokens only (its replies and the end-of-turn token that
closes each), never the system prompt, the user's words or the template's headers.

Which characters of the rendered text are the assistant's is found by rendering twice: the
conversation up to an assistant message with the generation prompt (the text before the reply)
and up to the end of that message (the text after it, trailing spaces and line breaks left
out); a template for which the first is not the start of the second is refused. The tokenizer's
character offsets then say which tokens fall inside.
"""
import json
from pathlib import Path

import numpy as np

TURNS = ("user", "assistant")


class DataError(ValueError):
    """A data file that cannot be trained on: the message names the file, the line and why."""


def read_examples(path):
    """A JSONL file -> a list of conversations (lists of {"role", "content"}), one a line (blank
    lines skipped). DataError for a missing, empty or non-UTF-8 file, a line that is not JSON,
    has no "messages", or whose roles are out of order."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data file {str(path)!r} does not exist")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        raise DataError(f"{path} line {line}: not valid UTF-8 text (byte "
                        f"{raw[error.start:error.start + 1]!r} at offset {error.start})") from None
    examples = [(n, _messages(path, n, line)) for n, line in enumerate(text.splitlines(), 1)
                if line.strip()]
    if not examples:
        raise DataError(f"data file {path} is empty: it needs one JSON object a line, "
                        '{"messages": [...]}')
    return examples


def _messages(path, n, line):
    where = f"{path} line {n}"
    try:
        example = json.loads(line)
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not JSON ({error.msg} at column {error.colno}); the file "
                        'must hold one JSON object a line, {"messages": [...]}') from None
    if not isinstance(example, dict) or "messages" not in example:
        raise DataError(f'{where}: no "messages" (each line is {{"messages": [{{"role": ..., '
                        f'"content": ...}}, ...]}}), got {line[:80]!r}')
    messages = example["messages"]
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and set(m) == {"role", "content"} and
            isinstance(m["content"], str) for m in messages):
        raise DataError(f'{where}: "messages" must be a list of {{"role": ..., "content": str}}, '
                        f"got {json.dumps(messages)[:80]}")
    roles = [m["role"] for m in messages]
    turns = roles[1:] if roles[:1] == ["system"] else roles
    expected = [TURNS[i % 2] for i in range(len(turns))]
    if not turns or turns != expected or turns[-1] != "assistant":
        raise DataError(f"{where}: roles out of order, got {', '.join(roles) or 'none'}: an "
                        "optional system message, then user and assistant in turn, ending with "
                        "the assistant's")
    return messages


def encode(model, messages):
    """A conversation -> (ids int [L], keep bool [L]): the rendered conversation's token ids,
    and which of them are the assistant's. model: a LanguageModel (its chat template and
    tokenizer: minattn/models/chat_model.py)."""
    text = model.chat_prompt(messages, add_generation_prompt=False)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = model.chat_prompt(messages[:i], add_generation_prompt=True)
        upto = model.chat_prompt(messages[:i + 1], add_generation_prompt=False).rstrip()
        if not (upto.startswith(before) and text.startswith(upto)):
            raise ValueError(f"{model.path}: its chat template does not render a conversation "
                             "as the conversation before it followed by the new message; the "
                             "assistant's tokens cannot be told apart")
        spans.append((len(before), len(upto)))
    encoding = model.tokenizer.backend.encode(text)
    starts = np.array([start for start, _ in encoding.offsets])  # [L]
    keep = np.zeros(len(starts), dtype=bool)
    for begin, end in spans:
        keep |= (starts >= begin) & (starts < end)
    return np.array(encoding.ids), keep


def check_lengths(path, encoded, max_length):
    """Refuse (DataError) the examples longer than max_length tokens: they are not cut, since a
    cut conversation may lose the very reply it is there to teach. encoded: [(line, ids, keep)]."""
    long = [(len(ids), line) for line, ids, _ in encoded if len(ids) > max_length]
    if long:
        length, line = max(long)
        raise DataError(f"{path}: {len(long)} of {len(encoded)} examples are longer than "
                        f"--max-length {max_length} tokens (the longest, line {line}, has "
                        f"{length}): raise --max-length or shorten them")


def batch(examples, pad_id):
    """[(ids [L_i], keep [L_i]), ...] -> tokens int [B, L - 1], targets int [B, L - 1], weights
    bool [B, L - 1], L the longest: each row's input and the next token it predicts, padded on
    the right (a causal model's real tokens never see padding after them), weights True where
    the target is one of the assistant's tokens."""
    length = max(len(ids) for ids, _ in examples)
    ids = np.full((len(examples), length), pad_id, dtype=np.int64)
    keep = np.zeros((len(examples), length), dtype=bool)
    for row, (example_ids, example_keep) in enumerate(examples):
        ids[row, :len(example_ids)] = example_ids
        keep[row, :len(example_keep)] = example_keep
    return ids[:, :-1], ids[:, 1:], keep[:, 1:]
