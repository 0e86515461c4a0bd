"""causal_lm's hooks= read and replace a model's activations, against transformers (float64):
the residual stream against output_hidden_states, the weights against output_attentions, each
sublayer's output and each head's output before o_proj against torch forward hooks, and every
replacement against a torch hook making the same one. Small random Llama, Qwen3 (QK-norm, its
own head width) and Gemma 2 (sandwich norms, soft-capping, a sliding window) built from a
config; transformers' float32 islands lifted (the float64_islands fixture, tests/float64_peers.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="parity with transformers needs torch")
transformers = pytest.importorskip("transformers", reason="parity tests need transformers")

import minattn as ma  # noqa: E402
from minattn.hooks import ACTIVATIONS, replaced, run_with_cache  # noqa: E402
from minattn.interop import from_hf  # noqa: E402

from .peers import undocumented  # noqa: E402
from .test_hf_families import _build  # noqa: E402
from .test_hf_parity import V  # noqa: E402

FAMILIES = {
    "llama": ("llama", {}),
    "qwen3": ("qwen3", {"head_dim": 12}),
    "gemma2": ("gemma2", {"head_dim": 12, "sliding_window": 3, "attn_logit_softcapping": 1.5,
                          "final_logit_softcapping": 2.0, "query_pre_attn_scalar": 20}),
}
TOL = 1e-8


def _models(name):
    family, overrides = FAMILIES[name]
    model = _build(family, torch.float64, **{**overrides, "attn_implementation": "eager"}).eval()
    return model, *from_hf(model)


def _tokens(seed, b=2, length=6):
    return np.random.default_rng(seed).integers(3, V, size=(b, length))


def _torch_run(model, tokens, hooks=()):
    # -> logits, and the outputs of transformers (hidden states, attentions), with torch hooks
    handles = [register(hook) for register, hook in hooks]
    try:
        with torch.no_grad():
            out = model(torch.from_numpy(tokens), output_hidden_states=True,
                        output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    return out


def _sublayers(model, layer):
    block = model.model.layers[layer]
    return {"attn_out": block.self_attn.register_forward_hook,
            "mlp_out": block.mlp.register_forward_hook,
            "z": block.self_attn.o_proj.register_forward_pre_hook,
            "resid_pre": lambda f: block.register_forward_pre_hook(f, with_kwargs=True)}


def _torch_value(name, output, n_heads):
    # a torch hook's view of the activation -> minattn's layout
    if name == "attn_out":
        return output[0].numpy()
    if name == "z":  # o_proj's input [B, L, H d] -> [B, H, L, d]
        b, length, width = output[0].shape
        return output[0].reshape(b, length, n_heads, width // n_heads).transpose(1, 2).numpy()
    return output.numpy()


@pytest.mark.parametrize("name", FAMILIES)
def test_recorded_activations_equal_transformers(name, float64_islands):
    model, params, config = _models(name)
    tokens = _tokens(0)
    recorded, hooks = {}, []
    for layer in range(len(params["layers"])):
        for act, register in _sublayers(model, layer).items():
            if act == "resid_pre":
                continue
            keep = (lambda key: lambda module, *args: recorded.__setitem__(
                key, _torch_value(key[0], args[-1] if key[0] != "z" else args[0],
                                  config["n_heads"])))((act, layer))
            hooks.append((register, keep))
    out = _torch_run(model, tokens, hooks)
    logits, cache = run_with_cache(params, tokens, **config)
    assert set(cache) == {(a, layer) for a in ACTIVATIONS for layer in range(len(params["layers"]))}
    np.testing.assert_allclose(logits, out.logits.numpy(), rtol=0, atol=TOL)
    n = len(params["layers"])
    for layer in range(n):
        np.testing.assert_allclose(cache["resid_pre", layer], out.hidden_states[layer].numpy(),
                                   rtol=0, atol=TOL)
        np.testing.assert_allclose(cache["pattern", layer], out.attentions[layer].numpy(),
                                   rtol=0, atol=TOL)
        for act in ("attn_out", "mlp_out", "z"):
            np.testing.assert_allclose(cache[act, layer], recorded[act, layer], rtol=0, atol=TOL)
    for layer in range(n - 1):  # transformers' last hidden state is after the final norm
        np.testing.assert_allclose(cache["resid_post", layer], out.hidden_states[layer + 1].numpy(),
                                   rtol=0, atol=TOL)


def _replacing_torch_hook(name, new, n_heads, head=None, position=None):
    # a torch hook writing `new` into the activation (numpy, minattn's layout) where selected
    def select(value):  # value: minattn's layout; new where selected
        out = value.copy()
        index = (slice(None),) * (value.ndim - 2) if head is None else \
            (slice(None), head)
        out[index + ((slice(None) if position is None else position),)] = \
            np.broadcast_to(new, value.shape)[index + ((slice(None) if position is None
                                                        else position),)]
        return out

    if name == "attn_out":
        return lambda module, args, output: (torch.from_numpy(select(output[0].numpy())),
                                             *output[1:])
    if name == "mlp_out":
        return lambda module, args, output: torch.from_numpy(select(output.numpy()))
    if name == "z":
        def pre(module, args):
            b, length, width = args[0].shape
            z = args[0].reshape(b, length, n_heads, width // n_heads).transpose(1, 2).numpy()
            z = torch.from_numpy(select(z)).transpose(1, 2).reshape(b, length, width)
            return (z, *args[1:])
        return pre

    def resid(module, args, kwargs):
        if args:
            return (torch.from_numpy(select(args[0].numpy())), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": torch.from_numpy(select(
            kwargs["hidden_states"].numpy()))}
    return resid


@pytest.mark.parametrize("name", FAMILIES)
def test_replacements_equal_torch_hooks_making_them(name, float64_islands):
    model, params, config = _models(name)
    tokens, other = _tokens(0), _tokens(1)
    _, other_cache = run_with_cache(params, other, **config)
    h = config["n_heads"]
    cases = [  # (activation, layer, new, head, position)
        ("z", 1, np.zeros((), dtype=np.float64), 1, None),  # a head ablated
        ("attn_out", 0, other_cache["attn_out", 0], None, None),  # another run's
        ("mlp_out", 1, other_cache["mlp_out", 1].mean(0, keepdims=True), None, 2),  # a mean
        ("resid_pre", 1, other_cache["resid_pre", 1], None, 3),
        ("z", 0, other_cache["z", 0], 3, 4)]
    for act, layer, new, head, position in cases:
        logits = ma.causal_lm(params, tokens, hooks={(act, layer): replaced(
            new, head=head, position=position)}, **config)
        register = _sublayers(model, layer)[act]
        expected = _torch_run(model, tokens, [(register, _replacing_torch_hook(
            act, new, h, head, position))]).logits.numpy()
        plain = _torch_run(model, tokens).logits.numpy()
        assert np.abs(expected - plain).max() > 1e-3, (act, "the replacement must matter")
        np.testing.assert_allclose(logits, expected, rtol=0, atol=TOL, err_msg=act)


def test_a_replaced_pattern_is_what_the_values_are_read_with():
    # the reference: the layer's z recomputed by hand from the replaced weights and the values
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 2, 24, 4, 32,
                                       position="rope", norm="rms_norm", activation="swiglu",
                                       bias=False, tied=False, n_kv_heads=2)
    tokens = _tokens(2)
    uniform = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]  # [L, L]: the mean of the past
    _, cache = run_with_cache(params, tokens, hooks={("pattern", 1): replaced(uniform)}, **config)
    attention = params["layers"][1]["self_attention"]
    x = ma.rms_norm(cache["resid_pre", 1], params["layers"][1]["self_attention_norm"]["gamma"],
                    **({} if config.get("eps") is None else {"eps": config["eps"]}))
    v = (x @ attention["w_v"]).reshape(2, 6, 2, 6)  # [B, L, H_kv, d]
    for head in range(4):
        expected = np.einsum("qk,bkd->bqd", uniform, v[:, :, head // 2])  # kv head h // G
        np.testing.assert_allclose(cache["z", 1][:, head], expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cache["pattern", 1], np.broadcast_to(uniform, (2, 4, 6, 6)))


def test_without_hooks_the_model_runs_its_own_functions():
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 2, 24, 4, 32)
    tokens = _tokens(3)
    read = ma.causal_lm(params, tokens, hooks={(a, 1): (lambda v: v) for a in ACTIVATIONS},
                        **config)
    np.testing.assert_array_equal(read, ma.causal_lm(params, tokens, **config))


@pytest.mark.parametrize("hooks, message", [
    ({("attn", 0): lambda v: v}, "no activation is called 'attn'.*resid_pre, rot_q, rot_k, attn_out, z"),
    ({("z", 2): lambda v: v}, r"layer must be an int in \[0, 2\)"),
    ({"z": lambda v: v}, "a key is \\(name, layer\\)"),
    ({("z", 0): replaced(np.zeros((), dtype=np.float32))}, "dtype float32.*float64"),
    ({("z", 0): replaced(np.zeros((3, 6)))}, "must broadcast"),
    ({("z", 0): replaced(np.zeros(()), head=4)}, "head=4 is out of range.* has 4 along its head"),
    ({("attn_out", 0): replaced(np.zeros(()), head=0)}, "no head axis"),
    ({("mlp_out", 1): replaced(np.zeros(()), position=6)}, "position=6 is out of range"),
    ({("mlp_out", 1): lambda v: v[:, :3]}, r"returned shape \(2, 3, 24\).*\(2, 6, 24\)"),
    ({("mlp_out", 1): lambda v: None}, "returned NoneType"),
    ([{"attn": lambda v: v}, {}], "a block's hooks must be .* names among resid_pre"),
])
def test_bad_hooks_are_refused_by_name(hooks, message):
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 2, 24, 4, 32)
    with pytest.raises(ValueError, match=message):
        ma.causal_lm(params, _tokens(3), hooks=hooks, **config)


def test_heads_of_an_attention_that_is_not_self_attention_are_refused_by_name():
    import functools

    from minattn.mla import init_latent_attention, latent_attention

    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 2, 24, 4, 32,
                                       position="rope", norm="rms_norm", activation="swiglu",
                                       bias=False, tied=False)
    widths = {"qk_nope_head_dim": 4, "qk_rope_head_dim": 4, "v_head_dim": 5}
    rng = np.random.default_rng(1)
    params = {**params, "layers": [{**layer, "self_attention": init_latent_attention(
        rng, 24, 4, kv_lora_rank=6, q_lora_rank=7, **widths)} for layer in params["layers"]]}
    config = {**config, "attention": functools.partial(latent_attention, **widths)}
    logits, cache = run_with_cache(params, _tokens(3), names=("resid_pre", "attn_out"), **config)
    np.testing.assert_array_equal(logits, ma.causal_lm(params, _tokens(3), **config))
    with pytest.raises(ValueError, match="read self_attention's heads.*latent_attention"):
        ma.causal_lm(params, _tokens(3), hooks={("z", 1): lambda v: v}, **config)


@pytest.mark.parametrize("name", ["llama", "qwen3"])  # qwen3: QK-norm before the rotation
def test_rotated_queries_and_keys_equal_transformers_after_apply_rotary_pos_emb(
        name, float64_islands, monkeypatch):
    # q and k after RoPE exist in transformers only inside its attention's forward, as what the
    # model file's apply_rotary_pos_emb returns: that function is wrapped here, outside the
    # documented API (tests/peers.py), at the version the lock holds
    family = FAMILIES[name][0]
    modeling = f"transformers.models.{family}.modeling_{family}"
    rotated, rotate = [], undocumented(modeling, "apply_rotary_pos_emb")

    def recording(q, k, *args, **kwargs):  # each layer's q and k as transformers rotates them
        q, k = rotate(q, k, *args, **kwargs)
        rotated.append((q.numpy(), k.numpy()))
        return q, k
    monkeypatch.setattr(f"{modeling}.apply_rotary_pos_emb", recording)
    model, params, config = _models(name)
    tokens = _tokens(1)
    _torch_run(model, tokens)
    _, cache = run_with_cache(params, tokens, names=("rot_q", "rot_k"), **config)
    assert len(rotated) == len(params["layers"])
    for layer, (q, k) in enumerate(rotated):
        np.testing.assert_allclose(cache["rot_q", layer], q, rtol=0, atol=TOL)
        np.testing.assert_allclose(cache["rot_k", layer], k, rtol=0, atol=TOL)


def test_keys_replaced_by_zeros_give_every_query_the_mean_of_the_values_it_sees():
    params, config = ma.init_causal_lm(np.random.default_rng(0), V, 2, 16, 4, 24,
                                       n_kv_heads=2, position="rope", norm="rms_norm",
                                       activation="swiglu", bias=False)
    tokens = _tokens(2, b=1, length=5)
    zeros = lambda k: np.zeros_like(k)  # noqa: E731  (every score 0: uniform weights)
    _, cache = run_with_cache(params, tokens, hooks={("rot_k", 1): zeros},
                              names=("pattern",), **config)
    causal = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]
    np.testing.assert_allclose(cache["pattern", 1], np.broadcast_to(causal, (1, 4, 5, 5)),
                               rtol=0, atol=1e-14)
    assert np.abs(cache["pattern", 0] - causal).max() > 1e-3  # layer 0 keeps its own keys
