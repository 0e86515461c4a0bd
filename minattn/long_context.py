"""Long-context RoPE in self-attention: self_attention(..., rope_scaling=) rotates q and k with
one of rope_scaling.py's frequency schedules (linear, dynamic, YaRN, Llama 3's, LongRoPE) in
place of default RoPE's. The variant of minattn.kv_cache.self_attention that keyword selects
(engine/variants.py): it plugs the schedule into the rotation, rope(t, positions, base=).
"""
import functools

from .engine.decoder_checks import check_scaled_rope_attention
from .engine.variants import implements
from .kv_cache import self_attention
from .rope import apply_rope


@implements(self_attention, "rope_scaling", priority=20)
def self_attention_with_scaled_rope(params, x, mask=None, *, rope_scaling, rope=None, **config):
    """self_attention with RoPE's frequencies from the schedule rope_scaling (a dict
    {"rope_type", its keywords}: minattn.rope_scaling). config: as self_attention's."""
    # [..., L, D] -> [..., L, D], the new cache
    check_scaled_rope_attention(params, x, mask, rope_scaling, rope is None, config)
    rope = functools.partial(rope or apply_rope, scaling=rope_scaling)  # (a variant's rope too)
    return self_attention(params, x, mask, rope=rope, **config)
