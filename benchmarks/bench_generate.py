"""Per-token generation time against the context length, with and without the KV cache.

    python benchmarks/bench_generate.py [--lengths 128 256 512 1024 2048] [--rounds 5]
                                        [--style llama|gpt2] [--d-model 256] [--layers 4]

(with minattn installed, `pip install -e .`, or from the repository root with PYTHONPATH=.)

One new token after a context of L tokens, batch 1, float32, a randomly initialised model:
- with the cache: causal_lm on the one new token, given the cache of the L previous tokens
  (keys and values are projected once; the step reads L cached keys: cost linear in L);
- without: causal_lm on all L + 1 tokens again, and the last logits kept (what
  generate(..., use_cache=False) does at every step: cost quadratic in L for attention).
Both run in the same process, interleaved round by round (benchmarks/_harness.py); medians.
Prints markdown rows.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _harness import footer, header, interleaved, ratio  # noqa: E402
from minattn.language_model import causal_lm, init_causal_lm  # noqa: E402

STYLES = {
    "llama": dict(init=dict(position="rope", norm="rms_norm", activation="swiglu", bias=False,
                            tied=False),
                  config=dict(position="rope", norm="rms_norm", activation="swiglu", eps=1e-6)),
    "gpt2": dict(init=dict(position="learned", activation="gelu_tanh"),
                 config=dict(position="learned", activation="gelu_tanh")),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--style", choices=STYLES, default="llama")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2, help="llama style only (GQA)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=1000)
    args = parser.parse_args(argv)
    style = STYLES[args.style]
    gqa = {"n_kv_heads": args.kv_heads} if args.style == "llama" else {}
    rng = np.random.default_rng(0)
    params, _ = init_causal_lm(rng, args.vocab, args.layers, args.d_model, args.heads,
                            4 * args.d_model, n_positions=max(args.lengths) + 1,
                            dtype=np.float32, **gqa, **style["init"])
    config = {"n_heads": args.heads, **gqa, **style["config"]}
    print(f"{args.style}: d_model {args.d_model}, {args.layers} layers, {args.heads} heads"
          f"{f', {args.kv_heads} kv heads' if gqa else ''}, vocab {args.vocab}, float32, "
          f"batch 1, {args.rounds} rounds")
    header(0)
    print("\n| context L | with cache, ms/token | without cache, ms/token | speed-up |")
    print("|---|---|---|---|")
    for length in args.lengths:
        tokens = rng.integers(0, args.vocab, size=(1, length + 1))
        _, cache = causal_lm(params, tokens[:, :-1], return_cache=True, **config)
        times = interleaved({
            "cached": lambda: causal_lm(params, tokens[:, -1:], cache=cache, **config),
            "full": lambda: causal_lm(params, tokens, **config)[:, -1],
        }, args.rounds)
        cached, full = (1e3 * float(np.median(times[k])) for k in ("cached", "full"))
        print(f"| {length} | {cached:.2f} | {full:.2f} | {ratio(times['full'], times['cached'])} |",
              flush=True)
    footer()


if __name__ == "__main__":
    main()
