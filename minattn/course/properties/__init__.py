"""What attention must satisfy, stated once: the properties `python -m minattn check` grades a
student's functions by (tests/test_grader.py holds minattn itself to them too), one file per
exercise: ex01_softmax.py holds what exercise 1 is held to, ... ex16_attention_backward.py exercise 16's.
Each property belongs to the part of walkthrough.md that teaches it, and names the function it is
about (`of`).

Each property calls the PUBLIC minattn function through the package (`minattn.softmax`, ...),
so that under `minattn.swap` it exercises a student's version, and every composite that calls
it. Each compares with an independent reference (_references.py, or one beside the property):
slow loops in plain NumPy, in float64, that share no code with minattn. The machinery (the
registry, drawing, reporting) is _machinery.py; the contract every call is held to,
../contract.py. Optional: needs hypothesis; the core never imports it.
"""
# imported in this order, the order the grader checks them in
from . import (  # noqa: F401
    ex01_softmax, ex02_attention, ex03_masks, ex04_heads, ex05_multi_head_attention,
    ex06_layer_norm, ex07_feed_forward, ex08_encoder_block, ex09_grouped_query_attention,
    ex10_rope, ex11_kv_cache, ex14_attention_sinks, ex15_delta_rule, ex12_softmax_backward,
    ex16_attention_backward, ex13_blockwise_attention)
from ._machinery import COURSE, PROPERTIES, Property, prop, student  # noqa: F401

BY_NAME = {p.name: p for p in PROPERTIES}
