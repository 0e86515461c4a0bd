"""minattn on CuPy against PyTorch CUDA, in the same run (needs a GPU, CuPy, torch with CUDA).

    python benchmarks/bench_gpu.py [--rounds 20] [--quick]

- encoder block, B=32 L=128 D=512 H=8 F=2048, float32 and float16: forward (torch eval,
  no_grad) and the gradient of a scalar loss (torch forward + backward);
- attention at L = 4096 ... 32768 (B=1, H=4, d_k=64, float32, causal): minattn's
  blockwise_attention and full scaled_dot_product_attention (while the L x L weights fit)
  against torch's scaled_dot_product_attention;
- the tour's training run (1000 steps of the count model) on CuPy and on NumPy.
Every time is a median over interleaved rounds after a warm-up, each call followed by a device
synchronisation; ratios are minattn / torch, and "of peak" is the achieved FLOP/s of the matrix
products as a share of a large matrix product's FLOP/s on the same GPU (in that dtype). Prints
markdown rows. Never run in CI.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a first look")
    args = parser.parse_args()

    import cupy
    import torch
    from autograd import grad

    import minattn as ma
    from minattn.engine import cupy_autograd, train

    cupy_autograd.register()
    dev = torch.device("cuda")

    def sync():
        cupy.cuda.Device().synchronize()
        torch.cuda.synchronize()

    def timed(functions, rounds):
        for f in functions.values():
            f()
        sync()
        times = {name: [] for name in functions}
        for _ in range(rounds):
            for name, f in functions.items():
                sync()
                start = time.perf_counter()
                f()
                sync()
                times[name].append(time.perf_counter() - start)
        return {name: float(np.median(t)) for name, t in times.items()}

    def peak(dtype, n=8192):
        a = cupy.ones((n, n), dtype)
        return 2 * n ** 3 / timed({"mm": lambda: a @ a}, 5)["mm"]

    print(f"GPU: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, CuPy {cupy.__version__}, "
          f"torch {torch.__version__}")
    b, length, d_model, h, d_ff = (8, 128, 256, 4, 1024) if args.quick else (32, 128, 512, 8, 2048)
    print(f"\n| encoder block B={b} L={length} D={d_model} H={h} F={d_ff} | minattn ms | torch ms "
          "| ratio | minattn of peak |\n|---|---|---|---|---|")
    for dtype, tdtype in ((np.float32, torch.float32), (np.float16, torch.float16)):
        rng = np.random.default_rng(0)
        host = ma.init_encoder_block(rng, d_model, h, d_ff, dtype=dtype)
        params = {k: {n: cupy.asarray(a) for n, a in v.items()} for k, v in host.items()}
        x = cupy.asarray(rng.normal(size=(b, length, d_model)).astype(dtype))
        layer = torch.nn.TransformerEncoderLayer(d_model, h, d_ff, dropout=0.0, batch_first=True)
        layer = layer.to(dev, tdtype).eval()
        xt = torch.as_tensor(cupy.asnumpy(x), device=dev)

        def torch_forward():
            with torch.no_grad():
                layer(xt)

        def torch_backward():
            layer.zero_grad(set_to_none=True)
            layer(xt.clone().requires_grad_(True)).float().sum().backward()

        loss = lambda p: ma.encoder_block(p, x, n_heads=h).astype(np.float32).sum()
        t = timed({"mf": lambda: ma.encoder_block(params, x, n_heads=h), "tf": torch_forward,
                   "mg": lambda: grad(loss)(params), "tg": torch_backward}, args.rounds)
        tokens = b * length
        flops = 2 * (4 * tokens * d_model ** 2 + 2 * b * length ** 2 * d_model + 2 * tokens * d_model * d_ff)
        p = peak(dtype)
        name = np.dtype(dtype).name
        print(f"| forward, {name} | {t['mf'] * 1e3:.2f} | {t['tf'] * 1e3:.2f} | {t['mf'] / t['tf']:.2f} "
              f"| {100 * flops / t['mf'] / p:.1f}% |")
        print(f"| gradient, {name} | {t['mg'] * 1e3:.2f} | {t['tg'] * 1e3:.2f} | {t['mg'] / t['tg']:.2f} "
              f"| {100 * 3 * flops / t['mg'] / p:.1f}% |")

    print("\n| attention, causal, B=1 H=4 d_k=64 float32 | L | blockwise ms | full ms | torch ms "
          "| blockwise / torch |\n|---|---|---|---|---|---|")
    for n in ((2048, 4096) if args.quick else (4096, 8192, 16384, 32768)):
        q, k, v = (cupy.asarray(np.random.default_rng(s).normal(size=(1, 4, n, 64)).astype(np.float32))
                   for s in range(3))
        qt, kt, vt = (torch.as_tensor(cupy.asnumpy(a), device=dev) for a in (q, k, v))
        functions = {"block": lambda: ma.blockwise_attention(q, k, v, causal=True, block_size=1024),
                     "torch": lambda: torch.nn.functional.scaled_dot_product_attention(
                         qt, kt, vt, is_causal=True)}
        if 4 * n * n * 4 * 3 < 40e9:  # the weights, scores and mask fit comfortably
            mask = ma.causal_mask(n, like=q)
            functions["full"] = lambda: ma.scaled_dot_product_attention(q, k, v, mask)
        t = timed(functions, max(3, args.rounds // 4))
        full = f"{t['full'] * 1e3:.1f}" if "full" in t else "-"
        print(f"| | {n} | {t['block'] * 1e3:.1f} | {full} | {t['torch'] * 1e3:.2f} | "
              f"{t['block'] / t['torch']:.1f} |")

    steps = 100 if args.quick else 1000
    to_gpu = lambda tree: {k: to_gpu(v) for k, v in tree.items()} if isinstance(tree, dict) else \
        [to_gpu(v) for v in tree] if isinstance(tree, (list, tuple)) else cupy.asarray(tree)
    start = time.perf_counter()
    train.train_count_model(seed=0, steps=steps, to_device=to_gpu)
    sync()
    gpu_s = time.perf_counter() - start
    start = time.perf_counter()
    train.train_count_model(seed=0, steps=steps)
    cpu_s = time.perf_counter() - start
    print(f"\ntour training, {steps} steps: CuPy {gpu_s:.1f} s, NumPy {cpu_s:.1f} s "
          "(tiny arrays: launch-bound on the GPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
