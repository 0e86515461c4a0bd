"""SmolLM3 (Hugging Face, 2025, "SmolLM3: smol, multilingual, long-context reasoner"; NoPE layers
after Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
Transformers"). Tested against transformers' models/smollm3/modeling_smollm3.py
(tests/test_hf_families.py).

What the family changes: Llama's block, with some layers that use no position encoding at all
(NoPE: no_rope_layers[i] == 0): those layers' rope_base is None, and causal_lm rotates nothing
there.
"""
from ..engine.param_checks import ROPE_BASE
from ..engine.variants import implements
from ..kv_cache import self_attention
from . import llama


def from_hf(model):
    # SmolLM3: Llama with layers that have no RoPE at all (NoPE: no_rope_layers[i] == 0), told
    # to causal_lm by a rope_base of None for those layers.
    config = model.config
    params, kwargs = llama.from_hf(model)
    rotated = list(config.no_rope_layers)[:len(params["layers"])]
    if len(rotated) != len(params["layers"]):
        raise ValueError(f"no_rope_layers has {len(rotated)} entries for "
                         f"{len(params['layers'])} layers")
    kwargs["rope_base"] = [kwargs["rope_base"] if use else None for use in rotated]
    return params, kwargs


def _no_rope(params, x, mask=None, *, rope_base=ROPE_BASE, **config):
    return rope_base is None


@implements(self_attention, when=_no_rope, priority=40)
def nope_attention(params, x, mask=None, *, rope_base, positions=None, rope_scaling=None,
                   partial_rotary_factor=None, rope=None, **config):
    """A NoPE layer's self_attention (rope_base=None): no position at all, q and k unrotated.
    The model's RoPE settings (rope_scaling, partial_rotary_factor), which causal_lm passes to
    every layer, are the rotated layers': this layer takes them and rotates nothing."""
    return self_attention(params, x, mask, **config)


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"smollm3": from_hf}
