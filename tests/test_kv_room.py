"""The KV cache appended in spare room (engine/kv_room.py): the same arrays as np.concatenate, to
the last bit; an array a caller holds never changes, whatever is appended after it (a cache kept
to branch from, a slice of one); and a model's logits over many steps, across the buffers'
ends, equal those of the cache concatenated at every step."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minattn.kv_cache as kv_cache
from minattn.engine import kv_room
from minattn.engine.kv_room import appended
from minattn.language_model import causal_lm, init_causal_lm


def _concatenated(past, new):
    return np.concatenate([past, new], axis=-2)


@settings(max_examples=60, deadline=None)
@given(lead=st.lists(st.integers(1, 3), min_size=0, max_size=2), d=st.integers(1, 5),
       lengths=st.lists(st.integers(0, 4), min_size=1, max_size=12),
       dtype=st.sampled_from([np.float32, np.float64, np.float16]), room=st.integers(1, 5))
def test_a_chain_of_appends_is_the_concatenation_and_no_held_array_changes(
        lead, d, lengths, dtype, room):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kv_room, "ROOM", room)
        _chain(lead, d, lengths, dtype)


def _chain(lead, d, lengths, dtype):
    rng = np.random.default_rng(len(lengths))
    past = rng.standard_normal((*lead, 2, d)).astype(dtype)
    want, held = past.copy(), []
    for n in lengths:
        new = rng.standard_normal((*lead, n, d)).astype(dtype)
        layout = _concatenated(past, new).strides
        past, want = appended(past, new), _concatenated(want, new)
        inner = [axis for axis in range(past.ndim) if layout[axis] <= layout[-2]]
        assert [past.strides[axis] for axis in inner] == [layout[axis] for axis in inner]
        assert past.dtype == want.dtype and past.shape == want.shape
        assert np.array_equal(past, want)
        held.append((past, want))
    for view, snapshot in held:  # every array handed out still shows what it showed
        assert np.array_equal(view, snapshot)


def test_keys_laid_out_token_by_token_keep_that_layout():
    # a model's keys: split_heads' view of [B, L, H, d], as NumPy's concatenation keeps them
    rng = np.random.default_rng(2)
    past = rng.standard_normal((2, 5, 3, 4)).astype(np.float32).swapaxes(1, 2)  # [B, H, L, d]
    for _ in range(3):
        new = rng.standard_normal((2, 1, 3, 4)).astype(np.float32).swapaxes(1, 2)
        want = _concatenated(past, new)
        past = appended(past, new)
        assert np.array_equal(past, want) and past.strides[1:] == want.strides[1:]


def test_the_room_is_used_and_the_past_copied_once_every_room_tokens(monkeypatch):
    monkeypatch.setattr(kv_room, "ROOM", 4)
    past = np.zeros((1, 2, 3, 2), np.float32)
    views = [past]
    for i in range(12):
        views.append(appended(views[-1], np.full((1, 2, 1, 2), i, np.float32)))
    assert views[1].base is None  # the first from the caller's array: a concatenation
    buffers = [v.base for v in views[2:]]  # then a chain of steps: views of buffers
    assert all(b is not None and b.size >= v.size for b, v in zip(buffers, views[2:]))
    assert len({id(b) for b in buffers}) < len(buffers)  # steps written into one buffer's room
    assert np.array_equal(views[-1][0, 0, 3:, 0], np.arange(12))


def test_a_held_cache_appended_twice_branches_without_changing_either_branch():
    rng = np.random.default_rng(0)
    start = appended(rng.standard_normal((1, 3, 5, 4)), rng.standard_normal((1, 3, 1, 4)))
    a_new, b_new = rng.standard_normal((2, 1, 3, 1, 4))
    a = appended(start, a_new)  # takes start's room
    a_copy = a.copy()
    b = appended(start, b_new)  # start's room is taken: b is a copy, a unchanged
    assert np.array_equal(a, a_copy)
    assert np.array_equal(a, _concatenated(start, a_new))
    assert np.array_equal(b, _concatenated(start, b_new))
    assert np.array_equal(appended(a, b_new), _concatenated(a_copy, b_new))
    assert np.array_equal(b, _concatenated(start, b_new))


def test_a_held_cache_appended_again_costs_one_copy_as_before():
    rng = np.random.default_rng(3)
    held = rng.standard_normal((1, 2, 7, 4))
    for _ in range(3):  # a retry from the same cache: one concatenation each, never a buffer
        out = appended(held, rng.standard_normal((1, 2, 1, 4)))
        assert out.base is None and out.flags.owndata


def test_a_slice_of_a_view_is_concatenated_not_written_into_the_room():
    rng = np.random.default_rng(1)
    view = appended(rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 1, 3)))
    view = appended(view, rng.standard_normal((2, 1, 3)))  # a view of a buffer
    later = appended(view, rng.standard_normal((2, 1, 3)))
    later_copy = later.copy()
    part = view[:, 2:, :]  # a slice: not the view handed out, never given its room
    new = rng.standard_normal((2, 1, 3))
    assert np.array_equal(appended(part, new), _concatenated(part, new))
    first = view[:1]  # fewer leading rows, the same start in memory
    assert np.array_equal(appended(first, new[:1]), _concatenated(first, new[:1]))
    assert np.array_equal(later, later_copy)


def test_arrays_that_differ_are_concatenated_as_numpy_does():
    past, new = np.ones((1, 2, 3, 4), np.float32), np.zeros((1, 2, 1, 4), np.float64)
    out = appended(past, new)
    assert out.dtype == np.float64 and np.array_equal(out, _concatenated(past, new))
    with pytest.raises(ValueError):
        appended(np.ones((1, 2, 3, 4)), np.ones((1, 3, 1, 4)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_models_logits_over_many_steps_equal_those_with_the_cache_concatenated(dtype,
                                                                                 monkeypatch):
    # a small Llama (RoPE, grouped-query attention, SwiGLU, RMSNorm): 40 steps from a 6-token
    # prompt, the buffers' room crossed many times (ROOM = 3), against the same steps with the
    # cache concatenated at every step (kv_cache's path before the room); then a branch from
    # a cache kept 10 steps back gives what a fresh run of the same tokens gives
    rng = np.random.default_rng(0)
    params, config = init_causal_lm(rng, 50, 2, 24, 4, 40, position="rope", tied=True,
                                    activation="swiglu", norm="rms_norm", bias=False,
                                    n_kv_heads=2, dtype=dtype)
    prompt = rng.integers(0, 50, size=(2, 6))

    def decode(tokens, steps):
        logits, cache = causal_lm(params, tokens, return_cache=True, **config)
        out, caches, token = [logits], [cache], tokens[:, -1:]
        for _ in range(steps):
            token = np.argmax(out[-1][:, -1], axis=-1)[:, None]
            logits, cache = causal_lm(params, token, cache=cache, return_cache=True, **config)
            out.append(logits)
            caches.append(cache)
        return out, caches

    monkeypatch.setattr(kv_room, "ROOM", 3)
    with_room, caches = decode(prompt, 40)
    monkeypatch.setattr(kv_cache, "appended", _concatenated)
    concatenated, _ = decode(prompt, 40)
    assert all(np.array_equal(a, b) for a, b in zip(with_room, concatenated))
    monkeypatch.undo()
    kept = caches[30]  # a cache 10 steps back, its room taken long since
    token = np.array([[7], [11]])
    branch, _ = causal_lm(params, token, cache=kept, return_cache=True, **config)
    fresh = causal_lm(params, token, cache=caches[30], return_cache=True, **config)[0]
    assert np.array_equal(branch, fresh)
    monkeypatch.setattr(kv_cache, "appended", _concatenated)
    again = causal_lm(params, token, cache=kept, return_cache=True, **config)[0]
    assert np.array_equal(branch, again)
    last = decode(prompt, 40)[1][-1]
    assert all(np.array_equal(c["k"], d["k"]) for c, d in zip(caches[-1], last))


def test_an_array_freed_leaves_no_entry_behind():
    rng = np.random.default_rng(4)
    before = len(kv_room._rooms)
    view = appended(rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 1, 4)))
    view = appended(view, rng.standard_normal((1, 2, 1, 4)))
    assert len(kv_room._rooms) == before + 1  # the chain's newest array alone holds room
    del view
    assert len(kv_room._rooms) == before


def test_the_views_are_read_only_so_no_write_reaches_another_steps_cache():
    # the views of one buffer share memory (a step's keys hold the last step's): a write into
    # one is refused, not passed on to the cache kept for a branch
    from minattn.engine.kv_room import appended

    rng = np.random.default_rng(0)
    k1 = appended(rng.normal(size=(1, 2, 3, 4)), rng.normal(size=(1, 2, 1, 4)))
    k2 = appended(k1, rng.normal(size=(1, 2, 1, 4)))
    k3 = appended(k2, rng.normal(size=(1, 2, 1, 4)))
    kept = k2.copy()
    assert np.shares_memory(k2, k3)
    for view in (k2, k3):
        with pytest.raises(ValueError, match="read-only"):
            view[..., 0, :] = 0.0
    np.testing.assert_array_equal(k2, kept)
