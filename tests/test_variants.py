"""engine/variants.py: a dispatched function answers the calls that select a registered variant
with that variant, and every other call with its own body, the variants' keywords left out.
Checked on small functions made here (what each returns says who ran), then on minattn's own."""
import inspect

import numpy as np
import pytest

import minattn as ma
from minattn.engine import variants


def _pair():
    @variants.dispatch(hooks=("plug",))
    def canonical(x, *, scale=1.0, plug=None):
        return ("canonical", x * scale, plug)

    @variants.implements(canonical, "shift")
    def shifted(x, *, shift, **config):
        return ("shifted",) + canonical(x + shift, **config)[1:]

    @variants.implements(canonical, when=lambda x, **config: x < 0)
    def negative(x, **config):
        return ("negative",) + canonical(-x, plug="negated", **config)[1:]

    return canonical


def test_a_call_without_a_variants_keyword_runs_the_canonical_body():
    f = _pair()
    assert f(2.0, scale=3.0) == ("canonical", 6.0, None)


@pytest.mark.parametrize("off", [None, False, np.False_])
def test_a_variants_keyword_left_off_is_not_passed_to_the_canonical_body(off):
    assert _pair()(2.0, shift=off) == ("canonical", 2.0, None)  # the body takes no shift


def test_a_keyword_set_runs_the_variant_which_calls_the_canonical_body():
    assert _pair()(2.0, shift=1.0, scale=10.0) == ("shifted", 30.0, None)


def test_a_predicate_selects_a_variant_and_variants_compose():
    f = _pair()
    assert f(-2.0) == ("negative", 2.0, "negated")
    # the shift runs first (registered first), then the predicate's variant on what it passes
    assert f(-5.0, shift=1.0) == ("shifted", 4.0, "negated")


def test_the_signature_shows_the_variants_keywords_and_hides_the_hooks():
    parameters = inspect.signature(_pair()).parameters
    assert list(parameters) == ["x", "scale", "shift"]
    assert parameters["shift"].default is None


def test_minattns_signatures_keep_every_keyword_a_config_may_hold():
    # the configs from_hf and load_language_model give pass these through causal_lm
    shown = inspect.signature(ma.causal_lm).parameters
    for keyword in ("n_kv_heads", "d_k", "norm", "eps", "rope_base", "rope_scaling", "window",
                    "partial_rotary_factor", "parallel", "embedding_scale", "attention",
                    "query_pre_attn_scalar", "attn_logit_softcapping",
                    "final_logit_softcapping", "head_mask", "logits_to_keep"):
        assert keyword in shown, keyword
    assert "core" not in inspect.signature(ma.self_attention).parameters  # a hook


def test_a_shared_function_with_a_variants_keyword_equals_the_variant_called_directly():
    from minattn.softcap import scaled_self_attention

    rng = np.random.default_rng(0)
    params = ma.init_multi_head_attention(rng, 8, 2)
    x = rng.normal(size=(1, 5, 8))
    via_dispatch, _ = ma.self_attention(params, x, n_heads=2, attn_logit_softcapping=1.5)
    direct, _ = scaled_self_attention(params, x, n_heads=2, attn_logit_softcapping=1.5)
    np.testing.assert_array_equal(via_dispatch, direct)
    plain, _ = ma.self_attention(params, x, n_heads=2)
    assert not np.allclose(plain, via_dispatch)  # the cap at 1.5 changes the scores


def test_a_call_missing_its_arguments_gets_the_canonical_functions_own_error():
    # The variants' `when` predicates see a call before the function does; one that cannot
    # bind the call selects nothing, and the canonical function raises its own TypeError.
    import minattn

    dispatched = {name: f for name, f in vars(minattn).items()
                  if callable(f) and isinstance(getattr(f, "variants", None), list)}
    assert {"causal_lm", "decoder_block", "self_attention", "multi_head_attention"} <= \
        set(dispatched)
    for name, f in dispatched.items():
        if any(when for _, when, _ in f.variants):
            with pytest.raises(TypeError, match=rf"^{name}\(\) missing"):
                f()


def _prioritised(order):
    # the same three variants, registered in `order`: each states its priority
    @variants.dispatch
    def canonical(x, **config):
        return [x]

    def variant(name, keyword, priority):
        @variants.implements(canonical, keyword, priority=priority)
        def run(x, **config):
            config.pop(keyword)
            return [name] + canonical(x, **config)
        return run

    made = {"outer": ("a", 2), "middle": ("b", 1), "inner": ("c", 0)}
    for name in order:
        variant(name, *made[name])
    return canonical


@pytest.mark.parametrize("order", [("outer", "middle", "inner"), ("inner", "middle", "outer"),
                                   ("middle", "inner", "outer")])
def test_the_variants_run_in_the_order_of_their_priorities_not_of_their_registration(order):
    assert _prioritised(order)(0, a=1, b=1, c=1) == ["outer", "middle", "inner", 0]
    assert _prioritised(order)(0, c=1, a=1) == ["outer", "inner", 0]


def test_equal_priorities_run_in_the_order_registered_and_first_before_every_other():
    @variants.dispatch
    def canonical(x, **config):
        return [x]

    for name, priority in (("one", 0), ("two", 0), ("high", 5)):
        variants.implements(canonical, name, priority=priority)(
            lambda x, _name=name, **config: [_name] + canonical(x, **{**config, _name: None}))
    variants.implements(canonical, "wrap", priority=variants.FIRST)(
        lambda x, **config: ["wrap"] + canonical(x, **{**config, "wrap": None}))
    assert canonical(0, one=1, two=1, high=1, wrap=1) == ["wrap", "high", "one", "two", 0]


def test_trace_lists_the_variants_a_call_runs_then_the_canonical_body():
    f = _pair()
    chain = variants.trace(f, -5.0, shift=1.0)
    assert [g.__name__ for g in chain] == ["shifted", "negative", "canonical"]
    assert chain[-1] is f.__wrapped__  # the body itself, not the dispatched function
    assert [g.__name__ for g in variants.trace(f, 2.0)] == ["canonical"]
    assert f(-5.0, shift=1.0) == ("shifted", 4.0, "negated")  # the variants as they were


def test_trace_leaves_the_variants_as_they_were_when_the_call_raises():
    f = _pair()
    before = list(f.variants)
    with pytest.raises(TypeError, match=r"missing 1 required positional argument"):
        variants.trace(f)
    assert f.variants == before


def test_minattns_attention_variants_run_in_the_order_their_files_state():
    rng = np.random.default_rng(0)
    params = ma.init_multi_head_attention(rng, 8, 2)
    x = rng.normal(size=(1, 5, 8))
    chain = variants.trace(ma.self_attention, params, x, n_heads=2, head_mask=np.ones(2),
                           positions=np.arange(5),
                           rope_scaling={"rope_type": "linear", "factor": 2.0})
    names = [f"{g.__module__}.{g.__name__}" for g in chain]
    assert names[:3] == ["minattn.head_mask.self_attention_with_head_mask",
                         "minattn.long_context.self_attention_with_scaled_rope",
                         "minattn.kv_cache.self_attention"]
    # hooks, last on self_attention: its attention reads the core the others chose
    assert ma.self_attention.variants[-1][2].__module__ == "minattn.hooks"
    assert ma.self_attention.priorities == sorted(ma.self_attention.priorities, reverse=True)


def test_a_typeerror_from_inside_a_predicate_surfaces():
    @variants.dispatch
    def canonical(x, **config):
        return x

    def broken(x, **config):
        return x + "a" == "b"  # a bug in the predicate, not a call it cannot take

    variants.implements(canonical, when=broken)(lambda x, **config: "variant")
    with pytest.raises(TypeError, match=r"unsupported operand"):
        canonical(1.0)
    with pytest.raises(TypeError, match=r"canonical\(\) missing 1 required positional"):
        canonical()  # the call the predicate cannot take: the canonical function's own error


def test_the_variants_of_each_minattn_function_have_distinct_priorities():
    # then the order in which they run is the one they state, whatever the order of the imports
    import minattn  # noqa: F401  (every variant registered)
    import minattn.families.deepseek_v3, minattn.families.diffllama  # noqa: E401, F401

    shared = {f"{f.__module__}.{f.__name__}": f.priorities for f in list(variants._DISPATCHED)
              if f.__module__.startswith("minattn") and len(set(f.priorities)) < len(f.priorities)}
    assert not shared
    assert any(len(f.priorities) > 3 for f in list(variants._DISPATCHED))  # the test sees them
