"""The optimizer of `finetune` against the libraries people train with, step by step, float64:
AdamW against torch.optim.AdamW, clipping against torch.nn.utils.clip_grad_norm_, the schedule
against transformers' get_cosine_schedule_with_warmup."""
import math

import numpy as np
import pytest

from minattn.training.optimizer import (adamw_init, adamw_update, clip_by_global_norm, cosine_lr,
                                        leaves)

torch = pytest.importorskip("torch")


def _tree(rng):
    return {"layers": [{"q": {"A": rng.normal(size=(6, 2)), "B": rng.normal(size=(2, 6))}},
                       {"v": {"A": rng.normal(size=(6, 2)), "B": np.zeros((2, 4))}}]}


@pytest.mark.parametrize("weight_decay, betas, eps", [(0.0, (0.9, 0.999), 1e-8),
                                                      (0.1, (0.8, 0.95), 1e-3)])
def test_adamw_equals_torch_adamw_step_by_step(weight_decay, betas, eps):
    # The same gradients (drawn, not computed, so both see identical ones), six steps, a learning
    # rate changed between steps as a scheduler does: every weight equal to torch's.
    rng = np.random.default_rng(0)
    params = _tree(rng)
    tensors = [torch.tensor(p, requires_grad=True) for p in leaves(params)]
    optimizer = torch.optim.AdamW(tensors, lr=0.1, betas=betas, eps=eps,
                                  weight_decay=weight_decay)
    state = adamw_init(params)
    for step in range(6):
        lr = 0.1 * (step + 1) / 6
        grads = _tree(rng)
        for tensor, g in zip(tensors, leaves(grads)):
            tensor.grad = torch.tensor(g)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        params, state = adamw_update(params, grads, state, lr=lr, betas=betas, eps=eps,
                                     weight_decay=weight_decay)
        for tensor, p in zip(tensors, leaves(params)):
            np.testing.assert_allclose(p, tensor.detach().numpy(), rtol=1e-14, atol=1e-15)
    assert state["step"] == 6


def test_adamw_without_weight_decay_equals_torch_adam_step_by_step():
    # weight_decay=0 is Adam as torch.optim.Adam computes it (eps after the bias-corrected root,
    # not Kingma & Ba's placement): the toy tasks' trainers (minattn/models/) take this step.
    rng = np.random.default_rng(1)
    params = _tree(rng)
    tensors = [torch.tensor(p, requires_grad=True) for p in leaves(params)]
    optimizer = torch.optim.Adam(tensors, lr=0.05, eps=1e-3)  # a large eps: its placement shows
    state = adamw_init(params)
    for _ in range(6):
        grads = _tree(rng)
        for tensor, g in zip(tensors, leaves(grads)):
            tensor.grad = torch.tensor(g)
        optimizer.step()
        params, state = adamw_update(params, grads, state, lr=0.05, eps=1e-3, weight_decay=0.0)
        for tensor, p in zip(tensors, leaves(params)):
            np.testing.assert_allclose(p, tensor.detach().numpy(), rtol=1e-14, atol=1e-15)


def test_adamw_without_weight_decay_minimizes_a_quadratic():
    params = {"x": np.array([3.0, -2.0])}
    state = adamw_init(params)
    for _ in range(500):
        grads = {"x": 2 * (params["x"] - np.array([1.0, 0.5]))}
        params, state = adamw_update(params, grads, state, lr=0.05, weight_decay=0.0)
    np.testing.assert_allclose(params["x"], [1.0, 0.5], atol=1e-3)


def test_every_trainer_in_the_package_steps_with_the_one_adamw():
    # No second Adam anywhere under minattn/: an optimizer function is defined in
    # training/optimizer.py only, and every module that trains imports its step from there.
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parent.parent / "minattn"
    defined, trainers = [], []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        defined += [f"{path.relative_to(package)}:{n}" for n in names
                    if n.lower().startswith("adam")]
        if any(n.startswith("train_") for n in names):
            trainers.append(path)
    assert sorted(defined) == ["training/optimizer.py:adamw_init",
                               "training/optimizer.py:adamw_update"], defined
    assert len(trainers) >= 3  # count_task, sorting_lm, induction (and more)
    for path in trainers:
        text = path.read_text(encoding="utf-8")
        imported = [line for line in text.splitlines()
                    if line.startswith("from ") and "optimizer import" in line and "adamw" in line]
        uses_loop = "training.loop import" in text or "from ..training import loop" in text
        assert imported or uses_loop, f"{path.name} trains without the package's AdamW"


def test_adamw_bias_correction_makes_the_first_step_lr_times_the_sign():
    # m / sqrt(v) after one step, corrected, is g / |g|: the first step is lr (less eps's share).
    params = {"w": np.array([1.0, -2.0, 3.0])}
    grads = {"w": np.array([0.5, -4.0, 2.0])}
    new, _ = adamw_update(params, grads, adamw_init(params), lr=0.1, eps=0.0, weight_decay=0.0)
    np.testing.assert_allclose(new["w"], params["w"] - 0.1 * np.sign(grads["w"]), rtol=1e-15)


def test_adamw_eps_is_added_after_the_square_root():
    # g = 1e-4 and eps = 1e-4: |step| = lr * g / (g + eps) = lr / 2 (inside the root it would be
    # lr * g / sqrt(g^2 + eps), about lr / 100).
    params = {"w": np.array([0.0])}
    new, _ = adamw_update(params, {"w": np.array([1e-4])}, adamw_init(params), lr=1.0, eps=1e-4,
                          weight_decay=0.0)
    np.testing.assert_allclose(new["w"], [-0.5], rtol=1e-12)


def test_adamw_weight_decay_shrinks_the_weight_itself():
    # With a zero gradient the moments stay zero: the step is the decay alone, w * (1 - lr * wd).
    params = {"w": np.array([2.0, -3.0])}
    new, _ = adamw_update(params, {"w": np.zeros(2)}, adamw_init(params), lr=0.5,
                          weight_decay=0.1)
    np.testing.assert_array_equal(new["w"], params["w"] * (1 - 0.5 * 0.1))


def test_adamw_changes_nothing_it_is_given():
    params, grads = {"w": np.ones(3)}, {"w": np.ones(3)}
    state = adamw_init(params)
    adamw_update(params, grads, state, lr=0.1)
    assert state["step"] == 0 and not state["m"]["w"].any()
    np.testing.assert_array_equal(params["w"], np.ones(3))


def test_adamw_keeps_float32_in_float32():
    params = {"w": np.ones(3, np.float32)}
    new, state = adamw_update(params, {"w": np.ones(3, np.float32)}, adamw_init(params), lr=0.1)
    assert new["w"].dtype == state["m"]["w"].dtype == state["v"]["w"].dtype == np.float32


@pytest.mark.parametrize("max_norm", [0.5, 3.0, 1e3])
def test_clipping_equals_torch_clip_grad_norm(max_norm):
    rng = np.random.default_rng(1)
    grads = _tree(rng)
    tensors = [torch.tensor(g, requires_grad=True) for g in leaves(grads)]
    for tensor in tensors:
        tensor.grad = tensor.detach().clone()
    expected_norm = torch.nn.utils.clip_grad_norm_(tensors, max_norm)
    clipped, norm = clip_by_global_norm(grads, max_norm)
    assert norm == pytest.approx(float(expected_norm), rel=1e-14)
    assert norm == pytest.approx(math.sqrt(sum(np.sum(g ** 2) for g in leaves(grads))), rel=1e-14)
    for tensor, g in zip(tensors, leaves(clipped)):
        np.testing.assert_allclose(g, tensor.grad.numpy(), rtol=1e-14)


def test_clipped_gradients_have_the_norm_asked_for():
    grads = {"a": np.full(4, 3.0), "b": [np.full(5, 4.0)]}
    clipped, norm = clip_by_global_norm(grads, 1.0)
    assert norm == pytest.approx(math.sqrt(4 * 9 + 5 * 16))
    assert math.sqrt(sum(np.sum(g ** 2) for g in leaves(clipped))) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("warmup, total", [(0, 10), (3, 10), (5, 6), (4, 4)])
def test_cosine_schedule_equals_transformers(warmup, total):
    transformers = pytest.importorskip("transformers")
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.3)
    scheduler = transformers.get_cosine_schedule_with_warmup(optimizer, warmup, total)
    for step in range(total):
        assert cosine_lr(step, lr=0.3, warmup=warmup, total=total) == pytest.approx(
            optimizer.param_groups[0]["lr"], rel=1e-15, abs=1e-18), step
        optimizer.step()
        scheduler.step()


def test_cosine_schedule_by_its_formula():
    # Warm-up linear from 0; at the warm-up's end lr itself; halfway through the decay lr / 2.
    assert cosine_lr(0, lr=2.0, warmup=4, total=12) == 0.0
    assert cosine_lr(2, lr=2.0, warmup=4, total=12) == 1.0
    assert cosine_lr(4, lr=2.0, warmup=4, total=12) == 2.0
    assert cosine_lr(8, lr=2.0, warmup=4, total=12) == pytest.approx(1.0)
    assert cosine_lr(12, lr=2.0, warmup=4, total=12) == pytest.approx(0.0, abs=1e-15)
