"""The baby GPT's step tail alone, two checkouts in one process (issue 61, item 5): what the
training loop runs after a step's two row pieces have their gradients (loop.accumulated's sum
and division, the clip, AdamW), old against new, alternating round by round.

    python benchmarks/ab_step_tail.py OLD_CHECKOUT NEW_CHECKOUT [--rounds N] [--two-threads]
                                      [--grad-scale S]

The same inputs on both sides: the baby GPT's float32 weights (char_gpt.init_char_gpt), two
pieces' gradients and AdamW's moments drawn, 768 counted targets, BABY's hyperparameters. Each
side runs its loop.accumulated (its _on_workers handing back the two pieces) then what its
_steps runs (old: clip_by_global_norm and adamw_update; new: step_tail.clip_then_adamw with the
squares accumulated left), and keeps its result until its next call, as a run keeps its state.
--two-threads: a third arm, the prototype of the new side's leaves split over the main thread
and one helper thread (halves balanced by size; the norm's squares combined here in the
leaves' order; Python's switch interval short as in engine/threads' splits): not in the
library. --grad-scale S: the pieces' gradients drawn S times as large (default 1: a norm of
about 900, which the clip scales; 1e-4, about 0.09: a clip that does not scale). The arms'
results are checked equal to the last bit first. Prints medians with their
IQR, wall and CPU time (the process's, all threads), and the per-round ratios.
"""
import argparse
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout, footer, header  # noqa: E402


def tail(m, pieces, params, state):
    gpt, loop = m.models.char_gpt, m.training.loop
    baby = gpt.BABY
    loop._on_workers = lambda f, trainable, part, rng, processes=None, **_: [
        (1.0, g) for g in pieces]
    part = (None, None, np.ones((12, 64)))
    kw = dict(lr=1e-3, betas=baby["betas"], weight_decay=baby["weight_decay"],
              decays=gpt.decays)
    if not hasattr(m.training, "step_tail"):
        opt = m.training.optimizer

        def old():
            loss, grads = loop.accumulated(None, params, [part], [None])
            grads, norm = opt.clip_by_global_norm(grads, baby["max_grad_norm"])
            return opt.adamw_update(params, grads, state, **kw), norm
        return old

    st, opt = m.training.step_tail, m.training.optimizer

    def new():
        squares = []
        loss, grads = loop.accumulated(None, params, [part], [None], None, squares)
        new_params, new_state, norm = st.clip_then_adamw(
            params, grads, state, max_norm=baby["max_grad_norm"], squares=squares,
            overwrite_grads=True, clip=opt.clip_by_global_norm, update=opt.adamw_update, **kw)
        return (new_params, new_state), norm
    return new


def two_threads(m, pieces, params, state):
    # the prototype: the new side's per-leaf work, half the leaves on a helper thread
    gpt, st = m.models.char_gpt, m.training.step_tail
    threads, trees = m.engine.threads, m.engine.trees
    baby, count, pool = gpt.BABY, 768, ThreadPoolExecutor(1)
    sizes = [p.size for p in trees.leaves(params)]
    halves, totals = ([], []), [0, 0]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        k = int(totals[1] < totals[0])
        halves[k].append(i)
        totals[k] += sizes[i]

    def on_two(f, items):
        out = [None] * len(items)

        def run(indices):
            for i in indices:
                out[i] = f(*items[i])
        with threads.short_switches():
            other = pool.submit(run, halves[1])
            run(halves[0])
            other.result()
        return out

    def finish(a, b):
        a = np.add(a, b)
        np.divide(a, count, out=a)
        return a, m.training.optimizer.squared_norm(a)

    def split():
        done = on_two(finish, trees.zip_leaves(*pieces))
        norm = math.sqrt(sum(sq for _, sq in done))
        b1, b2 = baby["betas"]
        t, lr = state["step"] + 1, 1e-3
        scale = min(baby["max_grad_norm"] / (norm + 1e-6), 1.0)
        step_size, root = lr / (1 - b1 ** t), math.sqrt(1 - b2 ** t)
        quads = [(p, g, mm, v) for (p, mm, v), (g, _) in
                 zip(trees.zip_leaves(params, state["m"], state["v"]), done)]
        out = on_two(lambda p, g, mm, v: st._adamw_leaf(
            p, g, mm, v, scale, b1, b2, step_size, root, 1e-8,
            1 - lr * (baby["weight_decay"] if gpt.decays(p) else 0.0), True), quads)
        new_params, new_m, new_v = trees.unzip(params, out, 3)
        return (new_params, {"step": t, "m": new_m, "v": new_v}), norm
    return split


def bits(result):
    (params, state), norm = result
    from minattn.engine.trees import leaves
    return norm, [np.asarray(x).tobytes() for x in leaves(params) + leaves(state)]


def stats(xs):
    q1, q2, q3 = np.percentile(np.asarray(xs) * 1e3, [25, 50, 75])
    return f"{q2:.2f} ms (IQR {q1:.2f}-{q3:.2f})"


def ratio(a, b):
    r = np.asarray(a) / np.asarray(b)
    q1, q2, q3 = np.percentile(r, [25, 50, 75])
    return f"{q2:.3f} (IQR {q1:.3f}-{q3:.3f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--two-threads", action="store_true")
    parser.add_argument("--grad-scale", type=float, default=1.0)
    args = parser.parse_args()
    header(0)
    rng = np.random.default_rng(2)
    arms = {}
    for name, path in (("old", args.old), ("new", args.new)):
        m = checkout(path, "models.char_gpt", "training.loop", "training.optimizer",
                     "engine.trees", "engine.threads")
        params, _ = m.models.char_gpt.init_char_gpt(np.random.default_rng(1), 65,
                                                     dtype=np.float32)
        if name == "old":
            draw = [[rng.standard_normal(p.shape).astype(np.float32) * s
                     for p in m.engine.trees.leaves(params)]
                    for s in (args.grad_scale, args.grad_scale, 1e-2)]
            draw.append([rng.random(p.shape).astype(np.float32) * 1e-4
                         for p in m.engine.trees.leaves(params)])
        as_tree = lambda xs: m.engine.trees.flatten(params)[1](list(xs))  # noqa: E731
        pieces = [as_tree(draw[0]), as_tree(draw[1])]
        state = {"step": 5, "m": as_tree(draw[2]), "v": as_tree(draw[3])}
        arms[name] = tail(m, pieces, params, state)
        if name == "new" and args.two_threads:
            arms["two threads"] = two_threads(m, pieces, params, state)
    want = bits(arms["old"]())
    for name, f in arms.items():
        assert bits(f()) == want, f"{name}: other bits than old's"
    print("the arms' results equal to the last bit")
    wall = {name: [] for name in arms}
    cpu = {name: [] for name in arms}
    held = {}
    names = list(arms)
    for rnd in range(args.rounds):
        for name in names[rnd % len(names):] + names[:rnd % len(names)]:
            s, c = time.perf_counter(), time.process_time()
            held[name] = arms[name]()
            wall[name].append(time.perf_counter() - s)
            cpu[name].append(time.process_time() - c)
    for name in arms:
        print(f"{name}: wall {stats(wall[name])}, CPU {stats(cpu[name])}")
    print(f"new / old: wall {ratio(wall['new'], wall['old'])}, CPU "
          f"{ratio(cpu['new'], cpu['old'])}")
    if args.two_threads:
        print(f"two threads / new: wall {ratio(wall['two threads'], wall['new'])}, CPU "
              f"{ratio(cpu['two threads'], cpu['new'])}")
    footer()


if __name__ == "__main__":
    main()
