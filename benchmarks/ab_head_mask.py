"""Does head_mask=None cost anything? causal_lm on SmolLM2-135M-Instruct (float32) from two
checkouts of minattn in one process, interleaved round by round: a 64-token prefill and one
decoding step through the KV cache (where a per-layer overhead would show most).

    python benchmarks/ab_head_mask.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]

OLD: before head_mask (e.g. `git worktree add /tmp/old 7f748d5`), NEW: with it. Both run the
same weights (loaded once, by NEW's loader). Prints the load average, medians with their IQR
and the per-round ratios new / old.
"""
import os
import sys

import numpy as np

from _harness import interleaved  # benchmarks/_harness.py, beside this script


def load(path):
    for name in [m for m in sys.modules if m.split(".")[0] == "minattn"]:
        del sys.modules[name]
    sys.path.insert(0, path)
    import minattn
    sys.path.pop(0)
    return minattn


old, new = load(sys.argv[1]), load(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
from minattn.pretrained import load_language_model  # noqa: E402  (NEW's, the last loaded)

lm = load_language_model()
tokens = np.random.default_rng(0).integers(17, 49152, size=(1, 64))
_, cache = new.causal_lm(lm.params, tokens, return_cache=True, **lm.config)
step = tokens[:, -1:]


def prefill(m):
    return lambda: m.causal_lm(lm.params, tokens, **lm.config)


def decode(m):
    return lambda: m.causal_lm(lm.params, step, cache=cache, **lm.config)


cases = {"old prefill": prefill(old), "new prefill": prefill(new),
         "old decode": decode(old), "new decode": decode(new)}
times = interleaved(cases, rounds)
print("load average", os.getloadavg(), "threads", os.environ.get("OMP_NUM_THREADS", "default"))
for name, t in times.items():
    q1, q2, q3 = np.percentile(t, [25, 50, 75]) * 1e3
    print(f"{name:12s} median {q2:8.2f} ms  IQR {q1:.2f}-{q3:.2f}  min {min(t) * 1e3:.2f}")
for kind in ("prefill", "decode"):
    ratio = np.array(times[f"new {kind}"]) / np.array(times[f"old {kind}"])
    print(f"new/old {kind} per round: median {np.median(ratio):.3f}, IQR "
          f"{np.percentile(ratio, 25):.3f}-{np.percentile(ratio, 75):.3f}")
