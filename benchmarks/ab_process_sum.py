"""The baby GPT's two row pieces handed over and added, two checkouts in one process (issue 61,
item 5): what a step on the run's worker process (engine/processes.py) does around the two
halves' own work, old against new, alternating round by round.

    python benchmarks/ab_process_sum.py OLD_CHECKOUT NEW_CHECKOUT [--rounds N] [--tail]

Each side: its WorkerProcesses (forked once) for a stand-in of the value and gradient that
hands back a piece's gradient drawn beforehand (the baby GPT's float32 shapes: 68 arrays,
809,856 numbers), and its loop.accumulated with it: the weights copied into the shared block,
the rows sent, the worker's gradient written into its block and brought back (old: copied
out; new: read in place), the two pieces added, divided by the counted targets and squared for
the norm (step_tail.summed). So the halves' own work is left out and what the change touched is
what is timed. The same gradients on both sides; the two sides' sums and squares are checked
equal to the last bit first. Prints the medians with their IQR, wall and CPU time (the
process's and its workers', /proc/PID/task/*/schedstat), the parent's own CPU time (what stays
on its core where the worker has the other: on a busy machine the worker's half may not run
at the same time, and the wall time does not show the split), and the per-round ratios.
--tail: the whole step tail as loop._steps runs it: the sum as above (with the side's
step_tail.on_worker where it has one: a prototype's, half the leaves summed, clipped and stepped
on the worker; docs/benchmarks.md, "The baby GPT's step tail split with the worker process"),
then step_tail.clip_then_adamw (BABY's hyperparameters), each side's weights and AdamW state
carried from round to round as a run's are; the two sides' states checked equal to the last
bit at the end.
Caution: an A/A (one checkout on both sides) of this script does not read 1: the arm labelled
new came out faster, whichever was built first, cause not found (docs/benchmarks.md, "The baby
GPT's step tail split with the worker process"); read a ratio only beside an A/A of the same hour.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout, footer, header  # noqa: E402
from ab_step_tail import ratio, stats  # noqa: E402
from ab_step_versions import children_cpu  # noqa: E402


def arm(m, gradients, tail=False):
    # -> (step(): the side's accumulated on its workers -> (loss, sum, squares), close())
    gpt = m.models.char_gpt
    params, _ = gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=np.float32)
    rebuild = m.engine.trees.flatten(params)[1]
    pieces = [rebuild(list(g)) for g in gradients]
    part = gpt.window_batch(np.random.default_rng(0).integers(65, size=10_000), context=64,
                            batch_size=12, seed=0, k=0)

    def stand_in(tree, piece, rng):  # a piece's gradient (the worker's: the second), fresh
        return 1.0, m.engine.trees.tree_map(np.copy, pieces[int(m.engine.processes._IN_WORKER)])

    opened = m.engine.processes.worker_processes(stand_in, 2)
    workers = opened.__enter__()

    def step():
        squares = []
        loss, grads = m.training.loop.accumulated(stand_in, params, [part], [None], workers,
                                                  squares)
        return loss, grads, squares

    if tail:
        st, opt, baby = m.training.step_tail, m.training.optimizer, gpt.BABY
        finish = (st.on_worker(workers),) if hasattr(st, "on_worker") else ()
        state = {"trainable": params, "adam": opt.adamw_init(params)}

        def step():
            squares = []
            loss, grads = m.training.loop.accumulated(stand_in, state["trainable"], [part],
                                                      [None], workers, squares, *finish)
            new, adam, norm = st.clip_then_adamw(
                state["trainable"], grads, state["adam"], max_norm=baby["max_grad_norm"],
                squares=squares, overwrite_grads=True, clip=opt.clip_by_global_norm,
                update=opt.adamw_update, lr=1e-3, betas=baby["betas"],
                weight_decay=baby["weight_decay"], decays=gpt.decays)
            state.update(trainable=new, adam=adam)
            return loss, new, [norm]

    return step, lambda: opened.__exit__(None, None, None)


def own_cpu(since):
    # the parent's CPU time since `since` (process_time: its threads, not its workers'), taken
    # after the call: with the worker on a core of its own, the serial part is about this
    return time.process_time() - since


def bits(result):
    loss, grads, squares = result
    from minattn.engine.trees import leaves
    return loss, squares, [g.tobytes() for g in leaves(grads)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--tail", action="store_true")
    args = parser.parse_args()
    header(0)
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(2)
    arms, ends = {}, []
    with threadpool_limits(2):  # two workers: the rows split in two pieces
        for name, path in (("old", args.old), ("new", args.new)):
            m = checkout(path, "models.char_gpt", "training.loop", "engine.trees",
                         "engine.processes", "training.step_tail", "training.optimizer")
            if name == "old":
                params, _ = m.models.char_gpt.init_char_gpt(np.random.default_rng(1), 65,
                                                             dtype=np.float32)
                gradients = [[rng.standard_normal(p.shape).astype(np.float32)
                              for p in m.engine.trees.leaves(params)] for _ in range(2)]
            arms[name], end = arm(m, gradients, args.tail)
            ends.append(end)
        try:
            want = bits(arms["old"]())
            assert bits(arms["new"]()) == want, "new: other bits than old's"
            print("the two sides' sums and squares (--tail: new weights and norms) equal to the "
                  "last bit")
            wall, cpu = {name: [] for name in arms}, {name: [] for name in arms}
            own = {name: [] for name in arms}
            held = {}
            for rnd in range(args.rounds):
                for name in (("old", "new") if rnd % 2 else ("new", "old")):
                    held.pop(name, None)  # (as a run drops its last step's gradient)
                    s, c = time.perf_counter(), time.process_time() + children_cpu()
                    p = time.process_time()
                    held[name] = arms[name]()
                    wall[name].append(time.perf_counter() - s)
                    cpu[name].append(time.process_time() + children_cpu() - c)
                    own[name].append(own_cpu(p))
            if args.tail:
                assert bits(arms["old"]()) == bits(arms["new"]()), "new: other bits than old's"
                print(f"after {args.rounds + 2} steps each, the two sides' weights and norms "
                      "equal to the last bit")
        finally:
            for end in ends:
                end()
    for name in arms:
        print(f"{name}: wall {stats(wall[name])}, CPU {stats(cpu[name])}, the parent's CPU "
              f"{stats(own[name])}")
    print(f"new / old: wall {ratio(wall['new'], wall['old'])}, CPU "
          f"{ratio(cpu['new'], cpu['old'])}, the parent's CPU {ratio(own['new'], own['old'])}")
    footer()


if __name__ == "__main__":
    main()
