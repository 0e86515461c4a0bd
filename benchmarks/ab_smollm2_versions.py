"""Two checkouts of minattn in one process, SmolLM2-135M-Instruct's decode step and 512-token
prefill (bench_smollm2.py's), with the peers beside them: the bare NumPy decode step
(bench_smollm2._bare_step) and, for the prefill, transformers' (torch on as many threads).

    python benchmarks/ab_smollm2_versions.py OLD NEW [ROUNDS [WHAT [THREADS [PAST]]]]

WHAT: "both" (the default), "decode", "prefill" or "prefill-timed" (the prefill with each call
run as inside a prompt's block timed on THREADS: threads._TUNING.running set around it, as
ab_prefill_core.py does for the core, so that the core keeps the block's threads rather than
its own one BLAS thread); THREADS: the BLAS threads (and torch's),
default 1 (two-thread runs wait on the other sessions' processes on a shared 2-core machine).
Every call of a checkout's causal_lm runs with the timing of the thread count off
(engine/threads.py's TIMED_THREADS = False, both checkouts alike), so that both run on THREADS.
- decode: the new token through the cache of a PAST-token prompt (default 64), its logits
  and their argmax
  (as bench_smollm2.py's minattn_decode); a round's time is the median of 16 steps; the bare
  step (median of 16 calls) in the same round;
- prefill: causal_lm(prompt of 512 tokens, return_cache=True, logits_to_keep=1), as generate
  calls it, and transformers' forward(use_cache=True, logits_to_keep=1).
Old and new run back to back, which first alternating round by round; the peer after them.
Both the wall clock and the process's CPU time (steadier where other processes share the cores).
Before timing, old and new are checked to give bit-for-bit the same logits and caches (decode:
16 steps' logits; prefill: the logits and every layer's cache), or, where a prompt's attention
or feed-forward rounds otherwise (issue 65's: the output divided by the sums, torch's form of
silu), the same tokens and logits within 1e-3 of their largest, the difference printed.
Prints medians (IQR) and the per-round ratios new / old, new / peer and old / peer.
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout, describe, footer, header, ratio  # noqa: E402

MODULES = ("engine.threads", "models.chat_model", "language_model")
STEPS = 16


def decode_steps(m, model, prompt):
    def run(record=None):  # -> the median (wall-clock, CPU) seconds of a step
        _, cache = m.causal_lm(model.params, prompt, return_cache=True, **model.config)
        token, times = prompt[:, -1:], []
        for _ in range(STEPS):
            start, cpu = time.perf_counter(), time.process_time()
            logits, cache = m.causal_lm(model.params, token, cache=cache, return_cache=True,
                                        **model.config)
            token = np.argmax(logits[:, -1], axis=-1)[:, None]
            times.append((time.perf_counter() - start, time.process_time() - cpu))
            if record is not None:
                record.append(logits)
        return tuple(np.median(times, axis=0))

    return run


def prefill(m, model, prompt, timed=False):
    def call():
        if timed:  # as inside a prompt's block timed on the threads in force
            m.engine.threads._TUNING.running = True
        try:
            return m.causal_lm(model.params, prompt, cache=None, return_cache=True,
                               logits_to_keep=1, **model.config)
        finally:
            m.engine.threads._TUNING.running = False

    return call


def main():
    old_path, new_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    what = sys.argv[4] if len(sys.argv) > 4 else "both"
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    past = int(sys.argv[6]) if len(sys.argv) > 6 else 64
    threadpool_limits(threads, user_api="blas")
    versions = {"old": checkout(old_path, *MODULES), "new": checkout(new_path, *MODULES)}
    for m in versions.values():
        m.engine.threads.TIMED_THREADS = False
    model = versions["new"].models.chat_model.load_language_model()
    text = "The Transformer relies entirely on attention to draw global dependencies. " * 60
    ids = model.tokenizer.encode(text)
    work = {}  # kind -> {"old", "new", peer name: f() -> seconds}
    if what in ("both", "decode"):
        import bench_smollm2

        prompt = np.array([ids[:past]])
        runs = {name: decode_steps(m, model, prompt) for name, m in versions.items()}
        logits = {name: [] for name in runs}
        for name, run in runs.items():
            run(logits[name])
        if not all(np.array_equal(a, b) for a, b in zip(logits["old"], logits["new"])):
            # a checkout whose prompt's feed-forward or attention rounds otherwise (issue 65):
            # the same tokens, the logits within float32 rounding
            drift = max(np.abs(b.astype(np.float64) - a).max()
                        for a, b in zip(logits["old"], logits["new"]))
            top = max(np.abs(a).max() for a in logits["old"])
            assert all(np.array_equal(np.argmax(a, -1), np.argmax(b, -1))
                       for a, b in zip(logits["old"], logits["new"])) and drift <= 1e-3 * top, \
                f"decode: the logits differ by {drift}"
            print(f"decode: old and new logits within {drift:.3g} (of {top:.3g}), the same tokens")
        bare = _timed(bench_smollm2._bare_step(model, prompt))
        work["decode"] = {**runs, "bare NumPy step": bare}
    if what in ("both", "prefill", "prefill-timed"):
        import torch
        import transformers

        from minattn.models.chat_model import default_model_path

        torch.set_num_threads(threads)
        path = default_model_path()
        hf = transformers.AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32).eval()
        prompt = np.array([ids[:512]])
        calls = {name: prefill(m, model, prompt, what == "prefill-timed")
                 for name, m in versions.items()}
        (lo, co), (ln, cn) = calls["old"](), calls["new"]()
        if not (np.array_equal(lo, ln) and all(
                np.array_equal(a[key], b[key]) for a, b in zip(co, cn) for key in ("k", "v"))):
            # a checkout whose prompt attention divides the output, not the weights (issue 65:
            # other roundings): the same next token, the logits within float32 rounding
            drift = np.abs(ln.astype(np.float64) - lo).max()
            assert np.array_equal(np.argmax(lo, -1), np.argmax(ln, -1)) and \
                drift <= 1e-3 * np.abs(lo).max(), f"prefill: the logits differ by {drift}"
            print(f"prefill: old and new logits within {drift:.3g} (of {np.abs(lo).max():.3g}),"
                  " the same next token")

        def transformers_prefill():
            with torch.no_grad():
                hf(torch.from_numpy(prompt), use_cache=True, logits_to_keep=1)

        work["prefill"] = {name: _seconds(f) for name, f in
                           {**calls, "transformers": transformers_prefill}.items()}
    header(0)
    print(f"{threads} thread(s), {rounds} rounds, decode after {past} tokens; old {old_path}, "
          f"new {new_path}")
    for kind, functions in work.items():
        for f in functions.values():
            f()
        times = {name: [] for name in functions}
        for r in range(rounds):
            for name in (("old", "new") if r % 2 else ("new", "old")) + tuple(functions)[2:]:
                times[name].append(functions[name]())
        peer = tuple(functions)[2]
        for i, clock in enumerate(("wall clock", "CPU time")):
            t = {name: [r[i] for r in runs] for name, runs in times.items()}
            for name, seconds in t.items():
                print(f"{kind}, {name}, {clock}: {describe(seconds).strip()}")
            print(f"{kind}, {clock}: new / old {ratio(t['new'], t['old'])}; new / {peer} "
                  f"{ratio(t['new'], t[peer])}; old / {peer} {ratio(t['old'], t[peer])}")
    footer()


def _seconds(f):
    def timed():  # -> (wall-clock, CPU) seconds of one call
        start, cpu = time.perf_counter(), time.process_time()
        f()
        return time.perf_counter() - start, time.process_time() - cpu

    return timed


def _timed(f):
    def timed():  # -> the median (wall-clock, CPU) seconds of STEPS calls
        return tuple(np.median([_seconds(f)() for _ in range(STEPS)], axis=0))

    return timed


if __name__ == "__main__":
    main()
