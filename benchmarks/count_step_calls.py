"""How many calls one worker's half of the baby GPT's training step makes (its value and
gradient on 6 of the 12 rows, one thread): Python function calls, the calls through
autograd.numpy's wrappers (each looks for boxes among its arguments first), and the tape's
nodes; for one checkout or two (old, then new), counted with cProfile (issue 61, item 5).

    python benchmarks/count_step_calls.py [CHECKOUT ...] [--rows 6]

The NumPy calls that let the GIL go are counted outside Python, by a uprobe on CPython's
PyEval_SaveThread (docs/benchmarks.md, "Fewer NumPy calls per worker"):
    perf probe -x "$(python -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')/libpython3.11.so.1.0" PyEval_SaveThread
    perf stat -e probe_libpython3:PyEval_SaveThread python benchmarks/count_step_calls.py . --steps N
for two values of N, the difference over their difference.
"""
import argparse
import cProfile
import os
import pstats
import sys

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout  # noqa: E402


def half_step(m, rows):
    gpt = m.models.char_gpt
    params, config = gpt.init_char_gpt(np.random.default_rng(1), 65, dtype=np.float32)
    ids = np.random.default_rng(0).integers(65, size=100_000)
    batch = tuple(a[:rows] for a in gpt.window_batch(ids, context=64, batch_size=12, seed=0,
                                                      k=0))
    value_and_grad = m.engine.autograd_rules.value_and_grad_by_leaf(gpt.loss_sum(config))
    return lambda: value_and_grad(params, batch, None)


def counts(step, rounds=5):
    import autograd.core as core

    nodes = []
    init = core.VJPNode.__init__

    def counted(node, *args):
        nodes.append(1)
        init(node, *args)

    for _ in range(3):
        step()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(rounds):
        step()
    profile.disable()
    core.VJPNode.__init__ = counted
    try:
        step()
    finally:
        core.VJPNode.__init__ = init
    stats = pstats.Stats(profile).stats
    total = sum(n for (_, _, _), (_, n, _, _, _) in stats.items())
    wrapped = sum(n for (path, _, name), (_, n, _, _, _) in stats.items()
                  if name == "f_wrapped" and path.endswith(os.path.join("autograd", "tracer.py")))
    return total / rounds, wrapped / rounds, len(nodes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", default=["."])
    parser.add_argument("--rows", type=int, default=6)
    parser.add_argument("--steps", type=int, default=0,
                        help="only run this many half steps of the first checkout (for perf)")
    args = parser.parse_args()
    with threadpool_limits(1):
        if args.steps:
            step = half_step(checkout(args.checkouts[0], "models.char_gpt",
                                      "engine.autograd_rules"), args.rows)
            for _ in range(args.steps):
                step()
            return
        for path in args.checkouts:
            m = checkout(path, "models.char_gpt", "engine.autograd_rules")
            total, wrapped, nodes = counts(half_step(m, args.rows))
            print(f"{path}: {args.rows} rows, one value and gradient: {total:,.0f} Python "
                  f"function calls, {wrapped:,.0f} through autograd.numpy's wrappers, "
                  f"{nodes} tape nodes")


if __name__ == "__main__":
    main()
