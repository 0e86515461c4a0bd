"""Properties of the argument checks (minattn/engine/checks.py) that the mutation test showed
no test stated (tests/MUTANTS.md): which floating masks count as a 0/1 "keep" mask, which
numbers pass as a scale or eps and what comes back, and the exact messages of the checks."""
import numpy as np
import pytest
from autograd import grad
from autograd.tracer import getval

import minattn as ma
from minattn.engine import checks

X = np.random.default_rng(0).normal(size=(2, 3, 3))
KEEP_MESSAGE = ("mask is a floating-point array of only 0s and 1s (dtype {}); a floating mask is "
                "added to the scores, so this would remove no key (it adds 1 to the kept scores). "
                "For a keep/drop mask pass booleans (True = may attend), e.g. mask.astype(bool); "
                "for an additive mask use 0 and -inf")


# --- a floating mask of only 0s and 1s (with a 1) is refused; any other floating mask is added ---

@pytest.mark.parametrize("values", [
    [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]],  # np.tril(np.ones((3, 3)))
    [[1.0] * 3] * 3,  # all ones
    [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]],  # a single 1
])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_zero_one_float_mask_is_refused_with_the_exact_advice(values, dtype):
    mask = np.array(values, dtype)
    with pytest.raises(ValueError) as error:
        ma.scaled_dot_product_attention(X, X, X, mask)
    assert str(error.value) == KEEP_MESSAGE.format(np.dtype(dtype))


@pytest.mark.parametrize("values", [
    [[0.0] * 3] * 3,  # all zeros: masks nothing, and looks like it
    [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]],  # 0 / -inf: the usual form
    [[0.0, 1.0, 2.0]] * 3,  # biases that happen to include 0 and 1
    [[1.0, -np.inf, 1.0]] * 3,  # 1s and -inf: a bias of 1 and a masked key
    [[0.5, 0.0, 1.0]] * 3,
    [[-1.0, 0.0, 1.0]] * 3,
])
def test_any_other_float_mask_is_added_to_the_scores(values):
    mask = np.array(values)
    out, weights = ma.scaled_dot_product_attention(X, X, X, mask)
    scores = X @ X.swapaxes(-1, -2) / np.sqrt(3) + mask
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(weights, e / e.sum(axis=-1, keepdims=True), rtol=1e-12)


def test_an_empty_float_mask_is_not_a_keep_mask():
    q = np.zeros((0, 3))
    out, weights = ma.scaled_dot_product_attention(q, q, q, np.zeros((0, 0)))
    assert out.shape == (0, 3) and weights.shape == (0, 0)


def test_a_zero_one_mask_is_refused_under_grad_too():
    # The values are read through autograd's box: a learnable mask of 0s and 1s is refused too.
    mask = np.tril(np.ones((3, 3)))
    with pytest.raises(ValueError, match="only 0s and 1s"):
        grad(lambda m: ma.scaled_dot_product_attention(X, X, X, m)[0].sum())(mask)


# --- scale and eps: what passes, what comes back ---

@pytest.mark.parametrize("value", [0.5, 2, np.float64(0.5), np.float32(0.5), np.int64(2)])
def test_a_number_comes_back_as_a_python_float(value):
    out = checks.check_positive_real("scale", value)
    assert type(out) is float and out == float(value)


def test_a_0d_array_and_an_autograd_box_come_back_as_they_are():
    a = np.array(0.5, np.float32)
    assert checks.check_positive_real("scale", a) is a
    seen = []
    grad(lambda s: seen.append(checks.check_positive_real("scale", s)) or s * 1.0)(0.5)
    assert type(seen[0]).__name__ == "ArrayBox" and getval(seen[0]) == 0.5


@pytest.mark.parametrize("value, message", [
    (0.0, "eps must be a positive, finite float, got 0.0"),
    (-0.0, "eps must be a positive, finite float, got -0.0"),
    (-1.0, "eps must be a positive, finite float, got -1.0"),
    (np.inf, "eps must be a positive, finite float, got inf"),
    (np.nan, "eps must be a positive, finite float, got nan"),
])
def test_zero_is_refused_unless_allowed(value, message):
    with pytest.raises(ValueError) as error:
        checks.check_positive_real("eps", value)
    assert str(error.value) == message
    if value == 0:
        assert checks.check_positive_real("eps", value, allow_zero=True) == 0.0


@pytest.mark.parametrize("value, message", [
    (-1e-3, "eps must be a non-negative, finite float, got -0.001"),
    (np.array(-np.inf), "eps must be a non-negative, finite float, got -inf"),
])
def test_allowing_zero_still_refuses_negative_and_infinite(value, message):
    with pytest.raises(ValueError) as error:
        checks.check_positive_real("eps", value, allow_zero=True)
    assert str(error.value) == message


@pytest.mark.parametrize("value, message", [
    (True, "scale must be a positive float, got True (bool)"),
    ("1", "scale must be a positive float, got '1' (str)"),
    (1j, "scale must be a positive float, got 1j (complex)"),
    (np.array([1.0]), "scale must be a positive float or a 0-d floating array, got ndarray of "
                      "shape (1,), dtype float64"),
    (np.array(1), "scale must be a positive float or a 0-d floating array, got ndarray of "
                  "shape (), dtype int64"),
])
def test_a_scale_that_is_not_a_real_number_is_a_type_error(value, message):
    with pytest.raises(TypeError) as error:
        checks.check_positive_real("scale", value)
    assert str(error.value) == message


# --- init_*'s rng and dtype ---

@pytest.mark.parametrize("rng, got", [(42, "int"), (np.random.RandomState(0), "RandomState"),
                                      (None, "NoneType"), (np.random, "module")])
def test_init_refuses_anything_but_a_generator_naming_its_type(rng, got):
    with pytest.raises(TypeError) as error:
        ma.init_feed_forward(rng, 4, 8)
    assert str(error.value) == ("rng must be a np.random.Generator, e.g. "
                                f"np.random.default_rng(0), got {got}")


# --- messages that name their argument exactly ---

MHA = ma.init_multi_head_attention(np.random.default_rng(0), 4, 2)
INT_X = ("x must be a floating-point array, got dtype int64 (convert it with "
         "x.astype(np.float32) or np.float64)")


@pytest.mark.parametrize("call, error, message", [
    (lambda: ma.split_heads(np.ones((2, 4), np.int64), 2), TypeError, INT_X),
    (lambda: ma.merge_heads(np.ones((2, 2, 4), np.int64)), TypeError, INT_X),
    (lambda: ma.layer_norm(np.ones(3), np.ones(3), np.ones(3), -1.0), ValueError,
     "eps must be a non-negative, finite float, got -1.0"),
    (lambda: ma.multi_head_attention(MHA, np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)),
                                     n_heads=2, n_kv_heads=3), ValueError,
     "n_kv_heads=3 must divide n_heads=2 (each kv head serves a group of n_heads // n_kv_heads "
     "query heads)"),
])
def test_the_message_names_the_argument_exactly(call, error, message):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message


def test_an_array_like_scale_without_ndim_is_a_type_error():
    class ArrayLike:  # a dtype and a shape, but no ndim: not a 0-d array
        dtype, shape = np.dtype(np.float64), (1,)
    with pytest.raises(TypeError, match=r"^scale must be a positive float or a 0-d floating"):
        checks.check_positive_real("scale", ArrayLike())


@pytest.mark.parametrize("others, message", [
    ({"window": 4, "sinks": None}, "toy does not support window (got window=4)"),
    ({"window": 4, "rope_scaling": {"rope_type": "linear", "factor": 2.0}, "cache": None},
     "toy does not support rope_scaling, window (got rope_scaling={'rope_type': 'linear', "
     "'factor': 2.0}, window=4)"),
])
def test_keywords_meant_for_other_variants_are_refused_all_by_name_in_order(others, message):
    with pytest.raises(ValueError) as error:
        checks.check_unused_keywords("toy", others)
    assert str(error.value) == message
    checks.check_unused_keywords("toy", {key: None for key in others})  # all None: accepted


# --- engine/param_checks.py: a feed-forward's hidden width read from its first weight ---

@pytest.mark.parametrize("function, first", [(ma.feed_forward, "w_1"),
                                             (ma.gated_feed_forward, "w_gate")])
def test_a_first_weight_given_transposed_is_refused_with_d_ff_unknown(function, first):
    # [d_ff, D] where [D, d_ff] is expected: the hidden width cannot be read from it, so the
    # message leaves it a name (read from the columns, it would demand a square [D, D])
    rng = np.random.default_rng(3)
    params = {"w_1": rng.normal(size=(12, 8)), "b_1": np.zeros(12),
              "w_2": rng.normal(size=(12, 8)), "b_2": np.zeros(8)} if first == "w_1" else {
        "w_gate": rng.normal(size=(12, 8)), "w_up": rng.normal(size=(8, 12)),
        "w_down": rng.normal(size=(12, 8))}
    with pytest.raises(ValueError, match=rf"^params\['{first}'\] has shape \(12, 8\), "
                                         rf"expected \(8, d_ff\)$"):
        function(params, rng.normal(size=(2, 8)))


# --- engine/param_checks.py: a key the formula has no place for, refused in full -----------------

def test_qk_norm_params_given_to_multi_head_attention_are_refused_in_full():
    rng = np.random.default_rng(4)
    params = ma.init_multi_head_attention(rng, 8, 2)
    params["q_norm"] = params["k_norm"] = {"gamma": np.ones(4)}
    x = rng.normal(size=(3, 8))
    with pytest.raises(ValueError) as error:
        ma.multi_head_attention(params, x, x, x, n_heads=2)
    assert str(error.value) == (
        "params has ['q_norm', 'k_norm'] (QK-norm), which multi_head_attention does not apply: "
        "use self_attention, or leave them out")


@pytest.mark.parametrize("gated, extra, message", [
    (False, "w_gate", "params has ['w_gate'], which this feed-forward does not use (its keys: "
                      "'w_1', 'b_1', 'w_2', 'b_2')"),
    (True, "b_up", "params has ['b_up'], which this feed-forward does not use (its keys: "
                   "'w_gate', 'w_up', 'w_down'; the gated feed-forward has no biases)"),
])
def test_a_feed_forward_key_its_formula_has_no_place_for_is_refused_in_full(gated, extra,
                                                                             message):
    # the plain form's message has no reason after its keys; the gated one says it has no biases
    rng = np.random.default_rng(5)
    init, call = ((ma.init_gated_feed_forward, ma.gated_feed_forward) if gated else
                  (ma.init_feed_forward, ma.feed_forward))
    params = init(rng, 8, 12)
    params[extra] = np.ones(12) if extra.startswith("b_") else np.ones((8, 12))
    with pytest.raises(ValueError) as error:
        call(params, rng.normal(size=(2, 8)))
    assert str(error.value) == message
