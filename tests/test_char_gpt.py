"""nanoGPT's baby GPT on minattn (minattn/models/char_gpt.py) against the same model written
here from torch.nn modules, as nanoGPT's model.py writes it (not from minattn): the same
initial weights, the same batches, 20 steps of AdamW (two parameter groups) with warm-up and a
cosine to min_lr and gradient clipping, in float64: every training loss, every evaluation on
both splits, and the logits after, equal to 1e-8."""
import math

import numpy as np
import pytest

from minattn.models import char_gpt
from minattn.engine.trees import leaves
from minattn.training import checkpoints

torch = pytest.importorskip("torch")
nn = torch.nn

TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
        "First Citizen:\nYou are all resolved rather to die than to famish?\n") * 3
SMALL = {"n_layers": 2, "n_heads": 2, "d_model": 16, "context": 8}
TRAINING = {"context": 8, "batch_size": 4, "lr": 1e-2, "min_lr": 1e-3, "warmup": 5,
            "weight_decay": 0.1, "betas": (0.9, 0.99), "max_grad_norm": 1.0, "eval_every": 5,
            "eval_batches": 2, "seed": 3}
STEPS = 20


class Block(nn.Module):
    # nanoGPT's Block: x + attn(ln_1(x)), then x + mlp(ln_2(x))
    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.attn_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.gelu, self.mlp_proj = nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
                   for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    # nanoGPT's GPT: token and position embeddings, the blocks, ln_f, lm_head tied to wte
    def __init__(self, vocab_size, n_layers, n_heads, d_model, context):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, d_model), nn.Embedding(context, d_model)
        self.h = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T  # [B, T, V]


def _copy_into(model, params):
    # minattn's [d_in, d_out] weights -> torch's [d_out, d_in]
    t = lambda a: torch.tensor(np.asarray(a))  # noqa: E731
    with torch.no_grad():
        model.wte.weight.copy_(t(params["token_embedding"]))
        model.wpe.weight.copy_(t(params["position_embedding"]))
        for block, layer in zip(model.h, params["layers"]):
            a, f = layer["self_attention"], layer["feed_forward"]
            block.c_attn.weight.copy_(t(np.concatenate([a["w_q"], a["w_k"], a["w_v"]], 1).T))
            block.c_attn.bias.copy_(t(np.concatenate([a["b_q"], a["b_k"], a["b_v"]])))
            block.attn_proj.weight.copy_(t(a["w_o"].T))
            block.attn_proj.bias.copy_(t(a["b_o"]))
            block.c_fc.weight.copy_(t(f["w_1"].T))
            block.c_fc.bias.copy_(t(f["b_1"]))
            block.mlp_proj.weight.copy_(t(f["w_2"].T))
            block.mlp_proj.bias.copy_(t(f["b_2"]))
            for norm, name in ((block.ln_1, "self_attention_norm"),
                               (block.ln_2, "feed_forward_norm")):
                norm.weight.copy_(t(layer[name]["gamma"]))
                norm.bias.copy_(t(layer[name]["beta"]))
        model.ln_f.weight.copy_(t(params["final_norm"]["gamma"]))
        model.ln_f.bias.copy_(t(params["final_norm"]["beta"]))


def _torch_run(model, train_ids, val_ids, settings, steps):
    # nanoGPT's train.py loop: AdamW with decay on the >= 2-D parameters only, the schedule
    # (warm-up from 0, then a cosine from lr to min_lr) as a LambdaLR, clipping at norm 1.
    lr, min_lr, warmup = settings["lr"], settings["min_lr"], settings["warmup"]
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": settings["weight_decay"]},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr,
                                  betas=settings["betas"], eps=1e-8)

    def factor(step):
        if step < warmup:
            return step / warmup
        progress = (step - warmup) / (steps - warmup)
        return min_lr / lr + (1 - min_lr / lr) * 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    batch = lambda ids, k: char_gpt.window_batch(  # noqa: E731
        ids, context=settings["context"], batch_size=settings["batch_size"],
        seed=settings["seed"], k=k)

    def loss(tokens, targets):
        logits = model(torch.tensor(tokens))
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           torch.tensor(targets).reshape(-1))

    def evaluate(ids):
        with torch.no_grad():
            return float(np.mean([loss(*batch(ids, 10 ** 9 + j)[:2]).item()
                                  for j in range(settings["eval_batches"])]))

    losses, evals = [], [[0, evaluate(train_ids), evaluate(val_ids)]]
    for step in range(steps):
        tokens, targets, _ = batch(train_ids, step)
        value = loss(tokens, targets)
        optimizer.zero_grad()
        value.backward()
        nn.utils.clip_grad_norm_(model.parameters(), settings["max_grad_norm"])
        optimizer.step()
        scheduler.step()
        losses.append(value.item())
        if (step + 1) % settings["eval_every"] == 0:
            evals.append([step + 1, evaluate(train_ids), evaluate(val_ids)])
    return losses, evals


@pytest.fixture(scope="module")
def data():
    characters = char_gpt.Characters(TEXT)
    return characters, *char_gpt.split(characters.encode(TEXT))


@pytest.fixture(scope="module")
def both_runs(data):
    characters, train_ids, val_ids = data
    params, config = char_gpt.init_char_gpt(np.random.default_rng(0), len(characters.chars),
                                            **SMALL)
    torch.manual_seed(0)
    model = GPT(len(characters.chars), **SMALL).double()
    _copy_into(model, params)
    state = char_gpt.train_char_gpt(params, config, train_ids, val_ids, steps=STEPS, **TRAINING)
    losses, evals = _torch_run(model, train_ids, val_ids, TRAINING, STEPS)
    return state, config, model, losses, evals


def test_training_losses_equal_torch_step_for_step_in_float64(both_runs):
    state, _, _, losses, _ = both_runs
    assert len(state["losses"]) == STEPS
    np.testing.assert_allclose(state["losses"], losses, rtol=1e-8)
    assert losses[-1] < losses[0] - 0.5  # and it learned something


def test_validation_and_training_evaluations_equal_torch(both_runs):
    state, _, _, _, evals = both_runs
    ours = np.array(state["settings"]["evals"])
    np.testing.assert_array_equal(ours[:, 0], [0, 5, 10, 15, 20])
    np.testing.assert_allclose(ours, np.array(evals), rtol=1e-8)


def test_logits_after_training_equal_torch(both_runs, data):
    state, config, model, _, _ = both_runs
    tokens = char_gpt.window_batch(data[2], context=8, batch_size=3, seed=9, k=0)[0]
    from minattn import causal_lm

    ours = causal_lm(state["trainable"], tokens, **config)
    with torch.no_grad():
        theirs = model(torch.tensor(tokens)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)


def test_a_resumed_run_takes_the_same_steps_to_the_same_bits(data, tmp_path):
    characters, train_ids, val_ids = data
    params, config = char_gpt.init_char_gpt(np.random.default_rng(1), len(characters.chars),
                                            **SMALL)
    settings = {**TRAINING, "eval_every": 3}
    whole = char_gpt.train_char_gpt(params, config, train_ids, val_ids, steps=6, **settings)
    # Ctrl-C after the evaluation at step 3, then the same run resumed from its checkpoint
    with pytest.raises(KeyboardInterrupt):
        char_gpt.train_char_gpt(params, config, train_ids, val_ids, steps=6, out=tmp_path,
                                on_eval=_interrupt_at(3), **settings)
    state = checkpoints.load_checkpoint(tmp_path)
    assert state["step"] == 3
    resumed = char_gpt.train_char_gpt(params, config, train_ids, val_ids, steps=6, state=state,
                                      **settings)
    assert resumed["losses"] == whole["losses"]
    assert resumed["settings"]["evals"] == whole["settings"]["evals"]
    for ours, theirs in zip(leaves(resumed["trainable"]), leaves(whole["trainable"])):
        np.testing.assert_array_equal(ours, theirs)


def _interrupt_at(step):
    def on_eval(state):
        if state["step"] == step:
            raise KeyboardInterrupt
    return on_eval


def test_windows_are_slices_of_the_text_with_targets_one_character_on(data):
    _, train_ids, _ = data
    tokens, targets, counted = char_gpt.window_batch(train_ids, context=8, batch_size=5, seed=0,
                                                     k=7)
    assert tokens.shape == targets.shape == counted.shape == (5, 8) and counted.all()
    np.testing.assert_array_equal(tokens[:, 1:], targets[:, :-1])
    text = "".join(map(chr, train_ids + 32))
    for row, target in zip(tokens, targets):
        assert "".join(map(chr, np.append(row, target[-1]) + 32)) in text


def test_only_matrices_and_embeddings_decay(data):
    params, _ = char_gpt.init_char_gpt(np.random.default_rng(0), len(data[0].chars), **SMALL)
    assert char_gpt.decays(params["token_embedding"])
    assert char_gpt.decays(params["layers"][0]["self_attention"]["w_q"])
    assert not char_gpt.decays(params["layers"][0]["self_attention"]["b_q"])
    assert not char_gpt.decays(params["final_norm"]["gamma"])
