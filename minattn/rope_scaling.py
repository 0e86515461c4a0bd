"""RoPE frequency schedules: how long-context models change RoPE's frequencies.

Default RoPE rotates feature pair i at the inverse frequency base^(-2i/d). A model trained on
sequences of length N has seen every pair turn through angles up to N * base^(-2i/d) only; the
schedules below stretch the slow pairs' wavelengths so that longer sequences stay within the
angles seen in training (walkthrough.md, "Model families"). Each is a function
(exponents 2i/d [d/2], base, positions) -> (inverse frequencies [d/2], attention_factor), with
the keyword names transformers uses in `rope_parameters` (4.x: `rope_scaling`), so a config's
dict passes through unchanged:

    {"rope_type": "linear", "factor": 4.0}
    {"rope_type": "dynamic", "factor": 4.0, "max_position_embeddings": 2048}
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, ...}
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192}
    {"rope_type": "longrope", "short_factor": [...], "long_factor": [...], "factor": 32.0,
     "original_max_position_embeddings": 4096}
"""
import math

import autograd.numpy as np

from .engine import param_checks
from .engine.param_checks import check_rope_scaling


def linear(exponents, base, positions, *, factor):
    """Position interpolation (Chen et al. 2023): every frequency divided by factor."""
    return base ** -exponents / factor, 1.0


def dynamic(exponents, base, positions, *, factor, max_position_embeddings):
    """Dynamic NTK scaling: beyond max_position_embeddings, a larger base, growing with the
    sequence length L = max(positions) + 1 (transformers' "dynamic"; default RoPE up to there)."""
    length = int(np.max(positions)) + 1 if np.size(positions) else 0
    if length <= max_position_embeddings:  # as transformers: no formula evaluated (d may be 2)
        return base ** -exponents, 1.0
    d = 2 * exponents.shape[0]  # > 2 here (apply_rope's check)
    base = base * (factor * length / max_position_embeddings - (factor - 1)) ** (d / (d - 2))
    return base ** -exponents, 1.0


def yarn(exponents, base, positions, *, factor, original_max_position_embeddings,
         attention_factor=None, beta_fast=32, beta_slow=1, mscale=None, mscale_all_dim=None,
         truncate=True):
    """YaRN (Peng et al. 2023): pairs turning more than beta_fast times over the original
    context keep their frequency, pairs turning less than beta_slow times are interpolated
    (divided by factor), a linear ramp in between; q and k are scaled by attention_factor
    (default m(1), with m(s) = 0.1 s ln(factor) + 1, or 1 where factor <= 1; where both mscale
    and mscale_all_dim are given, m(mscale) / m(mscale_all_dim))."""
    d = 2 * exponents.shape[0]

    def pair_turning(turns):  # the (fractional) pair index i that turns `turns` times
        return d * math.log(original_max_position_embeddings / (turns * 2 * math.pi)) / (
            2 * math.log(base))

    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    high = high + 0.001 if low == high else high  # transformers' guard against 0 / 0
    # each pair's place on the ramp, [d/2]: 0 keeps its frequency, 1 divides it by factor
    interpolated = np.clip((np.arange(d // 2, like=exponents) - low) / (high - low), 0, 1)
    inv_freq = base ** -exponents * (1 - interpolated + interpolated / factor)
    if attention_factor is None:
        m = lambda scale: 1.0 if factor <= 1 else 0.1 * scale * math.log(factor) + 1.0
        attention_factor = m(mscale) / m(mscale_all_dim) if mscale and mscale_all_dim else m(1)
    return inv_freq, attention_factor


def llama3(exponents, base, positions, *, factor, low_freq_factor, high_freq_factor,
           original_max_position_embeddings):
    """Llama 3.1's schedule: wavelengths shorter than N / high_freq_factor are kept, longer than
    N / low_freq_factor divided by factor, smoothly interpolated in between (N: the original
    context)."""
    inv_freq = base ** -exponents
    turns = original_max_position_embeddings * inv_freq / (2 * math.pi)  # N / wavelength
    smooth = np.clip((turns - low_freq_factor) / (high_freq_factor - low_freq_factor), 0, 1)
    return inv_freq * (smooth + (1 - smooth) / factor), 1.0


def longrope(exponents, base, positions, *, short_factor, long_factor, factor,
             original_max_position_embeddings, attention_factor=None):
    """LongRoPE (Ding et al. 2024; Phi-3's "longrope"): pair i's frequency divided by its own
    searched rescale factor, short_factor[i] while the sequence L = max(positions) + 1 fits the
    original context N, long_factor[i] beyond it (chosen per call, as dynamic scaling's base);
    q and k scaled by attention_factor (default sqrt(1 + ln(factor) / ln(N)), which needs N > 1,
    or 1 where factor <= 1)."""
    _check_longrope(exponents, short_factor, long_factor, factor, original_max_position_embeddings,
                    attention_factor)
    length = int(np.max(positions)) + 1 if np.size(positions) else 0
    rescale = long_factor if length > original_max_position_embeddings else short_factor
    inv_freq = base ** -exponents / np.array(rescale, dtype=exponents.dtype, like=exponents)
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1 else math.sqrt(
            1 + math.log(factor) / math.log(original_max_position_embeddings))
    return inv_freq, attention_factor


def _check_longrope(exponents, short_factor, long_factor, factor, original, attention_factor):
    for name, rescale in (("short_factor", short_factor), ("long_factor", long_factor)):
        if np.ndim(rescale) != 1 or len(rescale) != exponents.shape[0]:
            raise ValueError(f"longrope's {name} must hold one factor per rotated feature pair, "
                             f"{exponents.shape[0]}, got {np.shape(rescale)}")
    if attention_factor is None and factor > 1 and original <= 1:  # ln(N) <= 0: 0 divides, or
        # a negative ln(N) makes the factor below 1 or the square root's argument negative
        raise ValueError(f"longrope's default attention_factor, sqrt(1 + ln(factor) / ln(N)), "
                         f"needs original_max_position_embeddings N > 1, got N={original!r} "
                         f"(factor={factor!r}): give attention_factor, or N > 1")


SCHEDULES = {"linear": linear, "dynamic": dynamic, "yarn": yarn, "llama3": llama3,
             "longrope": longrope}
param_checks.ROPE_SCHEDULES.update(SCHEDULES)  # check_rope_scaling reads their keywords


def rope_frequencies(d, positions, *, base=10000.0, scaling=None):
    """-> (inverse frequencies [d/2], attention_factor) of RoPE on d features: default RoPE's
    base^(-2i/d) when scaling is None, else the schedule named by scaling["rope_type"] with the
    rest of the dict as its keywords."""
    exponents = np.arange(0, d, 2, like=positions) / d  # [d/2]
    if scaling is None:
        return float(base) ** -exponents, 1.0
    check_rope_scaling(scaling)
    keywords = {k: v for k, v in scaling.items() if k != "rope_type"}
    return SCHEDULES[scaling["rope_type"]](exponents, float(base), positions, **keywords)
