"""One LoRA fine-tuning step on minattn against torch + PEFT: SmolLM2-135M's shapes, the same
weights, the same threads, float32, batch 8 x 128 tokens, rank 8 on q and v.

    python benchmarks/bench_finetune.py [--rounds 3] [--batch 8] [--length 128] [--threads 2]
                                        [--busy 1]    beside N CPU-bound processes
    python benchmarks/bench_finetune.py --profile     where minattn's step goes: the forward
                                                      pass, the value and gradient, each
                                                      operation's VJP timed
    python benchmarks/bench_finetune.py --floor       the step's matrix products alone, in
                                                      NumPy as minattn's step splits them and
                                                      in torch, beside both steps

(with minattn, torch, transformers and peft installed; from the repository root with
PYTHONPATH=.)

transformers' LlamaForCausalLM is built from a LlamaConfig with SmolLM2-135M-Instruct's shapes
(30 layers, d_model 576, 9 heads sharing 3 KV heads of 64, SwiGLU 1536, vocabulary 49,152,
tied embeddings, RoPE base 100,000) and random weights, its default sdpa attention;
minattn.interop.from_hf copies the same weights into minattn. Then a LoRA of rank 8, alpha 16,
on q_proj and v_proj, the same A (B zero) on both sides: PEFT's get_peft_model, minattn.lora.
A step, on random tokens with every next token counted:
- PEFT: model(ids, labels=ids).loss (transformers' shifted cross-entropy), backward,
  clip_grad_norm_(1.0), torch.optim.AdamW.step, zero_grad;
- minattn: the value and gradient of the summed cross-entropy (minattn/training/losses.py
  lm_loss_sum: the unembedding fused with the loss) with respect to the LoRA tree's leaves, as
  training/loop.py takes them, clip_by_global_norm(1.0), adamw_update (training/optimizer.py).
Timed interleaved, round by round (benchmarks/_harness.py); torch and NumPy's BLAS on --threads
threads. Beside the step, minattn's forward alone (causal_lm with the LoRA, no gradient) and
PEFT's (under torch.no_grad), to say how much of the step the backward pass takes.

Peak memory: each side's step in a child process of its own, which builds only its model (random
weights of the same shapes), takes one step to warm up, then reports the peak resident memory of
a second step above the resident memory before the first (Linux: /proc/self/status's VmHWM,
reset through /proc/self/clear_refs, against VmRSS): the activations the backward pass keeps,
the gradients, the optimizer's moments, the logits, and what the allocator kept from the first
step. (Until 2026-11-28 13:45 UTC it was measured from the second step's start, which left out
the heaps glibc keeps per worker thread once minattn split a step over them.)
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _harness import busy, describe, footer, header, interleaved, profile_step, ratio  # noqa: E402

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, head_dim=64, rms_norm_eps=1e-5,
               rope_theta=100000.0, max_position_embeddings=8192, tie_word_embeddings=True,
               hidden_act="silu")
RANK, ALPHA, LR = 8, 16.0, 1e-4


def torch_model(seed=0):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(**SMOLLM2)
    return transformers.LlamaForCausalLM(config).float()


def peft_step(model):
    import peft
    import torch

    lora = peft.get_peft_model(model, peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0,
                                                      target_modules=["q_proj", "v_proj"]))
    trainable = [p for p in lora.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=LR, weight_decay=0.0)

    def step(ids):
        ids = torch.from_numpy(ids)
        loss = lora(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        optimizer.zero_grad()
        return float(loss.detach())

    def forward(ids):
        with torch.no_grad():
            return lora(input_ids=torch.from_numpy(ids)).logits

    return lora, step, forward


def minattn_step(params, config, lora):
    import minattn as ma
    from minattn.engine.autograd_rules import value_and_grad_by_leaf
    from minattn.training.loop import accumulated
    from minattn.training.losses import lm_loss_sum
    from minattn.training.optimizer import adamw_init, adamw_update, clip_by_global_norm

    def forward(trainable, tokens, rng, logits_to_keep=None, unembed=None):
        return ma.causal_lm(params, tokens, lora={"alpha": lora["alpha"], "layers": trainable},
                            logits_to_keep=logits_to_keep, unembed=unembed, **config)

    loss_sum = lm_loss_sum(forward)
    loss_and_grad = value_and_grad_by_leaf(loss_sum)
    state = {"lora": lora["layers"], "adam": adamw_init(lora["layers"])}  # alpha is not trained

    def step(ids):
        batch = (ids[:, :-1], ids[:, 1:], np.ones(ids[:, 1:].shape, dtype=bool))
        loss, grads = accumulated(loss_and_grad, state["lora"], [batch], [None])
        grads, _ = clip_by_global_norm(grads, 1.0)
        state["lora"], state["adam"] = adamw_update(state["lora"], grads, state["adam"], lr=LR,
                                                    weight_decay=0.0)
        return loss

    return step, lambda ids: forward(state["lora"], ids, None), loss_sum


def same_lora(peft_model, n_layers):
    # PEFT's A (lora_A.weight [r, d_in]) as minattn's [d_in, r]; B zero on both sides.
    names = {"q": "q_proj", "v": "v_proj"}
    modules = dict(peft_model.named_modules())
    layers = []
    for i in range(n_layers):
        layer = {}
        for target, name in names.items():
            module = modules[f"base_model.model.model.layers.{i}.self_attn.{name}"]
            a = module.lora_A["default"].weight.detach().numpy().T.copy()
            b = module.lora_B["default"].weight.detach().numpy().T.copy()
            layer[target] = {"A": a, "B": b}
        layers.append(layer)
    return {"alpha": ALPHA, "layers": layers}


def tokens(batch, length, seed=1):
    return np.random.default_rng(seed).integers(0, SMOLLM2["vocab_size"], size=(batch, length))


def threads(n):
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(n)
    return threadpool_limits(limits=n, user_api="blas")


def build():
    from minattn.interop import from_hf
    import minattn.lora  # noqa: F401  (causal_lm's lora= variant)

    model = torch_model()
    params, config = from_hf(model)
    peft_model, peft, peft_forward = peft_step(model)
    lora = same_lora(peft_model, SMOLLM2["num_hidden_layers"])
    step, forward, loss_sum = minattn_step(params, config, lora)
    return step, forward, peft, peft_forward, (loss_sum, lora["layers"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0,
                        help="CPU-bound processes running beside the timed rounds")
    parser.add_argument("--profile", action="store_true",
                        help="time minattn's recorded forward and each backward operation")
    parser.add_argument("--floor", action="store_true",
                        help="the step's products alone, NumPy and torch, beside both steps")
    parser.add_argument("--memory-child", choices=("minattn", "peft"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        return memory_child(args)
    header(args.busy)
    ids = tokens(args.batch, args.length)
    with threads(args.threads):
        step, forward, peft, peft_forward, (loss_sum, lora) = build()
        first = (step(ids), peft(ids))
        print(f"SmolLM2 shapes, random weights, float32, batch {args.batch} x {args.length} "
              f"tokens, LoRA rank {RANK} on q and v, {args.threads} threads; first step's loss: "
              f"minattn {first[0]:.6f}, PEFT {first[1]:.6f}")
        if args.profile:
            return profile(loss_sum, lora, ids)
        if args.floor:
            return floor(step, peft, ids, args)
        with busy(args.busy):
            times = interleaved({"minattn step": lambda: step(ids), "PEFT step": lambda: peft(ids),
                                 "minattn forward": lambda: forward(ids),
                                 "PEFT forward": lambda: peft_forward(ids)}, args.rounds)
    print("| | minattn | torch + PEFT | ratio |")
    print("|---|---|---|---|")
    for what in ("step", "forward"):
        print(f"| {what} | {describe(times['minattn ' + what])} | "
              f"{describe(times['PEFT ' + what])} | "
              f"{ratio(times['minattn ' + what], times['PEFT ' + what])} |")
    memory = {side: child_peak(side, args) for side in ("minattn", "peft")}
    print(f"| step's peak memory above the model | {memory['minattn']:.0f} MiB | "
          f"{memory['peft']:.0f} MiB | {memory['minattn'] / memory['peft']:.2f} |")
    footer()


def products(batch, length, library):
    """-> a function making the matrix products of one LoRA step of SmolLM2's shapes, nothing
    else, on random float32 arrays: each of a layer's 7 frozen weights forward and backward
    (y = x W, dx = dy Wᵀ), the LoRA's 4 small products forward and 4 backward for q and for v,
    the attention's products (Q Kᵀ and P V; backwards Q Kᵀ recomputed, dO Vᵀ, dS K, dSᵀ Q,
    Pᵀ dO) for 9 query heads on 3 KV heads, 30 layers; then the unembedding forward and d_h,
    of every token but the last. library "numpy": the batch's rows in pieces on worker threads,
    one BLAS thread each, as minattn's step splits them (training/loop.py: one piece per thread
    in force); "torch": all rows at once on torch's threads, as PEFT's."""
    d, f, kv, r, v_size, heads, groups, d_k = 576, 1536, 192, RANK, 49152, 3, 3, 64
    n = length - 1
    shapes = [(d, d), (d, kv), (d, kv), (d, d), (d, f), (d, f), (f, d)]
    rng = np.random.default_rng(0)
    weights = [rng.random(s, dtype=np.float32) for s in shapes]
    lora = [rng.random(s, dtype=np.float32) for s in ((d, r), (r, d), (d, r), (r, kv))]
    table = rng.random((v_size, d), dtype=np.float32)

    def rows(b):  # -> the products of b rows of the batch, in `xp` (NumPy or torch)
        x = {w.shape[0]: rng.random((b * n, w.shape[0]), dtype=np.float32) for w in weights}
        g = {w.shape[1]: rng.random((b * n, w.shape[1]), dtype=np.float32) for w in weights}
        small = rng.random((b * n, r), dtype=np.float32)
        q = rng.random((b, heads, groups, n, d_k), dtype=np.float32)
        k = rng.random((b, heads, 1, n, d_k), dtype=np.float32)
        p = rng.random((b, heads, groups, n, n), dtype=np.float32)
        logits = np.empty((b * n, v_size), np.float32)
        arrays = (x, g, small, q, k, p, logits)
        return arrays if library == "numpy" else _as_torch(arrays)

    def layer_products(arrays, ws, ls, unembedding):
        x, g, small, q, k, p, logits = arrays
        kt = k.swapaxes(-1, -2)
        for _ in range(30):
            for w in ws:
                x[w.shape[0]] @ w, g[w.shape[1]] @ w.T  # forward, and dx backward
            for a, b in zip(ls[::2], ls[1::2]):  # LoRA: x A, (x A) B; back: dB, d(xA), dA, dx
                x[d] @ a, small @ b, small.T @ g[b.shape[1]], g[b.shape[1]] @ b.T
                x[d].T @ small, small @ a.T
            q @ kt, p @ k, q @ kt, p @ k  # forward: S, P V; backward: S again, dO Vᵀ
            p @ k, p.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ q  # dS K, dSᵀ Q, Pᵀ dO
        h, chunk = x[d], max(1, 2 ** 23 // v_size)
        for start in range(0, h.shape[0], chunk):
            part = logits[start:start + chunk]
            part[...] = h[start:start + chunk] @ unembedding
            part @ unembedding.T

    if library == "numpy":  # the rows in pieces as the step splits them, read now
        from minattn.engine.threads import on_workers, row_pieces

        parts = [rows(p.stop - p.start) for p in row_pieces(table, batch)]
        return lambda: on_workers(lambda a: layer_products(a, weights, lora, table.T), parts)
    import torch

    whole = rows(batch)
    ws, ls, unembedding = _as_torch(weights), _as_torch(lora), torch.from_numpy(table).T

    def in_torch():
        with torch.no_grad():
            layer_products(whole, ws, ls, unembedding)

    return in_torch


def _as_torch(tree):
    import torch

    if isinstance(tree, dict):
        return {key: _as_torch(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_as_torch(value) for value in tree)
    return torch.from_numpy(tree)


def floor(step, peft, ids, args):
    """The step's products alone (products()), in NumPy as minattn's step runs them and in
    torch, interleaved with both steps: what a NumPy step cannot go below here, and how much of
    PEFT's step torch's products take."""
    work = {"minattn step": lambda: step(ids), "PEFT step": lambda: peft(ids),
            "NumPy products": products(args.batch, args.length, "numpy"),
            "torch products": products(args.batch, args.length, "torch")}
    with busy(args.busy):
        times = interleaved(work, args.rounds)
    print("| | median (IQR) | / PEFT step, per round |")
    print("|---|---|---|")
    for name, seconds in times.items():
        print(f"| {name} | {describe(seconds)} | {ratio(seconds, times['PEFT step'])} |")
    print(f"minattn step / NumPy products: {ratio(times['minattn step'], times['NumPy products'])}"
          f"; PEFT step / torch products: {ratio(times['PEFT step'], times['torch products'])}")
    footer()


def child_peak(side, args):
    command = [sys.executable, os.path.abspath(__file__), "--memory-child", side, "--batch",
               str(args.batch), "--length", str(args.length), "--threads", str(args.threads)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_mib"]


def memory_child(args):
    # One side's model only, random weights of SmolLM2's shapes; the resident memory once the
    # model is built, then a warm-up step, then the peak during the measured step. Measured
    # from before the warm-up, not from the measured step's start: memory the warm-up freed but
    # the allocator kept (glibc keeps a heap per worker thread) is the process's all the same.
    ids = tokens(args.batch, args.length)
    with threads(args.threads):
        if args.memory_child == "peft":
            _, step, _ = peft_step(torch_model())
        else:
            import minattn as ma
            import minattn.lora

            params, config = ma.init_causal_lm(
                np.random.default_rng(0), SMOLLM2["vocab_size"], 30, 576, 9, 1536,
                position="rope", norm="rms_norm", activation="swiglu", bias=False,
                n_kv_heads=3, dtype=np.float32)
            config = {**config, "rope_base": 100000.0}
            lora = minattn.lora.init_lora(np.random.default_rng(0), params, rank=RANK)
            step, _, _ = minattn_step(params, config, lora)
        before = _status_mib("VmRSS")
        step(ids)
        with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) reset to the present
            f.write("5")
        step(ids)
        peak = _status_mib("VmHWM")
    print(json.dumps({"peak_mib": peak - before}))


def _status_mib(field):
    # Linux's /proc/self/status: VmRSS (resident now), VmHWM (its peak since the last reset)
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def profile(loss_sum, lora, ids):
    # where a step goes, by autograd's nodes (_harness.profile_step)
    batch = (ids[:, :-1], ids[:, 1:], np.ones(ids[:, 1:].shape, dtype=bool))
    profile_step(loss_sum, (lora, batch, None))
    footer()


if __name__ == "__main__":
    main()
