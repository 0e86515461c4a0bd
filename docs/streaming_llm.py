"""StreamingLLM on a tiny trained model: the loss past the cache's window, with and without the
first tokens kept (walkthrough.md, "Attention sinks"). Not a test: an experiment whose output
the walkthrough quotes.

A 2-layer RoPE language model (D = 32, 2 heads, SwiGLU, RMSNorm) learns a random bigram chain
over tokens 1..15 from sequences of 32 tokens that start with token 0 (BOS). It then reads 128
tokens one at a time through the KV cache, pruned after each step by
minattn.sinks.streaming_cache, and the mean loss over the tokens past position 32 is printed for
each policy. Usage: PYTHONPATH=. python docs/streaming_llm.py [steps] [seed]
"""
import sys

import autograd.numpy as np
from autograd import value_and_grad

import minattn as ma
from minattn.models.count_task import adam_init, adam_update, cross_entropy
from minattn.sinks import streaming_cache

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
    state, loss_and_grad = adam_init(params), value_and_grad(loss)
    for _ in range(steps):
        _, grads = loss_and_grad(params, sample(rng, chain, 32, LENGTH + 1))
        params, state = adam_update(params, grads, state, lr=1e-2)
    return params


def streaming_losses(params, tokens, n_sink, window):
    # -> [B, L - 1]: the loss of each next token, read one token a step through a pruned cache.
    cache, losses = None, []
    for t in range(tokens.shape[1] - 1):
        logits, cache = ma.causal_lm(params, tokens[:, t:t + 1], cache=cache, return_cache=True,
                                     **CONFIG)
        cache = streaming_cache(cache, n_sink=n_sink, window=window, rope_base=10000.0)
        z = logits[:, -1] - np.max(logits[:, -1], axis=-1, keepdims=True)
        log_p = z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))
        losses.append(-log_p[np.arange(tokens.shape[0]), tokens[:, t + 1]])
    return np.stack(losses, axis=1)


def main(steps=300, seed=0):
    rng = np.random.default_rng(seed)
    chain = rng.dirichlet(np.full(V - 1, 0.3), size=V - 1)
    params = train(rng, chain, steps)
    entropy = -np.mean(np.sum(chain * np.log(chain), axis=1))
    print(f"seed {seed}, {steps} steps; the chain's mean entropy {entropy:.4f} nats")
    tokens = sample(np.random.default_rng(seed + 100), chain, 64, 129)
    for n_sink, window in [(0, 16), (1, 15), (4, 12), (0, 128)]:
        loss = streaming_losses(params, tokens, n_sink, window)[:, LENGTH:].mean()
        print(f"n_sink={n_sink:d} window={window:3d}: mean loss past position {LENGTH}: "
              f"{loss:.4f}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
