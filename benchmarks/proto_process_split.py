"""Prototype (issue 61, item 5): the baby GPT's two-piece training step with its second half on a
worker PROCESS (forked once, fed through anonymous shared memory) instead of a second worker
thread; against the two-thread step and torch's two-thread step, interleaved in one process.

    python benchmarks/proto_process_split.py [--rounds 20] [--busy 0]

Three arms, each its own model from the same weights, stepped on the same batches k = 0, 1, ...:
"threads" (loop.train as it is: 6 rows on each of two worker threads), "process" (6 rows on the
main thread, 6 on a forked child, both with one BLAS thread), torch (2 threads). The two minattn
arms' losses are compared bit for bit. CPU time: the parent's process_time plus, for the process
arm, the child's own (reported through the pipe).
"""
import argparse
import mmap
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")

import numpy as np  # noqa: E402

from _harness import busy, describe, footer, header, ratio  # noqa: E402
from bench_char_gpt import build  # noqa: E402
from bench_finetune import threads  # noqa: E402


class ChildHalf:
    """A forked child that computes loss_and_grad on the weights in shared memory."""

    def __init__(self, loss_and_grad, template):
        from minattn.engine.autograd_rules import _leaves

        leaves, self.rebuild = _leaves(template)
        self.layout, offset = [], 0
        for leaf in leaves:
            offset = -(-offset // 64) * 64
            self.layout.append((offset, leaf.shape, leaf.dtype))
            offset += leaf.nbytes
        self.weights_buf = mmap.mmap(-1, max(offset, 1))
        self.grads_buf = mmap.mmap(-1, max(offset, 1))
        self.weights = self._views(self.weights_buf)
        self.grads = self._views(self.grads_buf)
        self.conn, child_conn = multiprocessing.Pipe()
        context = multiprocessing.get_context("fork")
        self.process = context.Process(target=self._serve, args=(child_conn, loss_and_grad),
                                       daemon=True)
        self.process.start()
        child_conn.close()
        self.child_cpu = []

    def _views(self, buf):
        return [np.ndarray(shape, dtype, buffer=buf, offset=offset)
                for offset, shape, dtype in self.layout]

    def _serve(self, conn, loss_and_grad):
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            while True:
                try:
                    message = conn.recv()
                except EOFError:
                    return
                if message is None:
                    return
                part, rng = message
                start = time.process_time()
                value, g = loss_and_grad(self.rebuild(self._views(self.weights_buf)), part, rng)
                from minattn.engine.autograd_rules import _leaves
                for view, leaf in zip(self.grads, _leaves(g)[0]):
                    np.copyto(view, leaf, casting="no")
                conn.send((value, time.process_time() - start))

    def start(self, trainable, part, rng):
        from minattn.engine.autograd_rules import _leaves
        for view, leaf in zip(self.weights, _leaves(trainable)[0]):
            np.copyto(view, leaf, casting="no")
        self.conn.send((part, rng))

    def result(self):
        value, cpu = self.conn.recv()
        self.child_cpu.append(cpu)
        return value, self.rebuild([view.copy() for view in self.grads])

    def close(self):
        self.conn.send(None)
        self.process.join(5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    header(args.busy)
    from threadpoolctl import threadpool_limits

    from minattn.engine.threads import row_pieces
    from minattn.training import loop

    original = loop._on_workers
    mode = {"process": False, "child": None}

    def on_workers(loss_and_grad, trainable, part, rng):
        if not mode["process"]:
            return original(loss_and_grad, trainable, part, rng)
        pieces = row_pieces(part[0], len(part[0]))
        assert len(pieces) == 2, pieces
        rngs = [None] * 2 if rng is None else rng.spawn(2)
        child = mode["child"]
        child.start(trainable, tuple(a[pieces[1]] for a in part), rngs[1])
        with threadpool_limits(limits=1, user_api="blas"):
            mine = loss_and_grad(trainable, tuple(a[pieces[0]] for a in part), rngs[0])
        return [mine, child.result()]

    loop._on_workers = on_workers
    with threads(2):
        thread_step, torch_step, _, _ = build()
        process_step, _, _, _ = build()
        # the child's loss_and_grad: built from the same loss_sum as the process arm's train
        cells = dict(zip(process_step.__code__.co_freevars, process_step.__closure__))
        loss_sum = cells["loss_sum"].cell_contents
        state = cells["state"].cell_contents
        from minattn.engine.autograd_rules import value_and_grad_by_leaf
        mode["child"] = ChildHalf(value_and_grad_by_leaf(loss_sum), state["trainable"])
        counters = {"threads": iter(range(10 ** 6)), "process": iter(range(10 ** 6)),
                    "torch": iter(range(10 ** 6))}
        losses = {"threads": [], "process": []}
        cpu = {"threads": [], "process": [], "torch": []}

        def arm(name, step):
            def call():
                mode["process"] = name == "process"
                before = len(mode["child"].child_cpu)
                start = time.process_time()
                loss = step(next(counters[name]))
                spent = time.process_time() - start
                if name == "process":
                    spent += sum(mode["child"].child_cpu[before:])
                cpu[name].append(spent)
                if name in losses:
                    losses[name].append(loss)
            return call

        functions = {"threads": arm("threads", thread_step),
                     "process": arm("process", process_step),
                     "torch": arm("torch", torch_step)}
        with busy(args.busy):
            for f in functions.values():
                f()
            times = {name: [] for name in functions}
            names = list(functions)
            for r in range(args.rounds):
                order = names[r % 3:] + names[:r % 3]
                for name in order:
                    start = time.perf_counter()
                    functions[name]()
                    times[name].append(time.perf_counter() - start)
        mode["child"].close()
    cpu = {k: v[1:] for k, v in cpu.items()}
    print(f"baby GPT, float32, 12 x 64, 2 threads, {args.rounds} rounds, order rotated")
    print("| arm | wall | CPU (all threads; + child's) |")
    for name in times:
        print(f"| {name} | {describe(times[name])} | {describe(cpu[name])} |")
    print(f"process / threads: wall {ratio(times['process'], times['threads'])}, "
          f"CPU {ratio(cpu['process'], cpu['threads'])}")
    print(f"process / torch: wall {ratio(times['process'], times['torch'])}, "
          f"CPU {ratio(cpu['process'], cpu['torch'])}")
    print(f"threads / torch: wall {ratio(times['threads'], times['torch'])}, "
          f"CPU {ratio(cpu['threads'], cpu['torch'])}")
    same = losses["threads"] == losses["process"]
    print(f"losses of the two minattn arms equal to the last bit: {same} "
          f"({len(losses['process'])} steps)")
    footer()


if __name__ == "__main__":
    main()
