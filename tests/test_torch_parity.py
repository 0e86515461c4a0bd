"""Same expression, two engines: minattn against PyTorch (CPU), modules in eval mode.

Weights travel through minattn.interop.from_torch and masks through mask_from_torch, so these
tests check the interop and the core together. Outputs must agree to a max abs error of 1e-10 in
float64 and 2e-5 in float32.

What torch does that matters here (checked on torch 2.13):
- Fast path: in eval mode under no_grad, MultiheadAttention and TransformerEncoderLayer may run a
  fused kernel instead of their Python composition. A module-wide fixture turns it off, so each
  test compares against torch's reference composition; test_fast_path_agrees_too checks the
  fused kernel separately. (That kernel only knows relu and exact gelu: it runs
  nn.GELU(approximate="tanh") as exact gelu, so there only the slow path is the reference.)
- Nested tensors: TransformerEncoder(enable_nested_tensor=True) warns and, on the fast path,
  returns zeros at padded positions. We build stacks with enable_nested_tensor=False.
- Fully masked query rows: MultiheadAttention gives NaN when need_weights=True (softmax of all
  -inf), but F.scaled_dot_product_attention and need_weights=False give zeros, as minattn does.
  Parity tests keep at least one key per query except where that behaviour is the subject.
"""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip(
    "torch", reason="parity tests need PyTorch: pip install torch==2.13.0 (CPU)"
)
F = torch.nn.functional

import minattn as ma  # noqa: E402
from minattn.interop import from_torch, mask_from_torch  # noqa: E402

from .strategies import model_sizes, seeds  # noqa: E402

MAX_ABS_ERROR = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 2e-5}
DTYPES = [np.float64, np.float32]
TORCH_DTYPE = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32}
# Tests that build a torch module per example take a few examples each (whatever the profile),
# spread over many parametrized cases, to keep this file within ~20 s.
few_examples = settings(max_examples=6)


@pytest.fixture(scope="module", autouse=True)
def torch_reference_path():
    # Once for the whole module, so it covers every hypothesis example too. Both settings are
    # process-wide: both are restored afterwards, and other test modules never see them.
    fastpath, threads = torch.backends.mha.get_fastpath_enabled(), torch.get_num_threads()
    torch.backends.mha.set_fastpath_enabled(False)
    # One thread: for tensors this small, handing work to other threads costs more than the math
    # (on a busy 2-core machine, 15 ms against 0.2 ms per attention call).
    torch.set_num_threads(1)
    yield
    torch.backends.mha.set_fastpath_enabled(fastpath)
    torch.set_num_threads(threads)


def assert_matches_torch(actual, expected):
    expected = expected.detach().numpy()
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=0, atol=MAX_ABS_ERROR[actual.dtype])


def randomized(module, seed, dtype):
    """The module in `dtype`, eval mode, every parameter replaced by noise: torch initialises
    biases to 0 and LayerNorm to (1, 0), which would hide a bias or gamma bug."""
    module = module.to(TORCH_DTYPE[np.dtype(dtype)]).eval()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(rng.normal(scale=0.5, size=tuple(p.shape))))
    return module


def t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def normal(seed, *shapes, dtype, loc=0.0):
    # Values from a seeded Generator rather than hypothesis: sizes are what hypothesis explores
    # here, and drawing arrays element by element would cost most of this file's time.
    rng = np.random.default_rng(seed)
    return [rng.normal(loc, size=shape).astype(dtype) for shape in shapes]


MASK_KINDS = ["none", "padding", "causal", "causal+padding", "additive", "per_head"]


def torch_masks(kind, rng, b, n_heads, l_q, l_k, dtype):
    """(attn_mask, key_padding_mask) in torch's convention (True = ignore, floating = added).
    Key 0 is never hidden, so no query is left with nothing to attend to."""
    lengths = rng.integers(1, l_k + 1, size=b)
    padding = np.arange(l_k)[None, :] >= lengths[:, None]  # [B, L_k], True past each length
    causal = ~ma.causal_mask(l_q, l_k)  # [L_q, L_k]; top-left aligned, so key 0 is always seen
    if kind == "none":
        return None, None
    if kind == "padding":
        return None, padding
    if kind == "causal":
        return causal, None
    if kind == "causal+padding":
        return causal, padding
    if kind == "additive":  # torch warns if the two masks differ in type, so both are floating
        bias = rng.normal(size=(l_q, l_k)).astype(dtype)
        return bias, np.where(padding, -np.inf, 0.0).astype(dtype)
    if kind == "per_head":  # [B * H, L_q, L_k], torch's batch-major order
        ignore = rng.random((b * n_heads, l_q, l_k)) < 0.5
        ignore[..., 0] = False
        return ignore, None
    raise ValueError(kind)


# --- mask_from_torch -------------------------------------------------------------------------


def test_no_masks_give_none():
    assert mask_from_torch() is None
    assert mask_from_torch(None, None, n_heads=2, dtype=np.float32) is None


def test_boolean_masks_flip_polarity_and_combine_with_and():
    attn = np.array([[False, True, True], [False, False, True]])  # [L_q, L_k], True = ignore
    padding = np.array([[False, False, False], [False, True, True]])  # [B, L_k]
    mask = mask_from_torch(attn, padding)
    assert mask.dtype == np.bool_ and mask.shape == (2, 1, 2, 3)
    np.testing.assert_array_equal(mask, ~attn[None, None] & ~padding[:, None, None, :])


def test_key_padding_mask_alone_broadcasts_over_heads_and_queries():
    padding = np.array([[False, True], [False, False]])
    np.testing.assert_array_equal(mask_from_torch(key_padding_mask=padding),
                                  ~padding[:, None, None, :])


def test_floating_masks_add_and_boolean_ignore_becomes_minus_inf():
    attn = np.array([[0.5, -1.0], [2.0, 0.0]], dtype=np.float32)
    padding = np.array([[False, True]])
    mask = mask_from_torch(attn, padding)
    assert mask.dtype == np.float32 and mask.shape == (1, 1, 2, 2)
    np.testing.assert_array_equal(mask[0, 0], [[0.5, -np.inf], [2.0, -np.inf]])


def test_dtype_asks_for_an_additive_mask():
    mask = mask_from_torch(np.array([[False, True]]), dtype=np.float64)
    assert mask.dtype == np.float64
    np.testing.assert_array_equal(mask, [[0.0, -np.inf]])


def test_batch_times_heads_mask_splits_batch_major():
    b, n_heads = 2, 3
    rows = np.arange(b * n_heads)
    attn = rows[:, None, None] == rows[None, None, :]  # [B * H, 1, B * H]: row i ignores key i
    mask = mask_from_torch(attn, n_heads=n_heads)
    assert mask.shape == (b, n_heads, 1, b * n_heads)
    for i in range(b * n_heads):  # torch's row b * H + h is minattn's [b, h]
        np.testing.assert_array_equal(mask[i // n_heads, i % n_heads], ~attn[i])


def test_torch_tensors_and_numpy_arrays_convert_alike():
    attn, padding = np.array([[False, True]]), np.array([[True, False]])
    np.testing.assert_array_equal(mask_from_torch(t(attn), t(padding)),
                                  mask_from_torch(attn, padding))


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"attn_mask": np.zeros((2, 2), int)}, TypeError, r"attn_mask must be boolean .* got dtype int64"),
    ({"key_padding_mask": t(np.zeros((1, 2), np.uint8))}, TypeError, r"key_padding_mask .* uint8"),
    ({"attn_mask": "causal"}, TypeError, r"attn_mask must be a tensor or array, got str"),
    ({"attn_mask": np.zeros((4, 2, 2), bool)}, ValueError, r"pass n_heads="),
    ({"attn_mask": np.zeros((4, 2, 2), bool), "n_heads": 3}, ValueError, r"first dim 4 is not B \* n_heads"),
    ({"attn_mask": np.zeros((4, 2, 2), bool), "n_heads": 0}, TypeError, r"n_heads must be a positive int"),
    ({"attn_mask": np.zeros((1, 1, 2, 2), bool)}, ValueError, r"attn_mask must have shape \(L_q, L_k\)"),
    ({"key_padding_mask": np.zeros((2,), bool)}, ValueError, r"key_padding_mask must have shape \(B, L_k\)"),
    ({"attn_mask": np.zeros((2, 3), bool), "key_padding_mask": np.zeros((1, 2), bool)}, ValueError,
     r"disagree on L_k"),
    ({"attn_mask": np.zeros((4, 2, 2), bool), "key_padding_mask": np.zeros((3, 2), bool),
      "n_heads": 2}, ValueError, r"disagree on B"),
    ({"attn_mask": np.zeros((2, 2), bool), "dtype": np.int32}, TypeError, r"floating dtype"),
])
def test_mask_from_torch_rejects_what_it_cannot_convert(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        mask_from_torch(**kwargs)


# --- scaled dot-product attention -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 6), st.integers(1, 5), seeds,
       st.sampled_from([None, 0.3]))
def test_attention_matches_torch_sdpa(dtype, b, l_q, l_k, d_k, seed, scale):
    q, k, v = normal(seed, (b, 2, l_q, d_k), (b, 2, l_k, d_k), (b, 2, l_k, 3), dtype=dtype)
    out, _ = ma.scaled_dot_product_attention(q, k, v, scale=scale)
    assert_matches_torch(out, F.scaled_dot_product_attention(t(q), t(k), t(v), scale=scale))
    # is_causal=True is top-left aligned, as causal_mask(L_q, L_k), also when L_q != L_k.
    out, _ = ma.scaled_dot_product_attention(q, k, v, ma.causal_mask(l_q, l_k), scale=scale)
    assert_matches_torch(out, F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True,
                                                             scale=scale))


@pytest.mark.parametrize("dtype", DTYPES)
@given(st.integers(1, 6), st.integers(1, 6), seeds)
def test_attention_masks_match_torch_sdpa(dtype, l_q, l_k, seed):
    q, k, v, bias = normal(seed, (2, l_q, 4), (2, l_k, 4), (2, l_k, 3), (l_q, l_k), dtype=dtype)
    # F.scaled_dot_product_attention's boolean mask already means True = may attend: no flip.
    # Rows with nothing to attend to are allowed: torch 2.13's SDPA gives them zeros, as minattn.
    keep = np.random.default_rng(seed + 1).random((l_q, l_k)) < 0.6
    for mask in (keep, bias):
        out, _ = ma.scaled_dot_product_attention(q, k, v, mask)
        expected = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(mask))
        assert_matches_torch(out, expected)


# --- multi-head attention -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@few_examples
@given(st.data(), model_sizes(), seeds, st.booleans())
def test_multi_head_attention_matches_torch(dtype, mask_kind, data, sizes, seed, cross):
    b, l_q, d_model, n_heads, _ = sizes
    l_k = data.draw(st.integers(1, 6)) if cross else l_q  # cross-attention: L_q != L_k
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(b, l_q, d_model)).astype(dtype)
    memory = query if not cross else rng.normal(size=(b, l_k, d_model)).astype(dtype)
    attn_mask, padding = torch_masks(mask_kind, rng, b, n_heads, l_q, l_k, dtype)
    module = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    module = randomized(module, seed, dtype)
    params, kwargs = from_torch(module)

    out, weights = ma.multi_head_attention(params, query, memory, memory,
                                           mask_from_torch(attn_mask, padding, n_heads=n_heads),
                                           **kwargs)
    masks = {"attn_mask": None if attn_mask is None else t(attn_mask),
                    "key_padding_mask": None if padding is None else t(padding)}
    torch_out, torch_weights = module(t(query), t(memory), t(memory), **masks,
                                      average_attn_weights=False)
    assert_matches_torch(out, torch_out)
    assert_matches_torch(weights, torch_weights)  # [B, H, L_q, L_k], per head
    _, averaged = ma.multi_head_attention(params, query, memory, memory,
                                          mask_from_torch(attn_mask, padding, n_heads=n_heads),
                                          average_weights=True, **kwargs)
    assert_matches_torch(averaged, module(t(query), t(memory), t(memory), **masks)[1])


def test_sequence_first_module_takes_transposed_inputs():
    module = randomized(torch.nn.MultiheadAttention(6, 2), 0, np.float64)  # batch_first=False
    params, kwargs = from_torch(module)
    x = np.random.default_rng(1).normal(size=(2, 5, 6))  # [B, L, D]
    out, _ = ma.multi_head_attention(params, x, x, x, **kwargs)
    torch_out, _ = module(*(t(x.transpose(1, 0, 2)),) * 3)  # [L, B, D] in, [L, B, D] out
    assert_matches_torch(out, torch_out.transpose(0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_module_without_bias_gives_zero_biases(dtype):
    module = randomized(torch.nn.MultiheadAttention(6, 3, bias=False, batch_first=True), 0, dtype)
    params, kwargs = from_torch(module)
    assert all(params[f"b_{p}"].dtype == dtype and not params[f"b_{p}"].any() for p in "qkvo")
    x = np.random.default_rng(1).normal(size=(2, 4, 6)).astype(dtype)
    assert_matches_torch(ma.multi_head_attention(params, x, x, x, **kwargs)[0],
                         module(t(x), t(x), t(x))[0])


def test_fully_masked_query_matches_torch_without_weights():
    # need_weights=False: torch 2.13 routes through SDPA, which gives a hidden-everything query
    # zero attention (its output is then out_proj's bias), as minattn does. With
    # need_weights=True torch returns NaN for that query instead.
    module = randomized(torch.nn.MultiheadAttention(4, 2, batch_first=True), 0, np.float64)
    params, kwargs = from_torch(module)
    x = np.random.default_rng(1).normal(size=(2, 3, 4))
    padding = np.array([[True, True, True], [False, False, True]])  # sequence 0 hides every key
    mask = mask_from_torch(None, padding)
    out, weights = ma.multi_head_attention(params, x, x, x, mask, **kwargs)
    assert not weights[0].any()
    torch_out, _ = module(t(x), t(x), t(x), key_padding_mask=t(padding), need_weights=False)
    assert_matches_torch(out, torch_out)


# --- layer norm -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@few_examples
@given(st.integers(1, 8), seeds, st.sampled_from([1e-5, 1e-3, 0.5]), st.booleans())
def test_layer_norm_matches_torch(dtype, d_model, seed, eps, bias):
    # Rows of random values, offset from 0 so the mean matters. Not hypothesis's arrays: a
    # constant float32 row leaves rounding noise of ~1e-7 in x - mean, which 1/sqrt(eps) ~ 300
    # amplifies past 2e-5 (torch happens to get exact zeros there); that is float32, not a bug.
    (x,) = normal(seed, (2, 3, d_model), dtype=dtype, loc=2.0)
    module = randomized(torch.nn.LayerNorm(d_model, eps=eps, bias=bias), seed, dtype)
    params, kwargs = from_torch(module)
    assert kwargs == {"eps": eps} and params["gamma"].dtype == dtype
    assert_matches_torch(ma.layer_norm(x, **params, **kwargs), module(t(x)))


# --- encoder block and stack ----------------------------------------------------------------

ACTIVATIONS = {  # what torch accepts -> what from_torch reports
    "relu": "relu", "gelu": "gelu", F.relu: "relu", F.gelu: "gelu", torch.nn.ReLU(): "relu",
    torch.nn.GELU(): "gelu", torch.nn.GELU(approximate="tanh"): "gelu_tanh",
}


# (ids without memory addresses, the same in every process: pytest-xdist's workers compare them)
@pytest.mark.parametrize("activation, name", ACTIVATIONS.items(),
                         ids=lambda a: f"F.{a.__name__}" if hasattr(a, "__name__") else str(a))
def test_every_spelling_of_an_activation_is_recognised(activation, name):
    layer = torch.nn.TransformerEncoderLayer(4, 2, 8, activation=activation)
    assert from_torch(layer)[1]["activation"] == name


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation, name", [("relu", "relu"), ("gelu", "gelu"),
                                              (torch.nn.GELU(approximate="tanh"), "gelu_tanh")])
@few_examples
# d_model >= 4: LayerNorm over 2 features is ill-conditioned (two nearly equal features amplify
# float32 rounding by 1/sqrt(eps)), and there both engines stray from float64 by more than 2e-5.
@given(model_sizes(min_d_model=4), seeds, st.sampled_from(["none", "padding", "causal+padding"]))
def test_encoder_block_matches_torch(dtype, norm_first, activation, name, sizes, seed, mask_kind):
    b, length, d_model, n_heads, d_ff = sizes
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, length, d_model)).astype(dtype)
    attn_mask, padding = torch_masks(mask_kind, rng, b, n_heads, length, length, dtype)
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, norm_first=norm_first,
                                             activation=activation, layer_norm_eps=1e-4,
                                             batch_first=True)
    layer = randomized(layer, seed, dtype)
    params, kwargs = from_torch(layer)
    assert kwargs == {"n_heads": n_heads, "norm_first": norm_first,
                      "activation": name, "eps": 1e-4}
    y = ma.encoder_block(params, x, mask_from_torch(attn_mask, padding), **kwargs)
    assert_matches_torch(y, layer(t(x), src_mask=None if attn_mask is None else t(attn_mask),
                                  src_key_padding_mask=None if padding is None else t(padding)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_first, final_norm", [(False, False), (True, True), (True, False)])
@few_examples
@given(model_sizes(min_d_model=4), st.integers(1, 3), seeds)  # d_model >= 4: see above
def test_encoder_matches_torch(dtype, norm_first, final_norm, sizes, n_layers, seed):
    b, length, d_model, n_heads, d_ff = sizes
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(b, length, d_model)).astype(dtype)
    attn_mask, padding = torch_masks("causal+padding", rng, b, n_heads, length, length, dtype)
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, d_ff, activation="gelu",
                                             norm_first=norm_first, batch_first=True)
    norm = torch.nn.LayerNorm(d_model) if final_norm else None
    # enable_nested_tensor=False: the nested-tensor path warns and zeroes padded positions.
    stack = torch.nn.TransformerEncoder(layer, n_layers, norm=norm, enable_nested_tensor=False)
    stack = randomized(stack, seed, dtype)
    params, kwargs = from_torch(stack)
    assert len(params["layers"]) == n_layers and ("final_norm" in params) == final_norm
    y = ma.encoder(params, x, mask_from_torch(attn_mask, padding), **kwargs)
    assert_matches_torch(y, stack(t(x), mask=t(attn_mask), src_key_padding_mask=t(padding)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_fast_path_agrees_too(dtype, activation):
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, activation=activation, batch_first=True)
    layer = randomized(layer, 0, dtype)
    params, kwargs = from_torch(layer)
    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype(dtype)
    padding = np.array([[False] * 5, [False, False, False, True, True]])
    torch.backends.mha.set_fastpath_enabled(True)
    try:
        with torch.no_grad():  # the fused kernel runs only when nothing needs a gradient
            fast = layer(t(x), src_key_padding_mask=t(padding))
    finally:
        torch.backends.mha.set_fastpath_enabled(False)
    y = ma.encoder_block(params, x, mask_from_torch(None, padding), **kwargs)
    assert_matches_torch(y, fast)


# --- from_torch: what it copies, what it refuses --------------------------------------------


def test_params_are_copies_in_the_module_dtype_and_minattn_layout():
    module = torch.nn.MultiheadAttention(6, 2)  # float32 by default
    params, kwargs = from_torch(module)
    assert kwargs == {"n_heads": 2}
    assert params["w_q"].dtype == np.float32 and params["w_o"].shape == (6, 6)
    np.testing.assert_array_equal(params["w_o"], module.out_proj.weight.detach().numpy().T)
    np.testing.assert_array_equal(params["w_k"], module.in_proj_weight.detach().numpy()[6:12].T)
    with torch.no_grad():
        module.out_proj.weight.add_(1.0)
    assert not np.array_equal(params["w_o"], module.out_proj.weight.detach().numpy().T)


def _stack_with(change):
    stack = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(4, 2, 8), 2,
                                        enable_nested_tensor=False)
    change(stack)
    return stack


@pytest.mark.parametrize("module, error, pattern", [
    (lambda: torch.nn.MultiheadAttention(4, 2, kdim=3), ValueError, r"kdim=3, vdim=4 \(not both embed_dim=4\)"),
    (lambda: torch.nn.MultiheadAttention(4, 2, add_bias_kv=True), ValueError, r"add_bias_kv=True"),
    (lambda: torch.nn.MultiheadAttention(4, 2, add_zero_attn=True), ValueError, r"add_zero_attn=True"),
    (lambda: torch.nn.LayerNorm((3, 4)), ValueError, r"normalized_shape=\(3, 4\)"),
    (lambda: torch.nn.LayerNorm(4, elementwise_affine=False), ValueError, r"elementwise_affine=False"),
    (lambda: torch.nn.LayerNorm(4).to(torch.bfloat16), TypeError, r"got torch.bfloat16"),
    (lambda: torch.nn.TransformerEncoderLayer(4, 2, 8, activation=F.silu), ValueError,
     r"activation <function silu .* is not supported"),
    (lambda: torch.nn.Conv1d(4, 4, 1), TypeError, r"from_torch supports .* got Conv1d"),
    (lambda: torch.nn.RMSNorm((3, 4)), ValueError, r"RMSNorm over normalized_shape=\(3, 4\)"),
    (lambda: torch.nn.RMSNorm(4, elementwise_affine=False), ValueError,
     r"RMSNorm with elementwise_affine=False"),
    (lambda: _stack_with(lambda s: setattr(s.layers[1], "norm_first", True)), ValueError,
     r"layers\[1\] has config .* minattn's encoder applies one config"),
    (lambda: _stack_with(lambda s: setattr(s.layers[0].norm2, "eps", 1e-3)), ValueError,
     r"norm1.eps=1e-05 and norm2.eps=0.001 differ"),
    (lambda: _stack_with(lambda s: setattr(s, "norm", torch.nn.LayerNorm(4, eps=1e-6))), ValueError,
     r"final norm's eps=1e-06 differs from the layers' eps=1e-05"),
])
def test_from_torch_refuses_what_minattn_cannot_compute(module, error, pattern):
    with pytest.raises(error, match=pattern):
        from_torch(module())


def test_missing_torch_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    hint = r"pip install torch \(the CPU build: pip install torch --index-url https://download\.pytorch\.org/whl/cpu\)"
    with pytest.raises(ImportError, match=hint):
        from_torch(object())


def test_importing_interop_does_not_import_torch():
    code = "import sys, minattn.interop; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
