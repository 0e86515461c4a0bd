"""The training loop of `finetune` on a tiny random language model whose trainable tree is its
last norm and unembedding (LoRA's matrices are one more tree): accumulation equal to one big
batch, padding that changes nothing, resuming to the same bits, checkpoints that survive an
interrupted write, a NaN stopped by its step."""
import numpy as np
import pytest
from autograd import grad

import minattn as ma
from minattn.engine import trees
from minattn.training import checkpoints, losses, loop
from minattn.training.chat_data import batch

V = 11


@pytest.fixture(scope="module")
def model():
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 1, 8, 2, 12, position="rope",
                                       norm="rms_norm", activation="swiglu", bias=False,
                                       tied=False, n_kv_heads=1)
    frozen = {k: v for k, v in params.items() if k not in ("final_norm", "lm_head")}
    trainable = {"final_norm": params["final_norm"], "lm_head": params["lm_head"]}

    def forward(trainable, tokens, rng, logits_to_keep=None, unembed=None):
        # rng: noise on the final norm's gain in place of LoRA's dropout, so that the draws
        # must repeat on resuming
        if rng is not None:
            gamma = trainable["final_norm"]["gamma"]
            trainable = {**trainable, "final_norm": {
                **trainable["final_norm"], "gamma": gamma + 1e-3 * rng.normal(size=gamma.shape)}}
        return ma.causal_lm({**frozen, **trainable}, tokens, logits_to_keep=logits_to_keep,
                            unembed=unembed, **config)

    return forward, trainable


def _examples(n, seed=1):
    # Conversations of 4 to 9 tokens; the "assistant's" tokens drawn, the last one among them
    # (as several turns would give: counted runs, and gaps).
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(n):
        ids = rng.integers(1, V, size=int(rng.integers(4, 10)))
        keep = (rng.random(len(ids)) < 0.4) | (np.arange(len(ids)) == len(ids) - 1)
        examples.append((ids, keep))
    return examples


def _train(model, dropout=True, **options):
    forward, trainable = model
    if not dropout:  # the same weights draw no noise: what one batch and its parts share
        forward = (lambda f: lambda t, tokens, rng, n, **hook: f(t, tokens, None, n, **hook))(
            forward)
    settings = dict(steps=4, batch_size=2, pad_id=0, lr=0.05, seed=3, warmup=1,
                    weight_decay=0.01, max_grad_norm=1.0)
    return loop.train(losses.lm_loss_sum(forward), trainable, _examples(7), **{**settings,
                                                                           **options})


def _nll_by_loop(forward, trainable, examples):
    # The reference: each example alone, unpadded, its assistant tokens' -log p summed.
    total, count = 0.0, 0
    for ids, keep in examples:
        logits = forward(trainable, ids[None, :-1], None)[0]  # [L - 1, V]
        log_p = logits - np.log(np.sum(np.exp(logits - logits.max(-1, keepdims=True)), -1,
                                       keepdims=True)) - logits.max(-1, keepdims=True)
        for t in range(len(ids) - 1):
            if keep[t + 1]:
                total, count = total - log_p[t, ids[t + 1]], count + 1
    return total / count


def test_the_loss_of_a_padded_batch_is_each_example_alone(model):
    forward, trainable = model
    examples = _examples(5)
    loss_sum = losses.lm_loss_sum(forward)
    padded = batch(examples, pad_id=0)
    value = float(loss_sum(trainable, padded, None)) / int(padded[2].sum())
    assert value == pytest.approx(_nll_by_loop(forward, trainable, examples), rel=1e-12)
    assert loop.evaluate(loss_sum, trainable, examples, batch_size=2, pad_id=0) == \
        pytest.approx(_nll_by_loop(forward, trainable, examples), rel=1e-12)


def test_the_counted_loss_and_its_gradient_by_hand_are_cross_entropys():
    # The reference: minattn's cross_entropy of the counted positions' logits, times their
    # number, differentiated by autograd; and finite differences.
    from autograd.test_util import check_grads

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3, 4, V)) * 3
    targets = rng.integers(0, V, size=(3, 4))
    counted = rng.random((3, 4)) < 0.5
    counted[0, 0] = True

    def reference(x):
        return ma.cross_entropy(x[counted], targets[counted]) * int(counted.sum())

    assert losses.counted_nll_sum(logits, targets, counted) == pytest.approx(reference(logits),
                                                                           rel=1e-13)
    np.testing.assert_allclose(grad(lambda x: losses.counted_nll_sum(x, targets, counted))(logits),
                               grad(reference)(logits), rtol=1e-12, atol=1e-15)
    check_grads(lambda x: losses.counted_nll_sum(x, targets, counted), modes=["rev"],
                order=1)(logits)


def test_the_counted_loss_keeps_float32():
    logits = np.zeros((1, 2, V), np.float32)
    g = grad(lambda x: losses.counted_nll_sum(x, np.array([[1, 2]]), np.array([[True, False]])))(
        logits)
    assert g.dtype == np.float32 and not g[0, 1].any()


def test_accumulated_micro_batches_give_the_gradient_of_one_big_batch(model):
    forward, trainable = model
    examples = _examples(6)
    loss_sum = losses.lm_loss_sum(forward)
    from autograd import value_and_grad

    parts = [batch(examples[:1], 0), batch(examples[1:4], 0), batch(examples[4:], 0)]
    loss, grads = loop.accumulated(value_and_grad(loss_sum), trainable, parts, [None] * 3)
    big = batch(examples, 0)
    count = int(big[2].sum())
    expected = grad(lambda t: loss_sum(t, big, None) / count)(trainable)
    assert loss == pytest.approx(_nll_by_loop(forward, trainable, examples), rel=1e-12)
    for (path, g), (_, e) in zip(trees.paths(grads), trees.paths(expected)):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-14, err_msg=str(path))


def test_a_run_with_accumulation_takes_the_steps_of_the_big_batch(model):
    # Micro-batches k*2 .. of size 2, two a step, are the examples of batches of 4.
    a = _train(model, dropout=False, batch_size=4)
    b = _train(model, dropout=False, batch_size=2, accumulation=2)
    np.testing.assert_allclose(a["losses"], b["losses"], rtol=1e-10)
    np.testing.assert_allclose(a["trainable"]["lm_head"], b["trainable"]["lm_head"], rtol=1e-9)


def test_every_pass_shows_each_example_once():
    seen = [loop.micro_batch(7, 3, seed=5, k=k) for k in range(7)]  # 21 positions: 3 passes
    flat = [i for part in seen for i in part]
    for p in range(3):
        assert sorted(flat[7 * p:7 * (p + 1)]) == list(range(7))
    assert flat[:7] != flat[7:14]  # each pass its own order


def test_training_is_deterministic_for_a_seed(model):
    a, b, c = _train(model), _train(model), _train(model, seed=4)
    assert a["losses"] == b["losses"]
    np.testing.assert_array_equal(a["trainable"]["lm_head"], b["trainable"]["lm_head"])
    assert a["losses"] != c["losses"]


def test_a_resumed_run_ends_with_the_same_bits(model, tmp_path):
    # Ctrl-C after step 3 saves; resumed from the checkpoint, the run ends where the
    # uninterrupted one did, to the last bit: weights, AdamW's moments, losses.
    whole = _train(model, steps=5)

    def interrupt(step, loss, n_tokens):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _train(model, steps=5, out=tmp_path, callback=interrupt)
    saved = checkpoints.load_checkpoint(tmp_path)
    assert saved["step"] == 3
    resumed = _train(model, steps=5, state=saved)
    assert resumed["losses"] == whole["losses"]
    for tree in ("trainable", "adam"):
        for a, b in zip(trees.paths(whole[tree]), trees.paths(resumed[tree])):
            assert a[0] == b[0]
            np.testing.assert_array_equal(a[1], b[1])


def test_an_interrupted_write_leaves_the_last_checkpoint_whole(model, tmp_path, monkeypatch):
    first = _train(model, steps=2, out=tmp_path)
    before = (tmp_path / checkpoints.CHECKPOINT).read_bytes()

    def cut(file, **arrays):
        file.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints.np, "savez", cut)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save_checkpoint(tmp_path, {**first, "step": 3})
    assert (tmp_path / checkpoints.CHECKPOINT).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [checkpoints.CHECKPOINT]
    monkeypatch.undo()
    np.testing.assert_array_equal(checkpoints.load_checkpoint(tmp_path)["trainable"]["lm_head"],
                                  first["trainable"]["lm_head"])


def test_a_nan_loss_stops_at_its_step_and_keeps_the_last_good_checkpoint(model, tmp_path):
    forward, trainable = model
    done = []  # the steps finished (a step may call the model once per piece of its rows)

    def poisoned(trainable, tokens, rng, logits_to_keep, unembed=None):
        out = forward(trainable, tokens, rng, logits_to_keep, unembed)  # the loss: fused
        return out * np.nan if len(done) >= 3 else out  # step 4: NaN

    with pytest.raises(loop.NonFinite, match="at step 4"):
        loop.train(losses.lm_loss_sum(poisoned), trainable, _examples(7), steps=6, batch_size=2,
                   pad_id=0, lr=0.05, out=tmp_path, every=1,
                   callback=lambda step, loss, n: done.append(step))
    assert checkpoints.load_checkpoint(tmp_path)["step"] == 3


@pytest.mark.parametrize("poisoned_step", [2, 4])  # a checkpoint's step, the last step
def test_weights_an_update_makes_nan_stop_the_run_before_any_checkpoint_holds_them(
        model, tmp_path, monkeypatch, poisoned_step):
    forward, trainable = model
    update, steps = loop.adamw_update, []

    def poisoned(params, grads, state, **kwargs):  # the update of poisoned_step: one NaN weight
        steps.append(1)
        new, state = update(params, grads, state, **kwargs)
        if len(steps) == poisoned_step:
            new = {**new, "lm_head": new["lm_head"].copy()}
            new["lm_head"][0, 0] = np.nan
        return new, state

    monkeypatch.setattr(loop, "adamw_update", poisoned)
    with pytest.raises(loop.NonFinite, match=f"weights became NaN or infinite at step "
                                             f"{poisoned_step}"):
        loop.train(losses.lm_loss_sum(forward), trainable, _examples(7), steps=4, batch_size=2,
                   pad_id=0, lr=0.05, out=tmp_path, every=2)
    saved = checkpoints.load_checkpoint(tmp_path) if poisoned_step == 4 else None
    assert (saved["step"] == 2 and np.isfinite(saved["trainable"]["lm_head"]).all()) \
        if saved else not (tmp_path / checkpoints.CHECKPOINT).exists()


@pytest.fixture(scope="module")
def tied_lora_model():
    # A tied embedding with an unembedding bias, LoRA on q and v with B drawn (not zero), so
    # that every adapter's gradient is non-zero.
    import minattn.lora

    rng = np.random.default_rng(4)
    params, config = ma.init_causal_lm(rng, V, 2, 8, 2, 12, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False, n_kv_heads=1)
    params["lm_head_bias"] = rng.normal(size=V)
    lora = minattn.lora.init_lora(rng, params, rank=2)
    for layer in lora["layers"]:
        for pair in layer.values():
            pair["B"] = rng.normal(size=pair["B"].shape)

    def forward(trainable, tokens, rng, logits_to_keep=None, unembed=None):
        return ma.causal_lm(params, tokens, lora={"alpha": 16, "layers": trainable},
                            logits_to_keep=logits_to_keep,
                            unembed=unembed, **config)

    return forward, lora["layers"], config, params


def test_the_fused_loss_and_its_lora_gradient_equal_the_logits_then_the_loss(tied_lora_model):
    # The reference: the logits of every unembedded position, then counted_nll_sum (held to
    # cross_entropy above), differentiated by autograd; float64.
    forward, lora, _, _ = tied_lora_model
    padded = batch(_examples(4, seed=2), pad_id=0)
    fused, plain = losses.lm_loss_sum(forward), losses.lm_loss_sum(forward, fused=False)
    assert float(fused(lora, padded, None)) == pytest.approx(float(plain(lora, padded, None)),
                                                             rel=1e-13)
    for (path, g), (_, e) in zip(trees.paths(grad(fused)(lora, padded, None)),
                                 trees.paths(grad(plain)(lora, padded, None))):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-13, err_msg=str(path))


def test_soft_capped_logits_take_the_unfused_loss_by_name(tied_lora_model):
    # Gemma 2 caps the logits after the unembedding: the fused loss would leave the cap out, so
    # the model refuses the unembed= hook, and fusable() sends it the unfused way.
    import minattn.families.gemma  # noqa: F401  (final_logit_softcapping's variant)

    _, lora, config, params = tied_lora_model
    capped = {**config, "final_logit_softcapping": 5.0}
    with pytest.raises(ValueError, match="final_logit_softcapping caps the logits, which "
                                         "unembed= replaces"):
        ma.causal_lm(params, np.array([[1, 2]]), unembed=lambda p, h: h, **capped)
    assert not losses.fusable(capped) and losses.fusable(config)

    def forward(trainable, tokens, rng, logits_to_keep=None, unembed=None):
        return ma.causal_lm(params, tokens, lora={"alpha": 16, "layers": trainable},
                            logits_to_keep=logits_to_keep,
                            unembed=unembed, **capped)

    examples = _examples(4, seed=2)
    padded = batch(examples, pad_id=0)
    loss_sum = losses.lm_loss_sum(forward, fused=losses.fusable(capped))
    assert float(loss_sum(lora, padded, None)) / int(padded[2].sum()) == pytest.approx(
        _nll_by_loop(forward, lora, examples), rel=1e-12)
