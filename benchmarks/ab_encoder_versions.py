"""Two checkouts of minattn in one process: the encoder block's forward and gradient, interleaved
round by round, for a before/after comparison of a restructuring (the same machine, the same
moment, the same torch-free work).

    python benchmarks/ab_encoder_versions.py OLD_CHECKOUT NEW_CHECKOUT [L [ROUNDS]]

e.g. `git worktree add /tmp/old <commit>` for OLD. Prints medians with their IQR and the per-round
ratios new / old, the order of the two alternating round by round. B=32 L=128 (or L) D=512
H=8 F=2048, float32, as bench_encoder.py; 9 rounds (or ROUNDS).
"""
import sys, time, numpy as np
from autograd import grad
import autograd.numpy as anp
def load(path):
    for m in [m for m in sys.modules if m.split(".")[0] == "minattn"]: del sys.modules[m]
    sys.path.insert(0, path); import minattn; sys.path.pop(0); return minattn
old = load(sys.argv[1]); new = load(sys.argv[2])
rng = np.random.default_rng(0)
B, L, D, H, F = 32, int(sys.argv[3]) if len(sys.argv) > 3 else 128, 512, 8, 2048
params = old.init_encoder_block(rng, D, H, F, dtype=np.float32)
x = rng.normal(size=(B, L, D)).astype(np.float32)
r = rng.normal(size=(B, L, D)).astype(np.float32)
def fwd(m): return lambda: m.encoder_block(params, x, n_heads=H)
def grd(m): return lambda: grad(lambda p: anp.sum(m.encoder_block(p, x, n_heads=H) * r))(params)
res = {k: [] for k in ("old f", "new f", "old g", "new g")}
for f in (fwd(old), fwd(new), grd(old), grd(new)): f()
for rnd in range(int(sys.argv[4]) if len(sys.argv) > 4 else 9):  # old first in odd rounds, new first in even ones: a fixed order biased
    for kind, make in (("f", fwd), ("g", grd)):  # the gradient's ratio (0.69 fixed, 0.95 alternating)
        for name, m in ((("old", old), ("new", new)) if rnd % 2 else (("new", new), ("old", old))):
            f = make(m); s = time.perf_counter(); f(); res[f"{name} {kind}"].append(time.perf_counter() - s)
import os
print("load", os.getloadavg())
med = {k: np.median(v) * 1e3 for k, v in res.items()}
for k in res: print(k, f"{med[k]:.1f} ms", f"IQR {np.percentile(res[k],25)*1e3:.1f}-{np.percentile(res[k],75)*1e3:.1f}")
ratios_f = np.array(res["new f"]) / np.array(res["old f"]); ratios_g = np.array(res["new g"]) / np.array(res["old g"])
print("new/old forward per round median", np.median(ratios_f).round(3), "IQR", np.percentile(ratios_f, [25, 75]).round(3))
print("new/old gradient per round median", np.median(ratios_g).round(3), "IQR", np.percentile(ratios_g, [25, 75]).round(3))
