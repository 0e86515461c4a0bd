"""A chat's KV cache, kept from one turn to the next.

Each turn the chat template renders the whole conversation again, and the tokenizer cuts it
into ids; a turn's ids mostly begin with the ids of the turns before (the previous prompt, then
the reply as generated). ChatCache holds the ids whose keys and values its cache holds, compares
them with the new turn's ids, and keeps the cache up to where they first differ: only the ids
past that point are read. They can differ before the end of what it holds: the reply's text,
tokenized again, need not give the ids that were generated, and a template may render an
earlier message differently once a later one follows. The cache is then cut back to the common
prefix, which gives the same keys and values as reading that prefix afresh: a position's keys
depend only on the tokens up to it (the mask is causal).

    chat = ChatCache()
    for question in questions:
        messages.append({"role": "user", "content": question})
        ids = model.tokenizer.encode(model.chat_prompt(messages))
        reply = list(model.reply(ids, 100, chat_cache=chat))   # reads chat.n_read new ids
        messages.append({"role": "assistant", "content": model.tokenizer.decode(reply)})
"""
import numpy as np


class ChatCache:
    """The ids a KV cache holds, and the cache: one {"k", "v": [1, H_kv, L, d_k]} per layer, as
    causal_lm returns it. start(ids) keeps what the new ids share with the old; read(...) reads
    ids after them. n_cached and n_read: the last turn's ids found in the cache and read."""

    def __init__(self):
        self.ids = []  # list[int]: the ids whose keys and values self.cache holds, in order
        self.cache = None  # None: empty
        self.n_cached = 0
        self.n_read = 0

    def start(self, ids):
        """A turn's ids (the whole conversation, rendered; list[int]) -> the ids left to read.
        The cache is cut back to the longest prefix it shares with ids, and to at most
        len(ids) - 1 of them: the last id is read again, for the logits that follow it."""
        ids = [int(i) for i in ids]
        if _length(self.cache) != len(self.ids):  # interrupted between a read and its record
            self.ids, self.cache = [], None
        keep = 0
        limit = min(len(self.ids), len(ids) - 1)
        while keep < limit and self.ids[keep] == ids[keep]:
            keep += 1
        if keep < len(self.ids):
            self.cache = _cut(self.cache, keep)
            keep = _length(self.cache)  # 0 where the cache cannot be cut back (read it all)
            self.ids = self.ids[:keep]
        self.n_cached, self.n_read = keep, len(ids) - keep
        return ids[keep:]

    def read(self, params, ids, config):
        """Read ids (list[int]) after what the cache holds -> the logits [1, V] of the next id;
        the cache then holds them too. config: the keyword arguments of causal_lm."""
        from ..language_model import causal_lm

        logits, self.cache = causal_lm(params, np.array([ids]), cache=self.cache,
                                       return_cache=True, logits_to_keep=1, **config)  # [1, 1, V]
        self.ids = self.ids + list(ids)
        return logits[:, -1]


def _length(cache):
    # The positions a cache holds (layer 0's keys), 0 when empty.
    if not cache or "k" not in cache[0]:
        return 0
    return cache[0]["k"].shape[-2]


def _cut(cache, keep):
    # The cache of the first `keep` positions: the keys and values sliced. None (empty) for
    # keep == 0, and where a layer holds a state other than keys and values (a recurrent
    # layer's state is not a list of positions to cut).
    if keep == 0 or any(set(layer) != {"k", "v"} for layer in cache):
        return None
    return tuple({name: layer[name][..., :keep, :] for name in ("k", "v")} for layer in cache)
