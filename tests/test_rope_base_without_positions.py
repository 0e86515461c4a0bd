"""A rope_base given without positions rotates nothing: every public entry point that takes
rope_base refuses it by name (naming rope_base and positions, or causal_lm's position='rope'),
10000.0 included (the default's value, given), on the cached paths too; the default left out,
or rope_base=None (a layer without RoPE), is no RoPE as documented.

The entry points are found by walking the concept modules' public signatures, so a new one
fails here until its call is listed."""
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import minattn as ma
from minattn.differential import differential_attention, init_differential_attention
from minattn.gated_attention import gated_attention
from minattn.mla import init_latent_attention, latent_attention

rng = np.random.default_rng(0)
D, H, H_KV, F, L = 16, 4, 2, 24, 5
X = rng.normal(size=(2, L, D))
LLAMA = dict(norm="rms_norm", activation="swiglu", norm_first=True, eps=1e-6)
BLOCK = ma.init_decoder_block(rng, D, H, F, n_kv_heads=H_KV, norm="rms_norm",
                              activation="swiglu", bias=False)
ATTENTION = BLOCK["self_attention"]
GATED = {**ATTENTION, "w_gate": rng.normal(size=(D, D)), "q_norm": {"gamma": np.ones(D // H)},
         "k_norm": {"gamma": np.ones(D // H)}}
DIFFERENTIAL = init_differential_attention(rng, D, H, layer_index=0, n_kv_heads=H_KV)
LATENT = dict(n_heads=H, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=4)
TOKENS = np.array([[1, 2, 3, 4, 5]])

# entry point -> a call with its rope_base keywords (and positions where given)
CALLS = {
    "self_attention": lambda **rope: ma.self_attention(ATTENTION, X, n_heads=H, n_kv_heads=H_KV,
                                                       **rope),
    "decoder_block": lambda **rope: ma.decoder_block(BLOCK, X, n_heads=H, n_kv_heads=H_KV,
                                                     **LLAMA, **rope),
    "differential_attention": lambda **rope: differential_attention(
        DIFFERENTIAL, X, n_heads=H, n_kv_heads=H_KV, **rope),
    "gated_attention": lambda **rope: gated_attention(GATED, X, n_heads=H, n_kv_heads=H_KV, **rope),
}
CACHED = {  # the cached paths: decoding token by token from an empty cache
    "self_attention": lambda **rope: ma.self_attention(ATTENTION, X, n_heads=H, n_kv_heads=H_KV,
                                                       cache={}, **rope),
    "decoder_block": lambda **rope: ma.decoder_block(BLOCK, X, n_heads=H, n_kv_heads=H_KV,
                                                     cache={}, **LLAMA, **rope),
    "decoder": lambda **rope: ma.decoder({"layers": [BLOCK, BLOCK]}, X, n_heads=H,
                                         n_kv_heads=H_KV, cache=({}, {}), **LLAMA, **rope),
}
# Taking rope_base for another purpose: streaming_cache re-rotates the kept keys (it has no
# positions to leave out).
OTHER = {"streaming_cache"}


def _entry_points():
    names = set()
    modules = [ma] + [importlib.import_module(f"minattn.{m.name}")
                      for m in pkgutil.iter_modules(ma.__path__) if not m.ispkg
                      and m.name != "__main__"]
    for module in modules:
        for name, f in vars(module).items():
            if name.startswith("_") or not callable(f) or \
                    getattr(f, "__module__", None) not in (module.__name__, "minattn"):
                continue
            try:
                parameters = inspect.signature(f).parameters
            except (TypeError, ValueError):
                continue
            if "rope_base" in parameters:
                names.add(name)
    return names


def test_every_entry_point_taking_rope_base_is_held_here():
    assert _entry_points() == set(CALLS) | {"causal_lm"} | OTHER


@pytest.mark.parametrize("base", [10000.0, 500000.0, 10])
@pytest.mark.parametrize("name", sorted(CALLS) + [f"{name}, cached" for name in sorted(CACHED)])
def test_a_rope_base_without_positions_is_refused_naming_both(name, base):
    call = CACHED[name[:-len(", cached")]] if name.endswith("cached") else CALLS[name]
    with pytest.raises(ValueError, match=rf"^rope_base={base!r} set RoPE, which rotates q and k "
                                         r"only where positions are given: pass positions"):
        call(rope_base=base)


@pytest.mark.parametrize("name", sorted(CALLS) + [f"{name}, cached" for name in sorted(CACHED)])
def test_rope_base_left_out_or_none_is_no_rope(name):
    call = CACHED[name[:-len(", cached")]] if name.endswith("cached") else CALLS[name]
    first = lambda out: out[0] if isinstance(out, tuple) else out  # noqa: E731
    at_zero = first(call(positions=np.zeros(L, int), rope_base=10000.0))  # rotating by 0
    np.testing.assert_allclose(first(call()), at_zero, rtol=0, atol=1e-12)
    if not name.startswith(("differential", "gated")):  # rope_base=None: SmolLM3's NoPE layer
        np.testing.assert_allclose(first(call(rope_base=None)), at_zero, rtol=0, atol=1e-12)
    rotated = first(call(positions=np.arange(L), rope_base=10000.0))
    assert np.abs(rotated - at_zero).max() > 1e-3  # the rotation is on where positions are


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_causal_lm_with_learned_positions_refuses_a_rope_base_naming_position_rope(base):
    params, config = ma.init_causal_lm(rng, vocab_size=11, d_model=D, n_heads=H, d_ff=F,
                                       n_layers=2, n_positions=L)
    with pytest.raises(ValueError, match=rf"^rope_base={base!r} set RoPE, which "
                                         r"position='learned' .* pass position='rope'"):
        ma.causal_lm(params, TOKENS, n_heads=H, rope_base=base)
    ma.causal_lm(params, TOKENS, n_heads=H)  # the default: no RoPE asked for


def test_latent_attention_requires_positions():
    # (its rope_base among the block's keywords it takes: MLA always rotates)
    params = init_latent_attention(rng, D, H, kv_lora_rank=4, q_lora_rank=None, **{
        k: v for k, v in LATENT.items() if k != "n_heads"})
    with pytest.raises((TypeError, ValueError), match="positions"):
        latent_attention(params, X, **LATENT, positions=None, rope_base=10000.0)
