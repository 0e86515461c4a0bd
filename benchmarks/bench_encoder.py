"""Speed of the encoder block: minattn (NumPy + autograd) against PyTorch's CPU
TransformerEncoderLayer with the same weights, measured in the same run.

    python benchmarks/bench_encoder.py            # the issue's size, plus a small size table
    python benchmarks/bench_encoder.py --repeats 20
    python benchmarks/bench_encoder.py --threads 1   # both libraries single-threaded

Prints, for float32 at B=32, L=128, d_model=512, 8 heads, d_ff=2048:
  forward time ratio minattn / torch (eval mode, no grad)      target <= 1.1
  gradient time ratio minattn grad / torch forward + backward  target <= 1.25
  the forward's share of NumPy's own matmul peak (GFLOP/s of one big float32 matmul).
Timings are medians of repeated runs after a warm-up; both libraries use their default threads.
"""
import argparse
import os
import platform
import sys
import time

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--repeats", type=int, default=10)
parser.add_argument("--threads", type=int, default=None,
                    help="BLAS/torch threads for both libraries (default: each library's own)")
ARGS = parser.parse_args()
if ARGS.threads:  # must be set before NumPy loads its BLAS
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402
from autograd import grad  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minattn as ma  # noqa: E402


def median_time(f, repeats):
    f()  # warm-up: first-call allocations, BLAS thread start-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def block_flops(b, length, d_model, d_ff):
    # Multiply-adds x 2: four D x D projections, scores and weights @ V, the two FFN products.
    tokens = b * length
    return 2 * (4 * tokens * d_model * d_model + 2 * b * length * length * d_model
                + 2 * tokens * d_model * d_ff)


def matmul_peak(repeats):
    a = np.random.default_rng(0).normal(size=(2048, 2048)).astype(np.float32)
    t = median_time(lambda: a @ a, repeats)
    return 2 * 2048**3 / t


def minattn_block(b, length, d_model, n_heads, d_ff, repeats):
    rng = np.random.default_rng(0)
    params = ma.init_encoder_block(rng, d_model, n_heads, d_ff)
    cast = lambda t: {k: cast(v) for k, v in t.items()} if isinstance(t, dict) else t.astype(np.float32)
    params = cast(params)
    x = rng.normal(size=(b, length, d_model)).astype(np.float32)
    forward = lambda: ma.encoder_block(params, x, n_heads=n_heads)
    loss = lambda p, x: np.sum(ma.encoder_block(p, x, n_heads=n_heads))
    gradient = lambda: grad(loss)(params, x)
    return params, x, median_time(forward, repeats), median_time(gradient, repeats)


def torch_block(params, x, n_heads, repeats):
    import torch

    d_model = x.shape[-1]
    d_ff = params["feed_forward"]["w_1"].shape[1]
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True)
    with torch.no_grad():  # the same weights, torch's [out, in] layout
        a = params["attention"]
        layer.self_attn.in_proj_weight.copy_(torch.from_numpy(
            np.concatenate([a["w_q"].T, a["w_k"].T, a["w_v"].T])))
        layer.self_attn.in_proj_bias.copy_(torch.from_numpy(np.concatenate([a["b_q"], a["b_k"], a["b_v"]])))
        layer.self_attn.out_proj.weight.copy_(torch.from_numpy(a["w_o"].T.copy()))
        layer.self_attn.out_proj.bias.copy_(torch.from_numpy(a["b_o"]))
        f = params["feed_forward"]
        layer.linear1.weight.copy_(torch.from_numpy(f["w_1"].T.copy()))
        layer.linear1.bias.copy_(torch.from_numpy(f["b_1"]))
        layer.linear2.weight.copy_(torch.from_numpy(f["w_2"].T.copy()))
        layer.linear2.bias.copy_(torch.from_numpy(f["b_2"]))
    layer.eval()
    xt = torch.from_numpy(x)
    with torch.no_grad():
        out = layer(xt).numpy()
    ours = ma.encoder_block(params, x, n_heads=n_heads)
    err = float(np.abs(out - ours).max())

    def forward():
        with torch.no_grad():
            layer(xt)

    def forward_backward():
        layer.zero_grad(set_to_none=True)
        xg = xt.clone().requires_grad_(True)
        layer(xg).sum().backward()

    return median_time(forward, repeats), median_time(forward_backward, repeats), err


def main(args=ARGS):
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}, "
          f"python {platform.python_version()}")
    peak = matmul_peak(args.repeats)
    print(f"NumPy float32 matmul peak (2048^3): {peak / 1e9:.1f} GFLOP/s")

    print("\nminattn encoder block, float32 (forward / gradient of a scalar loss):")
    print(f"{'B':>4} {'L':>5} {'D':>5} {'H':>3} {'F':>5} {'forward ms':>11} {'gradient ms':>12}")
    for b, length, d_model, n_heads, d_ff in [(8, 64, 128, 4, 512), (16, 128, 256, 4, 1024)]:
        _, _, fwd, grd = minattn_block(b, length, d_model, n_heads, d_ff, args.repeats)
        print(f"{b:>4} {length:>5} {d_model:>5} {n_heads:>3} {d_ff:>5} {fwd * 1e3:>11.1f} "
              f"{grd * 1e3:>12.1f}")

    size = (32, 128, 512, 8, 2048)
    params, x, fwd, grd = minattn_block(*size, args.repeats)
    share = block_flops(size[0], size[1], size[2], size[4]) / fwd / peak
    print("\nB=32, L=128, d_model=512, 8 heads, d_ff=2048, float32:")
    print(f"  minattn forward  {fwd * 1e3:8.1f} ms   ({100 * share:.0f}% of the matmul peak)")
    print(f"  minattn gradient {grd * 1e3:8.1f} ms")
    try:
        import torch
    except ImportError:
        print("  torch not installed: no comparison (pip install torch==2.13.0)")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    t_fwd, t_fb, err = torch_block(params, x, size[3], args.repeats)
    print(f"  torch {torch.__version__} ({torch.get_num_threads()} threads): forward {t_fwd * 1e3:.1f} ms, "
          f"forward+backward {t_fb * 1e3:.1f} ms; max |minattn - torch| = {err:.1e}")
    print(f"  forward ratio  minattn / torch: {fwd / t_fwd:.2f}  (target <= 1.1)")
    print(f"  gradient ratio minattn / torch: {grd / t_fb:.2f}  (target <= 1.25)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
