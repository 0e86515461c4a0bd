"""float32 inputs with float64 params (every init_*'s default dtype) give float32 outputs and
caches: the params are taken in the inputs' dtype (checks.in_dtype), so the result is the float32
computation, within float32 rounding of the float64 one, never a silent upcast to float64."""
import numpy as np

from minattn.differential import differential_attention, init_differential_attention
from minattn.mla import init_latent_attention, latent_attention

MLA = dict(n_heads=2, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2)


def _both(call, params, x):
    """call in float32 (float64 params) and in float64 -> (float32 results, float64 results)."""
    return call(params, x.astype(np.float32)), call(params, x)


def _check(ours, reference):
    out, cache = ours
    assert out.dtype == np.float32
    assert all(a.dtype == np.float32 for a in cache.values())
    np.testing.assert_allclose(out, reference[0], rtol=1e-4, atol=1e-5)


def test_differential_attention():
    rng = np.random.default_rng(0)
    params = init_differential_attention(rng, 8, 4, layer_index=2)  # float64
    x = rng.normal(size=(2, 3, 8))
    _check(*_both(lambda p, t: differential_attention(p, t, n_heads=4, positions=np.arange(3)),
                  params, x))


def test_latent_attention():
    rng = np.random.default_rng(0)
    params = init_latent_attention(rng, 8, 2, kv_lora_rank=4, q_lora_rank=4, **{
        k: v for k, v in MLA.items() if k != "n_heads"})  # float64
    x = rng.normal(size=(2, 3, 8))
    _check(*_both(lambda p, t: latent_attention(p, t, positions=np.arange(3), **MLA), params, x))
