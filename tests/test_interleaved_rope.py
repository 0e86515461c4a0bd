"""apply_rope(..., interleaved=True): RoPE with neighbouring features paired, (2i, 2i + 1), as
GPT-J writes it; held to transformers' GPT-J functions (rotate_every_two, apply_rotary_pos_emb)
in float64, with their sin and cos computed in float64 from transformers' formula. It is the
rotate-half rotation on the features reordered, its gradient is autograd's of that composition,
and interleaved=False is apply_rope itself."""
import numpy as np
import pytest
from autograd import grad
from autograd.test_util import check_grads

import minattn as ma

from .peers import undocumented

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
# GPT-J's rotation alone: its model file's function (no documented entry point takes q alone),
# at the version the lock holds
GPTJ = "transformers.models.gptj.modeling_gptj"


def _gptj_rope(x, positions, base=10000.0):
    # x [B, L, H, d] (GPT-J's layout); sin, cos [B, L, d/2] as create_sinusoidal_positions,
    # in float64
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.from_numpy(positions).double()[None, :, None] * inv_freq  # [1, L, d/2]
    return undocumented(GPTJ, "apply_rotary_pos_emb")(torch.from_numpy(x), torch.sin(angles),
                                                        torch.cos(angles)).numpy()


@pytest.mark.parametrize("d, offset", [(2, 0), (8, 0), (16, 37)])
def test_interleaved_rope_equals_gptjs(d, offset):
    rng = np.random.default_rng(d)
    x = rng.normal(size=(2, 6, 3, d))  # [B, L, H, d]
    positions = np.arange(6) + offset
    ours = ma.apply_rope(np.swapaxes(x, 1, 2), positions, interleaved=True)  # [B, H, L, d]
    np.testing.assert_allclose(np.swapaxes(ours, 1, 2), _gptj_rope(x, positions), rtol=0,
                               atol=1e-12)


def test_interleaved_is_rotate_half_on_the_reordered_features():
    x = np.random.default_rng(0).normal(size=(2, 5, 8))
    order = np.r_[0:8:2, 1:8:2]  # (x0, x2, x4, x6, x1, x3, x5, x7)
    ours = ma.apply_rope(x, np.arange(5), interleaved=True)
    np.testing.assert_allclose(ours[..., order], ma.apply_rope(x[..., order], np.arange(5)),
                               rtol=0, atol=1e-15)
    np.testing.assert_array_equal(ma.apply_rope(x, np.arange(5), interleaved=False),
                                  ma.apply_rope(x, np.arange(5)))
    assert np.abs(ours - ma.apply_rope(x, np.arange(5))).max() > 1e-2  # another rotation


def test_interleaved_rope_gradients_equal_finite_differences():
    x = np.random.default_rng(1).normal(size=(2, 4, 6))
    check_grads(lambda x: ma.apply_rope(x, np.arange(4), interleaved=True), modes=["rev"],
                order=2)(x)
    assert grad(lambda x: (ma.apply_rope(x, np.arange(4), interleaved=True) ** 2).sum())(
        x.astype(np.float32)).dtype == np.float32


@pytest.mark.parametrize("x, interleaved, error, message", [
    (np.ones((2, 5)), "yes", TypeError, "interleaved must be True or False, got 'yes'"),
    (np.ones((2, 5)), True, ValueError, "needs an even feature size d"),
    (np.ones(4), True, ValueError, "x must have shape"),
])
def test_bad_interleaved_calls_are_refused_by_name(x, interleaved, error, message):
    with pytest.raises(error, match=message):
        ma.apply_rope(x, np.arange(2), interleaved=interleaved)
