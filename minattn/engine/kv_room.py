"""A KV cache appended in spare room: the append-in-place policy.

A decoder's KV cache grows by one token a step, and it is plain arrays, passed in and returned,
never changed in place (kv_cache.py). Appended with np.concatenate, each step copies the whole
past of every layer: a step of SmolLM2 after 1,000 tokens copies 60 arrays of 750 KiB (90 MB
read and written, beside its 540 MB of weights read), and the copy grows with every token.

    keys = appended(past, new)     # np.concatenate([past, new], axis=-2), the same numbers

returns the same array as the concatenation, but as a view of a larger buffer with room for
ROOM more tokens after them (at least a quarter of the length): the next step's new token is
written into that room, where no array anyone holds can see it, and its result is again a view
of the buffer, one token longer. The past is copied once every ROOM steps, into a new buffer.

The arrays a caller holds never change. Only the view a call returned takes the room after it,
and only once: appending to it hands the room to the new view. A cache kept from an earlier
step (to branch, to retry), a slice of a view, an autograd box (a gradient being recorded), a
CuPy array, or arrays that differ in dtype or in anything but their length along axis -2 are
concatenated into a new buffer, as the concatenation would copy them.

The keys attend as before: the buffer's axes lie in memory in the order of the concatenated
array's (NumPy keeps its inputs'; a model's keys come token by token), so each head's [L, d]
block has the strides it had there, only the step across the axes outside L is longer, and
every product reads the same rows the same way: the same numbers to the last bit
(tests/test_kv_room.py compares a model's logits over many steps).
"""
import threading
import weakref

import numpy

ROOM = 128  # the least number of tokens a new buffer holds beyond its cache

_rooms = {}  # id(a view appended() returned) -> (a weak reference to it, its buffer)
_lock = threading.RLock()  # (a view freed inside it forgets itself: re-entered)


def appended(past, new):
    """past [..., L_past, d], new [..., L, d] -> [..., L_past + L, d]: see the module docstring."""
    if type(past) is not numpy.ndarray or type(new) is not numpy.ndarray or \
            past.dtype != new.dtype or past.ndim != new.ndim or past.ndim < 2 or \
            past.shape[:-2] != new.shape[:-2] or past.shape[-1] != new.shape[-1]:
        return numpy.concatenate([past, new], axis=-2)
    n_past, total = past.shape[-2], past.shape[-2] + new.shape[-2]
    with _lock:
        entry = _rooms.pop(id(past), None)  # the room, taken (or none)
    if entry is not None and entry[0]() is past and total <= entry[1].shape[-2]:
        buffer = entry[1]
        buffer[..., n_past:total, :] = new
    else:
        buffer = _with_room(numpy.concatenate([past, new], axis=-2))
    view = buffer[..., :total, :]
    key = id(view)
    with _lock:
        _rooms[key] = (weakref.ref(view, lambda ref, key=key: _forget(key, ref)), buffer)
    return view


def _with_room(out):
    # out [..., L, d] -> a buffer [..., L + room, d] holding it, its axes laid out in memory in
    # out's order: NumPy's concatenation keeps its inputs' order (a model's keys come token by
    # token, [..., L, H_kv, d] in memory, from split_heads' view), and each product then reads
    # the same strides it read in the concatenated array.
    order = sorted(range(out.ndim), key=lambda axis: -out.strides[axis])  # outermost first
    shape = out.shape[:-2] + (out.shape[-2] + max(ROOM, out.shape[-2] // 4), out.shape[-1])
    buffer = numpy.empty([shape[axis] for axis in order], out.dtype).transpose(
        numpy.argsort(order))
    buffer[..., :out.shape[-2], :] = out
    return buffer


def _forget(key, ref):
    with _lock:
        entry = _rooms.get(key)
        if entry is not None and entry[0] is ref:  # (not a newer view's, given the freed id)
            del _rooms[key]
