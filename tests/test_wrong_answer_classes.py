"""Classes of wrong answers that pass a property drawing only small, typical values, and the
properties (minattn/course/properties/) that catch them, held against minattn itself: an
argument of 0 treated as "not given" (scale=0, eps=0, n=0), a mask applied after the exponential
or a row maximum taken over masked entries (masked values thousands above the kept ones),
dropout at the wrong point of a block (on the feed-forward output, on the residual sum), and
blockwise code that loses the last partial block (lengths that are not multiples of the block
size, on purpose). Each runs the course's property under this suite's hypothesis profile; the
pitfalls (minattn.course.pitfalls) that fail them are in tests/test_pitfalls.py, and the
mutants and student answers that fail them in tests/test_grader.py."""
from hypothesis import given
from hypothesis import strategies as st

from minattn.course import grader, properties


def course_property(name):
    """A test of this module running the course's property `name` on minattn itself."""
    prop = properties.BY_NAME[name]

    def test(data):
        prop.check(grader.Named(data))
    test.__name__ = test.__qualname__ = f"test_{name}"
    test.__doc__ = prop.statement
    return given(st.data())(test)


test_attention_uses_the_given_scale = course_property("attention_uses_the_given_scale")
test_layer_norm_matches_the_formula = course_property("layer_norm_matches_the_formula")
test_padding_mask_keeps_real_tokens = course_property("padding_mask_keeps_real_tokens")
test_softmax_ignores_masked_values_however_large = course_property(
    "softmax_ignores_masked_values_however_large")
test_attention_ignores_masked_scores_however_large = course_property(
    "attention_ignores_masked_scores_however_large")
test_feed_forward_drops_hidden_units = course_property("feed_forward_drops_hidden_units")
test_encoder_block_keeps_dropout_off_the_residual_path = course_property(
    "encoder_block_keeps_dropout_off_the_residual_path")
test_encoder_block_matches_the_paper = course_property("encoder_block_matches_the_paper")
test_blockwise_attention_matches_attention = course_property(
    "blockwise_attention_matches_attention")
test_blockwise_attention_reads_the_last_partial_block = course_property(
    "blockwise_attention_reads_the_last_partial_block")
test_blockwise_attention_ignores_masked_keys_however_large = course_property(
    "blockwise_attention_ignores_masked_keys_however_large")
