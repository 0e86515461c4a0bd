"""StreamingLLM on a tiny trained model: the loss and the attention past the cache's window,
with and without the first tokens kept (walkthrough.md, "Attention sinks"). Not a test: an
experiment whose output the walkthrough quotes.

A 2-layer RoPE language model (D = 32, 2 heads, SwiGLU, RMSNorm) learns a random bigram chain
over tokens 1..15 from sequences of 32 tokens that start with token 0 (BOS). It then reads 128
tokens one at a time through the KV cache, pruned after each step by
minattn.sinks.streaming_cache. For each policy it prints the mean loss over the tokens past
position 32 and, over the same steps, the mean attention weight each head of each layer puts
on the cache's first slot (the BOS token when the first tokens are kept or nothing is dropped,
the oldest recent token when they are not) and on the first n_sink slots together; and, for
reference, the full cache's weight on BOS within the 32 positions the model was trained on.
Usage: PYTHONPATH=. python docs/streaming_llm.py [steps] [seed]
"""
import sys

import autograd.numpy as np
from autograd import value_and_grad

import minattn as ma
from minattn.loss import cross_entropy
from minattn.sinks import streaming_cache
from minattn.training.optimizer import adamw_init, adamw_update

V, BOS, LENGTH = 16, 0, 32
CONFIG = {"n_heads": 2, "norm": "rms_norm", "activation": "swiglu", "position": "rope"}


def sample(rng, chain, n, length):
    # int [n, length]: BOS, then a walk of the chain (chain[a - 1] the next-token law after a).
    tokens = [np.full(n, BOS), rng.integers(1, V, size=n)]
    for _ in range(length - 2):
        u = rng.random((n, 1))
        cdf = np.cumsum(chain[tokens[-1] - 1], axis=1)
        tokens.append(1 + np.minimum(np.sum(cdf < u, axis=1), V - 2))
    return np.stack(tokens, axis=1)


def train(rng, chain, steps):
    params, _ = ma.init_causal_lm(rng, V, 2, 32, 2, 64, position="rope", norm="rms_norm",
                                  activation="swiglu", bias=False, tied=False)
    loss = lambda p, x: cross_entropy(ma.causal_lm(p, x[:, :-1], **CONFIG), x[:, 1:])
    state, loss_and_grad = adamw_init(params), value_and_grad(loss)
    for _ in range(steps):
        _, grads = loss_and_grad(params, sample(rng, chain, 32, LENGTH + 1))
        params, state = adamw_update(params, grads, state, lr=1e-2, weight_decay=0.0)  # Adam
    return params


def streaming_losses(params, tokens, n_sink, window):
    # -> ([B, L - 1]: the loss of each next token, read one token a step through a pruned cache;
    # a list over the steps of each layer's weights [B, H, L_k] of the token read, over the
    # cache it was given and itself). The weights are recorded by swapping a spy in for
    # scaled_dot_product_attention, which each layer calls once a step, in order.
    cache, losses, rows, calls = None, [], [], []
    attend = ma.scaled_dot_product_attention

    def spy(*args, **kwargs):
        out, weights = attend(*args, **kwargs)
        calls.append(weights)  # [B, H_kv, G, 1, L_k]: one query, H = H_kv G heads
        return out, weights

    with ma.swap(scaled_dot_product_attention=spy):
        for t in range(tokens.shape[1] - 1):
            logits, cache = ma.causal_lm(params, tokens[:, t:t + 1], cache=cache,
                                         return_cache=True, **CONFIG)
            rows.append([np.reshape(w, (tokens.shape[0], -1, w.shape[-1])) for w in calls])
            calls.clear()
            cache = streaming_cache(cache, n_sink=n_sink, window=window, rope_base=10000.0)
            z = logits[:, -1] - np.max(logits[:, -1], axis=-1, keepdims=True)
            log_p = z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
            losses.append(-log_p[np.arange(tokens.shape[0]), tokens[:, t + 1]])
    return np.stack(losses, axis=1), rows


def entropy_rate(chain):
    # The chain's entropy per token, in nats: each state's next-token entropy, weighted by how
    # often a long walk visits that state (the stationary distribution pi, pi = pi chain).
    eigenvalues, eigenvectors = np.linalg.eig(chain.T)
    pi = np.real(eigenvectors[:, np.argmin(np.abs(eigenvalues - 1))])
    pi = pi / pi.sum()
    return -np.sum(pi * np.sum(chain * np.log(chain), axis=1))


def heads(values):
    return ", ".join(f"{v:.4f}" for v in values)


def main(steps=300, seed=0):
    rng = np.random.default_rng(seed)
    chain = rng.dirichlet(np.full(V - 1, 0.3), size=V - 1)
    params = train(rng, chain, steps)
    print(f"seed {seed}, {steps} steps; the chain's entropy rate {entropy_rate(chain):.4f} nats "
          "a token (the least loss any model can reach on long walks)")
    tokens = sample(np.random.default_rng(seed + 100), chain, 64, 129)
    for n_sink, window in [(0, 16), (1, 15), (4, 12), (0, 128)]:
        losses, rows = streaming_losses(params, tokens, n_sink, window)
        print(f"n_sink={n_sink:d} window={window:3d}: mean loss past position {LENGTH}: "
              f"{losses[:, LENGTH:].mean():.4f}")
        for layer in range(len(rows[0])):
            past = [step[layer] for step in rows[LENGTH:]]  # the steps whose loss is averaged
            first = np.mean([w[:, :, 0] for w in past], axis=(0, 1))  # [H]
            print(f"  layer {layer}: mean weight on the cache's first slot, per head: "
                  f"{heads(first)}"
                  + (f"; on its first {n_sink}: "
                     f"{heads(np.mean([w[:, :, :n_sink].sum(-1) for w in past], axis=(0, 1)))}"
                     if n_sink > 1 else ""))
            if window == 128:
                trained = np.mean([step[layer][:, :, 0] for step in rows[1:LENGTH]], axis=(0, 1))
                print(f"  layer {layer}: the weight on BOS at positions 1..{LENGTH - 1}, per "
                      f"head: {heads(trained)}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
