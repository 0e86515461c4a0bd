"""Does head_mask=None cost anything? causal_lm on SmolLM2-135M-Instruct (float32) from two
checkouts of minattn in one process, interleaved round by round: a 64-token prefill and one
decoding step through the KV cache (where a per-layer overhead would show most).

    python benchmarks/ab_head_mask.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]

OLD: before head_mask (e.g. `git worktree add /tmp/old 7f748d5`), NEW: with it. Both run the
same weights (loaded once, by NEW's loader). Prints the load average, medians with their IQR
and the per-round ratios new / old, the order of the two alternating round by round.
"""
import os
import sys

import numpy as np

from _harness import alternating, checkout, report_ab  # benchmarks/_harness.py, beside this script



old, new = checkout(sys.argv[1]), checkout(sys.argv[2])
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


def works(m):
    return {"prefill": prefill(m), "decode": decode(m)}


print("load average before", os.getloadavg(), "threads", os.environ.get("OMP_NUM_THREADS", "default"))
report_ab(alternating(works(old), works(new), rounds))
print("load average after", os.getloadavg())
