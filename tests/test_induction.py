"""The induction model: its data, its scores (against hand-built attention), its ablation, and a
short training run that grows an induction head (a smaller config than the CLI's default, so
that the test stays cheap; the default is measured in the walkthrough)."""
import numpy as np
import pytest

from minattn.models import induction as ind
from minattn.attention import softmax


def test_repeated_blocks_are_distinct_tokens_then_the_same_again():
    tokens = ind.make_repeated_blocks(np.random.default_rng(0), 5, 7, vocab_size=20)
    assert tokens.shape == (5, 14)
    np.testing.assert_array_equal(tokens[:, :7], tokens[:, 7:])
    assert all(len(set(row[:7])) == 7 for row in tokens)


def test_induction_score_is_one_for_attention_to_the_token_after_the_previous_occurrence():
    block = 5
    weights = np.zeros((2, 3, 2 * block, 2 * block))  # [N, H, L, L]
    for i in range(2 * block):
        weights[:, 0, i, i] = 1.0  # head 0: attends to itself
        weights[:, 1, i, max(i - 1, 0)] = 1.0  # head 1: previous token
        weights[:, 2, i, i - block + 1 if i >= block else 0] = 1.0  # head 2: induction
    np.testing.assert_allclose(ind.induction_scores(weights), [0.0, 0.0, 1.0])
    # head 2 looks back at position 0 from the first block: previous-token only from i = 1
    np.testing.assert_allclose(ind.previous_token_scores(weights), [0.0, 1.0, 1 / 9])


def test_induction_score_of_uniform_causal_attention_is_the_mean_of_one_over_i_plus_one():
    block = 4
    weights = np.tril(np.ones((2 * block, 2 * block)))
    weights = (weights / weights.sum(-1, keepdims=True))[None, None]  # [1, 1, L, L]
    expected = np.mean([1.0 / (i + 1) for i in range(block, 2 * block)])
    np.testing.assert_allclose(ind.induction_scores(weights), [expected])


def test_ablating_a_head_removes_exactly_its_share_of_the_layer_output():
    rng = np.random.default_rng(1)
    params = ind.init_induction_model(rng, vocab_size=10, n_positions=8, d_model=8, n_heads=2,
                                      n_layers=1)
    tokens = rng.integers(0, 10, size=(2, 8))
    ablated = ind.ablate_head(params, 0, 1, n_heads=2)
    # Reference, written out: the head's output is its weights @ v, read by its rows of w_o.
    layer = params["layers"][0]
    x = params["embedding"][tokens] + params["positions"][:8]
    q, k, v = (x @ layer[f"w_{p}"][:, 4:] for p in "qkv")  # head 1: columns 4..7
    weights = softmax(q @ np.swapaxes(k, -1, -2) / 2.0, mask=np.tril(np.ones((8, 8), bool)))
    head_out = weights @ v @ layer["w_o"][4:]  # [N, L, D]
    difference = (ind.induction_model(params, tokens, n_heads=2)
                  - ind.induction_model(ablated, tokens, n_heads=2))
    np.testing.assert_allclose(difference, head_out @ params["unembedding"], atol=1e-10)
    assert np.all(params["layers"][0]["w_o"][4:] != 0)  # the input params are not changed


def test_half_losses_split_the_first_block_from_the_repeat():
    params = ind.init_induction_model(np.random.default_rng(2), vocab_size=10, n_positions=8,
                                      d_model=8, n_heads=2, n_layers=1)
    tokens = ind.make_repeated_blocks(np.random.default_rng(3), 4, 4, vocab_size=10)
    losses = ind.loss_per_position(params, tokens, n_heads=2)  # [7]
    first, second = ind.half_losses(params, tokens, n_heads=2)
    assert first == pytest.approx(np.mean(losses[:3]))
    assert second == pytest.approx(np.mean(losses[3:]))
    assert np.mean(losses) == pytest.approx(float(ind.next_token_loss(params, tokens, n_heads=2)))


# The CI-sized run: a smaller model on shorter blocks over a smaller vocabulary, trained for 600
# steps (about 20 s; the CLI's default run takes minutes, its numbers are in walkthrough.md).
SMALL = {"vocab_size": 16, "block_lengths": (4, 8), "d_model": 32, "n_heads": 2}


@pytest.fixture(scope="module")
def trained():
    params = ind.train_induction_model(seed=0, steps=600, **SMALL)
    data = {"block": 6, "vocab_size": SMALL["vocab_size"], "n_heads": SMALL["n_heads"]}
    report, _, _ = ind.evaluate(params, **data)
    return params, report, ind.ablation_report(params, **data)


def test_training_grows_an_induction_head_in_the_last_layer(trained):
    _, report, _ = trained
    assert max(report["induction_scores"][-1]) >= 0.4


def test_the_repeat_costs_less_than_half_the_first_block(trained):
    _, report, _ = trained
    assert report["loss_second_half"] < 0.5 * report["loss_first_half"]


def test_ablating_the_induction_heads_destroys_the_in_context_gain(trained):
    _, report, ablation = trained
    off = ablation["induction_heads_ablated"]
    assert ablation["induction_heads"]
    assert off["loss_second_half"] > 0.6 * off["loss_first_half"]
    assert off["loss_second_half"] > 4 * report["loss_second_half"]


def test_the_induction_command_writes_the_promised_json_and_both_figures(tmp_path, capsys):
    import json

    from minattn import cli

    assert cli.induction.INDUCTION_STEPS == ind.STEPS  # --help's default is the model's
    path, figure = tmp_path / "run.json", tmp_path / "heads.png"
    assert cli.main(["induction", "--steps", "3", "--json", str(path), "--plot", str(figure)]) == 0
    out = capsys.readouterr().out
    run = json.loads(path.read_text())
    assert {"induction_scores", "previous_token_scores", "loss_first_half", "loss_second_half",
            "steps", "seconds"} <= set(run)
    assert np.shape(run["induction_scores"]) == np.shape(run["previous_token_scores"]) == (2, 4)
    assert run["steps"] == 3 and run["seconds"] > 0
    if figure.exists():  # matplotlib installed
        curve = tmp_path / "heads-curve.png"
        assert curve.read_bytes()[:4] == b"\x89PNG"
        assert f"to {figure} and the training curve to {curve}" in out
    assert "loss on the repeat" in out and "fastest fall" in out and "K-composition" in out


def _committed(name):
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "docs" / "figures" / name
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_committed_default_run_shows_what_the_walkthrough_says():
    # docs/figures/induction.json: `python -m minattn induction` with the defaults, seed 0.
    run = _committed("induction.json")
    assert run["steps"] == ind.STEPS
    assert max(run["induction_scores"][-1]) >= 0.4
    assert run["loss_second_half"] < 0.5 * run["loss_first_half"]
    off = run["ablation"]["induction_heads_ablated"]
    assert off["loss_second_half"] > 0.6 * off["loss_first_half"]
    one_layer = _committed("induction_one_layer.json")
    assert max(one_layer["induction_scores"][-1]) < 0.4
    assert one_layer["loss_second_half"] > 0.5 * one_layer["loss_first_half"]


@pytest.mark.skipif(not __import__("os").environ.get("MINATTN_SLOW"),
                    reason="the default run takes minutes: set MINATTN_SLOW=1 to run it")
def test_the_default_run_reproduces_the_committed_numbers():
    params = ind.train_induction_model(seed=0)
    report, _, _ = ind.evaluate(params, n_heads=ind.CONFIG["n_heads"])
    run = _committed("induction.json")
    np.testing.assert_allclose(report["induction_scores"], run["induction_scores"], atol=0.02)
    assert report["loss_second_half"] == pytest.approx(run["loss_second_half"], abs=0.02)
