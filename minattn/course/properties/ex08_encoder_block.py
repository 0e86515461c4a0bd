"""What exercise 8, the encoder block (section 6), is held to: the properties its command grades it
by, each against a slow float64 reference:
    python -m minattn check my_attention/08_encoder_block.py
"""
import numpy as np
from hypothesis import strategies as st

import minattn

from .. import contract
from ._machinery import (
    BLOCK, as_dtype, check_dropout, check_seeds, close, floats, prop, random_params, seeds,
    show, sizes)
from ._references import ref_encoder_block, ref_layer_norm
from .ex05_multi_head_attention import draw_mask, ref_output_of_weights


@prop("encoder_block_matches_the_paper", "encoder_block", "encoder_block is x = "
      "self_attention_norm(x + self_attention(x)), then feed_forward_norm(x + feed_forward(x)) "
      "(post-norm); with norm_first=True x + self_attention(self_attention_norm(x)), then "
      "x + feed_forward(feed_forward_norm(x)) (pre-norm), for one sequence [L, D] or a batch "
      "[B, L, D]; the mask (causal [L, L], padding [B, 1, 1, L], both) reaches the attention, "
      "and eps both norms", BLOCK,
      "each sublayer's output is ADDED to its input (the residual), the norm sits after the add "
      "(post-norm) or before the sublayer (pre-norm); pass mask, n_heads and eps on")
def _(data):
    check_encoder_block(data, later=False)


@prop("encoder_block_returns_weights_and_passes_activation_on", "encoder_block", "with "
      "return_weights=True encoder_block returns its attention's weights beside the output, and "
      "activation reaches the feed-forward network", BLOCK,
      "return the weights of the attention whose output the block used; pass activation on",
      part=4)
def _(data):
    check_encoder_block(data, later=True)


def check_encoder_block(data, later):
    # later: the second reading's options too (an activation drawn, return_weights=True)
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model = n_heads * data.draw(st.integers(1, 3), "d_k")
    length = data.draw(sizes, "L")
    activation = data.draw(st.sampled_from(["relu", "gelu", "gelu_tanh"]), "activation") \
        if later else "relu"
    drawn = data.draw(st.sampled_from([0.5, 1e-5]), "eps")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    batch = data.draw(st.sampled_from([(1,), (2,), ()]), "batch shape")
    x = data.draw(floats(batch + (length, d_model)), "x") * \
        data.draw(st.sampled_from([1.0, 0.1]), "x scaled by")
    if batch:
        mask, keep = draw_mask(data, batch[0], length, length)
    else:  # one sequence [L, D], under a causal mask
        mask = np.tril(np.ones((length, length), bool))
        keep = lambda b: mask  # noqa: E731
        data.show("mask", mask)
    # both norms, and eps=0 too when every row of x varies (eps=0 is refused on a constant row)
    for norm_first, eps in [(False, drawn), (True, drawn)] + (
            [(False, 0.0), (True, 0.0)] if (np.ptp(x, axis=-1) > 0).all() else []):
        options = dict(activation=activation, return_weights=True) if later else {}
        got = minattn.encoder_block(p, x, mask, n_heads=n_heads, norm_first=norm_first, eps=eps,
                                    **options)
        got, weights = (np.asarray(a) for a in got) if later else (np.asarray(got), None)
        assert got.shape == x.shape, f"output {got.shape}, expected {x.shape}"
        assert not later or weights.shape == batch + (n_heads, length, length), (
            f"weights {weights.shape}, expected {batch + (n_heads, length, length)}")
        for b in range(batch[0] if batch else 1):
            at = (b,) if batch else ()
            ref_out, ref_w = ref_encoder_block(p, x[at], n_heads, keep(b), norm_first, eps,
                                               activation)
            close(got[at], ref_out, 1e-7, f"encoder_block (norm_first={norm_first}, eps={eps}), "
                                          f"batch entry {b}")
            if later:
                close(weights[at], ref_w, 1e-7, "the attention weights (return_weights=True, "
                                                f"norm_first={norm_first}), batch entry {b}")
        if later:
            plain = minattn.encoder_block(p, x, mask, n_heads=n_heads, norm_first=norm_first,
                                          activation=activation, eps=eps)
            close(plain, got, 0, "encoder_block without return_weights (the output alone)")


@prop("encoder_block_passes_dropout_on", "encoder_block", "with dropout=p and an rng, the "
      "attention weights (return_weights=True) are 0 or their value without dropout / (1 - p), "
      "the rng's seed alone decides the output, and dropout and rng reach multi_head_attention "
      "and feed_forward (when the block calls them)", BLOCK,
      "pass dropout and rng on to multi_head_attention and feed_forward", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model, length = 2 * n_heads, data.draw(st.integers(3, 5), "L")
    norm_first = data.draw(st.sampled_from([True, False]), "norm_first")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    x = data.draw(floats((length, d_model)), "x")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    block = lambda rng: minattn.encoder_block(p, x[None], n_heads=n_heads, norm_first=norm_first,
                                              dropout=rate, rng=rng, return_weights=True)
    calls = []  # what the block passes to the parts it calls through minattn (if it does)

    def spy(name):
        inner = getattr(minattn, name)

        def spying(*args, **kwargs):
            if not contract.calling_again():  # the grader's second calls get copies of the rng
                calls.append((name, kwargs.get("dropout", 0.0), kwargs.get("rng")))
            return inner(*args, **kwargs)
        return spying
    rng = np.random.default_rng(0)
    with minattn.swap(multi_head_attention=spy("multi_head_attention"),
                      feed_forward=spy("feed_forward")):
        _, weights = block(rng)
    for name, rate_given, rng_given in calls:
        assert rate_given == rate and rng_given is rng, (
            f"encoder_block(..., dropout={rate}, rng=rng) called {name} with dropout={rate_given}, "
            f"rng={'the rng given' if rng_given is rng else rng_given!r}")
    check_dropout(np.asarray(weights)[0], ref_encoder_block(p, x, n_heads, None, norm_first)[1],
                  rate, "the attention weights")
    check_seeds(lambda rng: np.asarray(block(rng)[0]), "the output")


@prop("encoder_block_keeps_dropout_off_the_residual_path", "encoder_block", "dropout acts inside "
      "the sublayers (and on their outputs), never on the residual path: with sublayers whose "
      "output is zero (w_o, b_o, w_2, b_2 all 0), the block with dropout returns exactly what it "
      "returns without (x for pre-norm, the two norms of x for post-norm)", BLOCK,
      "drop the sublayer's output before adding it to x: x + dropout(sublayer(x)); never "
      "dropout(x + sublayer(x)), and never the block's output", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model, length = 2 * n_heads, data.draw(st.integers(2, 5), "L")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    zero = lambda a: np.zeros_like(a)
    p = {**p, "self_attention": {**p["self_attention"], "w_o": zero(p["self_attention"]["w_o"]),
                                 "b_o": zero(p["self_attention"]["b_o"])},
         "feed_forward": {**p["feed_forward"], "w_2": zero(p["feed_forward"]["w_2"]),
                          "b_2": zero(p["feed_forward"]["b_2"])}}
    x = data.draw(floats((length, d_model)), "x")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    for norm_first in (False, True):
        got = minattn.encoder_block(p, x[None], n_heads=n_heads, norm_first=norm_first,
                                    dropout=rate, rng=np.random.default_rng(0))
        close(np.asarray(got)[0], ref_encoder_block(p, x, n_heads, None, norm_first)[0], 1e-9,
              f"the block's output with dropout={rate} and sublayers that output 0 "
              f"(norm_first={norm_first})")


@prop("encoder_block_returns_the_weights_it_used", "encoder_block", "with dropout=p and "
      "return_weights=True the weights returned are the ones the block's output was computed "
      "with: with a feed-forward network that outputs 0 (w_2, b_2 all 0), each token's output is "
      "the block's formula with the attention output those weights give, reaching the residual "
      "add whole or through dropout (each feature 0 or divided by 1 - p)", BLOCK,
      "return the weights of the very attention call whose output the block adds to x: another "
      "call draws other dropout masks", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model, length = 2 * n_heads, data.draw(st.integers(3, 5), "L")
    p = random_params(data.draw(seeds, "params seed"), d_model)
    p = {**p, "feed_forward": {**p["feed_forward"], "w_2": np.zeros_like(p["feed_forward"]["w_2"]),
                               "b_2": np.zeros_like(p["feed_forward"]["b_2"])}}
    x = data.draw(floats((2, length, d_model)), "x")
    rate = data.draw(st.sampled_from([0.5, 0.4]), "dropout")
    norm = lambda h, which: ref_layer_norm(h, p[which]["gamma"], p[which]["beta"], 1e-5)  # noqa: E731
    masks = np.array(list(np.ndindex(*(2,) * d_model)), float)  # every 0/1 mask of a token's D
    for norm_first in (False, True):
        got, weights = minattn.encoder_block(p, x, n_heads=n_heads, norm_first=norm_first,
                                             dropout=rate, rng=np.random.default_rng(0),
                                             return_weights=True)
        got, weights = np.asarray(got), np.asarray(weights)
        for b in range(2):
            h = norm(x[b], "self_attention_norm") if norm_first else x[b]
            used = ref_output_of_weights(p["self_attention"], h, weights[b])  # [L, D]
            added = np.concatenate([used[:, None], used[:, None] * masks / (1 - rate)], axis=1)
            outs = x[b][:, None] + added  # [L, 1 + 2^D, D]: every way it reaches the residual
            if not norm_first:
                outs = norm(norm(outs, "self_attention_norm"), "feed_forward_norm")
            for t in range(length):
                assert np.isclose(outs[t], got[b, t], rtol=1e-7, atol=1e-9).all(axis=-1).any(), (
                    f"norm_first={norm_first}, batch entry {b}, token {t}: the output "
                    f"{show(got[b, t])} is not what the weights returned give (the attention "
                    f"output they give: {show(used[t])}): are they from another attention call "
                    "than the one whose output the block uses (or is dropout applied elsewhere "
                    "than inside the sublayers or on their outputs)?")


@prop("encoder_block_draws_each_sublayers_dropout_on_its_own", "encoder_block", "when the "
      "block drops its sublayers' outputs (as torch does; optional), each sublayer draws its own "
      "mask: with constant sublayer outputs (attention b_o = 1, feed-forward b_2 = 4, every weight "
      "w_o, w_2 zero) the pre-norm block's output minus x is, feature by feature, (1 or 0 or "
      "1 / (1 - p)) + (4 or 0 or 4 / (1 - p)), and the two sublayers' dropped features are not "
      "the same ones", BLOCK,
      "draw a new mask for each sublayer (rng.random(shape) >= p each time): one mask reused "
      "drops the same features of both", part=4)
def _(data):
    n_heads = data.draw(st.integers(1, 2), "n_heads")
    d_model = 2 * n_heads
    p = random_params(data.draw(seeds, "params seed"), d_model)
    p = {**p, "self_attention": {**p["self_attention"], "w_o": np.zeros((d_model, d_model)),
                                 "b_o": np.ones(d_model)},
         "feed_forward": {**p["feed_forward"], "w_2": np.zeros_like(p["feed_forward"]["w_2"]),
                          "b_2": np.full(d_model, 4.0)}}
    x = data.draw(floats((16, d_model)), "x")
    rate = 0.5
    got = np.asarray(minattn.encoder_block(p, x[None], n_heads=n_heads, norm_first=True,
                                           dropout=rate, rng=np.random.default_rng(0)))[0]
    added = got - x  # [L, D]: what the two sublayers added, feature by feature
    options = {(a, f): a + f for a in (1.0, 0.0, 1 / (1 - rate)) for f in (4.0, 0.0, 4 / (1 - rate))}
    attention_dropped, feed_forward_dropped = np.zeros(added.shape, bool), np.zeros(added.shape, bool)
    for index in np.ndindex(added.shape):
        found = [key for key, total in options.items() if abs(added[index] - total) < 1e-9]
        assert found, (f"token {index[0]}, feature {index[1]}: the block added {added[index]:.6g} "
                       f"to x, not (1, 0 or {1 / (1 - rate):g}) + (4, 0 or {4 / (1 - rate):g}) "
                       f"for sublayers that output 1 and 4 with dropout={rate}")
        attention_dropped[index], feed_forward_dropped[index] = found[0][0] == 0, found[0][1] == 0
    assert not (attention_dropped.any() and feed_forward_dropped.any()
                and (attention_dropped == feed_forward_dropped).all()), (
        f"the attention's and the feed-forward network's outputs are dropped at exactly the "
        f"same {attention_dropped.sum()} of {attention_dropped.size} features (each drawn on its "
        f"own, they would share about a half): one dropout mask serves both sublayers\n"
        f"dropped:\n{show(attention_dropped.astype(int))}")


@prop("encoder_block_keeps_float32", "encoder_block", "an encoder block on float32 inputs and "
      "params returns float32", BLOCK, "a float64 scalar or array created inside upcasts float32")
def _(data):
    p = as_dtype(random_params(data.draw(seeds, "params seed"), 4), np.float32)
    x = data.draw(floats((1, data.draw(sizes, "L"), 4), dtype=np.float32), "x")
    norm_first = data.draw(st.sampled_from([True, False]), "norm_first")
    out = np.asarray(minattn.encoder_block(p, x, n_heads=2, norm_first=norm_first))
    assert out.dtype == np.float32, f"got {out.dtype}"
