"""The gated delta rule's two forms against softmax attention and transformers' torch chunked
function, L = 1k..32k, one head size, forward, in the same process, interleaved, one thread
each (benchmarks/_harness.py).

    python benchmarks/bench_delta_rule.py [--lengths 1024,...,32768] [--rounds 3] [--busy N]

B=1, H=2, d_k = d_v = 128 (Qwen3-Next's linear-attention head), float32, chunk_size 64, unit q and
k, β in (0, 1), g in (-0.1, 0). Timed at each L:
  delta_rule loop      minattn.delta_rule(chunk_size=None): one token at a time
  delta_rule chunked   minattn.delta_rule(chunk_size=64): the UT transform, then one step a chunk
  torch chunked        transformers' torch_chunk_gated_delta_rule (Qwen3-Next's fallback when
                       flash-linear-attention is absent), the same inputs as torch tensors
  softmax attention    minattn.blockwise_attention(causal=True): causal softmax attention with the
                       same q, k, v, computed tile by tile (the full [L, L] scores would need
                       4 GiB per head at 32k)
  chunk products       the floor of the chunked form: its matrix products alone (q kᵀ and k kᵀ of
                       every chunk, one C x C product in place of the solve, and the scan's three
                       products a chunk), on the same arrays
Every BLAS and torch on one thread (threadpool_limits(1), torch.set_num_threads(1)): the same
thread count for all, and blockwise's worker threads follow the BLAS limit.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minattn as ma  # noqa: E402
from _harness import busy, describe, footer, header, interleaved, ratio  # noqa: E402

H, D, C = 2, 128, 64


def inputs(length, rng):
    q = ma.l2_normalize(rng.standard_normal((1, H, length, D), dtype=np.float32))
    k = ma.l2_normalize(rng.standard_normal((1, H, length, D), dtype=np.float32))
    v = rng.standard_normal((1, H, length, D), dtype=np.float32)
    beta = rng.uniform(0, 1, (1, H, length)).astype(np.float32)
    g = -rng.uniform(0, 0.1, (1, H, length)).astype(np.float32)
    return q, k, v, beta, g


def chunk_products(q, k, v):
    # The chunked form's matrix products alone, without its masks, exps, solve or Python steps.
    n = q.shape[-2] // C
    qc, kc, vc = (x.reshape(1, H, n, C, D) for x in (q, k, v))
    scores, system = qc @ kc.swapaxes(-1, -2), kc @ kc.swapaxes(-1, -2)  # [1, H, n, C, C]
    uw = system @ np.concatenate([vc, kc], axis=-1)  # in place of the triangular solve
    state = np.zeros((1, H, D, D), np.float32)
    for c in range(n):
        new = uw[..., c, :, :D] - uw[..., c, :, D:] @ state
        qc[..., c, :, :] @ state + scores[..., c, :, :] @ new
        state = 1e-4 * (kc[..., c, :, :].swapaxes(-1, -2) @ new)  # 1e-4: no overflow


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1024,2048,4096,8192,16384,32768")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits
    from transformers.models.qwen3_next import modeling_qwen3_next

    torch.set_num_threads(1)
    torch_chunked = modeling_qwen3_next.torch_chunk_gated_delta_rule
    torch_chunked = getattr(torch_chunked, "__wrapped__", torch_chunked)  # the torch function
    header(args.busy)
    print(f"forward, B=1 H={H} d_k=d_v={D} float32, chunk_size={C}; torch {torch.__version__}, "
          f"one thread everywhere; {args.rounds} rounds after one warm-up call")
    rng = np.random.default_rng(0)
    with busy(args.busy), threadpool_limits(1):
        for length in (int(x) for x in args.lengths.split(",")):
            q, k, v, beta, g = inputs(length, rng)
            tq, tk, tv, tb, tg = (torch.from_numpy(x).transpose(1, 2) for x in (q, k, v, beta, g))
            times = interleaved({
                "delta_rule loop": lambda: ma.delta_rule(q, k, v, beta, g),
                "delta_rule chunked": lambda: ma.delta_rule(q, k, v, beta, g, chunk_size=C),
                "torch chunked": lambda: torch_chunked(tq, tk, tv, tg, tb, chunk_size=C),
                "softmax attention": lambda: ma.blockwise_attention(q, k, v, causal=True,
                                                                    block_size=256),
                "chunk products": lambda: chunk_products(q, k, v),
            }, args.rounds)
            print(f"L = {length}")
            for name, t in times.items():
                print(f"  {name:<20}{describe(t)}")
            print(f"  loop / chunked: {ratio(times['delta_rule loop'], times['delta_rule chunked'])}"
                  f";  chunked / torch chunked: "
                  f"{ratio(times['delta_rule chunked'], times['torch chunked'])}"
                  f";  chunked / floor: "
                  f"{ratio(times['delta_rule chunked'], times['chunk products'])}", flush=True)
    footer()


if __name__ == "__main__":
    main()
