"""Exact recall of an arbitrary earlier token: softmax attention against a delta-rule state of
the same head size (walkthrough.md, "What a state costs, and what it cannot do"). Not a test:
an experiment whose output the walkthrough quotes.

One head, d_k = d_v = 32. A sequence writes L key-value pairs (random unit keys, random unit
values); then each of 200 queries asks for the value of one earlier token by presenting its
key. Softmax attention keeps every key and value (a cache of 64 L numbers) and reads
softmax(q Kᵀ · 50) V; the delta rule (β = 1, no decay: its best case for recall) folds them
into one [32, 32] state S and reads q S; linear attention (the same state, sums only) reads
q Σ kᵀ v. A query counts as recalled when its output is nearer (in cosine) to the asked value
than to every other of the L values. Printed: the fraction recalled and the mean cosine to the
asked value, over 5 sequences per L; and, for the two states, the fraction recalled when the
16 queries ask for the last 16 tokens, one each (a recurrent state remembers the recent past
best).
Usage: PYTHONPATH=. python docs/recall.py [seed]
"""
import sys

import numpy as np

import minattn as ma

D, QUERIES, TRIALS, SHARPNESS, RECENT = 32, 200, 5, 50.0, 16


def recall(read, values, asked):
    # -> (fraction recalled, mean cosine to the asked value) of outputs read [Q, d_v]
    read = read / np.maximum(np.linalg.norm(read, axis=-1, keepdims=True), 1e-30)
    cosines = read @ values.T  # [Q, L]: values are unit rows
    return (np.mean(np.argmax(cosines, axis=-1) == asked),
            np.mean(cosines[np.arange(len(asked)), asked]))


def trial(rng, length):
    keys = ma.l2_normalize(rng.normal(size=(length, D)), eps=0.0)
    values = ma.l2_normalize(rng.normal(size=(length, D)), eps=0.0)
    asked = rng.integers(0, length, size=QUERIES)
    queries = keys[asked]  # [Q, d_k]: "what came with this key?"
    softmax_read, _ = ma.scaled_dot_product_attention(queries, keys, values, scale=SHARPNESS)
    _, state = ma.delta_rule(keys, keys, values, np.ones(length), scale=1.0, return_state=True)
    summed = keys.T @ values  # linear attention's state after the L tokens, [d_k, d_v]
    results = [[*recall(read, values, asked), np.nan]
               for read in (softmax_read, queries @ state, queries @ summed)]
    recent = np.arange(max(0, length - RECENT), length)  # the last 16 tokens, each asked once
    for result, s in zip(results[1:], (state, summed)):  # read q S from either state
        result[2] = recall(keys[recent] @ s, values, recent)[0]
    return results


def main(seed=0):
    rng = np.random.default_rng(seed)
    print(f"one head, d_k = d_v = {D}; {QUERIES} queries x {TRIALS} sequences per length; "
          "recalled: the fraction of queries answered nearest to the asked value; cos: the "
          "mean cosine of the output to it")
    print(f"{'L':>6}  {'softmax attention':>18}  {'delta rule (32x32)':>18}  "
          f"{'linear attn (32x32)':>19}   recalled, last {RECENT}: delta  linear")
    for length in (8, 16, 32, 64, 128, 256, 1024):
        results = np.mean([trial(rng, length) for _ in range(TRIALS)], axis=0)  # [3, 3]
        print(f"{length:>6}  " + "  ".join(f"{r:>7.0%} cos {c:5.2f}  " for r, c, _ in results)
              + f"{results[1, 2]:>25.0%}  {results[2, 2]:>6.0%}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
