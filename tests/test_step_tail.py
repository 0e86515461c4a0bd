"""The training step's tail leaf by leaf (training/step_tail.py): the gradients' sum and
division (`summed`), the clip and AdamW (`clip_then_adamw`) equal to the readable functions
(loop.accumulated's tree by tree sum, optimizer.clip_by_global_norm and adamw_update, each
held to torch in tests/test_finetune_optimizer.py) to the last bit, for float16/32/64, the baby
GPT's tree and a LoRA tree, decays on and off, a clip that scales and one that does not, several
steps; nothing passed in changed; the readable functions run wherever the policy steps aside,
and a stand-in clip or update is called as given; whole training runs equal with the policy on
and off."""
import copy
import math

import numpy as np
import pytest

import minattn as ma
import minattn.lora
from minattn.engine import processes
from minattn.engine.trees import leaves, paths, tree_map, unzip, zip_leaves
from minattn.models import char_gpt
from minattn.training import loop, step_tail
from minattn.training.optimizer import (adamw_init, adamw_update, clip_by_global_norm,
                                        global_norm, squared_norm)

from .test_training_workers import two_threads  # noqa: E402,F401 (a fixture)


@pytest.fixture(autouse=True)
def no_worker_left():
    yield
    assert processes.live_worker_pids() == []


def _gpt_tree(dtype, small=False):
    sizes = dict(n_layers=1, n_heads=2, d_model=16, context=8) if small else {}
    params, _ = char_gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=dtype, **sizes)
    return params


def _lora_tree(dtype):
    rng = np.random.default_rng(4)
    params, _ = ma.init_causal_lm(rng, 11, 2, 8, 2, 12, position="rope", norm="rms_norm",
                                  activation="swiglu", bias=False, n_kv_heads=1, dtype=dtype)
    return minattn.lora.init_lora(rng, params, rank=2, dtype=dtype)["layers"]  # lists of dicts


def _like(tree, rng, scale=1.0, positive=False):
    draw = (lambda p: rng.random(p.shape)) if positive else (lambda p: rng.normal(size=p.shape))
    return tree_map(lambda p: (scale * draw(p)).astype(p.dtype), tree)


def _state(params, rng, step):
    # AdamW's state after `step` steps: moments drawn (v positive), of params' dtypes
    if step == 0:
        return adamw_init(params)
    return {"step": step, "m": _like(params, rng, 1e-2), "v": _like(params, rng, 1e-4, True)}


def _bits(tree):
    # every leaf's dtype, shape and bytes, in order, with the tree's paths
    return [(path, np.asarray(x).dtype.str, np.shape(x), np.asarray(x).tobytes())
            for path, x in paths(tree)]


def _readable(params, pieces, count, state, max_norm, **kwargs):
    # loop.accumulated's sum and division as it was written, then the optimizer's functions
    grads = pieces[0]
    for g in pieces[1:]:
        grads = tree_map(np.add, grads, g)
    grads = tree_map(lambda g: g / count, grads)
    clipped, norm = clip_by_global_norm(grads, max_norm)
    new_params, new_state = adamw_update(params, clipped, state, **kwargs)
    return grads, norm, new_params, new_state


TREES = {"baby GPT": lambda dtype: _gpt_tree(dtype), "LoRA": _lora_tree}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("max_norm", [1e-3, 1e6])  # a clip that scales, one that does not
@pytest.mark.parametrize("decays", [None, char_gpt.decays, "no decay"])
def test_the_tail_leaf_by_leaf_equals_the_readable_functions_to_the_last_bit(
        dtype, tree, max_norm, decays):
    rng = np.random.default_rng(5)
    params = TREES[tree](dtype)
    eps = 1e-3 if dtype == np.float16 else 1e-8  # (1e-8 is 0 in float16: v / 0)
    kwargs = dict(lr=3e-3, betas=(0.9, 0.99), eps=eps, weight_decay=0.1, decays=decays)
    if decays == "no decay":
        kwargs.update(weight_decay=0.0, decays=None)
    for step, n_pieces in ((0, 2), (1, 1), (7, 3)):
        pieces = [_like(params, rng) for _ in range(n_pieces)]
        state = _state(params, rng, step)
        count = 768
        given = copy.deepcopy((params, pieces, state))
        grads, norm, want_params, want_state = _readable(params, pieces, count, state,
                                                         max_norm, **kwargs)
        squares = []
        summed = step_tail.summed(iter(pieces), count, squares)
        assert _bits(summed) == _bits(grads)
        assert squares == [squared_norm(g) for g in leaves(grads)]
        new_params, new_state, new_norm = step_tail.clip_then_adamw(
            params, summed, state, max_norm=max_norm, squares=squares, overwrite_grads=True,
            **kwargs)
        assert new_norm == norm
        assert _bits(new_params) == _bits(want_params)
        assert _bits(new_state) == _bits(want_state)
        assert _bits((params, pieces, state)) == _bits(given)  # nothing passed in changed
        if max_norm < 1:
            assert norm > max_norm  # (the clip did scale)


def test_the_norm_is_computed_here_without_squares_and_the_gradient_left_as_it_was():
    rng = np.random.default_rng(6)
    params = _gpt_tree(np.float32, small=True)
    grads, state = _like(params, rng), _state(params, rng, 3)
    given = _bits(grads)
    new_params, new_state, norm = step_tail.clip_then_adamw(params, grads, state, max_norm=0.5,
                                                            lr=1e-3, weight_decay=0.1)
    _, want_norm = clip_by_global_norm(grads, 0.5)
    want = adamw_update(params, clip_by_global_norm(grads, 0.5)[0], state, lr=1e-3,
                        weight_decay=0.1)
    assert norm == want_norm == global_norm(grads)
    assert _bits((new_params, new_state)) == _bits(want)
    assert _bits(grads) == given


def test_the_sums_equal_the_tree_by_tree_sums_for_any_number_of_pieces():
    rng = np.random.default_rng(7)
    params = _lora_tree(np.float32)
    for n in (1, 2, 3, 5):
        pieces = [_like(params, rng) for _ in range(n)]
        given = _bits(pieces)
        want = pieces[0]
        for g in pieces[1:]:
            want = tree_map(np.add, want, g)
        want = tree_map(lambda g: g / 37, want)
        got = step_tail.summed(pieces, 37)
        assert _bits(got) == _bits(want) and _bits(pieces) == given
        assert all(not np.shares_memory(a, b) for a in leaves(got) for piece in pieces
                   for b in leaves(piece))


def test_no_gradient_to_sum_is_a_value_error():
    with pytest.raises(ValueError, match="gradients must hold at least one"):
        step_tail.summed([], 3)


def test_sums_of_other_dtypes_shapes_and_structures_are_as_written():
    # float32 + float64 (promoted), a row added to a matrix (broadcast), integer gradients,
    # 0-d arrays, and a second tree whose dict keys come in another order (paired by key)
    a = {"w": np.ones((2, 3), np.float32), "b": np.arange(3), "s": np.array(2.0)}
    b = {"w": np.full((2, 3), 0.5), "b": np.arange(3), "s": np.array(1.0)}
    c = {"s": np.array(4.0), "b": np.arange(3), "w": np.full((1, 3), 0.25, np.float32)}
    want = tree_map(lambda g: g / 3, tree_map(np.add, tree_map(np.add, a, b), c))
    assert _bits(step_tail.summed([a, b, c], 3)) == _bits(want)
    want = tree_map(lambda g: g / 3, tree_map(np.add, a, c))
    assert _bits(step_tail.summed([a, c], 3)) == _bits(want)


def _cases():
    # (name, params, grads, state, kwargs): where the policy steps aside
    rng = np.random.default_rng(8)
    params = _gpt_tree(np.float32, small=True)
    grads, state = _like(params, rng), _state(params, rng, 2)
    base = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)

    class Sub(np.ndarray):
        pass

    reordered = dict(reversed(list(params.items())))
    float64_grad = tree_map(lambda g: g.astype(np.float64), grads)
    sub = tree_map(lambda g: g.view(Sub), grads)
    yield "a NumPy float as lr (not weak: the arrays promoted)", params, grads, state, \
        {**base, "lr": np.float64(1e-3)}
    yield "a NumPy float as beta", params, grads, state, {**base, "betas": (np.float32(0.9),
                                                                               0.99)}
    yield "a NumPy integer as the step", params, grads, {**state, "step": np.int64(2)}, base
    yield "a float64 gradient for float32 weights", params, float64_grad, state, base
    yield "an ndarray subclass", params, sub, state, base
    yield "the keys in another order", reordered, grads, state, base


@pytest.mark.parametrize("case", list(_cases()), ids=lambda case: case[0])
def test_where_the_policy_steps_aside_the_readable_functions_run(case):
    _, params, grads, state, kwargs = case
    assert step_tail._applies(params, grads, state, 1.0, kwargs["lr"], kwargs["betas"], 1e-8,
                              kwargs["weight_decay"]) is None
    given = _bits((params, grads, state))
    clipped, norm = clip_by_global_norm(grads, 0.5)
    want = adamw_update(params, clipped, state, **kwargs)
    new_params, new_state, new_norm = step_tail.clip_then_adamw(
        params, grads, state, max_norm=0.5, overwrite_grads=True, **kwargs)
    assert new_norm == norm
    assert _bits((new_params, new_state)) == _bits(want)
    assert _bits((params, grads, state)) == given


def test_the_policy_applies_to_the_training_loops_trees():
    rng = np.random.default_rng(9)
    params = _gpt_tree(np.float32, small=True)
    quads = step_tail._applies(params, _like(params, rng), adamw_init(params), 1.0, 1e-3,
                               (0.9, 0.99), 1e-8, 0.1)
    assert quads is not None and [q[0] for q in quads] == leaves(params)


def test_a_stand_in_clip_or_update_is_called_as_given():
    rng = np.random.default_rng(10)
    params = _gpt_tree(np.float32, small=True)
    grads, state = _like(params, rng), _state(params, rng, 1)
    calls = []

    def clip(g, max_norm):
        calls.append("clip")
        return clip_by_global_norm(g, max_norm)

    def update(p, g, s, **kwargs):
        calls.append("update")
        return "new params", {"step": -1}

    assert step_tail.clip_then_adamw(params, grads, state, max_norm=1.0, clip=clip,
                                     update=update)[:2] == ("new params", {"step": -1})
    assert calls == ["clip", "update"]


def test_what_before_update_raises_stops_the_step_before_adamw(monkeypatch):
    rng = np.random.default_rng(11)
    params = _gpt_tree(np.float32, small=True)
    grads, state = _like(params, rng), _state(params, rng, 1)
    given, seen = _bits((params, grads, state)), []

    def stop(norm):
        seen.append(norm)
        raise ArithmeticError("stop")

    def no_leaf(*args):
        raise AssertionError("a leaf stepped")

    monkeypatch.setattr(step_tail, "_adamw_leaf", no_leaf)
    with pytest.raises(ArithmeticError, match="stop"):
        step_tail.clip_then_adamw(params, grads, state, max_norm=1.0, before_update=stop,
                                  overwrite_grads=True)
    assert seen == [global_norm(grads)] and _bits((params, grads, state)) == given


def test_the_policy_off_gives_the_same_bits(monkeypatch):
    rng = np.random.default_rng(12)
    params = _lora_tree(np.float32)
    pieces = [_like(params, rng) for _ in range(3)]
    state = _state(params, rng, 4)
    runs = []
    for on in (True, False):
        monkeypatch.setattr(step_tail, "STEP_TAIL", on)
        squares = []
        grads = step_tail.summed(copy.deepcopy(pieces), 12, squares)
        runs.append((_bits(grads), squares, _bits(step_tail.clip_then_adamw(
            params, grads, state, max_norm=0.1, squares=squares, overwrite_grads=True,
            decays=char_gpt.decays))))
    assert runs[0] == runs[1]


def test_zip_leaves_and_unzip_walk_as_tree_map():
    a = {"x": [np.zeros(1), (np.ones(2), np.ones(3))], "y": np.zeros(4)}
    b = tree_map(lambda v: v + 1, a)
    assert [tuple(id(v) for v in pair) for pair in zip_leaves(a, b)] == \
        [(id(x), id(y)) for x, y in zip(leaves(a), leaves(b))]
    assert zip_leaves(a, {"y": a["y"], "x": a["x"]}) is None  # keys in another order
    assert zip_leaves(a, {**a, "x": a["x"][:1]}) is None
    assert zip_leaves(a, {**a, "y": [a["y"]]}) is None
    doubled, halved = unzip(a, [(2 * v, v / 2) for v in leaves(a)], 2)
    assert _bits(doubled) == _bits(tree_map(lambda v: 2 * v, a))  # (tuples as lists)
    assert _bits(halved) == _bits(tree_map(lambda v: v / 2, a))
    assert isinstance(doubled["x"][1], list)


@pytest.mark.parametrize("dtype, accumulation", [(np.float32, 1), (np.float64, 2)])
def test_a_training_run_is_the_same_with_the_policy_on_and_off(monkeypatch, two_threads, dtype,
                                                               accumulation):
    # two row pieces a micro-batch (the worker process where it applies): summed adds 2 or 4
    params, config = char_gpt.init_char_gpt(np.random.default_rng(0), 11, n_layers=1,
                                            n_heads=2, d_model=16, context=8, dtype=dtype)
    ids = np.random.default_rng(1).integers(11, size=300)
    runs, trees_summed = [], []

    def counted(gradients, count, squares=None):
        gradients = list(gradients)
        trees_summed.append(len(gradients))
        return step_tail.summed(gradients, count, squares)

    monkeypatch.setattr(loop, "summed", counted)
    for on in (True, False):
        monkeypatch.setattr(step_tail, "STEP_TAIL", on)
        state = loop.train(char_gpt.loss_sum(config), params, None, steps=3, batch_size=None,
                           pad_id=None, lr=1e-2, warmup=1, accumulation=accumulation,
                           weight_decay=0.1, decays=char_gpt.decays, max_grad_norm=0.05,
                           betas=(0.9, 0.99), at_end=False,
                           batches=lambda k: char_gpt.window_batch(ids, context=8,
                                                                   batch_size=4, seed=0, k=k))
        runs.append((state["losses"], _bits(state["trainable"]), _bits(state["adam"])))
    assert runs[0] == runs[1]
    assert trees_summed == [2 * accumulation] * 6  # (two pieces a micro-batch)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("overwrite", [True, False])
def test_a_clip_that_does_not_scale_skips_its_multiply_with_the_same_bits(dtype, overwrite):
    # scale 1 (a norm under max_norm): the multiply skipped; scale 0.999, and the largest
    # Python float under 1: multiplied (that last one tells a skip from a multiply in float64
    # only: in float32 and float16 g times it rounds back to g). The readable functions' bits
    # each time, with signed zeros and subnormals in the gradient, and the gradient left as it
    # was unless handed over
    rng = np.random.default_rng(9)
    params = _gpt_tree(dtype)
    grads = _like(params, rng, 1e-2)
    tiny = np.finfo(dtype).smallest_subnormal
    leaves(grads)[0].flat[:3] = [-0.0, tiny, -tiny]
    state = _state(params, rng, 3)
    eps = 1e-3 if dtype == np.float16 else 1e-8
    kwargs = dict(lr=3e-3, betas=(0.9, 0.99), eps=eps, weight_decay=0.1)
    norm = global_norm(grads)
    for max_norm in (2 * norm, 0.999 * norm, math.nextafter(norm + 1e-6, 0.0)):
        _, want_norm, want_params, want_state = _readable(params, [grads], 1, state, max_norm,
                                                          **kwargs)
        given = _bits(grads)
        new_params, new_state, new_norm = step_tail.clip_then_adamw(
            params, copy.deepcopy(grads) if overwrite else grads, state, max_norm=max_norm,
            overwrite_grads=overwrite, **kwargs)
        assert new_norm == want_norm == norm
        assert _bits(new_params) == _bits(want_params)
        assert _bits(new_state) == _bits(want_state)
        assert _bits(grads) == given
