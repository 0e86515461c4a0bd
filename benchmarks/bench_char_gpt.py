"""nanoGPT's baby GPT (4 layers, 4 heads, width 128, context 64, batch 12) trained on
Shakespeare: a training step on minattn against the same model in torch, float32, the same
weights, batches and threads.

    python benchmarks/bench_char_gpt.py [--rounds 20] [--threads 2] [--busy 1]
    python benchmarks/bench_char_gpt.py --run 2000    the whole run on each side, one after
                                                      the other: wall time and the validation
                                                      loss of each
    python benchmarks/bench_char_gpt.py --profile     where minattn's step goes: the forward
                                                      pass, the value and gradient, each
                                                      operation's VJP timed (as
                                                      bench_finetune's)
    python benchmarks/bench_char_gpt.py --timeline    where minattn's two-thread step goes, in
                                                      one run of --rounds + 5 steps: the
                                                      caller's half, the worker process's half
                                                      (timed in the worker), the wait for it,
                                                      the sum, clip and AdamW, and each half's
                                                      minor page faults
    python benchmarks/bench_char_gpt.py --floor       the floor of the row split: minattn's
                                                      step on half the rows (6 x 64), on one
                                                      thread, what each of two workers does,
                                                      against torch's whole step on --threads

(with minattn and torch installed, Shakespeare's text cached by `python -m minattn
shakespeare` or MINATTN_CACHE; from the repository root with PYTHONPATH=.)

The torch side is tests/test_char_gpt.py's reference, written from torch.nn as nanoGPT's
model.py (not from minattn), eager (no torch.compile), given minattn's initial weights. A step:
- torch: the logits, F.cross_entropy, backward, clip_grad_norm_(1.0), AdamW (decay on the
  matrices and embeddings), the LambdaLR scheduler's step, zero_grad;
- minattn: a step of minattn/training/loop.py's train (value_and_grad of the summed
  cross-entropy with the unembedding fused, the rows split over the cores: the second piece
  on the run's worker process where engine/processes.py applies, else on a worker thread;
  clip_by_global_norm, adamw_update), as `python -m minattn shakespeare` takes it: the rounds
  are ONE run of rounds + 1 steps (its first, with the worker's fork, the warm-up), each of
  torch's steps in its callback (in_one_run), minattn's step timed from the end of one
  callback to the start of the next; its CPU time is the process's and its worker's.
  (--floor: a run of one step per call, as before: a run of one step keeps its threads.)
Timed interleaved, round by round, on the same batches. Peak memory: each side's step in a
child process of its own, the peak resident memory of a step above the resident memory before
it (Linux's VmHWM, reset through /proc/PID/clear_refs); minattn's second step of a run of two,
above the memory before the run, plus its worker's private memory after the first step (the
heap it keeps for the next: engine/processes.py's keep_heap) and its peak in the second step
above its memory after the first (the run's frame still holds the first step's gradient: a few
MiB more than one step per run). Both sides on the threads given (MINATTN_TIMED_THREADS=0
unless set, which also keeps the worker process without timing it against the threads:
CONTRIBUTING.md, "Benchmarks").
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("MINATTN_TIMED_THREADS", "0")  # code against code, not thread policies

import numpy as np  # noqa: E402

from _harness import busy, describe, footer, header, interleaved, profile_step, ratio  # noqa: E402
from bench_finetune import threads  # noqa: E402


def build(seed=0, steps=2000, rows=None):
    """-> (minattn's step(k), torch's step(k), the split, the model's pieces). rows: minattn's
    step on the first `rows` rows of each batch only (--floor)."""
    import torch

    from minattn.models import char_gpt
    from minattn.training import loop, text_data
    from minattn.training.optimizer import adamw_init, cosine_lr
    from tests.test_char_gpt import GPT, _copy_into

    baby = char_gpt.BABY
    text = text_data.shakespeare()
    characters = char_gpt.Characters(text)
    train_ids, val_ids = char_gpt.split(characters.encode(text))
    model_shape = {k: baby[k] for k in ("n_layers", "n_heads", "d_model", "context")}
    params, config = char_gpt.init_char_gpt(np.random.default_rng(seed), len(characters.chars),
                                            dtype=np.float32, **model_shape)
    model = GPT(len(characters.chars), **model_shape).float()
    _copy_into(model, params)
    batch = lambda k: char_gpt.window_batch(train_ids, context=baby["context"],  # noqa: E731
                                            batch_size=baby["batch_size"], seed=seed, k=k)
    state = {"step": 0, "trainable": params, "adam": adamw_init(params), "losses": [],
             "settings": None}
    loss_sum = char_gpt.loss_sum(config)

    def minattn_step(k):
        # one step: a loop.train run of its own (a run of one step keeps its worker threads)
        nonlocal state
        state = loop.train(loss_sum, None, None, steps=state["step"] + 1, total=steps,
                           state=state, batches=lambda _: tuple(a[:rows] for a in batch(k)),
                           batch_size=None,
                           pad_id=None, lr=baby["lr"], min_lr=baby["min_lr"],
                           warmup=baby["warmup"], weight_decay=baby["weight_decay"],
                           betas=baby["betas"], decays=char_gpt.decays,
                           max_grad_norm=baby["max_grad_norm"])
        return state["losses"][-1]

    def minattn_run(n, between):
        # n steps of ONE loop.train run from the state (a run's worker process, if the process
        # policy applies, forked at its first step and kept), between(step, loss) after each
        nonlocal state
        state = loop.train(loss_sum, None, None, steps=state["step"] + n, total=steps,
                           state=state, batches=lambda k: tuple(a[:rows] for a in batch(k)),
                           batch_size=None,
                           pad_id=None, lr=baby["lr"], min_lr=baby["min_lr"],
                           warmup=baby["warmup"], weight_decay=baby["weight_decay"],
                           betas=baby["betas"], decays=char_gpt.decays,
                           max_grad_norm=baby["max_grad_norm"],
                           callback=lambda step, loss, _: between(step, loss))

    minattn_step.run = minattn_run

    optimizer = torch.optim.AdamW(
        [{"params": [p for p in model.parameters() if p.dim() >= 2],
          "weight_decay": baby["weight_decay"]},
         {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}],
        lr=baby["lr"], betas=baby["betas"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: cosine_lr(
        s, lr=1.0, warmup=baby["warmup"], total=steps, min_lr=baby["min_lr"] / baby["lr"]))

    def torch_step(k):
        tokens, targets, _ = batch(k)
        logits = model(torch.from_numpy(tokens))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 torch.from_numpy(targets).reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), baby["max_grad_norm"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        return float(loss.detach())

    def minattn_val():
        return char_gpt.evaluate(state["trainable"], config, val_ids, context=baby["context"],
                                 batch_size=baby["batch_size"], batches=baby["eval_batches"],
                                 seed=seed)

    def torch_val():
        with torch.no_grad():
            losses = []
            for j in range(baby["eval_batches"]):
                tokens, targets, _ = char_gpt.window_batch(
                    val_ids, context=baby["context"], batch_size=baby["batch_size"], seed=seed,
                    k=10 ** 9 + j)
                logits = model(torch.from_numpy(tokens))
                losses.append(float(torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), torch.from_numpy(targets).reshape(-1))))
        return float(np.mean(losses))

    return minattn_step, torch_step, minattn_val, torch_val


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0,
                        help="CPU-bound processes running beside the timed rounds")
    parser.add_argument("--run", type=int, default=0,
                        help="train this many steps on each side (the baby config: 2000), "
                             "timing each whole run and reporting its validation loss")
    parser.add_argument("--profile", action="store_true",
                        help="time minattn's forward, its value and gradient, and each "
                             "operation's VJP")
    parser.add_argument("--floor", action="store_true",
                        help="minattn's step on half the rows, on one thread (an ideal split "
                             "over two workers), against torch's whole step on --threads")
    parser.add_argument("--timeline", action="store_true",
                        help="where minattn's step goes: each half, the wait, the tail")
    parser.add_argument("--memory-child", choices=("minattn", "torch"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        return memory_child(args)
    header(args.busy)
    with threads(args.threads):
        if args.run:
            return whole_runs(args)
        if args.profile:
            return profile(args.rounds)
        if args.timeline:
            return timeline(args.rounds, args.threads)
        minattn_step, torch_step, _, _ = build(rows=6 if args.floor else None)
        if args.floor:  # each of two workers' share, with no other worker to wait for
            half_step = minattn_step
            minattn_step = lambda k: one_thread(half_step, k)  # noqa: E731
            counter = iter(range(10 ** 6))
            cpu = {"minattn": [], "torch": []}  # the process's CPU time of each timed call

            def with_cpu(name, step):
                def call():
                    start = time.process_time()
                    step(next(counter))
                    cpu[name].append(time.process_time() - start)
                return call

            with busy(args.busy):
                times = interleaved({"minattn": with_cpu("minattn", minattn_step),
                                     "torch": with_cpu("torch", torch_step)}, args.rounds)
            cpu = {name: seconds[1:] for name, seconds in cpu.items()}  # less the warm-up call
        else:
            with busy(args.busy):
                times, cpu = in_one_run(minattn_step.run, torch_step, args.rounds)
    print(f"baby GPT, float32, batch 12 x 64 characters, {args.threads} threads, "
          f"{args.rounds} rounds" + (
              "; minattn: half the rows (6 x 64) on one thread, the floor of its row split"
              if args.floor else ""))
    if args.floor:
        print(f"| minattn's step, 6 rows, 1 thread / torch's, 12 rows, {args.threads} threads | "
              f"{describe(times['minattn'])} | {describe(times['torch'])} | "
              f"{ratio(times['minattn'], times['torch'])} |")
        print(f"| their CPU time | {describe(cpu['minattn'])} | {describe(cpu['torch'])} | "
              f"{ratio(cpu['minattn'], cpu['torch'])} |")
        return footer()
    print("| | minattn | torch (eager) | ratio |")
    print("|---|---|---|---|")
    print(f"| training step | {describe(times['minattn'])} | {describe(times['torch'])} | "
          f"{ratio(times['minattn'], times['torch'])} |")
    print(f"| its CPU time (user + system, all threads; beside other work, less moved by it "
          f"than the wall time at one thread) | {describe(cpu['minattn'])} | "
          f"{describe(cpu['torch'])} | {ratio(cpu['minattn'], cpu['torch'])} |")
    memory = {side: child_peak(side, args) for side in ("minattn", "torch")}
    print(f"| a step's peak memory above the model | {memory['minattn']:.1f} MiB | "
          f"{memory['torch']:.1f} MiB | {memory['minattn'] / memory['torch']:.2f} |")
    footer()


def worker_cpu():
    """Seconds of CPU that the live worker processes of a training run (engine/processes.py)
    have used: each thread's time on a CPU, in nanoseconds (Linux's /proc/PID/task/TID/schedstat;
    /proc/PID/stat counts in ticks of 10 ms)."""
    from minattn.engine.processes import live_worker_pids

    total = 0
    for pid in live_worker_pids():
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    return total / 1e9


def in_one_run(run, torch_step, rounds):
    """minattn's steps as one training run of rounds + 1 steps (its first, with a worker
    process's fork, the warm-up), torch's step k after minattn's step k, in the run's callback.
    minattn's step: from the end of one callback to the start of the next (the batch, the
    step, clipping, AdamW). -> ({side: [seconds]}, {side: [CPU seconds]}): the process's CPU
    time (all its threads), minattn's plus its worker processes'."""
    times = {"minattn": [], "torch": []}
    cpu = {"minattn": [], "torch": []}
    mark = {}

    def between(step, loss):
        now, now_cpu, now_worker = time.perf_counter(), time.process_time(), worker_cpu()
        if step > 1:
            times["minattn"].append(now - mark["wall"])
            cpu["minattn"].append(now_cpu - mark["cpu"] + now_worker - mark["worker"])
        start, start_cpu = time.perf_counter(), time.process_time()
        torch_step(step - 1)
        if step > 1:
            times["torch"].append(time.perf_counter() - start)
            cpu["torch"].append(time.process_time() - start_cpu)
        mark.update(wall=time.perf_counter(), cpu=time.process_time(), worker=worker_cpu())

    run(rounds + 1, between)
    return times, cpu


def one_thread(step, k):
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        return step(k)


def whole_runs(args):
    # each side's whole run in turn, the same batches: wall time and the validation loss
    minattn_step, torch_step, minattn_val, torch_val = build(steps=args.run)
    for name, step, val in (("minattn", minattn_step, minattn_val),
                            ("torch", torch_step, torch_val)):
        start = time.perf_counter()
        if name == "minattn":  # one loop.train run, as `python -m minattn shakespeare`'s
            last = []
            step.run(args.run, lambda _, loss: last.append(loss))
            loss = last[-1]
        else:
            for k in range(args.run):
                loss = step(k)
        seconds = time.perf_counter() - start
        print(f"{name}: {args.run} steps in {seconds:.0f} s, last training loss {loss:.3f}, "
              f"validation loss {val():.3f}", flush=True)
    footer()


def profile(rounds):
    # where a step goes, by autograd's nodes (_harness.profile_step)
    from minattn.models import char_gpt
    from minattn.training import text_data

    baby = char_gpt.BABY
    text = text_data.shakespeare()
    characters = char_gpt.Characters(text)
    train_ids, _ = char_gpt.split(characters.encode(text))
    params, config = char_gpt.init_char_gpt(
        np.random.default_rng(0), len(characters.chars), dtype=np.float32,
        **{k: baby[k] for k in ("n_layers", "n_heads", "d_model", "context")})
    loss_sum = char_gpt.loss_sum(config)
    batch = char_gpt.window_batch(train_ids, context=baby["context"],
                                  batch_size=baby["batch_size"], seed=0, k=0)
    profile_step(loss_sum, (params, batch, None), rounds)
    footer()


def child_peak(side, args):
    command = [sys.executable, os.path.abspath(__file__), "--memory-child", side, "--threads",
               str(args.threads)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def timeline(rounds, n_threads):
    """One loop.train run of rounds + 5 steps (the first five left out), its pieces timed where
    they run, each step split into: the caller's half of the rows; the wait for the workers'
    answers (the first asked to the last answered); the step before its halves (the batch made,
    the weights copied into the shared block, the rows sent: from the last step's callback to
    the caller's half); the sum of the pieces; clip_then_adamw; the rest (the map's end, the
    callback and the loop); and each half's own time and minor page faults (/proc/self/stat),
    from inside the loss-and-gradient, in the caller and in each worker. The engine's functions
    wrapped by this script for the run, not changed. A step that ran on threads instead (the
    timed rule, MINATTN_TIMED_THREADS=1) is counted and left out."""
    import tempfile

    from minattn.engine import processes
    from minattn.training import loop

    rounds = max(rounds, 1)
    minattn_step, _, _, _ = build()
    marks, rows, on_threads = {}, [], [0]
    handle, log = tempfile.mkstemp(suffix=".timeline")  # the workers' records
    os.close(handle)

    def timed(owner, name, key, first=False):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if not first or key + "0" not in marks:
                marks[key + "0"] = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                marks[key + "1"] = time.perf_counter()
        setattr(owner, name, wrapper)
        return owner, name, original

    def own(f):  # the loss-and-gradient, timed where it runs: its time and page faults
        def g(*args, **kwargs):
            faults, start = _minor_faults(), time.perf_counter()
            out = f(*args, **kwargs)
            record = (time.perf_counter() - start, _minor_faults() - faults)
            if processes._IN_WORKER:
                with open(log, "a") as file:
                    file.write("%r %r\n" % record)
            else:
                marks["here"] = record
            return out
        return g

    last = [None]

    def between(step, loss):
        now, m = time.perf_counter(), marks
        if last[0] is not None and "map0" not in m:
            on_threads[0] += 1
        elif last[0] is not None:
            parts = [m["here"][0], m["answer1"] - m["answer0"],
                     m["map0"] - last[0] + m["answer0"] - m["map0"] - m["here"][0],
                     m["tail0"] - m["map1"], m["tail1"] - m["tail0"]]
            rows.append(parts + [now - last[0] - sum(parts), now - last[0], m["here"][1]])
        marks.clear()
        last[0] = time.perf_counter()

    originals = [timed(processes.WorkerProcesses, "_map", "map"),
                 timed(processes.WorkerProcesses, "_answer", "answer", first=True),
                 timed(loop, "clip_then_adamw", "tail")]
    worker_processes = loop.worker_processes
    loop.worker_processes = lambda f, calls: worker_processes(own(f), calls)
    try:
        minattn_step.run(rounds + 5, between)
        with open(log) as file:
            worker = [tuple(map(float, line.split())) for line in file]
    finally:
        loop.worker_processes = worker_processes
        for owner, name, original in originals:
            setattr(owner, name, original)
        os.unlink(log)
    n_workers = max(1, n_threads - 1)
    rows, worker = np.array(rows[4:]), worker[5 * n_workers:]
    if not worker or not len(rows):
        print(f"no step on a worker process to show ({on_threads[0]} on threads; "
              "MINATTN_PROCESSES=0, one thread, or not Linux)")
        return footer()
    print(f"baby GPT, float32, batch 12 x 64 characters, {n_threads} threads, one run; medians "
          f"(IQR) of {len(rows)} steps" + (f" ({on_threads[0]} steps on threads left out)"
                                           if on_threads[0] else ""))
    print("| part of a step | time |")
    print("|---|---|")
    for i, what in enumerate(("the caller's half", "waiting for the workers' answers",
                              "the step before its halves (the batch, the weights into the "
                              "shared block, the rows sent)", "the sum of the pieces",
                              "clip_then_adamw", "the rest (the map's end, the callback, the "
                              "loop)", "the whole step")):
        print(f"| {what} | {describe(rows[:, i])} |")
    times, faults = np.array(worker).T
    print(f"| a worker's half, timed in the worker | {describe(times)} |")
    print(f"minor page faults a step: the caller's half {np.median(rows[:, 7]):.0f}, a "
          f"worker's {np.median(faults):.0f}")
    return footer()


def _minor_faults():
    # Linux's /proc/self/stat, field 10 (minflt); after the command's parenthesised name
    with open("/proc/self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def _status_mib(field, pid="self"):
    # Linux's /proc/PID/status: VmRSS (resident now), VmHWM (its peak since the last reset)
    with open(f"/proc/{pid}/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _private_mib(pid):
    # Linux's /proc/PID/smaps_rollup: the resident pages no other process maps
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(line.split()[1]) for line in f
                   if line.startswith(("Private_Clean:", "Private_Dirty:"))) / 1024


def memory_child(args):
    # Both sides are built (the data and the weights alike), one side steps: the resident memory
    # before a warm-up step, then the peak of the next step above it.
    with threads(args.threads):
        minattn_step, torch_step, _, _ = build()
        if args.memory_child == "torch":
            before = _status_mib("VmRSS")
            torch_step(0)
            with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) reset to the present
                f.write("5")
            torch_step(1)
            peak = _status_mib("VmHWM") - before
        else:  # a run of two steps: this process's peak, and its worker processes' (if any)
            from minattn.engine.processes import live_worker_pids

            marks = {}

            def between(step, loss):
                # this process's peak above its memory before the run; a worker's: its private
                # memory after the first step (what it holds of its own: the heap it keeps for
                # the next step, its copies of this process's pages), plus its peak in the
                # second step above its memory after the first
                pids = ["self"] + [str(pid) for pid in live_worker_pids()]
                if step == 1:
                    marks["before"] = {pid: _status_mib("VmRSS", pid) - _private_mib(pid)
                                       for pid in pids}
                    marks["before"]["self"] = before
                    for pid in pids:
                        with open(f"/proc/{pid}/clear_refs", "w") as f:
                            f.write("5")
                else:
                    marks["peak"] = sum(_status_mib("VmHWM", pid) - marks["before"][pid]
                                        for pid in pids)

            before = _status_mib("VmRSS")
            minattn_step.run(2, between)
            peak = marks["peak"]
    print(json.dumps({"peak_mib": peak}))


if __name__ == "__main__":
    sys.exit(main())
