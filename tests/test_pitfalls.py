"""Each pitfall in minattn.course.pitfalls is caught by a named property of this suite: with the pitfall
swapped in for the real function the property fails by its own assertion, and with the real
function the same property passes."""
import contextlib
import inspect

import numpy as np
import pytest
from hypothesis import Phase, settings

import minattn
from minattn.course import pitfalls

from . import (test_attention, test_decoder, test_encoder, test_heads, test_layer_norm,
               test_softmax, test_wrong_answer_classes)

# (pitfall, the real function it replaces, the property that catches it, that test's parameters)
CASES = [
    ("attention_without_scaling", "scaled_dot_product_attention",
     test_attention.test_matches_loop_reference, {}),
    ("softmax_over_wrong_axis", "scaled_dot_product_attention",
     test_attention.test_weights_nonnegative_and_rows_sum_to_one, {}),
    ("split_heads_without_transpose", "split_heads",
     test_heads.test_split_heads_takes_contiguous_feature_slices, {}),
    ("attention_with_inverted_mask", "scaled_dot_product_attention",
     test_attention.test_masked_keys_get_zero_weight_and_do_not_matter, {}),
    ("attention_with_minus_1e9_mask", "scaled_dot_product_attention",
     test_attention.test_masked_keys_get_zero_weight_and_do_not_matter, {}),
    ("layer_norm_over_wrong_axis", "layer_norm", test_layer_norm.test_matches_loop_reference, {}),
    ("layer_norm_std_plus_eps", "layer_norm", test_layer_norm.test_eps_sits_inside_the_square_root,
     {}),
    ("softmax_without_max_subtraction", "softmax",
     test_softmax.test_huge_logits_give_finite_results, {"dtype": np.float32}),
    ("encoder_block_without_residual", "encoder_block",
     test_encoder.test_block_matches_hand_written_block, {"norm_first": False}),
    ("encoder_block_without_residual", "encoder_block",
     test_encoder.test_block_matches_hand_written_block, {"norm_first": True}),
    ("causal_mask_off_by_one", "causal_mask",
     test_decoder.test_logits_do_not_depend_on_later_tokens, {"style": "gpt2"}),
    ("self_attention_with_rope_on_values", "self_attention",
     test_decoder.test_rope_attention_is_invariant_to_shifting_all_positions, {}),
    ("causal_lm_without_advancing_positions", "causal_lm",
     test_decoder.test_cached_decoding_equals_the_full_forward_pass, {"style": "gpt2"}),
    ("causal_lm_without_advancing_positions", "causal_lm",
     test_decoder.test_cached_decoding_equals_the_full_forward_pass, {"style": "llama"}),
    ("attention_with_scale_or_default", "scaled_dot_product_attention",
     test_wrong_answer_classes.test_attention_uses_the_given_scale, {}),
    ("softmax_masking_after_exp", "softmax",
     test_wrong_answer_classes.test_softmax_ignores_masked_values_however_large, {}),
    ("feed_forward_with_dropout_on_the_output", "feed_forward",
     test_wrong_answer_classes.test_feed_forward_drops_hidden_units, {}),
    ("encoder_block_with_dropout_on_the_residual_sum", "encoder_block",
     test_wrong_answer_classes.test_encoder_block_keeps_dropout_off_the_residual_path, {}),
    ("blockwise_attention_without_the_last_partial_block", "blockwise_attention",
     test_wrong_answer_classes.test_blockwise_attention_reads_the_last_partial_block, {}),
]
IDS = [f"{name}-{'-'.join(map(str, kwargs.values())) or 'default'}" for name, _, _, kwargs in CASES]


def _node_id(test):
    # tests.test_attention.test_matches_loop_reference -> tests/test_attention.py::test_...
    return f"{test.__module__.replace('.', '/')}.py::{test.__name__}"


def _swap_in(monkeypatch, real_name, replacement):
    """Replace the real function wherever minattn holds it, with the public minattn.swap, undone
    when the test ends."""
    _OPEN_SWAPS.enter_context(minattn.swap(**{real_name: replacement}))


_OPEN_SWAPS = contextlib.ExitStack()


@pytest.fixture(autouse=True)
def _close_swaps():
    yield
    _OPEN_SWAPS.close()


def test_table_covers_every_pitfall_and_agrees_with_PITFALLS():
    public = {name for name, f in vars(pitfalls).items()
              if inspect.isfunction(f) and f.__module__ == pitfalls.__name__}
    assert public == set(pitfalls.PITFALLS) == {name for name, *_ in CASES}
    for name, real_name, prop, _ in CASES:
        assert pitfalls.PITFALLS[name] == _node_id(prop)


@pytest.mark.parametrize("name, real_name", sorted({(n, r) for n, r, _, _ in CASES}))
def test_pitfall_has_the_real_signature_and_says_what_is_wrong(name, real_name):
    pitfall = getattr(pitfalls, name)
    assert inspect.signature(pitfall) == inspect.signature(getattr(minattn, real_name))
    assert len(inspect.getdoc(pitfall).splitlines()) >= 3  # what is wrong, and why it matters


@pytest.mark.parametrize("name, real_name, prop, kwargs", CASES, ids=IDS)
def test_property_passes_with_the_real_function(name, real_name, prop, kwargs):
    prop(**kwargs)


@pytest.mark.parametrize("name, real_name, prop, kwargs", CASES, ids=IDS)
def test_property_fails_with_the_pitfall(name, real_name, prop, kwargs, monkeypatch):
    _swap_in(monkeypatch, real_name, getattr(pitfalls, name))
    if hasattr(prop, "hypothesis"):
        # Skip shrinking: that it fails is the point here, not the smallest failing example.
        # (Hypothesis keeps a test's settings on the function; monkeypatch restores them.)
        current = prop._hypothesis_internal_use_settings
        monkeypatch.setattr(prop, "_hypothesis_internal_use_settings",
                            settings(current, phases=[Phase.explicit, Phase.generate],
                                     database=None))
    # NumPy's overflow warnings off: the property's own assertion must catch the bug, not the
    # warnings-as-errors filter. Hypothesis re-raises the assertion it found (or a group of
    # them, when it found several distinct failures).
    with np.errstate(all="ignore"), pytest.raises((AssertionError, ExceptionGroup)) as caught:
        prop(**kwargs)
    if isinstance(caught.value, ExceptionGroup):
        _, others = caught.value.split(AssertionError)
        assert others is None, f"the property crashed instead of failing: {others!r}"
