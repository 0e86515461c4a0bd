"""What a decode step's small operations cost between its matrix-vector products: each op timed
right after a product over a SmolLM2-sized weight (the product streams 3.5 MB through the core's
caches) and again right after itself (hot), one BLAS thread.

    python benchmarks/bench_decode_cold.py [--rounds 3]

(with minattn; from the repository root or with PYTHONPATH=.)

A decode step of SmolLM2 makes 121 matrix-vector products, and between two of them it runs the
norms, RoPE, the cache's append, the attention of one token, SwiGLU, the residual adds, and its
Python: the checks, the policies, the dispatch. Each product reads its weights through the L2
cache (2 MB a core here), and what ran before it is no longer there: the first NumPy call after a
product pays for fetching its code and data again. This prints, for each op at a decode step's
shapes (float32, one token, 9 query and 3 KV heads of 64, 65 keys), the median time right after
a product and right after a call of itself, over 40 weights a round, and the medians' median
over the rounds: the ops of the bare NumPy step (bench_smollm2._bare_step's formulas) beside
minattn's. Only the times after a product count in a step.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import footer, header  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    from minattn.engine.decoder_checks import _check_decoder_block, check_self_attention
    from minattn.engine.query_blocks import weights_unread
    from minattn.kv_cache import _append
    from minattn.multi_head import grouped_attention
    from minattn.normalization import rms_norm
    from minattn.position_wise import swiglu
    from minattn.rope import apply_rope

    threadpool_limits(1, user_api="blas")
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    weights = [np.asfortranarray(f32(576, 1536)) for _ in range(40)]
    x, gamma, gate, up = f32(1, 1, 576), f32(576), f32(1, 1, 1536), f32(1, 1, 1536)
    q, keys, values, new = f32(1, 9, 1, 64), f32(1, 3, 65, 64), f32(1, 3, 65, 64), f32(1, 3, 1, 64)
    past, positions, core = keys[:, :, :64].copy(), np.arange(64, 65), weights_unread(
        grouped_attention)
    attention = {"w_q": f32(576, 576), "w_k": f32(576, 192), "w_v": f32(576, 192),
                 "w_o": f32(576, 576)}
    block = {"self_attention": attention, "self_attention_norm": {"gamma": gamma},
             "feed_forward": {"w_gate": f32(576, 1536), "w_up": f32(576, 1536),
                              "w_down": f32(1536, 576)}, "feed_forward_norm": {"gamma": gamma}}
    cache = {"k": past, "v": past}
    x2, qb, kb, vb = x[0], q[0, :, 0].reshape(3, 3, 64), keys[0], values[0]

    def bare_attention():  # bench_smollm2._bare_step's, for one token
        s = qb @ kb.transpose(0, 2, 1) / 8.0
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ vb

    ops = {
        "one ufunc (x + x)": (lambda: x + x, None),
        "RMSNorm": (lambda: x2 / np.sqrt(np.mean(x2 * x2, axis=-1, keepdims=True) + 1e-5) * gamma,
                    lambda: rms_norm(x, gamma, 1e-5)),
        "attention of one token": (bare_attention, lambda: core(q, keys, values, None)),
        "SwiGLU": (lambda: gate / (1 + np.exp(-gate)) * up, lambda: swiglu(gate, up)),
        "RoPE of q": (None, lambda: apply_rope(q, positions, base=100000.0)),
        "the cache's append": (lambda: np.concatenate([past, new], axis=-2),
                               lambda: _append(past, new)),
        "a block's checks": (None, lambda: _check_decoder_block(
            block, x, None, None, 9, 3, "rms_norm", "swiglu", 1e-5, False, True)),
        "self-attention's checks": (None, lambda: check_self_attention(
            attention, x, None, 9, 3, 64, positions, 100000.0, cache, True, 1e-5)),
    }
    header(0)
    print(f"one BLAS thread, {args.rounds} rounds of {len(weights)} products; microseconds "
          "a call, the median over the rounds of each round's median")
    print("| op | bare NumPy: after a product | hot | minattn: after a product | hot |")
    print("|---|---|---|---|---|")
    for name, pair in ops.items():
        cells = []
        for f in pair:
            if f is None:
                cells += ["", ""]
                continue
            cold, hot = [], []
            for _ in range(args.rounds):
                c, h = [], []
                for w in weights:
                    x2 @ w
                    start = time.perf_counter()
                    f()
                    middle = time.perf_counter()
                    f()
                    c.append(middle - start)
                    h.append(time.perf_counter() - middle)
                cold.append(np.median(c))
                hot.append(np.median(h))
            cells += [f"{1e6 * np.median(cold):.1f}", f"{1e6 * np.median(hot):.1f}"]
        print(f"| {name} | {' | '.join(cells)} |")
    footer()


if __name__ == "__main__":
    main()
