"""Where a 512-token prefill's time goes: one decoder layer at SmolLM2-135M's shapes, step by
step in sequence, minattn's functions against the same steps in torch, and what a NumPy layer
could cost at best.

    python benchmarks/bench_prefill_layers.py [--rounds 11] [--length 512] [--threads 2] [--busy N]

(with minattn, torch installed; from the repository root or with PYTHONPATH=.)

Each round runs 30 layers (SmolLM2's count, the same random float32 weights each time: the time
depends on the shapes only) three ways, one after the other, and records each step's time
summed over the 30 layers:
- minattn: rms_norm, linears (q, k, v), apply_rope, the causal grouped attention core as a
  decoder's self-attention calls it inside a prompt's block (weights_unread(grouped_attention):
  no weights kept; its products on the BLAS threads in force, as under the block's
  threads_chosen_by_timing), linear (o), the residual, rms_norm, linears (gate, up),
  silu(gate) * up (position_wise.swiglu, as gated_feed_forward calls it: before issue 65's
  last change this script timed silu(gate) * up, two concept calls the model does not make),
  the down product, the residual; the weights laid out as a loaded model's
  (models/llama_layout.py: linear_weight's order, packed into one buffer, so that q, k, v and
  gate, up are one product each);
- torch: the same steps as transformers' Llama layer makes them (F.linear, rotate_half,
  F.scaled_dot_product_attention(is_causal=True, enable_gqa=True), F.silu), in torch.no_grad;
- floor: minattn's steps, but the attention core replaced by its two products alone (the
  scores and weights-times-values of each causal block of 128 queries, minattn's blocks, no
  mask, no softmax) and silu(gate) * up by five passes, all but the first in place
  (gate / (1 + exp(-gate)) * up): not a correct layer; a lower bound for those two steps of
  minattn's layer.
One layer of minattn and of torch are checked equal (float32 tolerance) before timing. The
three run in a rotating order, 0.2 s apart (OpenBLAS's and torch's idle threads spin for a while
after a product: the pause keeps one from slowing the next one's first step).
Prints each step's median over the rounds and its range, and the per-round total ratios.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import busy, footer, header, ratio  # noqa: E402

STEPS = ["norm", "q,k,v", "rope", "core", "o", "residual", "norm", "gate,up", "silu*up", "down",
         "residual"]
LAYERS, D, FF, HEADS, KV_HEADS, HEAD_DIM, BASE, EPS = 30, 576, 1536, 9, 3, 64, 1e5, 1e-5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args()
    import torch
    from threadpoolctl import threadpool_limits

    from minattn.engine.query_blocks import weights_unread
    from minattn.linear import linear, linears
    from minattn.engine import threads
    from minattn.masks import causal_mask
    from minattn.models.llama_layout import linear_weight, packed
    from minattn.multi_head import grouped_attention
    from minattn.normalization import rms_norm
    from minattn.position_wise import swiglu
    from minattn.rope import apply_rope

    threadpool_limits(args.threads, user_api="blas")
    torch.set_num_threads(args.threads)
    F, L = torch.nn.functional, args.length
    rng = np.random.default_rng(0)
    w = lambda *shape: (rng.standard_normal(shape) * 0.05).astype(np.float32)
    x0, g = w(1, L, D), w(D) + 1
    # torch's Linear weights [d_out, d_in]; minattn's as load_language_model lays them out
    shapes = {"q": (HEADS * HEAD_DIM, D), "k": (KV_HEADS * HEAD_DIM, D), "v": (KV_HEADS * HEAD_DIM, D),
              "o": (D, D), "gate": (FF, D), "up": (FF, D), "down": (D, FF)}
    torch_ws = {name: w(*shape) for name, shape in shapes.items()}
    ws = packed({name: linear_weight(a) for name, a in torch_ws.items()})
    ws_qkv, wo, ws_gu, wd = (ws["q"], ws["k"], ws["v"]), ws["o"], (ws["gate"], ws["up"]), ws["down"]
    mask, positions = causal_mask(L), np.arange(L)
    core = weights_unread(grouped_attention)

    def heads(a, n):  # [1, L, n * d] -> [1, n, L, d]
        return a.reshape(1, L, n, HEAD_DIM).transpose(0, 2, 1, 3)

    def products_only(q, k, v, rows=128):  # the floor's core: not attention, its products
        qg, kg, vg = q.reshape(1, KV_HEADS, HEADS // KV_HEADS, L, HEAD_DIM), k[:, :, None], v[:, :, None]
        outs = [(qg[..., s:s + rows, :] @ kg[..., :s + rows, :].swapaxes(-1, -2)) @ vg[..., :s + rows, :]
                for s in range(0, L, rows)]
        return np.concatenate(outs, -2).reshape(1, HEADS, L, HEAD_DIM)

    def silu_up_floor(gate, up):  # five passes (overflow of exp gives the limit, 0)
        with np.errstate(over="ignore"):
            e = np.negative(gate)
            np.exp(e, out=e)
            e += 1
            np.divide(gate, e, out=e)
            e *= up
            return e

    def numpy_layers(x, floor, times, layers=LAYERS):
        threads._TUNING.running = True  # as inside a prompt's block: the core on the threads in force
        try:
            return _numpy_layers(x, floor, times, layers)
        finally:
            threads._TUNING.running = False

    def _numpy_layers(x, floor, times, layers):
        marks = [time.perf_counter()]
        for _ in range(layers):
            h = rms_norm(x, g, eps=EPS); marks.append(time.perf_counter())
            q, k, v = linears(h, ws_qkv); marks.append(time.perf_counter())
            q, k = (apply_rope(heads(a, n), positions, base=BASE) for a, n in ((q, HEADS), (k, KV_HEADS)))
            marks.append(time.perf_counter())
            v = heads(v, KV_HEADS)
            a = products_only(q, k, v) if floor else core(q, k, v, mask)[0]; marks.append(time.perf_counter())
            a = linear(a.transpose(0, 2, 1, 3).reshape(1, L, D), wo); marks.append(time.perf_counter())
            x = x + a; marks.append(time.perf_counter())
            h = rms_norm(x, g, eps=EPS); marks.append(time.perf_counter())
            gate, up = linears(h, ws_gu); marks.append(time.perf_counter())
            hidden = silu_up_floor(gate, up) if floor else swiglu(gate, up); marks.append(time.perf_counter())
            y = hidden @ wd; marks.append(time.perf_counter())
            x = x + y; marks.append(time.perf_counter())
        if times is not None:
            times.append(np.diff(marks).reshape(layers, len(STEPS)).sum(axis=0))
        return x

    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))
    tg = t(g)
    twq, twk, twv, two, twg, twu, twd = (t(torch_ws[n]) for n in ("q", "k", "v", "o", "gate", "up", "down"))
    inv_freq = 1.0 / BASE ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
    angles = torch.outer(torch.arange(L, dtype=torch.float64), inv_freq)
    cos, sin = (torch.cat((f(angles), f(angles)), -1).float() for f in (torch.cos, torch.sin))

    def rotate(a):  # transformers' apply_rotary_pos_emb: a cos + rotate_half(a) sin
        return a * cos + torch.cat((-a[..., HEAD_DIM // 2:], a[..., :HEAD_DIM // 2]), -1) * sin

    def norm(a):  # transformers' LlamaRMSNorm in float32
        return tg * (a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + EPS))

    def torch_layers(x, times, layers=LAYERS):
        marks = [time.perf_counter()]
        for _ in range(layers):
            h = norm(x); marks.append(time.perf_counter())
            q, k, v = F.linear(h, twq), F.linear(h, twk), F.linear(h, twv); marks.append(time.perf_counter())
            q = rotate(q.view(1, L, HEADS, HEAD_DIM).transpose(1, 2))
            k = rotate(k.view(1, L, KV_HEADS, HEAD_DIM).transpose(1, 2)); marks.append(time.perf_counter())
            a = F.scaled_dot_product_attention(q, k, v.view(1, L, KV_HEADS, HEAD_DIM).transpose(1, 2),
                                               is_causal=True, enable_gqa=True); marks.append(time.perf_counter())
            a = F.linear(a.transpose(1, 2).reshape(1, L, D), two); marks.append(time.perf_counter())
            x = x + a; marks.append(time.perf_counter())
            h = norm(x); marks.append(time.perf_counter())
            gate, up = F.linear(h, twg), F.linear(h, twu); marks.append(time.perf_counter())
            hidden = F.silu(gate) * up; marks.append(time.perf_counter())
            y = F.linear(hidden, twd); marks.append(time.perf_counter())
            x = x + y; marks.append(time.perf_counter())
        if times is not None:
            times.append(np.diff(marks).reshape(layers, len(STEPS)).sum(axis=0))
        return x

    with torch.no_grad():
        ours, theirs = numpy_layers(x0, False, None, layers=1), torch_layers(t(x0), None, layers=1).numpy()
        error = np.abs(ours - theirs).max() / np.abs(theirs).max()
        assert error < 1e-5, f"one layer differs from torch's: relative error {error:.1e}"
        runs = {"minattn": [], "torch": [], "floor": []}
        with busy(args.busy):
            header(args.busy)
            print(f"{args.threads} threads, {args.rounds} rounds of {LAYERS} layers, "
                  f"{L} tokens; one layer equal to torch's within {error:.1e} (relative)")
            order = [lambda: numpy_layers(x0, False, runs["minattn"]),
                     lambda: torch_layers(t(x0), runs["torch"]),
                     lambda: numpy_layers(x0, True, runs["floor"])]
            for r in range(args.rounds + 1):  # the first round warms up, not counted
                for i in range(3):
                    time.sleep(0.2)
                    order[(r + i) % 3]()
            footer()
    runs = {name: np.array(r[1:]) * 1e3 for name, r in runs.items()}  # [rounds, steps], ms
    print(f"{'step (30 layers)':18s} {'minattn':>18s} {'torch':>18s} {'minattn - torch':>16s} {'floor':>8s}")
    for i, step in enumerate(STEPS):
        m, tt, f = (np.median(runs[n][:, i]) for n in ("minattn", "torch", "floor"))
        span = lambda n: f"[{runs[n][:, i].min():.0f}-{runs[n][:, i].max():.0f}]"
        print(f"{step:18s} {m:7.1f} {span('minattn'):>10s} {tt:7.1f} {span('torch'):>10s} {m - tt:+16.1f} {f:8.1f}")
    totals = {name: r.sum(axis=1) for name, r in runs.items()}
    print(f"{'total':18s} {np.median(totals['minattn']):7.1f} {'':10s} {np.median(totals['torch']):7.1f}"
          f" {'':10s} {'':16s} {np.median(totals['floor']):8.1f}")
    print(f"minattn / torch, per round: {ratio(totals['minattn'], totals['torch'])}")
    print(f"floor / torch, per round:   {ratio(totals['floor'], totals['torch'])}")


if __name__ == "__main__":
    main()
