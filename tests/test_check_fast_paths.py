"""The checks take the common case first (plain NumPy float arrays of the right shapes), without
their full sequence of calls. A fast path must answer exactly as the full checks do: here each
check is given the same arguments twice, as plain arrays (the fast path may run) and as views of
an ndarray subclass (which no fast path takes), and must return the same values, or raise the
same error, for well-formed and malformed arguments alike."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from minattn.engine import checks
from minattn.rope import _check_apply_rope


class Slow(np.ndarray):
    """An ndarray no fast path takes (they ask for type(x) is np.ndarray)."""


def slow(value):
    return value.view(Slow) if isinstance(value, np.ndarray) else value


def answer(check, *args):
    try:
        return "ok", check(*args)
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error)


def same(fast, full):
    assert fast[0] == full[0], (fast, full)
    if fast[0] != "ok":
        assert fast[1] == full[1]
        return
    a, b = fast[1], full[1]
    a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            assert np.asarray(y).dtype == x.dtype and np.array_equal(np.asarray(y), x)
        else:
            assert x == y and type(x) is type(y)


# These checks take microseconds: many examples, so that the rare shapes (0-d, empty) come up.
many = settings(max_examples=400)
sizes = st.integers(0, 3)
shapes = st.lists(sizes, min_size=0, max_size=4).map(tuple)


def arrays(shape, dtype=np.float64):
    # an ndarray of that shape (0-d included: np.asarray, not the NumPy scalar of a 0-d / 7)
    return np.asarray(np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) / 7, dtype)


@many
@given(q=shapes, k=shapes, v=shapes, mask=st.none() | shapes, d=st.sampled_from([np.float64, np.float32]))
def test_check_attention(q, k, v, mask, d):
    args = [arrays(q), arrays(k, d), arrays(v), None if mask is None else arrays(mask) > 0.1]
    same(answer(checks.check_attention, *args, None, 0.0, None, None),
         answer(checks.check_attention, *map(slow, args), None, 0.0, None, None))


@many
@given(q=shapes, k=shapes, v=shapes, mask=st.none() | shapes,
       d=st.sampled_from([np.float64, np.float32]))
def test_check_grouped_attention(q, k, v, mask, d):
    args = [arrays(q), arrays(k, d), arrays(v), None if mask is None else arrays(mask) > 0.1]
    same(answer(checks.check_grouped_attention, *args, 0.0, None),
         answer(checks.check_grouped_attention, *map(slow, args), 0.0, None))


@many
@given(x=shapes, mask=st.none() | shapes, axis=st.sampled_from([-1, 0, 1]))
def test_check_softmax(x, mask, axis):
    args = [arrays(x), axis, None if mask is None else arrays(mask) > 0.1]
    same(answer(checks.check_softmax, *args), answer(checks.check_softmax, *map(slow, args)))


@many
@given(x=shapes, gamma=shapes, beta=shapes, eps=st.sampled_from([1e-5, 0.0, -1.0, float("inf")]),
       d=st.sampled_from([np.float64, np.float32]))
def test_check_layer_norm(x, gamma, beta, eps, d):
    args = [np.asarray(arrays(x) + 1), arrays(gamma, d), arrays(beta), eps]
    same(answer(checks.check_layer_norm, *args), answer(checks.check_layer_norm, *map(slow, args)))


@many
@given(x=shapes, n=st.sampled_from([1, 2, 3, 0, -1, 2.0]))
def test_check_split_and_merge_heads(x, n):
    same(answer(checks.check_split_heads, arrays(x), n),
         answer(checks.check_split_heads, slow(arrays(x)), n))
    same(answer(checks.check_merge_heads, arrays(x)),
         answer(checks.check_merge_heads, slow(arrays(x))))


@many
@given(x=shapes, positions=shapes, base=st.sampled_from([10000.0, 0.0, float("inf"), float("nan"), 3]),
       integer=st.booleans())
def test_check_apply_rope(x, positions, base, integer):
    p = np.asarray(np.arange(int(np.prod(positions))).reshape(positions))
    p = p if integer else p.astype(np.float64)
    same(answer(_check_apply_rope, arrays(x), p, base, None),
         answer(_check_apply_rope, slow(arrays(x)), slow(p), base, None))


@many
@given(shape=shapes, expected=st.lists(st.sampled_from([0, 1, 2, 3, "n"]), max_size=4).map(tuple),
       d=st.sampled_from([None, np.float32, np.float64]), missing=st.booleans())
def test_check_params(shape, expected, d, missing):
    params = {} if missing else {"w": arrays(shape)}
    fast = answer(checks.check_params, params, {"w": expected}, "p", d)
    full = answer(checks.check_params, {k: slow(v) for k, v in params.items()}, {"w": expected},
                  "p", d)
    assert fast[0] == full[0] and (fast[0] != "ok" or np.array_equal(fast[1]["w"], full[1]["w"])
                                   and fast[1]["w"].dtype == np.asarray(full[1]["w"]).dtype)


@many
@given(shape=shapes, target=shapes)
def test_broadcasts_to_is_numpys_rule(shape, target):
    try:
        want = np.broadcast_shapes(shape, target) == target
    except ValueError:
        want = False
    assert checks.broadcasts_to(shape, target) == want


@many
@given(a=shapes, b=shapes, c=shapes)
def test_broadcast_or_raise_is_numpys_rule(a, b, c):
    try:
        want = ("ok", np.broadcast_shapes(a, b, c))
    except ValueError:
        want = ("ValueError",)
    got = answer(checks.broadcast_or_raise, [("a", a), ("b", b), ("c", c)], "these")
    assert got[0] == want[0] and (got[0] != "ok" or got[1] == want[1])


@pytest.mark.parametrize("value", [1e-5, 0.0, -1.0, float("inf"), float("nan"), 1, True])
def test_check_positive_real(value):
    for allow_zero in (False, True):
        got = answer(checks.check_positive_real, "eps", value, allow_zero)
        want = answer(checks.check_positive_real, "eps", np.float64(value), allow_zero) \
            if not isinstance(value, bool) else ("TypeError",)
        assert got[0] == want[0]


@many
@given(gate=shapes, up=shapes, down=shapes, d_model=st.sampled_from([0, 1, 2, 3]),
       d=st.sampled_from([None, np.float32, np.float64]), integer=st.booleans(),
       gated=st.booleans())
def test_feed_forward_params_read_d_ff_as_the_check_would(gate, up, down, d_model, d, integer,
                                                          gated):
    # _d_ff reads the hidden width from w_gate (w_1) directly in the common case
    from minattn.position_wise import check_feed_forward_params, check_gated_feed_forward_params
    first = arrays(gate).astype(np.int64) if integer else arrays(gate)
    if gated:
        check, params = check_gated_feed_forward_params, {"w_gate": first, "w_up": arrays(up),
                                                          "w_down": arrays(down)}
    else:
        check, params = check_feed_forward_params, {"w_1": first, "b_1": arrays(up[-1:]),
                                                    "w_2": arrays(down), "b_2": arrays((d_model,))}
    fast = answer(check, params, d_model, "p", d)
    full = answer(check, {k: slow(v) for k, v in params.items()}, d_model, "p", d)
    assert fast[0] == full[0], (fast, full)
    if fast[0] != "ok":
        assert fast[1] == full[1]
    else:
        for key in params:
            assert np.array_equal(fast[1][key], np.asarray(full[1][key]))
            assert fast[1][key].dtype == np.asarray(full[1][key]).dtype


class Int(int):
    """An int no fast path takes (they ask for type(n) is int); its repr is the int's."""


def slow_int(n):
    return Int(n) if type(n) is int else n


SIZES = [0, 1, 2, 3, 6, -1, True, False, 2.0, np.int64(3), np.int32(2), np.uint8(4), "3", None]


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("other", [1, 6, 7, 0, np.int64(6)])
def test_size_and_head_count_checks_answer_as_their_full_forms(n, other):
    # each check given plain ints (its `type(n) is int` case may run) and the same values as an
    # int subclass (which only the full check takes): the same result, or the same error
    def same(check, *args):
        fast, full = answer(check, *args), answer(check, *map(slow_int, args))
        assert fast[0] == full[0] and fast[1] == full[1], (fast, full)
        assert fast[0] != "ok" or type(fast[1]) is type(full[1]) or fast[1] is None

    same(checks.check_size, "n", n)
    same(checks.check_size, "n", n, 0)
    same(checks.check_n_heads, n, other)
    same(checks.check_n_kv_heads, n, other)


FAULTS = [None, "eps 0", "eps < 0", "eps inf", "int eps", "base inf", "base < 0", "int base",
          "wrong positions", "float positions", "batch positions", "empty cache", "cache heads",
          "cache width", "b_q", "sinks", "q_norm", "lora", "odd d_k", "not whole heads",
          "float32 weights", "no weight", "n_kv not dividing", "numpy int heads"]


@settings(max_examples=400, deadline=None)
@given(lead=st.lists(st.integers(1, 2), min_size=0, max_size=1), length=st.integers(1, 3),
       n_heads=st.sampled_from([1, 2, 4]), n_kv=st.sampled_from([None, 1, 2]),
       d_k=st.sampled_from([None, 2, 4]), d=st.sampled_from([np.float64, np.float32]),
       cached=st.booleans(), fault=st.sampled_from(FAULTS))
def test_check_self_attention(lead, length, n_heads, n_kv, d_k, d, cached, fault):
    # its common case (a plain dict of NumPy weights, int positions, a NumPy cache or none: the
    # layers of a decode step) answers as the full checks do for the same arguments as views of
    # an ndarray subclass, which only the full checks take; each example well formed but for
    # at most one fault
    from minattn.engine.decoder_checks import check_self_attention

    d_model = 8
    n_kv = 3 if fault == "n_kv not dividing" else n_kv
    d_k = 3 if fault == "odd d_k" else d_k
    width = d_k or d_model // n_heads
    kv = n_kv or n_heads
    w_dtype = np.float32 if fault == "float32 weights" else d
    shapes = {"w_q": (d_model, n_heads * width), "w_k": (d_model, kv * width),
              "w_v": (d_model, kv * width), "w_o": (n_heads * width, d_model)}
    params = {key: arrays(shape, w_dtype) for key, shape in shapes.items()}
    extra = {"b_q": arrays((n_heads * width,), d), "sinks": arrays((n_heads,), d),
             "q_norm": {"gamma": arrays((width,), d)}, "lora": {"q": None}}
    if fault in extra:
        params[fault] = extra[fault]
    if fault == "no weight":
        del params["w_v"]
    x = arrays((*lead, length, d_model), d)
    pos = {"wrong positions": np.arange(length + 1), "float positions": np.arange(length) * 1.0,
           "batch positions": np.zeros((*lead, length), np.int64)}.get(fault, np.arange(length))
    heads, size = kv + (fault == "cache heads"), width + (fault == "cache width")
    past = {"k": arrays((*lead, heads, 4, size), d), "v": arrays((*lead, heads, 4, size), d)} \
        if cached else None
    past = {} if fault == "empty cache" else past
    eps = {"eps 0": 0.0, "eps < 0": -1.0, "eps inf": float("inf"), "int eps": 1}.get(fault, 1e-6)
    base = {"base inf": float("inf"), "base < 0": -2.0, "int base": 10000}.get(fault, 1e4)
    whole = fault != "not whole heads"
    heads_given = np.int64(n_heads) if fault == "numpy int heads" else n_heads

    def slow_tree(value):
        return {k: slow_tree(v) for k, v in value.items()} if isinstance(value, dict) \
            else slow(value)

    fast = answer(check_self_attention, params, x, None, heads_given, n_kv, d_k, pos, base,
                  past, whole, eps)
    full = answer(check_self_attention, slow_tree(params), slow(x), None, heads_given, n_kv,
                  d_k, slow(pos), base, None if past is None else slow_tree(past), whole, eps)
    assert fast[0] == full[0], (fast, full)
    if fast[0] != "ok":
        assert fast[1] == full[1]
        return
    (p1, x1, m1, pos1, c1), (p2, x2, m2, pos2, c2) = fast[1], full[1]
    assert list(p1) == list(p2) and m1 is m2 is None
    for key in shapes:
        if key in p1:
            assert p1[key].dtype == p2[key].dtype and np.array_equal(p1[key], p2[key])
    assert np.array_equal(x1, x2) and pos1.shape == pos2.shape and np.array_equal(pos1, pos2)
    assert (c1 is None) == (c2 is None) and (c1 is None or list(c1) == list(c2))


BLOCK_FAULTS = [None, "layer_norm", "relu", "memory_mask", "parallel", "np parallel",
                "eps < 0", "int eps", "eps None", "post norm", "cross key", "old name",
                "missing norm", "norm beta", "no gamma", "gamma shape", "gamma int",
                "ff bias", "ff lora", "ff float32", "ff shape", "ff list", "n_kv 3", "kv None",
                "bad norm", "numpy heads"]


@settings(max_examples=400, deadline=None)
@given(lead=st.lists(st.integers(1, 2), min_size=0, max_size=1), length=st.integers(1, 3),
       d=st.sampled_from([np.float64, np.float32]), fault=st.sampled_from(BLOCK_FAULTS))
def test_check_decoder_block(lead, length, d, fault):
    # its common case (a Llama block: the four sublayers, a gated feed-forward of NumPy weights
    # in x's dtype, NumPy gammas) answers as the full checks do for the same arguments as views
    # of an ndarray subclass; each example well formed but for at most one fault
    from minattn.engine.decoder_checks import _check_decoder_block

    d_model, d_ff = 8, 6
    norm = {"layer_norm": "layer_norm", "bad norm": "batch_norm"}.get(fault, "rms_norm")
    gamma = {"gamma": arrays((d_model,), d)}
    if fault in ("layer_norm", "norm beta"):
        gamma["beta"] = arrays((d_model,), d)
    feed = {"w_gate": arrays((d_model, d_ff), np.float32 if fault == "ff float32" else d),
            "w_up": arrays((d_model, d_ff + (fault == "ff shape")), d),
            "w_down": arrays((d_ff, d_model), d)}
    if fault == "ff bias":
        feed["b_up"] = arrays((d_ff,), d)
    if fault == "ff lora":
        feed["lora"] = {}
    params = {"self_attention": {"w_q": arrays((d_model, d_model), d)},
              "self_attention_norm": dict(gamma),
              "feed_forward": [feed] if fault == "ff list" else feed,
              "feed_forward_norm": dict(gamma)}
    if fault == "post norm":
        params["post_feed_forward_norm"] = dict(gamma)
    if fault == "cross key":
        params["cross_attention"] = {}
    if fault == "old name":
        params["norm1"] = params.pop("self_attention_norm")
    if fault == "missing norm":
        del params["feed_forward_norm"]
    if fault == "no gamma":
        params["feed_forward_norm"] = {}
    if fault == "gamma shape":
        params["feed_forward_norm"] = {"gamma": arrays((d_model + 1,), d)}
    if fault == "gamma int":
        params["feed_forward_norm"] = {"gamma": np.ones(d_model, np.int64)}
    x = arrays((*lead, length, d_model), d)
    n_heads = np.int64(4) if fault == "numpy heads" else 4
    n_kv = {"n_kv 3": 3, "kv None": None}.get(fault, 2)
    activation = "relu" if fault == "relu" else "swiglu"
    eps = {"eps < 0": -1.0, "int eps": 1, "eps None": None}.get(fault, 1e-5)
    parallel = {"parallel": True, "np parallel": np.bool_(False)}.get(fault, False)
    mask = np.ones((length, length), bool) if fault == "memory_mask" else None

    def slow_tree(value):
        if isinstance(value, dict):
            return {k: slow_tree(v) for k, v in value.items()}
        return [slow_tree(v) for v in value] if isinstance(value, list) else slow(value)

    fast = answer(_check_decoder_block, params, x, None, mask, n_heads, n_kv, norm, activation,
                  eps, parallel, True)
    full = answer(_check_decoder_block, slow_tree(params), slow(x), None, mask, n_heads, n_kv,
                  norm, activation, eps, parallel, True)
    assert fast[0] == full[0], (fast, full)
    if fast[0] != "ok":
        assert fast[1] == full[1]
        return
    (p1, x1, m1), (p2, x2, m2) = fast[1], full[1]
    assert list(p1) == list(p2) and m1 is m2 is None and np.array_equal(x1, x2)
    for key in p1:
        assert type(p1[key]) is type(p2[key]) and list(p1[key]) == list(p2[key])
        for name, value in p1[key].items():
            if isinstance(value, np.ndarray):
                assert value.dtype == p2[key][name].dtype
                assert np.array_equal(value, p2[key][name])
