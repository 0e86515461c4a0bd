"""A KV cache appended in spare room: the append-in-place policy.

A decoder's KV cache grows by one token a step, and it is plain arrays, passed in and returned,
never changed in place (kv_cache.py). Appended with np.concatenate, each step copies the whole
past of every layer: a step of SmolLM2 after 1,000 tokens copies 60 arrays of 750 KiB (90 MB
read and written, beside its 540 MB of weights read), and the copy grows with every token.

    keys = appended(past, new)     # np.concatenate([past, new], axis=-2), the same numbers

returns the same array as the concatenation. Appending to an array it returned (the next step
of a generation), it copies the past again (a concatenation, then that into a buffer) with room
for ROOM more tokens after them (at least a quarter of the length), and returns a view of the
buffer; the next step's new token is written into that room, where no array anyone holds can
see it, and its result is again a view of the buffer, one token longer. The past is copied once
every ROOM steps, into a new buffer.

The arrays a caller holds never change. The views returned share the buffer with the cache's
earlier and later steps, so they are read-only: a write into one, which would change the
others, raises NumPy's ValueError instead. Only the array a call returned takes the room after
it, and only once: appending to it hands the room on to the new view. A cache kept from an
earlier step (to branch, to retry), a slice of a view, a prompt's keys, an autograd box (a
gradient being recorded), a CuPy array, or arrays that differ in dtype or in anything but their
length along axis -2 are concatenated as ever (one copy, as before).

The keys attend as before: the buffer's axes lie in memory in the order of the concatenated
array's (NumPy keeps its inputs'; a model's keys come token by token), so each head's [L, d]
block has the strides it had there, only the step across the axes outside L is longer, and
every product reads the same rows the same way: the same numbers to the last bit
(tests/test_kv_room.py compares a model's logits over many steps).
"""
import weakref

import numpy

ROOM = 128  # the least number of tokens a new buffer holds beyond its cache

# id(an array appended() returned) -> (a weak reference to it, its buffer or None). A dict's
# get, pop and set are each atomic under the GIL: two threads appending to one array, one takes
# its room, the other concatenates.
_rooms = {}


class _Ref(weakref.ref):
    # a weak reference that knows its array's id, under which _rooms holds it
    __slots__ = ("key",)


def appended(past, new):
    """past [..., L_past, d], new [..., L, d] -> [..., L_past + L, d]: see the module docstring."""
    if type(past) is not numpy.ndarray or type(new) is not numpy.ndarray:
        return numpy.concatenate([past, new], axis=-2)
    shape, added = past.shape, new.shape  # (each read of .shape makes a tuple)
    if past.dtype != new.dtype or len(shape) != len(added) or len(shape) < 2 or \
            shape[:-2] != added[:-2] or shape[-1] != added[-1]:
        return numpy.concatenate([past, new], axis=-2)
    n_past = shape[-2]
    total = n_past + added[-2]
    entry = _rooms.pop(id(past), None)  # the room after past, taken (or none)
    if entry is None or entry[0]() is not past:  # an array of the caller's: as ever, the
        view, buffer = numpy.concatenate([past, new], axis=-2), None  # room only from the next
    else:  # a view this function returned: its chain of steps
        buffer = entry[1]
        if buffer is None or total > buffer.shape[-2]:
            buffer = _with_room(numpy.concatenate([past, new], axis=-2))
        else:
            buffer[..., n_past:total, :] = new
        view = buffer[..., :total, :]
        view.flags.writeable = False  # (it shares memory with the other steps' views)
    ref = _Ref(view, _forget)
    ref.key = id(view)
    _rooms[ref.key] = (ref, buffer)
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


def _forget(ref, rooms=_rooms):
    # (the array is being freed: no newer one has its id yet, nor its entry; the dict bound
    # here, so that a callback at the interpreter's exit finds it)
    entry = rooms.get(ref.key)
    if entry is not None and entry[0] is ref:
        rooms.pop(ref.key, None)
