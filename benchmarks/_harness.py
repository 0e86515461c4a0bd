"""What every benchmark here shares: interleaved rounds, medians with their spread, the load
average before and after, and `--busy N` competing processes started on purpose.

Timing on a shared 2-core machine is noisy, and another process can halve a multi-threaded
run. So the things compared run in the same process, alternating, round after round (a burst of
load then hits both alike), and each result is reported as a median with its spread.
"""
import contextlib
import importlib
import multiprocessing
import os
import platform
import sys
import time

import numpy as np


def _spin(stop):
    x = 0
    while not stop.is_set():  # a CPU-bound loop, in pure Python: it holds one core
        for _ in range(100_000):
            x += 1


@contextlib.contextmanager
def busy(n):
    """Run n CPU-bound processes for the duration (n = 0: nothing)."""
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(n)]
    for w in workers:
        w.start()
    try:
        if n:
            time.sleep(1.0)  # let them reach the scheduler before the first timing
        yield
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=5)
            if w.is_alive():
                w.terminate()


def interleaved(functions, rounds):
    """{name: f} -> {name: [seconds per round]}: one warm-up call each, then `rounds` rounds in
    which every f runs once, in the same order."""
    for f in functions.values():
        f()
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, f in functions.items():
            start = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - start)
    return times


def checkout(path, *submodules):
    """minattn imported from the checkout at `path`, and its `submodules` ("position_wise",
    "models.char_gpt", ...) so that they are attributes of it: module objects of its own. An A/B
    script calls it for the old checkout, then the new, and times both in one process; a later
    `import minattn` names the last one loaded."""
    for name in [m for m in sys.modules if m.split(".")[0] == "minattn"]:
        del sys.modules[name]
    sys.path.insert(0, path)
    try:
        minattn = importlib.import_module("minattn")
        for name in submodules:
            importlib.import_module(f"minattn.{name}")
        return minattn
    finally:
        sys.path.pop(0)


def alternating(old, new, rounds):
    """Two {label: f} (the same labels) -> {label: (old's seconds, new's seconds)}: one warm-up
    call each, then in every round each label's two functions back to back, which of them runs
    first alternating round by round (a fixed order had biased a gradient's ratio by a quarter:
    docs/benchmarks.md, "Fewer elementwise passes")."""
    for label in old:
        old[label](), new[label]()
    times = {label: ([], []) for label in old}
    for rnd in range(rounds):
        for label in old:
            for i in ((0, 1) if rnd % 2 else (1, 0)):
                start = time.perf_counter()
                (old, new)[i][label]()
                times[label][i].append(time.perf_counter() - start)
    return times


def report_ab(times):
    """Print each label's medians (IQR) and the per-round ratios new / old (alternating's times)."""
    for label, (o, n) in times.items():
        print(f"{label}: old {describe(o).strip()}, new {describe(n).strip()}, new/old {ratio(n, o)}")


def describe(seconds):
    """'median ms (IQR q1–q3)'."""
    q1, median, q3 = np.percentile(np.asarray(seconds) * 1e3, [25, 50, 75])
    return f"{median:8.1f} ms (IQR {q1:.1f}–{q3:.1f})"


def ratio(a, b):
    """Median of the per-round ratios a/b, and their IQR: pairs from the same round share the
    machine's state at that moment."""
    r = np.asarray(a) / np.asarray(b)
    q1, median, q3 = np.percentile(r, [25, 50, 75])
    return f"{median:.2f} (IQR {q1:.2f}–{q3:.2f})"


def header(busy_n):
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}, numpy {np.__version__}; --busy {busy_n}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")


def footer():
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")


def profile_step(loss, args, rounds=1):
    """Where a training step's time goes: `loss(*args)` unrecorded, then its value and gradient
    with respect to args[0]'s leaves as the training loop takes them
    (engine/autograd_rules.value_and_grad_by_leaf), each autograd node's VJP timed and summed
    by its primitive and argument shapes. Prints seconds per round (sums / rounds, not
    medians) and the twelve largest shares."""
    from collections import Counter

    import autograd.core as core

    from minattn.engine.autograd_rules import value_and_grad_by_leaf

    names, seconds, calls = {}, Counter(), Counter()
    init = core.VJPNode.__init__

    def timed_init(node, value, fun, args, kwargs, parent_argnums, parents):
        init(node, value, fun, args, kwargs, parent_argnums, parents)
        shapes = ", ".join(str(list(np.shape(a))) for a in args[:2] if hasattr(a, "shape"))
        name, vjp = f"{getattr(fun, '__name__', fun)}({shapes})", node.vjp

        def timed_vjp(g):
            start = time.perf_counter()
            out = tuple(vjp(g))
            seconds[name] += time.perf_counter() - start
            calls[name] += 1
            return out

        node.vjp = timed_vjp

    loss(*args)
    start = time.perf_counter()
    for _ in range(rounds):
        loss(*args)
    plain = (time.perf_counter() - start) / rounds
    start = time.perf_counter()
    for _ in range(rounds):
        value_and_grad_by_leaf(loss)(*args)
    whole = (time.perf_counter() - start) / rounds
    core.VJPNode.__init__ = timed_init
    try:
        for _ in range(rounds):
            value_and_grad_by_leaf(loss)(*args)
    finally:
        core.VJPNode.__init__ = init
    backward = sum(seconds.values()) / rounds
    print(f"forward, not recorded: {1e3 * plain:.1f} ms; value and gradient: {1e3 * whole:.1f} "
          f"ms; the nodes' VJPs: {1e3 * backward:.1f} ms ({sum(calls.values()) // rounds} "
          "nodes), of which:")
    for name, s in seconds.most_common(12):
        print(f"  {1e3 * s / rounds:8.2f} ms  {calls[name] // rounds:3d} x  {name}")
