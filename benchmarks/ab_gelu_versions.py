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
import time

import numpy as np
from threadpoolctl import threadpool_limits


def load(path):
    for m in [m for m in sys.modules if m.split(".")[0] == "minattn"]:
        del sys.modules[m]
    sys.path.insert(0, path)
    import minattn
    import minattn.engine.autograd_rules
    import minattn.models.char_gpt
    import minattn.position_wise
    sys.path.pop(0)
    return minattn


old, new = load(sys.argv[1]), load(sys.argv[2])
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


fs = {"old": works(old), "new": works(new)}
times = {(v, k): [] for v in fs for k in fs["old"]}
with threadpool_limits(threads):
    for v in fs:
        for f in fs[v].values():
            f()
    for rnd in range(rounds):  # old first in odd rounds, new first in even ones
        for k in fs["old"]:
            for v in (("old", "new") if rnd % 2 else ("new", "old")):
                f = fs[v][k]
                s = time.perf_counter()
                f()
                times[v, k].append(time.perf_counter() - s)
print(f"BLAS threads {threads}, {rounds} rounds, load before/after: see the caller; now",
      os.getloadavg())
for k in fs["old"]:
    o, n = np.array(times["old", k]), np.array(times["new", k])
    r = n / o
    print(f"{k}: old {np.median(o) * 1e3:.2f} ms (IQR {np.percentile(o, 25) * 1e3:.2f}-"
          f"{np.percentile(o, 75) * 1e3:.2f}), new {np.median(n) * 1e3:.2f} ms (IQR "
          f"{np.percentile(n, 25) * 1e3:.2f}-{np.percentile(n, 75) * 1e3:.2f}), new/old "
          f"{np.median(r):.3f} (IQR {np.percentile(r, 25):.3f}-{np.percentile(r, 75):.3f})")
