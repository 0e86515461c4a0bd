"""Two checkouts of minattn in one process: the float32 GELU's forward, its forward with the
derivative (what a differentiated GELU computes), and the baby GPT's value and gradient
(bench_char_gpt.py's step without the optimizer), interleaved round by round, for a
before/after comparison of the GELU (issues 61 and 65).

    python benchmarks/ab_gelu_versions.py OLD_CHECKOUT NEW_CHECKOUT [THREADS [ROUNDS]]

e.g. `git worktree add /tmp/old <commit>` for OLD. THREADS: the BLAS thread limit
(threadpoolctl), 1 or 2 (default 1). Shapes [12, 64, 512] (the baby GPT's MLP) and
[32, 128, 1536] (all-MiniLM-L6-v2's, batch 32). Prints each median with its IQR and the median
and IQR of the per-round ratios new / old, the order of the two alternating round by round;
11 rounds (or ROUNDS).
"""
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

from _harness import alternating, checkout, report_ab  # benchmarks/_harness.py, beside this script

old, new = (checkout(path, "engine.autograd_rules", "models.char_gpt", "position_wise")
            for path in sys.argv[1:3])
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 1
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 11
rng = np.random.default_rng(0)
xs = {shape: rng.standard_normal(shape).astype(np.float32)
      for shape in ((12, 64, 512), (32, 128, 1536))}
ids = rng.integers(65, size=10_000)
params, config = old.models.char_gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=np.float32)
batch = old.models.char_gpt.window_batch(ids, context=64, batch_size=12, seed=0, k=0)


def works(m):
    pw = m.position_wise
    step = m.engine.autograd_rules.value_and_grad_by_leaf(m.models.char_gpt.loss_sum(config))
    out = {}
    for shape, x in xs.items():
        out[f"forward {list(shape)}"] = lambda x=x: pw._gelu_float32(x)
        out[f"forward+derivative {list(shape)}"] = \
            lambda x=x: pw._gelu_float32_and_derivative(("x",), x)
    out["baby GPT value and gradient"] = lambda: step(params, batch, None)
    return out


with threadpool_limits(threads):
    times = alternating(works(old), works(new), rounds)
print(f"BLAS threads {threads}, {rounds} rounds, load before/after: see the caller; now",
      os.getloadavg())
report_ab(times)
