"""What the mutation run of the functions changed since their module's last run showed untested
(tests/MUTANTS.md, "2026-11-27 night (b)"). Each test names the module it is for; references
are formulas or loops written here, or the refusal's documented wording (the argument named as
the caller wrote it)."""
import numpy as np
import pytest

import minattn as ma

D, H, L = 8, 2, 5


@pytest.fixture
def sinks_params():
    rng = np.random.default_rng(0)
    params = dict(ma.init_multi_head_attention(rng, D, H))
    return {**params, "sinks": np.array([0.5, -1.0])}, rng.standard_normal((1, L, D))


# sinks.py: _split_sinks, the check self_attention and multi_head_attention run with params["sinks"]

@pytest.mark.parametrize("n_heads, error", [(0, ValueError), (2.0, TypeError)])
def test_attention_with_sinks_refuses_a_bad_n_heads_by_its_name(sinks_params, n_heads, error):
    params, x = sinks_params
    with pytest.raises(error, match=rf"^n_heads must be a positive int, got {n_heads!r}$"):
        ma.self_attention(params, x, n_heads=n_heads)
    with pytest.raises(error, match=rf"^n_heads must be a positive int, got {n_heads!r}$"):
        ma.multi_head_attention(params, x, x, x, n_heads=n_heads)


def test_attention_with_sinks_names_the_input_as_the_caller_calls_it(sinks_params):
    # The refusal of an integer input names the argument: self_attention's x, and
    # multi_head_attention's query (as it does without sinks).
    params, x = sinks_params
    integers = np.ones((1, L, D), dtype=np.int64)
    with pytest.raises(TypeError, match=r"^x must be a floating-point array, got dtype int64"):
        ma.self_attention(params, integers, n_heads=H)
    for p in (params, {k: v for k, v in params.items() if k != "sinks"}):
        with pytest.raises(TypeError,
                           match=r"^query must be a floating-point array, got dtype int64"):
            ma.multi_head_attention(p, integers, x, x, n_heads=H)


# gated_attention.py: a bad rope_base refused by gated_attention's own check, before any product

def _gated_params():
    rng = np.random.default_rng(0)
    d, h, d_k = 8, 2, 4
    return {"w_q": rng.normal(size=(d, h * d_k)), "w_k": rng.normal(size=(d, d_k)),
            "w_v": rng.normal(size=(d, d_k)), "w_o": rng.normal(size=(h * d_k, d)),
            "w_gate": rng.normal(size=(d, h * d_k)), "q_norm": {"gamma": rng.normal(size=d_k)},
            "k_norm": {"gamma": rng.normal(size=d_k)}}


@pytest.mark.parametrize("rope_base, error, message", [
    (-1.0, ValueError, "rope_base must be a positive float, got -1.0"),
    ("x", TypeError, "rope_base must be a positive float, got 'x' (str)"),
])
def test_gated_attention_refuses_a_bad_rope_base_before_computing(monkeypatch, rope_base, error,
                                                                   message):
    import minattn.gated_attention as module

    calls = []
    monkeypatch.setattr(module, "_project", lambda *a: calls.append(1))
    with pytest.raises(error) as info:
        module.gated_attention(_gated_params(), np.ones((1, 3, 8)), n_heads=2, n_kv_heads=1,
                               positions=np.arange(3), rope_base=rope_base)
    assert str(info.value) == message and calls == []
