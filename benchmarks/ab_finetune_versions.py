"""The LoRA fine-tuning step of bench_finetune.py, two checkouts of minattn in one process
(issue 65): SmolLM2-135M's shapes, random weights copied from transformers' model
(bench_finetune.build: from_hf, PEFT's A, B zero), batch 8 x 128, rank 8 on q and v, the step as
bench_finetune.minattn_step takes it (training/loop.accumulated, clip, AdamW), old against new,
which runs first alternating round by round (_harness.alternating).

    python benchmarks/ab_finetune_versions.py OLD_CHECKOUT NEW_CHECKOUT [--rounds N]
                                              [--threads 2,1]

Each side builds its own model through its own minattn (from_hf, lora, causal_lm) and keeps its
own LoRA and AdamW state from step to step. For each thread count in --threads (BLAS and torch
limited to it; the step's rows split as the training loop splits them), prints the medians with
their IQR and the per-round ratios new / old of the wall clock and of the process's CPU time
(every thread's), after checking that the two sides' first losses are equal to the last bit
(the same weights, the same tokens). Needs torch, transformers and peft (for build).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_finetune  # noqa: E402
from _harness import alternating, checkout, describe, footer, header, ratio, report_ab  # noqa: E402

MODULES = ("engine.autograd_rules", "interop", "lora", "training.loop", "training.losses",
           "training.optimizer")


def side(path, ids):
    """The checkout at `path`'s step on ids, built while its minattn is the one imported, a
    list its CPU seconds go to, and its first step's loss and gradient (all rows at once)."""
    m = checkout(path, *MODULES)
    step, _, _, _, (loss_sum, lora) = bench_finetune.build()
    batch = (ids[:, :-1], ids[:, 1:], np.ones(ids[:, 1:].shape, dtype=bool))
    first = m.engine.autograd_rules.value_and_grad_by_leaf(loss_sum)(lora, batch, None)
    cpu = []

    def timed():
        start = time.process_time()
        loss = step(ids)
        cpu.append(time.process_time() - start)
        return loss
    return timed, cpu, first


def leaves(tree):
    if isinstance(tree, dict):
        return [x for key in sorted(tree) for x in leaves(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [x for value in tree for x in leaves(value)]
    return [tree]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", default="2,1")
    args = parser.parse_args(argv)
    ids = bench_finetune.tokens(8, 128)
    old, old_cpu, old_first = side(os.path.abspath(args.old), ids)
    new, new_cpu, new_first = side(os.path.abspath(args.new), ids)
    header(0)
    same = old_first[0] == new_first[0] and all(
        np.array_equal(a, b) for a, b in zip(leaves(old_first[1]), leaves(new_first[1])))
    print("the first step's loss and gradient (all rows at once), old and new: equal to the "
          f"last bit: {same}")
    for n in [int(t) for t in args.threads.split(",")]:
        with bench_finetune.threads(n):
            first = (old(), new())
            if n == int(args.threads.split(",")[0]):
                print("the first losses:", first, "equal:", first[0] == first[1])
            del old_cpu[:], new_cpu[:]
            times = alternating({f"LoRA step, {n} thread(s), wall": old},
                                {f"LoRA step, {n} thread(s), wall": new}, args.rounds)
            report_ab(times)
            o, nw = old_cpu[1:], new_cpu[1:]  # alternating's warm-up call first
            print(f"LoRA step, {n} thread(s), CPU: old {describe(o).strip()}, "
                  f"new {describe(nw).strip()}, new/old {ratio(nw, o)}")
        print(f"  load now: {os.getloadavg()}, {time.strftime('%H:%M:%S UTC', time.gmtime())}")
    footer()


if __name__ == "__main__":
    main()
