"""Two checkouts of minattn in one process: the encoder block's forward and gradient, interleaved
round by round, for a before/after comparison of a restructuring (the same machine, the same
moment, the same torch-free work).

    python benchmarks/ab_encoder_versions.py OLD_CHECKOUT NEW_CHECKOUT [L [ROUNDS]]

e.g. `git worktree add /tmp/old <commit>` for OLD. Prints medians with their IQR and the per-round
ratios new / old, the order of the two alternating round by round. B=32 L=128 (or L) D=512
H=8 F=2048, float32, as bench_encoder.py; 9 rounds (or ROUNDS).
"""
import os
import sys

import autograd.numpy as anp
import numpy as np
from autograd import grad

from _harness import alternating, checkout, report_ab  # benchmarks/_harness.py, beside this script

old, new = checkout(sys.argv[1]), checkout(sys.argv[2])
rng = np.random.default_rng(0)
B, L, D, H, F = 32, int(sys.argv[3]) if len(sys.argv) > 3 else 128, 512, 8, 2048
params = old.init_encoder_block(rng, D, H, F, dtype=np.float32)
x = rng.normal(size=(B, L, D)).astype(np.float32)
r = rng.normal(size=(B, L, D)).astype(np.float32)


def works(m):
    return {"forward": lambda: m.encoder_block(params, x, n_heads=H),
            "gradient": lambda: grad(lambda p: anp.sum(m.encoder_block(p, x, n_heads=H) * r))(params)}


print("load before", os.getloadavg())
report_ab(alternating(works(old), works(new), int(sys.argv[4]) if len(sys.argv) > 4 else 9))
print("load after", os.getloadavg())
