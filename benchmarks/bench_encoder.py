"""Speed of the encoder block: minattn (NumPy + autograd) against PyTorch's CPU
TransformerEncoderLayer with the same weights, measured in the same run.

    python benchmarks/bench_encoder.py               # B=32 L=128 D=512 H=8 F=2048, float32
    python benchmarks/bench_encoder.py --busy 2      # while two CPU-bound processes compete
    python benchmarks/bench_encoder.py --threads 1   # both libraries single-threaded

minattn's forward and autograd gradient (of a scalar loss) against torch's eval forward and
forward + backward, and the block's matrix products alone (the floor), interleaved round by
round; medians with their IQR, per-round ratios, the load average before and after.
"""
import argparse
import os
import sys

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--repeats", type=int, default=15, help="interleaved rounds (default 15)")
parser.add_argument("--busy", type=int, default=0, help="competing CPU-bound processes to run")
parser.add_argument("--threads", type=int, default=None,
                    help="BLAS/torch threads for both libraries (default: each library's own)")
ARGS = parser.parse_args()
if ARGS.threads:  # must be set before NumPy loads its BLAS
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402
from autograd import grad  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
import minattn as ma  # noqa: E402


def torch_functions(params, x, n_heads):
    import torch

    d_model = x.shape[-1]
    d_ff = params["feed_forward"]["w_1"].shape[1]
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True)
    with torch.no_grad():  # the same weights, torch's [out, in] layout
        a = params["self_attention"]
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

    return forward, forward_backward, err


def floor_products(params, x, n_heads):
    # The block's matrix products alone, in NumPy, with the same shapes: the cost below which
    # no NumPy implementation of the block can go.
    a, f = params["self_attention"], params["feed_forward"]
    b, length, d_model = x.shape
    d_k = d_model // n_heads
    tokens = x.reshape(-1, d_model)
    q = np.ascontiguousarray((tokens @ a["w_q"]).reshape(b, length, n_heads, d_k).transpose(0, 2, 1, 3))
    k = np.ascontiguousarray(q.swapaxes(-1, -2))

    def products():
        for w in ("w_q", "w_k", "w_v", "w_o"):
            tokens @ a[w]
        scores = q @ k  # [B, H, L, L]
        scores @ q  # weights @ V
        (tokens @ f["w_1"]) @ f["w_2"]

    return products


def gradient_floor_products(params, x, n_heads):
    # The matrix products of minattn's gradient (the forward's, then the backward's), alone:
    # for each projection dW = xᵀ g, and dx = g Wᵀ where x needs a gradient (not for the block's
    # own input, which grad(loss)(params, x) does not differentiate); for the attention core
    # dP = dO Vᵀ, dQ = dS K, dK = dSᵀ Q, dV = Pᵀ dO, on one BLAS thread as minattn runs them.
    from minattn.engine.threads import one_blas_thread

    a, f = params["self_attention"], params["feed_forward"]
    b, length, d_model = x.shape
    d_k = d_model // n_heads
    tokens = x.reshape(-1, d_model)
    hidden = tokens @ f["w_1"]
    q = np.ascontiguousarray((tokens @ a["w_q"]).reshape(b, length, n_heads, d_k).transpose(0, 2, 1, 3))
    p = q @ q.swapaxes(-1, -2)  # stands in for the weights [B, H, L, L]

    def products():
        for w in ("w_q", "w_k", "w_v", "w_o"):
            tokens @ a[w]  # forward
            tokens.T @ tokens  # dW = xᵀ g (an [N, D] g stands in for the real one)
        tokens @ a["w_o"].T  # dx of the output projection
        (tokens @ f["w_1"]) @ f["w_2"]  # forward
        hidden.T @ tokens, tokens @ f["w_2"].T  # dW_2, dx of the second layer
        tokens.T @ hidden, hidden @ f["w_1"].T  # dW_1, dx of the first layer
        with one_blas_thread():
            (q @ q.swapaxes(-1, -2)) @ q  # forward: scores, weights @ V
            q @ q.swapaxes(-1, -2), p @ q, p.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ q

    return products


def main(args=ARGS):
    from _harness import busy, describe, footer, header, interleaved, ratio

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    size = (32, 128, 512, 8, 2048)
    b, length, d_model, n_heads, d_ff = size
    rng = np.random.default_rng(0)
    cast = lambda t: {k: cast(v) for k, v in t.items()} if isinstance(t, dict) else t.astype(np.float32)
    params = cast(ma.init_encoder_block(rng, d_model, n_heads, d_ff))
    x = rng.normal(size=(b, length, d_model)).astype(np.float32)
    loss = lambda p, x: np.sum(ma.encoder_block(p, x, n_heads=n_heads))
    t_fwd, t_fb, err = torch_functions(params, x, n_heads)
    header(args.busy)
    print(f"encoder block, float32, B={b} L={length} D={d_model} H={n_heads} F={d_ff}; torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads); max |minattn - torch| = {err:.1e}")
    with busy(args.busy):
        times = interleaved({
            "minattn forward": lambda: ma.encoder_block(params, x, n_heads=n_heads),
            "torch forward": t_fwd,
            "minattn gradient": lambda: grad(loss)(params, x),
            "torch forward+backward": t_fb,
            "matmul floor": floor_products(params, x, n_heads),
            "gradient matmul floor": gradient_floor_products(params, x, n_heads),
        }, args.repeats)
    for name, seconds in times.items():
        print(f"  {name:<24}{describe(seconds)}")
    print(f"  forward ratio minattn / torch:  {ratio(times['minattn forward'], times['torch forward'])}")
    print(f"  gradient ratio minattn / torch: {ratio(times['minattn gradient'], times['torch forward+backward'])}")
    print(f"  minattn forward / matmul floor: {ratio(times['minattn forward'], times['matmul floor'])}")
    print(f"  minattn gradient / its matmul floor: "
          f"{ratio(times['minattn gradient'], times['gradient matmul floor'])}")
    footer()
    return 0


if __name__ == "__main__":
    sys.exit(main())
