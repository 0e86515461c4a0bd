"""A decode step's shorter paths through the policies: where no argument is an autograd box, the
policies around a function with a gradient written by hand (float16_in_float32, dispatch,
bias_in_place) call the function itself, without gradient_by_hand's wrapper; the checks answer
the common case in one frame; memo keys its arguments inline. Each must give what the longer
path gives: the same bits, the same answers, the same errors, and a gradient still recorded
(by the hand-written VJP) wherever an argument is a box."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minattn.engine import checks, memo, variants
from minattn.engine.autograd_rules import gradient_by_hand, unrecorded
from minattn.engine.dtypes import float16_in_float32
from minattn.engine.fused_products import bias_in_place
from minattn.engine.param_checks import check_gated_feed_forward_params


from .test_check_fast_paths import Slow, answer  # noqa: E402


def slow(value):
    # test_check_fast_paths' slow, into dicts too (a block's params)
    if isinstance(value, dict):
        return {k: slow(v) for k, v in value.items()}
    return value.view(Slow) if isinstance(value, np.ndarray) else value


# -- a gradient is still recorded, by the VJP written by hand, wherever an argument is a box


def _twice_vjp(wrt, g, y, x):
    # deliberately not f's derivative (3): a gradient of 2 shows that this VJP was used, and
    # autograd did not trace f
    return {"x": 2.0 * g}


def _three_x(x):
    return 3.0 * x


def _linear_vjp(wrt, g, y, x, w, b):
    return {"x": 2.0 * g @ w.T, "w": 2.0 * x.T @ g, "b": 2.0 * g.sum(0)}


def _linear(x, w, b=None):
    return x @ w if b is None else x @ w + b


WRAPPED = {
    "float16_in_float32": lambda: float16_in_float32("x")(gradient_by_hand(_twice_vjp)(_three_x)),
    "dispatch": lambda: variants.dispatch(gradient_by_hand(_twice_vjp)(_three_x)),
}


@pytest.mark.parametrize("policy", sorted(WRAPPED))
def test_a_policy_calls_the_function_itself_only_where_nothing_is_recorded(policy):
    f = WRAPPED[policy]()
    x = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(f(x), 3.0 * x)  # plain arrays: the function itself, its value
    gradient = autograd.grad(lambda t: anp.sum(f(t)))(x)
    assert np.array_equal(gradient, np.full_like(x, 2.0))  # a box: gradient_by_hand's VJP


def test_bias_in_place_calls_linear_itself_only_where_nothing_is_recorded():
    lin = bias_in_place(gradient_by_hand(_linear_vjp)(_linear))
    x, w, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4), np.arange(4.0)
    assert np.array_equal(lin(x, w), x @ w) and np.array_equal(lin(x, w, b), x @ w + b)
    for bias in (None, b):
        got = autograd.grad(lambda t: anp.sum(lin(t, w, bias)))(x)
        assert np.array_equal(got, 2.0 * np.ones((2, 4)) @ w.T)  # the hand VJP's, times 2
        got = autograd.grad(lambda t: anp.sum(lin(x, t, bias)))(w)
        assert np.array_equal(got, 2.0 * x.T @ np.ones((2, 4)))


def test_unrecorded_names_only_gradient_by_hands_wrappers():
    wrapped = gradient_by_hand(_twice_vjp)(_three_x)
    assert unrecorded(wrapped) is _three_x
    assert unrecorded(_three_x) is None
    assert unrecorded(variants.dispatch(wrapped)) is None  # (a wrapper around it: not its own)


# -- a decode step on plain arrays and on views of a subclass (which takes every general path)


def _model(dtype):
    from minattn.language_model import init_causal_lm

    rng = np.random.default_rng(0)
    params, config = init_causal_lm(rng, 50, 3, 24, 6, 16, position="rope", tied=True,
                                    activation="swiglu", norm="rms_norm", bias=False,
                                    n_kv_heads=2, dtype=dtype)
    config.update(rope_base=10000.0, eps=1e-5)
    return params, config, rng.integers(0, 50, size=(1, 12))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decode_steps_on_plain_arrays_equal_the_general_paths_to_the_last_bit(dtype):
    # the same steps with the weights as views of an ndarray subclass, which every check of
    # them takes in its full form: the same logits and caches, bit for bit, step after step
    # (each step's cache the one the step before returned: the KV room's path)
    from minattn.language_model import causal_lm

    params, config, tokens = _model(dtype)
    runs = []
    for weights in (params, {k: slow(v) if k != "layers" else [slow(p) for p in v]
                             for k, v in params.items()}):
        logits, cache = causal_lm(weights, tokens[:, :6], return_cache=True, **config)
        steps = [(np.asarray(logits), cache)]
        for i in range(6, tokens.shape[1]):
            logits, cache = causal_lm(weights, tokens[:, i:i + 1], cache=cache,
                                      return_cache=True, **config)
            steps.append((np.asarray(logits), cache))
        runs.append(steps)
    for (fast_logits, fast_cache), (full_logits, full_cache) in zip(*runs):
        assert fast_logits.dtype == full_logits.dtype == dtype
        assert np.array_equal(fast_logits, full_logits)
        for a, b in zip(fast_cache, full_cache):
            assert np.array_equal(a["k"], b["k"]) and np.array_equal(a["v"], b["v"])


# -- the gated feed-forward's params, checked at once in the common case


FF_FAULTS = [None, "extra key", "lora", "bias", "missing", "float32", "int", "list", "gate rows",
             "gate 3-d", "up shape", "down shape", "d_model", "dtype None", "not a dict"]


@settings(max_examples=300, deadline=None)
@given(d=st.sampled_from([np.float64, np.float32]), d_ff=st.integers(0, 3),
       d_model=st.integers(0, 3), fault=st.sampled_from(FF_FAULTS))
def test_gated_feed_forward_params_answer_as_the_full_checks(d, d_ff, d_model, fault):
    # well formed but for at most one fault; the same params as views of an ndarray subclass
    # take the full checks: the same answer, or the same error
    def w(shape, dtype=d):
        return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) / 7

    params = {"w_gate": w((d_model, d_ff)), "w_up": w((d_model, d_ff)),
              "w_down": w((d_ff, d_model))}
    changes = {"extra key": ("w_other", w((2,))), "lora": ("lora", {}), "bias": ("b_up", w((d_ff,))),
               "float32": ("w_up", w((d_model, d_ff), np.float32)),
               "int": ("w_down", np.ones((d_ff, d_model), np.int64)),
               "list": ("w_gate", w((d_model, d_ff)).tolist()),
               "gate rows": ("w_gate", w((d_model + 1, d_ff))),
               "gate 3-d": ("w_gate", w((1, d_model, d_ff))),
               "up shape": ("w_up", w((d_model, d_ff + 1))),
               "down shape": ("w_down", w((d_ff, d_model + 1)))}
    if fault in changes:
        key, value = changes[fault]
        params[key] = value
    if fault == "missing":
        del params["w_up"]
    given_d_model = d_model + 1 if fault == "d_model" else d_model
    dtype = None if fault == "dtype None" else np.dtype(np.float64)
    if fault == "not a dict":
        params = list(params.items())
    fast = answer(check_gated_feed_forward_params, params, given_d_model, "p", dtype)
    full = answer(check_gated_feed_forward_params, slow(params) if isinstance(params, dict)
                  else params, given_d_model, "p", dtype)
    assert fast[0] == full[0], (fast, full)
    if fast[0] != "ok":
        assert fast[1] == full[1]
        return
    assert type(fast[1]) is dict and list(fast[1]) == list(full[1])
    for key, value in fast[1].items():
        assert np.asarray(value).dtype == np.asarray(full[1][key]).dtype
        assert np.array_equal(value, np.asarray(full[1][key]))


# -- memo's keys and the broadcast of a few shapes, written out inline: the same answers


VALUES = [np.arange(3), np.arange(3.0), np.arange(3, dtype=np.int32), np.zeros((2, 0)), 7, 7.0,
          True, None, "s", np.dtype(np.float32), np.float32(2.0), np.int64(3), (1, 2), [1, 2.0],
          {"rope_type": "llama3", "factor": 8.0}, np.array(5)]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_memo_keys_its_arguments_as_its_general_key(value):
    args, kwargs = (value, 4, value), {"scaling": value, "base": 1e4}
    general = (tuple(map(memo._key, args)),
               tuple((k, memo._key(v)) for k, v in kwargs.items()))
    assert memo._keys(args, kwargs) == general
    assert memo._keys(args, {}) == (general[0], ())
    assert memo._keys(args, {}) != memo._keys((np.arange(4),) + args[1:], {})


def _set_rule(shapes):
    # _broadcast_sizes as it was written before: a set of each axis's sizes other than 1
    if any(len(s) != len(shapes[0]) for s in shapes):
        return None
    result = []
    for sizes in zip(*shapes):
        others = set(sizes) - {1}
        if len(others) > 1:
            return None
        result.append(others.pop() if others else 1)
    return tuple(result)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=4).map(tuple), min_size=1, max_size=4))
def test_broadcast_sizes_answers_as_the_set_rule(shapes):
    got = checks._broadcast_sizes(shapes)
    assert got == _set_rule(shapes)
    if got is not None:
        assert got == tuple(np.broadcast_shapes(*shapes))
