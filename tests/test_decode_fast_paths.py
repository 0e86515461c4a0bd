"""A decode step's shorter paths through the policies: where no argument is an autograd box, the
policies around a function with a gradient written by hand (float16_in_float32, dispatch,
bias_in_place) call the function itself, without gradient_by_hand's wrapper, and that function
runs on NumPy itself (autograd_rules.on_numpy_itself: no autograd.numpy wrapper per NumPy call);
the checks answer the common case in one frame; memo keys its arguments inline, and answers the
last call's arguments at once. Each must give what the longer path gives: the same bits, the
same answers, the same errors, and a gradient still recorded (by the hand-written VJP) wherever
an argument is a box."""
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


# -- a function with its gradient by hand, called with no box, runs on NumPy itself
# (autograd_rules.on_numpy_itself): the same code with its module's autograd.numpy read as NumPy


def _on_numpy_forms():
    # every gradient_by_hand function of the library that has a form on NumPy itself
    import minattn.normalization as normalization
    import minattn.position_wise as position_wise

    return {"rms_norm": normalization.rms_norm.__wrapped__,  # (under float16_in_float32)
            "layer_norm": normalization.layer_norm.__wrapped__,
            "sigmoid": position_wise.sigmoid, "relu": position_wise.relu,
            "gelu_tanh": position_wise.gelu_tanh}


def _arguments(name, x):
    d = x.shape[-1]
    rng = np.random.default_rng(d)
    gamma = rng.normal(size=d).astype(x.dtype)
    return {"rms_norm": (x, gamma, 1e-5), "layer_norm": (x, gamma, gamma[::-1].copy(), 1e-5)}.get(
        name, (x,))


def _numpy_forms_bound_to(module):
    # the forms' namespaces with autograd.numpy's names bound to `module` (autograd.numpy: the
    # path before the forms, every NumPy call through autograd's wrapper); undone by the caller
    from minattn.engine import autograd_rules

    saved = {}
    for namespace in autograd_rules._NAMESPACES.values():
        for name, value in list(namespace.items()):
            if value is np or value is anp:
                saved[(id(namespace), name)] = (namespace, value)
                namespace[name] = module
    return saved


def _restore(saved):
    for (_, name), (namespace, value) in saved.items():
        namespace[name] = value


def test_the_functions_with_a_form_on_numpy_have_it():
    for name, wrapper in _on_numpy_forms().items():
        plain = unrecorded(wrapper)
        assert plain is not wrapper.__wrapped__, name  # a form of its own
        assert plain.__code__ is wrapper.__wrapped__.__code__, name  # the same code
        assert plain.__globals__["np"] is np, name  # on NumPy itself


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(_on_numpy_forms())),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]),
       shape=st.sampled_from([(7,), (2, 5), (1, 1, 72), (3, 0), (2, 1, 33)]),
       scale=st.sampled_from([1e-3, 1.0, 30.0, 1e4]), seed=st.integers(0, 2 ** 16),
       specials=st.booleans())
def test_a_form_on_numpy_gives_the_functions_bits(name, dtype, shape, scale, seed, specials):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=shape) * scale).astype(dtype)
    if specials and x.size:  # NaN, infinities, zeros and a subnormal among the values
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size, 4)] = [np.nan, np.inf, -np.inf, 0.0]
        flat[rng.integers(0, x.size)] = np.finfo(dtype).tiny / 2
    wrapper = _on_numpy_forms()[name]
    args = _arguments(name, x)
    with np.errstate(all="ignore"):
        fast = unrecorded(wrapper)(*args)  # on NumPy itself
        written = wrapper.__wrapped__(*args)  # as written: through autograd.numpy's wrappers
    assert type(fast) is type(written) is np.ndarray and fast.dtype == written.dtype
    assert np.array_equal(fast, written, equal_nan=True)


def _decode_steps(params, config, tokens):
    from minattn.language_model import causal_lm

    logits, cache = causal_lm(params, tokens[:, :6], return_cache=True, **config)
    steps = [(np.asarray(logits), cache)]
    for i in range(6, tokens.shape[1]):
        logits, cache = causal_lm(params, tokens[:, i:i + 1], cache=cache, return_cache=True,
                                  **config)
        steps.append((np.asarray(logits), cache))
    return steps


def _same_steps(a, b):
    return all(np.array_equal(la, lb) and all(
        np.array_equal(ca["k"], cb["k"]) and np.array_equal(ca["v"], cb["v"])
        for ca, cb in zip(cache_a, cache_b)) for (la, cache_a), (lb, cache_b) in zip(a, b))


class _Rounded:
    # a mutant of NumPy for the forms: its sqrt rounds through float16 (another result's bits)
    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def sqrt(x, *args, **kwargs):
        return np.sqrt(np.asarray(x).astype(np.float16), *args, **kwargs).astype(
            np.asarray(x).dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decode_steps_on_numpy_itself_equal_the_steps_through_autograds_wrappers(dtype):
    # a small Llama model's prompt and decode steps with the forms on NumPy itself, then with
    # their autograd.numpy bound back (the path before them): the same logits and caches to the
    # last bit; and a mutant NumPy in the forms (a sqrt of other bits) is told apart
    params, config, tokens = _model(dtype)
    fast = _decode_steps(params, config, tokens)
    for module, same in ((anp, True), (_Rounded(), False)):
        saved = _numpy_forms_bound_to(module)
        try:
            other = _decode_steps(params, config, tokens)
        finally:
            _restore(saved)
        assert _same_steps(fast, other) is same
    assert _same_steps(fast, _decode_steps(params, config, tokens))  # (restored)


def _wrong_sqrt_vjp(wrt, g, y, x):
    return {"x": 5.0 * g}  # deliberately not sqrt's derivative: shows that this VJP ran


@gradient_by_hand(_wrong_sqrt_vjp)
def _root(x):
    return anp.sqrt(x)  # through autograd.numpy as written: a form on NumPy itself


def test_a_function_with_a_form_on_numpy_still_records_its_vjp_through_its_policies():
    assert unrecorded(_root) is not _root.__wrapped__  # it has a form of its own
    x = np.array([4.0, 9.0])
    for f in (_root, variants.dispatch(_root), float16_in_float32("x")(_root)):
        assert np.array_equal(f(x), [2.0, 3.0])  # plain arrays: the form on NumPy itself
        assert np.array_equal(autograd.grad(lambda t: anp.sum(f(t)))(x), [5.0, 5.0])


def test_gradients_through_the_forms_functions_match_float64_references():
    # rms_norm and sigmoid differentiated through their policies (their VJPs by hand) against
    # float64 formulas (central differences of the float64 forward would round: the formulas)
    import minattn.normalization as normalization
    import minattn.position_wise as position_wise

    rng = np.random.default_rng(1)
    x, gamma, w = rng.normal(size=(2, 5)), rng.normal(size=5), rng.normal(size=(2, 5))
    got = autograd.grad(lambda t: anp.sum(normalization.rms_norm(t, gamma, eps=1e-5) * w))(x)
    r = np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)
    d = w * gamma
    want = d / r - x * (d * x).mean(-1, keepdims=True) / r ** 3
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    got = autograd.grad(lambda t: anp.sum(position_wise.sigmoid(t) * w))(x)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(got, w * s * (1 - s), rtol=1e-12, atol=1e-14)


def test_a_form_on_numpy_reads_its_modules_other_names_as_they_are_at_the_call(monkeypatch):
    # a function swapped into the module (minattn.swap, a test) is the one the form calls
    import minattn.normalization as normalization

    calls = []
    original = normalization.feature_mean_of_product

    def counted(a, b):
        calls.append(a.shape)
        return original(a, b)

    x, gamma = np.ones((2, 4), np.float32), np.ones(4, np.float32)
    monkeypatch.setattr(normalization, "feature_mean_of_product", counted)
    normalization.rms_norm(x, gamma)
    assert calls == [(2, 4)]
    monkeypatch.undo()
    normalization.rms_norm(x, gamma)
    assert calls == [(2, 4)]


_GLOBAL = 0


def _reads_concatenate(x):
    return anp.concatenate([x, x])  # autograd's own concatenate (not a wrapper of NumPy's)


def _assigns_a_global(x):
    global _GLOBAL
    _GLOBAL = anp.sqrt(x)
    return _GLOBAL


def _reads_no_autograd_numpy(x):
    return np.sqrt(x)


def test_on_numpy_itself_leaves_a_function_it_cannot_run_on_numpy_as_it_is():
    from minattn.engine.autograd_rules import on_numpy_itself

    for f in (_reads_concatenate, _assigns_a_global, _reads_no_autograd_numpy, np.sqrt,
              functools_partial_of_sqrt()):
        assert on_numpy_itself(f) is f
    inner = on_numpy_itself(lambda x: [anp.sqrt(v) for v in x])  # (a comprehension's code too)
    assert inner.__globals__["anp"] is np
    assert np.array_equal(inner([np.array(4.0)]), [2.0])


def functools_partial_of_sqrt():
    import functools

    return functools.partial(anp.sqrt)


# -- memo: the last call's arguments answer at once, an array changed in place is a new call


def test_memo_answers_the_last_calls_objects_and_no_array_changed_in_place():
    calls = []

    @memo.by_value()
    def table(positions, d, dtype):
        calls.append(1)
        return positions[..., None] * np.ones(d, dtype)

    positions, dtype = np.array([3, 4]), np.dtype(np.float32)
    first = table(positions, 2, dtype)
    assert table(positions, 2, dtype) is first and len(calls) == 1  # the same objects
    assert table(positions, 3, dtype).shape == (2, 3) and len(calls) == 2  # another width
    assert table(positions, 2, np.dtype(np.float64)).dtype == np.float64 and len(calls) == 3
    assert table(positions.copy(), 2, dtype) is first and len(calls) == 3  # equal values: the memo
    assert table(positions, 2, dtype) is first and len(calls) == 3  # (the last call's again)
    positions[1] = 5  # changed in place: another call, never the stale table
    assert np.array_equal(table(positions, 2, dtype), [[3, 3], [5, 5]]) and len(calls) == 4
    positions.shape = (2, 1)  # its shape set in place: another call too
    assert table(positions, 2, dtype).shape == (2, 1, 2) and len(calls) == 5
    as_ints = np.array([7, 8], np.int64)
    table(as_ints, 2, dtype)
    as_ints.dtype = np.float64  # the same bytes, another dtype: another call
    table(as_ints, 2, dtype)
    assert len(calls) == 7
    options = {"a": 1}  # a dict may change between calls: never answered by identity
    key = memo._keys((options,), {})
    assert memo._call((options,), {}, key, None) is None
    assert memo._call((1,), {"k": 2}, memo._keys((1,), {"k": 2}), None) is None


def test_memo_never_answers_with_an_array_changed_during_the_call():
    # the last call's test holds the bytes its key was made from, before f ran: an array changed
    # while f runs (by f here; by another thread in the same way) is another call next time
    calls = []

    @memo.by_value()
    def total_then_bump(values):
        calls.append(1)
        result = np.array(values.sum())
        values[0] += 1  # (what another thread could do while the table is computed)
        return result

    values = np.array([1.0, 2.0])
    assert total_then_bump(values) == 3.0
    assert total_then_bump(values) == 4.0 and len(calls) == 2  # [2, 2]: not the stale 3
    assert total_then_bump(values) == 5.0 and len(calls) == 3


def test_memo_keys_a_scalar_type_as_a_value():
    assert memo._key(np.float32) == (type, np.float32)  # (it has shape and dtype descriptors)


def test_gradient_by_hands_wrapper_and_the_policies_call_the_form_on_numpy():
    # with a mutant NumPy bound in the forms, the wrapper and the policy around it give the
    # mutant's bits: each calls the form (not the function as written) where nothing is recorded
    import minattn.normalization as normalization

    x, gamma = np.random.default_rng(2).normal(size=(3, 8)), np.ones(8)
    written = normalization.rms_norm.__wrapped__.__wrapped__(x, gamma, 1e-5)
    saved = _numpy_forms_bound_to(_Rounded())
    try:
        for f in (normalization.rms_norm.__wrapped__, normalization.rms_norm):
            assert not np.array_equal(f(x, gamma, 1e-5), written)
    finally:
        _restore(saved)
    for f in (normalization.rms_norm.__wrapped__, normalization.rms_norm):
        assert np.array_equal(f(x, gamma, 1e-5), written)


# -- weights_unread's wrapper made once for a dispatched core; a decode call's core straight to
# its thread policy


def _attention_inputs(dtype, n_queries=1, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 6, n_queries, 8)).astype(dtype)
    k = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    v = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
    return q, k, v


def test_weights_unread_keeps_one_wrapper_for_a_dispatched_core_and_none_for_others():
    import functools
    import gc
    import weakref

    from minattn.engine import query_blocks
    from minattn.multi_head import grouped_attention

    first = query_blocks.weights_unread(grouped_attention)
    assert query_blocks.weights_unread(grouped_attention) is first
    assert first.__wrapped__ is grouped_attention
    # a functools.wraps wrapper of the core (which copies its attributes, the cached wrapper's
    # among them) gets a wrapper of its own, calling it, not the core's
    calls = []

    @functools.wraps(grouped_attention)
    def spy(*args, **kwargs):
        calls.append(1)
        return grouped_attention(*args, **kwargs)

    wrapped = query_blocks.weights_unread(spy)
    assert wrapped is not first and wrapped.__wrapped__ is spy
    wrapped(*_attention_inputs(np.float32))
    assert calls == [1]
    # a core made per call (not dispatched) gets a fresh wrapper each time, and nothing keeps
    # it alive once its caller lets it go (no cycle, no registry: freed without the collector)
    gc.disable()
    try:
        def per_call(q, k, v, mask=None):
            return grouped_attention(q, k, v, mask)

        one, two = query_blocks.weights_unread(per_call), query_blocks.weights_unread(per_call)
        assert one is not two and not hasattr(per_call, "_minattn_output_only")
        assert np.array_equal(one(*_attention_inputs(np.float64))[0],
                              grouped_attention(*_attention_inputs(np.float64))[0])
        alive = weakref.ref(per_call)
        del per_call, one, two
        assert alive() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_queries", [1, 3])
def test_weights_unread_gives_the_cores_bits_through_the_cached_and_a_fresh_wrapper(dtype,
                                                                                   n_queries):
    from minattn.engine import query_blocks
    from minattn.multi_head import grouped_attention

    q, k, v = _attention_inputs(dtype, n_queries)
    mask = np.tril(np.ones((n_queries, 9), bool), k=9 - n_queries)
    expected, _ = grouped_attention(q, k, v, mask)
    for core in (query_blocks.weights_unread(grouped_attention),
                 query_blocks._output_only(grouped_attention)):
        out, weights = core(q, k, v, mask)
        assert weights is None and out.dtype == dtype and np.array_equal(out, expected)
    # and the canonical core as written (not on NumPy itself): the same bits at one query
    token = query_blocks._PLAIN.set(False)
    try:
        written, _ = query_blocks.weights_unread(grouped_attention)(q, k, v, mask)
    finally:
        query_blocks._PLAIN.reset(token)
    if n_queries == 1:
        assert np.array_equal(written, expected)


def test_a_decode_calls_core_on_its_thread_policy_equals_the_path_through_plain_core():
    # the short path (one piece) against _plain_core_on_its_threads' and against the canonical
    # core as written, on grouped heads as grouped_attention passes them
    from minattn.attention import scaled_dot_product_attention
    from minattn.engine import query_blocks

    for dtype in (np.float32, np.float64):
        q, k, v = _attention_inputs(dtype)
        q, k, v = q.reshape(2, 3, 2, 1, 8), k[:, :, None], v[:, :, None]
        keep = np.ones((9,), bool)
        keep[2] = False
        for mask in (None, keep):
            checked = checks.check_attention(q, k, v, mask, None, 0.0, None)
            old = query_blocks._plain_core_on_its_threads(*checked[:6], rows=128, whole=True)
            new = scaled_dot_product_attention(q, k, v, mask)
            token = query_blocks._PLAIN.set(False)
            try:
                written = scaled_dot_product_attention(q, k, v, mask)
            finally:
                query_blocks._PLAIN.reset(token)
            for a, b, c in zip(old, new, written):
                assert a.dtype == b.dtype == c.dtype == dtype
                assert np.array_equal(a, b) and np.array_equal(b, c)


def test_a_decode_calls_core_still_refuses_bad_inputs_and_records_its_gradient():
    from minattn.attention import scaled_dot_product_attention
    from minattn.engine import query_blocks
    from minattn.multi_head import grouped_attention

    q, k, v = _attention_inputs(np.float64)
    with pytest.raises(ValueError, match="same feature size d_k"):
        scaled_dot_product_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="same length L_k"):
        scaled_dot_product_attention(q[:, :3], k, v[..., :5, :])
    core = query_blocks.weights_unread(grouped_attention)

    def through(q):
        return anp.sum(core(q, k, v)[0] ** 2)

    def reference(q):
        return anp.sum(grouped_attention(q, k, v)[0] ** 2)

    assert np.array_equal(autograd.grad(through)(q), autograd.grad(reference)(q))
    # against a float64 formula: the derivative of sum(out**2) by finite differences
    eps, i = 1e-6, (1, 4, 0, 5)
    bumped = q.copy()
    bumped[i] += eps
    numeric = (reference(bumped) - reference(q)) / eps
    assert abs(autograd.grad(through)(q)[i] - numeric) < 1e-4 * max(1.0, abs(numeric))
