"""What the heads of a real model do, against transformers loading the same GGUF (SmolLM2-135M-
Instruct), in float64: head_scores against the attention weights of output_attentions=True
(eager attention), causal_lm's head_mask against transformers with a forward pre-hook on o_proj
that scales each head's slice of its input, in_context_loss against torch's cross-entropy.

The reference: transformers' float64 Llama keeps float32 islands (RMSNorm, the rotary tables,
the eager softmax), lifted to float64 as tests/test_language_model.py lifts them (every float32
request answered in float64: tests/float64_peers.py), checked against the stock eager model at
float32 tolerance. Each model is loaded once (about 10 s each); the
sequences are short (12 random tokens, then the same 12; batch 2), the whole 30 layers."""
import numpy as np
import pytest

import contextlib

from tests.test_language_model import GGUF  # its import skips without the extras

import minattn as ma  # noqa: E402
from minattn.pretrained import (ablation_mask, head_scores, in_context_loss,  # noqa: E402
                                load_language_model, repeated_random_tokens)
from minattn.models.heads_of_a_model import attention_weights, random_heads, top_heads  # noqa: E402

from .float64_peers import float64_throughout  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

N, BATCH = 12, 2
MASK = {(0, 0): 0.0, (17, 4): 0.0, (18, 6): 0.0, (29, 8): 0.0, (5, 3): 0.5, (23, 7): 2.0}


@pytest.fixture(scope="module")
def model():
    return load_language_model(dtype=np.float64)


@pytest.fixture(scope="module")
def hf_model():
    with float64_throughout():  # (its rotary tables made in float64)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            GGUF.parent, gguf_file=GGUF.name, dtype=torch.float64, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="module")
def tokens(model):
    return repeated_random_tokens(model, np.random.default_rng(0), N, BATCH)  # [2, 40]


@pytest.fixture(scope="module")
def head_mask():
    mask = np.ones((30, 9))
    for (layer, head), scale in MASK.items():  # zeros ablate; any other scale works too
        mask[layer, head] = scale
    return mask


def _hf_run(hf_model, tokens, head_mask=None, lifted=True):
    # -> (logits [B, L, V], attention weights n_layers of [B, H, L, L])
    with float64_throughout() if lifted else contextlib.nullcontext():
        out = _hf_forward(hf_model, tokens, head_mask)
    return out.logits.numpy(), [a.numpy() for a in out.attentions]


@pytest.fixture(scope="module")
def hf_intact(hf_model, tokens):
    return _hf_run(hf_model, tokens)


@pytest.fixture(scope="module")
def hf_weights(hf_intact):
    return hf_intact[1]


@pytest.fixture(scope="module")
def hf_ablated(hf_model, tokens, head_mask):
    return _hf_run(hf_model, tokens, head_mask)[0]


def _hf_forward(hf_model, tokens, head_mask=None):
    # head_mask [n_layers, H]: each head's slice of o_proj's input (the heads' outputs side by
    # side, [B, L, H * d_k]) scaled by its entry, by a forward pre-hook on every o_proj.
    hooks = []
    if head_mask is not None:
        for layer, scale in zip(hf_model.model.layers, torch.tensor(head_mask)):
            def pre_hook(module, args, scale=scale):
                (x,) = args
                heads = x.reshape(*x.shape[:-1], len(scale), -1)  # [B, L, H, d_k]
                return ((heads * scale[:, None]).reshape(x.shape),)
            hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(pre_hook))
    try:
        with torch.no_grad():
            t = torch.tensor(tokens)
            return hf_model(t, attention_mask=torch.ones_like(t), output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()


def test_the_float64_eager_reference_is_stock_eager_at_float32_tolerance(hf_model, tokens,
                                                                         hf_weights):
    stock_weights = _hf_run(hf_model, tokens, lifted=False)[1]
    gaps = [np.abs(a - b).max() for a, b in zip(hf_weights, stock_weights)]
    assert max(gaps) < 1e-4 and max(gaps) > 0  # the same weights, and the islands were lifted


def test_repeated_random_tokens_repeat_and_avoid_special_tokens(model, tokens):
    assert tokens.shape == (BATCH, 2 * N) and np.array_equal(tokens[:, :N], tokens[:, N:])
    special = [i for i, t in model.tokenizer.backend.get_added_tokens_decoder().items()
               if t.special]
    assert special == list(range(17))  # SmolLM2's <|endoftext|>, <|im_start|>, ...
    assert tokens.min() >= 17 and tokens.max() < 49152
    again = repeated_random_tokens(model, np.random.default_rng(0), N, BATCH)
    assert np.array_equal(tokens, again)  # the Generator decides everything


def test_attention_weights_equal_transformers_output_attentions(model, tokens, hf_weights):
    _, weights = attention_weights(model, tokens)
    assert len(weights) == 30 and weights[0].shape == (BATCH, 9, 2 * N, 2 * N)
    for ours, theirs in zip(weights, hf_weights):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10)


def test_head_scores_equal_a_loop_over_transformers_weights(model, tokens, hf_weights):
    scores = head_scores(model, tokens)
    previous = np.zeros((30, 9))
    induction = np.zeros((30, 9))
    for layer, w in enumerate(hf_weights):  # [B, H, 2N, 2N]
        for head in range(9):
            previous[layer, head] = np.mean([w[b, head, t, t - 1] for b in range(BATCH)
                                             for t in range(1, 2 * N)])
            induction[layer, head] = np.mean([w[b, head, t, t - N + 1] for b in range(BATCH)
                                              for t in range(N, 2 * N)])
    np.testing.assert_allclose(scores["previous_token"], previous, rtol=0, atol=1e-12)
    np.testing.assert_allclose(scores["induction"], induction, rtol=0, atol=1e-12)
    assert scores["induction"].max() > 0.5  # SmolLM2 has induction heads: the test can fail


def test_head_mask_equals_scaling_o_proj_inputs_in_transformers(model, tokens, head_mask,
                                                                  hf_intact, hf_ablated):
    ours = ma.causal_lm(model.params, tokens, head_mask=head_mask, **model.config)
    np.testing.assert_allclose(ours, hf_ablated, rtol=0, atol=1e-9)
    assert np.abs(hf_ablated - hf_intact[0]).max() > 1.0  # the heads mattered


@pytest.mark.parametrize("ablated", [False, True])
def test_in_context_loss_equals_torch_cross_entropy(model, tokens, head_mask, hf_intact,
                                                    hf_ablated, ablated):
    logits = torch.tensor(hf_ablated if ablated else hf_intact[0])  # [B, 2N, V]
    t = torch.tensor(tokens)
    first = torch.nn.functional.cross_entropy(logits[:, :N - 1].flatten(0, 1), t[:, 1:N].flatten())
    second = torch.nn.functional.cross_entropy(logits[:, N - 1:-1].flatten(0, 1),
                                               t[:, N:].flatten())
    ours = in_context_loss(model, tokens, head_mask=head_mask if ablated else None)
    np.testing.assert_allclose(ours, (first.item(), second.item()), rtol=1e-12, atol=0)
    assert ablated or ours[1] < ours[0] - 5  # the repeat is learned in context


def test_top_heads_and_the_ablation_mask():
    scores = np.array([[0.1, 0.9], [0.5, 0.2], [0.9, 0.0]])
    assert top_heads(scores, 3) == [(0, 1), (2, 0), (1, 0)]  # ties: the earlier first

    class Small:
        params = {"layers": [{}, {}, {}], "token_embedding": np.zeros((5, 4))}
        config = {"n_heads": 2}
    mask = ablation_mask(Small(), [(2, 1), (0, 0)])
    np.testing.assert_array_equal(mask, [[0, 1], [1, 1], [1, 0]])
    picked = random_heads(Small(), np.random.default_rng(0), 4, exclude=[(0, 0), (2, 1)])
    assert len(set(picked)) == 4 and not {(0, 0), (2, 1)} & set(picked)


@pytest.mark.parametrize("call, error, match", [
    (lambda m, t: head_scores(m, t[:, :-1]), ValueError, r"even length 2n >= 4 .*, got 23"),
    (lambda m, t: head_scores(m, np.concatenate([t[:, :N], t[:, :N] + 1], 1)), ValueError,
     r"second half must repeat its first .* differ at position 0 of 12"),
    (lambda m, t: head_scores(m, t.astype(float)), ValueError, "tokens must be an int array"),
    (lambda m, t: head_scores(m, t[0]), ValueError, r"int array \[B, L\]"),
    (lambda m, t: in_context_loss(m, np.concatenate([t, t[:, :1]], 1)), ValueError,
     "even length"),
    (lambda m, t: head_scores("SmolLM2", t), TypeError, "lm must be a model with .params"),
    (lambda m, t: repeated_random_tokens(m, np.random.default_rng(0), 4097), ValueError,
     "n=4097 gives 2n = 8194 tokens, more than the model's context of 8192"),
    (lambda m, t: repeated_random_tokens(m, 0, 10), TypeError,
     "rng must be a numpy.random.Generator"),
    (lambda m, t: repeated_random_tokens(m, np.random.default_rng(0), 1), ValueError,
     "n must be at least 2"),
    (lambda m, t: repeated_random_tokens(m, np.random.default_rng(0), 10, 0), ValueError,
     "batch must be a positive int, got 0"),
    (lambda m, t: ablation_mask(m, [(30, 0)]), ValueError,
     r"heads\[0\] = \(30, 0\): layer must be in \[0, 29\]"),
    (lambda m, t: ablation_mask(m, [(0, 0), (3, 9)]), ValueError,
     r"heads\[1\] = \(3, 9\): head must be in \[0, 8\]"),
    (lambda m, t: ablation_mask(m, [3]), TypeError, r"heads\[0\] must be a \(layer, head\) pair"),
    (lambda m, t: ma.causal_lm(m.params, t, head_mask=np.ones((30, 8)), **m.config), ValueError,
     r"head_mask has shape \(30, 8\), expected \(30, 9\)"),
    (lambda m, t: ma.causal_lm(m.params, t, head_mask=np.ones((30, 9), int), **m.config),
     TypeError, "head_mask must be a floating-point array, got dtype int64"),
    (lambda m, t: ma.causal_lm(m.params, t, head_mask=np.full((30, 9), np.inf), **m.config),
     ValueError, "head_mask must be finite"),
])
def test_bad_input_is_refused_by_name(model, tokens, call, error, match):
    with pytest.raises(error, match=match):
        call(model, tokens)


# -- the command line: the model loaded once (this module's), handed to the CLI ------------------

@pytest.fixture
def cli_model(model, monkeypatch):
    from minattn.models import chat_model

    monkeypatch.setattr(chat_model, "load_language_model", lambda path=None: model)
    return model


def test_the_heads_command_prints_what_the_functions_compute(cli_model, tmp_path, capsys):
    from minattn import cli

    out_json = tmp_path / "heads.json"
    assert cli.main(["heads", "--n", "6", "--batch", "1", "--seed", "3", "--k", "2",
                     "--json", str(out_json)]) == 0
    out, err = capsys.readouterr()
    import json

    report = json.loads(out_json.read_text())
    tokens = repeated_random_tokens(cli_model, np.random.default_rng(3), 6, 1)
    scores = head_scores(cli_model, tokens)
    np.testing.assert_allclose(report["induction"], scores["induction"], rtol=0, atol=1e-12)
    assert [tuple(p) for p in report["top_induction"]] == top_heads(scores["induction"], 2)
    np.testing.assert_allclose(report["induction_ablated"], in_context_loss(
        cli_model, tokens, ablation_mask(cli_model, top_heads(scores["induction"], 2))),
        rtol=1e-12)
    layer, head = report["top_induction"][0]
    assert f"layer {layer:2d} head {head}   {scores['induction'][layer, head]:.3f}" in out
    assert "top 2 induction heads ablated" in out and "2 random heads ablated (draw 3)" in out
    assert "6/6" in err and "6/6" not in out  # the progress bar (3 + 3 passes) on stderr


@pytest.mark.parametrize("argv, match", [
    (["--n", "4097"], "--n 4097 gives 2n = 8194 tokens, more than the model's context of 8192"),
    (["--k", "136"], "--k must be at most 135"),
    (["--n", "65", "--html", "page.html"], "--html draws at most 128 tokens; --n 65 gives 130"),
])
def test_the_heads_command_refuses_sizes_by_name(cli_model, argv, match, tmp_path,
                                                 monkeypatch, capsys):
    from minattn import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["heads", *argv]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("error: ") and match in err and err.count("\n") == 1, err


def test_the_page_of_a_language_model_draws_in_headless_chromium(cli_model, tmp_path, capsys):
    from tests.test_html_page import CHROMIUM, _check_drawn

    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    from minattn import cli

    text = "The cat sat on the mat, and the dog lay by the door. " * 8  # 105 tokens
    page = tmp_path / "smollm2.html"
    assert cli.main(["attention", text, "--model", "smollm2", "--layer", "18", "--head", "6",
                     "--html", str(page)]) == 0
    labels = [cli.common._visible(cli_model.tokenizer.decode([i]))
              for i in cli_model.tokenizer.encode(text)]
    assert len(labels) > 100
    fit = 1_500_000 // (9 * len(labels) ** 2)  # layers that fit the page's bound
    out = capsys.readouterr().out
    assert f"the page holds layers 18 to {18 + fit - 1} of 30" in out
    assert f"saved the attention page ({fit} layers x 9 heads)" in out
    _check_drawn(tmp_path, page, labels, n_heads_shown=3)  # head 6's KV group: heads 6, 7, 8
    dom = page.read_text()
    assert '"group_size":3' in dom and "KV group" in dom and 'class="scroll"' in dom
