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
