"""Two checkouts of minattn in one process: layer_norm and rms_norm (forward; value and
gradient), softmax (no mask; causal) and the attention core's value and gradient, the order of the two alternating round by round, for a
before/after comparison of their elementwise passes (docs/benchmarks.md, "Fewer elementwise
passes"). Then the exact forms of a short row's max that were tried against NumPy's own.

    python benchmarks/ab_elementwise_passes.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 11]

e.g. `git worktree add /tmp/old <commit>` for OLD. float32; prints medians with their IQR, the
per-round ratios new / old and the load average before and after.
"""
import argparse
import os
import sys
import time

import numpy as np
from autograd import grad
import autograd.numpy as anp

from _harness import alternating, checkout, report_ab  # benchmarks/_harness.py, beside this script

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("old")
parser.add_argument("new")
parser.add_argument("--rounds", type=int, default=11)
ARGS = parser.parse_args()



def interleaved(label, old_f, new_f):
    report_ab(alternating({label: old_f}, {label: new_f}, ARGS.rounds))


old, new = checkout(ARGS.old), checkout(ARGS.new)
rng = np.random.default_rng(0)
print("threads", os.environ.get("OPENBLAS_NUM_THREADS", "default"), "load before", os.getloadavg())
for shape in [(32, 128, 512), (12, 64, 512)]:
    x, r = (rng.normal(size=shape).astype(np.float32) for _ in range(2))
    gamma, beta = (rng.normal(size=shape[-1]).astype(np.float32) for _ in range(2))
    for m in (old, new):
        m.ln = lambda m=m: m.layer_norm(x, gamma, beta)
        m.ln_g = lambda m=m: grad(lambda a: anp.sum(m.layer_norm(*a) * r))((x, gamma, beta))
        m.rms = lambda m=m: m.rms_norm(x, gamma)
        m.rms_g = lambda m=m: grad(lambda a: anp.sum(m.rms_norm(*a) * r))((x, gamma))
    for name in ("ln", "ln_g", "rms", "rms_g"):
        interleaved(f"{name} {shape}", getattr(old, name), getattr(new, name))
for shape in [(12, 8, 64, 64), (32, 8, 32, 32), (4, 8, 256, 64), (32, 8, 128, 128)]:
    x = rng.normal(size=shape).astype(np.float32)
    for mask in (None, np.tril(np.ones(shape[-2:], bool))):
        assert np.array_equal(old.softmax(x, mask=mask), new.softmax(x, mask=mask))
        interleaved(f"softmax {shape} {'causal' if mask is not None else 'no mask'}",
                    lambda: old.softmax(x, mask=mask), lambda: new.softmax(x, mask=mask))
for shape in [(32, 8, 128, 64), (12, 8, 64, 64)]:  # the attention core's value and gradient
    q, k, v, r = (rng.normal(size=shape).astype(np.float32) for _ in range(4))
    for m in (old, new):
        m.core_g = lambda m=m: grad(lambda a: anp.sum(m.scaled_dot_product_attention(*a)[0] * r))(
            (q, k, v))
    interleaved(f"scaled_dot_product_attention value and gradient {shape}", old.core_g, new.core_g)


def halves(x, width=16):  # np.maximum of the row's halves down to `width`, then max
    n = x.shape[-1]
    while n > width and n % 2 == 0:
        x, n = np.maximum(x[..., :n // 2], x[..., n // 2:n]), n // 2
    return x.max(axis=-1, keepdims=True)


forms = {"halves to 16": halves,
         "[.., 4, n/4] max(-2) then max(-1)": lambda x: x.reshape(
             x.shape[:-1] + (4, x.shape[-1] // 4)).max(-2).max(-1, keepdims=True),
         "transposed copy, max down columns": lambda x: np.swapaxes(x, -1, -2).copy().max(-2)[..., None]}
for shape in [(12, 8, 64, 64), (32, 8, 128, 128), (12, 64, 512)]:
    x = rng.normal(size=shape).astype(np.float32)
    for label, form in forms.items():
        assert np.array_equal(form(x), x.max(-1, keepdims=True))
        interleaved(f"row max {shape}, {label} against x.max(-1)",
                    lambda: x.max(-1, keepdims=True), lambda form=form: form(x))
print("load after", os.getloadavg())
