"""Same expression, two engines: minattn's decoder_block and decoder against
torch.nn.TransformerDecoderLayer and TransformerDecoder (eval mode, torch's reference path, as
in test_torch_parity.py): self-attention masks, memory and memory masks, post- and pre-norm,
relu and gelu, with and without a final norm. float64 within 1e-10, float32 within 2e-5."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip(
    "torch", reason="parity tests need PyTorch: pip install torch==2.13.0 (CPU)")

from minattn.transformer_decoder import decoder, decoder_block  # noqa: E402
from minattn.interop import from_torch, mask_from_torch  # noqa: E402

from .strategies import model_sizes, seeds  # noqa: E402
from .test_torch_parity import (DTYPES, assert_matches_torch, few_examples,  # noqa: E402,F401
                                randomized, t, torch_masks)


def _inputs(rng, sizes, dtype, mask_kind):
    b, length, d_model, n_heads, _ = sizes
    l_m = int(rng.integers(1, 6))
    x = rng.normal(size=(b, length, d_model)).astype(dtype)
    memory = rng.normal(size=(b, l_m, d_model)).astype(dtype)
    tgt = torch_masks(mask_kind, rng, b, n_heads, length, length, dtype)
    mem = torch_masks("padding" if mask_kind != "none" else "none", rng, b, n_heads, length, l_m,
                      dtype)
    return x, memory, tgt, mem


def _torch_kwargs(tgt, mem):
    as_t = lambda m: None if m is None else t(m)
    return dict(tgt_mask=as_t(tgt[0]), tgt_key_padding_mask=as_t(tgt[1]),
                memory_mask=as_t(mem[0]), memory_key_padding_mask=as_t(mem[1]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@few_examples
@given(model_sizes(min_d_model=4), seeds, st.sampled_from(["none", "causal", "causal+padding"]))
def test_decoder_block_matches_torch(dtype, norm_first, activation, sizes, seed, mask_kind):
    b, length, d_model, n_heads, d_ff = sizes
    rng = np.random.default_rng(seed)
    x, memory, tgt, mem = _inputs(rng, sizes, dtype, mask_kind)
    layer = torch.nn.TransformerDecoderLayer(d_model, n_heads, d_ff, norm_first=norm_first,
                                             activation=activation, layer_norm_eps=1e-4,
                                             batch_first=True)
    layer = randomized(layer, seed, dtype)
    params, kwargs = from_torch(layer)
    assert kwargs == {"n_heads": n_heads, "norm_first": norm_first, "activation": activation,
                      "eps": 1e-4}
    y = decoder_block(params, x, mask_from_torch(*tgt), memory=memory,
                      memory_mask=mask_from_torch(*mem), **kwargs)
    assert_matches_torch(y, layer(t(x), t(memory), **_torch_kwargs(tgt, mem)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first, final_norm", [(False, False), (True, True), (True, False)])
@few_examples
@given(model_sizes(min_d_model=4), st.integers(1, 3), seeds)
def test_decoder_matches_torch(dtype, norm_first, final_norm, sizes, n_layers, seed):
    d_model, n_heads, d_ff = sizes[2:]
    rng = np.random.default_rng(seed)
    x, memory, tgt, mem = _inputs(rng, sizes, dtype, "causal+padding")
    layer = torch.nn.TransformerDecoderLayer(d_model, n_heads, d_ff, activation="gelu",
                                             norm_first=norm_first, batch_first=True)
    norm = torch.nn.LayerNorm(d_model) if final_norm else None
    stack = randomized(torch.nn.TransformerDecoder(layer, n_layers, norm=norm), seed, dtype)
    params, kwargs = from_torch(stack)
    assert len(params["layers"]) == n_layers and ("final_norm" in params) == final_norm
    y = decoder(params, x, mask_from_torch(*tgt), memory=memory,
                memory_mask=mask_from_torch(*mem), **kwargs)
    assert_matches_torch(y, stack(t(x), t(memory), **_torch_kwargs(tgt, mem)))
