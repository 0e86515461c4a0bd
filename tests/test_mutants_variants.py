"""What the mutation run of minattn/head_mask.py showed untested (tests/MUTANTS.md): the variant
of self_attention that head_mask= selects, on its own (it was reached only by its refusals), and
causal_lm's with an attention_mask, with a float64 head_mask on a float32 model, and with a w_o
given as nested lists. The reference scales each head's rows of w_o in a loop; head_mask is never
used by it. Then the refusals of either variant, by name (a w_o or a model that is not what the
call takes is left to the call), the head_mask taken in the inputs' dtype, an attention of one's
own given its layer's row of head_mask; and long-context RoPE beside partial RoPE. Last,
engine/variants.py on small functions made inside each test (a variant's dispatch is made at
import, before mutmut picks a mutant): the keyword that selects the second of two variants, the
signature's shown keywords and their defaults, a predicate that cannot bind the call."""
import numpy as np
import pytest

import minattn as ma

D, H, H_KV, L = 24, 4, 2, 6


def scaled_rows(w_o, row):
    # w_o [H d_v, D] with head h's d_v rows times row[h], written out head by head
    d_v = len(w_o) // len(row)
    w_o = np.asarray(w_o)
    return np.concatenate([row[h] * w_o[h * d_v:(h + 1) * d_v] for h in range(len(row))])


@pytest.fixture
def attention():
    rng = np.random.default_rng(0)
    params = ma.init_decoder_block(rng, D, H, 32, n_kv_heads=H_KV, norm="rms_norm",
                                   activation="swiglu")["self_attention"]
    return params, rng.standard_normal((2, L, D)), rng.uniform(-1.0, 2.0, H)


def test_self_attentions_head_mask_scales_each_heads_rows_of_w_o(attention):
    params, x, row = attention
    config = {"n_heads": H, "n_kv_heads": H_KV, "positions": np.arange(L),
              "rope_base": 100.0}
    mask = ma.causal_mask(L)
    out, cache = ma.self_attention(params, x, mask, head_mask=row, **config)
    reference, reference_cache = ma.self_attention(
        {**params, "w_o": scaled_rows(params["w_o"], row)}, x, mask, **config)
    np.testing.assert_allclose(out, reference, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(cache["k"], reference_cache["k"])
    assert np.abs(out - ma.self_attention(params, x, mask, **config)[0]).max() > 1e-3


def test_a_float64_head_mask_keeps_a_float32_attention_in_float32(attention):
    params, x, row = attention
    params32 = {k: v.astype(np.float32) for k, v in params.items()}
    out, _ = ma.self_attention(params32, x.astype(np.float32), n_heads=H, n_kv_heads=H_KV,
                               head_mask=row)
    assert out.dtype == np.float32


@pytest.fixture
def model():
    rng = np.random.default_rng(1)
    params, config = ma.init_causal_lm(rng, 19, 2, D, H, 32, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False, tied=False,
                                       n_kv_heads=H_KV)
    return params, config, rng.uniform(-1.0, 2.0, (2, H))


def with_scaled_w_o(params, head_mask):
    layers = [{**layer, "self_attention": {**layer["self_attention"], "w_o": scaled_rows(
        layer["self_attention"]["w_o"], row)}} for layer, row in zip(params["layers"], head_mask)]
    return {**params, "layers": layers}


def test_causal_lms_head_mask_keeps_the_attention_mask(model):
    params, config, head_mask = model
    tokens = np.random.default_rng(2).integers(0, 19, size=(2, L))
    padding = np.ones((2, L), bool)
    padding[0, :2] = False  # left padding on the first row
    ours = ma.causal_lm(params, tokens, padding, head_mask=head_mask, **config)
    reference = ma.causal_lm(with_scaled_w_o(params, head_mask), tokens, padding, **config)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)
    unpadded = ma.causal_lm(params, tokens, head_mask=head_mask, **config)
    assert np.abs(ours[0] - unpadded[0]).max() > 1e-3  # the padding changed the first row


def test_a_float64_head_mask_keeps_a_float32_model_in_float32(model):
    params, config, head_mask = model

    tokens = np.arange(L)[None] % 19
    assert ma.causal_lm(float32(params), tokens, head_mask=head_mask, **config).dtype == \
        np.float32


def test_a_w_o_given_as_nested_lists_is_scaled_as_the_array(model):
    params, config, head_mask = model
    tokens = np.arange(L)[None] % 19
    as_lists = with_scaled_w_o(params, np.ones_like(head_mask))  # a copy
    as_lists["layers"][0]["self_attention"]["w_o"] = params["layers"][0]["self_attention"][
        "w_o"].tolist()
    np.testing.assert_allclose(ma.causal_lm(as_lists, tokens, head_mask=head_mask, **config),
                               ma.causal_lm(params, tokens, head_mask=head_mask, **config),
                               rtol=0, atol=1e-12)


def test_a_model_whose_embedding_is_not_float_is_refused_naming_it(model):
    params, config, head_mask = model
    bad = {**params, "token_embedding": params["token_embedding"].astype(np.int64)}
    with pytest.raises(TypeError, match=r"^params\['token_embedding'\] must be a floating-point"):
        ma.causal_lm(bad, np.arange(L)[None] % 19, head_mask=head_mask, **config)


@pytest.mark.parametrize("change, error, match", [
    (lambda a: {k: v for k, v in a.items() if k != "w_o"}, ValueError,
     r"^params is missing key 'w_o'"),
    (lambda a: {**a, "w_o": a["w_o"][:-1]}, ValueError,  # a row short: not H d_v rows
     r"^params\['w_o'\] has shape \(23, 24\), expected \(24, 24\)"),
    (lambda a: {**a, "w_o": a["w_o"][..., None]}, ValueError,  # 3-D: no rows to scale
     r"^params\['w_o'\] has shape \(24, 24, 1\), expected \(24, 24\)"),
])
def test_self_attentions_head_mask_leaves_a_bad_w_o_to_the_call(attention, change, error, match):
    params, x, row = attention
    with pytest.raises(error, match=match):
        ma.self_attention(change(params), x, n_heads=H, n_kv_heads=H_KV, head_mask=row)


def test_self_attentions_head_mask_takes_a_w_o_given_as_nested_lists(attention):
    params, x, row = attention
    out, _ = ma.self_attention({**params, "w_o": params["w_o"].tolist()}, x, n_heads=H,
                               n_kv_heads=H_KV, head_mask=row)
    reference, _ = ma.self_attention({**params, "w_o": scaled_rows(params["w_o"], row)}, x,
                                     n_heads=H, n_kv_heads=H_KV)
    np.testing.assert_allclose(out, reference, rtol=0, atol=1e-12)


def test_self_attentions_head_mask_refuses_an_integer_x_naming_x(attention):
    params, x, row = attention
    with pytest.raises(TypeError, match=r"^x must be a floating-point array, got dtype int64"):
        ma.self_attention(params, x.astype(np.int64), n_heads=H, n_kv_heads=H_KV, head_mask=row)


def float32(tree):
    if isinstance(tree, dict):
        return {k: float32(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [float32(v) for v in tree]
    return np.asarray(tree, np.float32)


ROW = np.array([0.1, 1 / 3, 0.7, 1.3])  # none a float32: each rounds on the way


def test_self_attentions_head_mask_is_taken_in_xs_dtype(attention):
    # check_head_mask's contract: the mask in the inputs' dtype, so a float32 attention scales
    # w_o by float32(m) in float32, exactly as the reference does by hand (one IEEE product per
    # weight); a float64 m would round each product once more, and differently
    params, x, _ = attention
    params, x = float32(params), x.astype(np.float32)
    out, _ = ma.self_attention(params, x, n_heads=H, n_kv_heads=H_KV, head_mask=ROW)
    reference, _ = ma.self_attention(
        {**params, "w_o": scaled_rows(params["w_o"], ROW.astype(np.float32))}, x, n_heads=H,
        n_kv_heads=H_KV)
    assert reference.dtype == np.float32
    np.testing.assert_array_equal(out, reference)


def test_causal_lms_head_mask_is_taken_in_the_models_dtype(model):
    params, config, _ = model
    params, tokens = float32(params), np.arange(L)[None] % 19
    head_mask = np.stack([ROW, ROW[::-1]])
    reference = ma.causal_lm(with_scaled_w_o(params, head_mask.astype(np.float32)), tokens,
                             **config)
    assert reference.dtype == np.float32
    np.testing.assert_array_equal(ma.causal_lm(params, tokens, head_mask=head_mask, **config),
                                  reference)


@pytest.mark.parametrize("bad", [
    lambda p: {k: v for k, v in p.items() if k != "layers"},  # no layers to mask
    lambda p: list(p.values()),  # not a dict
])
def test_causal_lms_head_mask_leaves_a_model_without_layers_to_the_call(model, bad):
    params, config, head_mask = model
    with pytest.raises(ValueError, match=r"^params must be a dict with keys 'token_embedding', "
                                         r"'layers'"):
        ma.causal_lm(bad(params), np.arange(L)[None] % 19, head_mask=head_mask, **config)


def test_causal_lms_head_mask_leaves_a_layer_without_attention_to_the_call(model):
    params, config, head_mask = model
    layers = [{k: v for k, v in layer.items() if k != "self_attention"}
              for layer in params["layers"]]
    with pytest.raises(ValueError, match=r"^params is missing key 'self_attention'"):
        ma.causal_lm({**params, "layers": layers}, np.arange(L)[None] % 19, head_mask=head_mask,
                     **config)


def test_causal_lms_head_mask_refuses_a_torch_w_o_naming_it(model):
    torch = pytest.importorskip("torch")
    params, config, head_mask = model
    layers = [{**layer, "self_attention": {**layer["self_attention"], "w_o": torch.tensor(
        layer["self_attention"]["w_o"])}} for layer in params["layers"]]
    with pytest.raises(TypeError, match=r"^params\['w_o'\] is a torch tensor"):
        ma.causal_lm({**params, "layers": layers}, np.arange(L)[None] % 19, head_mask=head_mask,
                     **config)


def test_an_attention_of_ones_own_gets_its_layers_row_of_head_mask_and_the_padding(model):
    # an attention that is not self_attention (nor MLA) is given its layer's row as its own
    # head_mask; here one that passes it on to self_attention, against w_o scaled by hand
    params, config, head_mask = model
    rows = []

    def own_attention(params, x, mask=None, *, head_mask, **config):
        rows.append(head_mask)
        return ma.self_attention(params, x, mask, head_mask=head_mask, **config)

    tokens = np.random.default_rng(3).integers(0, 19, size=(2, L))
    padding = np.ones((2, L), bool)
    padding[1, :3] = False
    ours = ma.causal_lm(params, tokens, padding, head_mask=head_mask, attention=own_attention,
                        **config)
    np.testing.assert_array_equal(np.array(rows), head_mask)
    reference = ma.causal_lm(with_scaled_w_o(params, head_mask), tokens, padding, **config)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-12)


def test_long_context_rope_beside_partial_rope_on_an_odd_head_width():
    # d_k = 5: RoPE on int(5 * 0.4) = 2 features of each head, the schedule on those; linear
    # scaling by 2 at positions 2 t is plain RoPE at positions t (the schedule's definition)
    rng = np.random.default_rng(4)
    params = ma.init_multi_head_attention(rng, 10, 2)
    x = rng.standard_normal((1, 6, 10))
    scaled, _ = ma.self_attention(params, x, n_heads=2, positions=2 * np.arange(6),
                                  partial_rotary_factor=0.4,
                                  rope_scaling={"rope_type": "linear", "factor": 2.0})
    plain, _ = ma.self_attention(params, x, n_heads=2, positions=np.arange(6),
                                 partial_rotary_factor=0.4)
    np.testing.assert_allclose(scaled, plain, rtol=0, atol=1e-12)
    assert np.abs(plain - ma.self_attention(params, x, n_heads=2, positions=2 * np.arange(6),
                                            partial_rotary_factor=0.4)[0]).max() > 1e-3


def test_long_context_rope_on_a_whole_odd_head_is_refused_naming_d_k():
    rng = np.random.default_rng(5)
    params = ma.init_multi_head_attention(rng, 10, 2)
    with pytest.raises(ValueError, match=r"^RoPE \(positions given\) needs an even head width "
                                         r"d_k, got d_k=5 \(d_model=10, n_heads=2\)"):
        ma.self_attention(params, rng.standard_normal((1, 6, 10)), n_heads=2,
                          positions=np.arange(6),
                          rope_scaling={"rope_type": "linear", "factor": 2.0})


def _two_variants(**dispatch_keywords):
    # made here, inside the test: what each returns says who ran
    from minattn.engine import variants

    @variants.dispatch(**dispatch_keywords)
    def canonical(x, *, scale=1.0):
        return ("canonical", x * scale)

    @variants.implements(canonical, "a")
    def first(x, *, a, **config):
        return ("first",) + canonical(x + a, **config)[1:]

    @variants.implements(canonical, "b")
    def second(x, *, b, **config):
        return ("second",) + canonical(x - b, **config)[1:]

    @variants.implements(canonical, when=lambda x, **config: x < 0)
    def negative(x, **config):
        return ("negative",) + canonical(-x, **config)[1:]

    return canonical


def test_the_keyword_of_the_second_variant_runs_the_second_not_the_first():
    f = _two_variants()
    assert f(5.0, b=2.0) == ("second", 3.0)
    assert f(5.0, a=2.0) == ("first", 7.0)
    assert f(5.0, a=None, b=2.0) == ("second", 3.0)  # a named but off
    assert f(5.0, scale=2.0) == ("canonical", 10.0)


def test_a_predicate_that_cannot_bind_the_call_leaves_it_to_the_canonical_function():
    f = _two_variants()
    with pytest.raises(TypeError, match=r"canonical\(\) missing 1 required positional argument"):
        f()


def test_shows_keywords_join_the_signature_with_their_defaults():
    import inspect

    from minattn.engine import variants

    f = _two_variants(shows={"shown": 3})
    variants.show(f, later=7)
    parameters = inspect.signature(f).parameters
    assert list(parameters) == ["x", "scale", "shown", "a", "b", "later"]
    assert (parameters["shown"].default, parameters["a"].default, parameters["later"].default) == \
        (3, None, 7)
    assert all(parameters[k].kind is inspect.Parameter.KEYWORD_ONLY for k in ("shown", "later"))


@pytest.mark.parametrize("head_mask", [None, "ones"])
def test_a_model_whose_layers_are_not_dicts_is_refused_by_name(model, head_mask):
    # was an AttributeError from causal_lm's own check (it read layer.get); with head_mask, the
    # variant leaves such a layer to that check
    params, config, _ = model
    with pytest.raises(TypeError, match=r"^params must be a dict of arrays, got list"):
        ma.causal_lm({**params, "layers": [[1.0], [2.0]]}, np.arange(L)[None] % 19,
                     head_mask=None if head_mask is None else np.ones((2, H)), **config)
