"""What exercise 7, the feed-forward network (section 6), is held to: the properties its command
grades it by, each against a slow float64 reference:
    python -m minattn check my_attention/07_feed_forward.py
"""
import math

import numpy as np
from hypothesis import strategies as st

import minattn

from ._machinery import (
    as_dtype, check_draws, check_dropout, check_seeds, close, floats, prop, random_params,
    seeds, show, sizes)
from ._references import ref_feed_forward


def check_feed_forward(data, activations):
    d = data.draw(st.integers(1, 4), "D")
    p = random_params(data.draw(seeds, "params seed"), d)["feed_forward"]
    lead = data.draw(st.sampled_from([(2, data.draw(sizes, "L")), (3,), ()]), "leading axes")
    x = data.draw(floats(lead + (d,)), "x")
    for activation in activations:  # every one, in every example
        got = minattn.feed_forward(p, x) if activation is None else \
            minattn.feed_forward(p, x, activation=activation)
        close(got, ref_feed_forward(p, x, activation or "relu"), 1e-8,
              f"feed_forward(params, x, activation={activation!r})")


@prop("feed_forward_matches_the_formula", "feed_forward", "feed_forward(params, x) = relu(x w_1 + "
      "b_1) w_2 + b_2 for every token of x [..., D] (any leading axes, none included)",
      {"feed_forward"}, "the activation goes between the two linear maps, on the hidden width F")
def _(data):
    check_feed_forward(data, (None, "relu"))


@prop("feed_forward_takes_gelu", "feed_forward", "feed_forward(params, x, activation=a) = "
      "a(x w_1 + b_1) w_2 + b_2 for gelu and gelu_tanh too, float32 kept", {"feed_forward"},
      "check which activation was asked for; np.vectorize(math.erf) and NumPy float64 scalars "
      "return float64: cast back to x.dtype", part=4)
def _(data):
    check_feed_forward(data, ("gelu", "gelu_tanh"))
    p = as_dtype(random_params(data.draw(seeds, "params seed"), 3)["feed_forward"], np.float32)
    x = data.draw(floats((1, data.draw(sizes, "L"), 3), dtype=np.float32), "float32 x")
    for activation in ("gelu", "gelu_tanh"):
        out = np.asarray(minattn.feed_forward(p, x, activation=activation))
        assert out.dtype == np.float32, f"float32 in, {out.dtype} out ({activation})"


@prop("feed_forward_dropout_is_unbiased", "feed_forward", "with dropout=p and an rng, the output "
      "averaged over many tokens equals the output without dropout (inverted dropout rescales "
      "the kept units by 1 / (1 - p)), and the rng's seed alone decides what is dropped",
      {"feed_forward"}, "drop hidden units with the rng given and scale the kept ones by "
      "1 / (1 - p): the expected output must not change", part=4)
def _(data):
    d = data.draw(st.integers(2, 4), "D")
    p = random_params(data.draw(seeds, "params seed"), d, d_ff=8)["feed_forward"]
    token = data.draw(floats((d,), bound=2.0), "x (one token, repeated 4000 times)")
    rate = data.draw(st.sampled_from([0.5, 0.3]), "dropout")
    x = np.tile(token, (4000, 1))
    run = lambda rng: np.asarray(minattn.feed_forward(p, x, activation="gelu", dropout=rate, rng=rng))
    got = run(np.random.default_rng(0))
    expected = ref_feed_forward(p, token, "gelu")
    error = np.abs(got.mean(axis=0) - expected)
    spread = got.std(axis=0) / math.sqrt(len(x)) + 1e-9
    assert (error < 6 * spread).all() and got.std(axis=0).max() > 0, (
        f"the mean output over 4000 copies of one token with dropout={rate} is "
        f"{show(got.mean(axis=0))}, without dropout {show(expected)} (more than 6 standard errors "
        "apart, or no dropout at all)")
    check_seeds(lambda rng: run(rng)[:8], "the output")


@prop("feed_forward_drops_hidden_units", "feed_forward", "with dropout=p, each token's output is "
      "act(x w_1 + b_1) ⊙ m / (1 - p) w_2 + b_2 for some 0/1 mask m over the F hidden units: "
      "dropout acts on the hidden layer, after the activation, not on the input or the output; "
      "dropout=1 drops every unit (the output is b_2)",
      {"feed_forward"},
      "drop the hidden units h = act(x @ w_1 + b_1): np.where(keep, h / (1 - p), 0) with keep of "
      "h's shape, THEN @ w_2 + b_2; dropping the output instead keeps the mean but not the form; "
      "np.where(keep, h / (1 - p), 0), not h * keep / (1 - p), which is 0 / 0 = NaN at p = 1",
      part=4)
def _(data):
    d = data.draw(st.integers(1, 3), "D")
    p = random_params(data.draw(seeds, "params seed"), d, d_ff=3)["feed_forward"]
    x = data.draw(floats((8, d), bound=2.0), "x")
    rate = data.draw(st.sampled_from([0.5, 0.25]), "dropout")
    activation = data.draw(st.sampled_from(["relu", "gelu"]), "activation")
    got = np.asarray(minattn.feed_forward(p, x, activation=activation, dropout=rate,
                                          rng=np.random.default_rng(0)))
    hidden = ref_feed_forward({**p, "w_2": np.eye(3), "b_2": np.zeros(3)}, x, activation)
    masks = np.array(list(np.ndindex(2, 2, 2)), float)  # every 0/1 mask of the 3 hidden units
    outs = (hidden[:, None, :] * masks[None] / (1 - rate)) @ p["w_2"] + p["b_2"]  # [8, 8 masks, D]
    assert got.shape == x.shape, f"the output has shape {got.shape}, expected {x.shape}"
    every = np.asarray(minattn.feed_forward(p, x, activation=activation, dropout=1.0,
                                            rng=np.random.default_rng(0)))
    close(every, np.broadcast_to(p["b_2"], x.shape), 0, "the output with dropout=1.0 (every "
          "hidden unit dropped: b_2, never 0 / 0)")
    for t in range(len(x)):
        assert np.isclose(outs[t], got[t], rtol=1e-7, atol=1e-9).all(axis=-1).any(), (
            f"token {t}'s output {show(got[t])} is not act(x w_1 + b_1) ⊙ m / (1 - {rate}) w_2 + "
            f"b_2 for any 0/1 mask m of the hidden units (without dropout it is "
            f"{show(ref_feed_forward(p, x[t], activation))}): is dropout applied somewhere else "
            "than to the hidden units?")


@prop("feed_forward_dropout_draws_one_p_per_unit", "feed_forward", "with dropout=p each hidden "
      "unit of each token is dropped on its own with probability p: on x [2, 500, 8] with F = 8 "
      "hidden units (w_1 = w_2 = I, b_1 = 1, b_2 = 0, so the output shows the units), a fraction "
      "1 - p of the 8000 units is kept (each divided by 1 - p), and no two batch entries, tokens "
      "or units share their draws (Hoeffding's bound for a failure probability of 1e-9, at the "
      "fixed seed and any other)", {"feed_forward"},
      "p is the probability of dropping a unit, and every unit of every token is an independent "
      "draw", part=4)
def _(data):
    rate = data.draw(st.sampled_from([0.25, 0.4]), "dropout")
    p = {"w_1": np.eye(8), "b_1": np.ones(8), "w_2": np.eye(8), "b_2": np.zeros(8)}
    x = np.ones((2, 500, 8))  # every hidden unit is relu(1 + 1) = 2
    got = np.asarray(minattn.feed_forward(p, x, dropout=rate,
                                          rng=np.random.default_rng(data.draw(seeds, "seed"))))
    assert got.shape == x.shape, f"the output has shape {got.shape}, expected {x.shape}"
    check_dropout(got, np.full(x.shape, 2.0), rate, "the hidden units (the output)")
    check_draws(got != 0, rate, {0: "batch entries", 1: "tokens", 2: "hidden units"},
                "the hidden units")


@prop("feed_forward_keeps_float32", "feed_forward", "the feed-forward network on float32 inputs "
      "and params returns float32", {"feed_forward"},
      "a NumPy float64 scalar or a float64 array created inside upcasts float32")
def _(data):
    p = as_dtype(random_params(data.draw(seeds, "params seed"), 3)["feed_forward"], np.float32)
    x = data.draw(floats((1, data.draw(sizes, "L"), 3), dtype=np.float32), "x")
    out = np.asarray(minattn.feed_forward(p, x))
    assert out.dtype == np.float32, f"float32 in, {out.dtype} out"
