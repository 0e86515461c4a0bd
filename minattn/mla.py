"""Multi-head latent attention (MLA; DeepSeek-V2, arXiv:2405.04434, and DeepSeek-V3): keys and
values come out of one compressed latent per token, so the KV cache holds only that latent and
one shared RoPE key: kv_lora_rank + qk_rope_head_dim numbers per token and layer.

    c_kv = rms_norm(x W_kv_a[:, :r])            [..., L, r]       r = kv_lora_rank (cached)
    k_rope = rope(x W_kv_a[:, r:])              [..., L, d_rope]  one for all heads (cached)
    k_h = [c_kv W_UK_h, k_rope],  v_h = c_kv W_UV_h              W_kv_b = [W_UK_h, W_UV_h] per head
    q_h = [q_nope_h, rope(q_rope_h)]            from x W_q, or x W_q_a -> rms_norm -> W_q_b

Naive form: decompress k_h and v_h, then attend. Absorbed form: q_nope_h · (c_kv W_UK_h) =
(q_nope_h W_UK_hᵀ) · c_kv, so W_UK moves into the query and W_UV after the attention, and every
head attends over the latent itself: multi-query attention with keys [c_kv, k_rope] and values
c_kv. The two are the same function (walkthrough.md, "Multi-head latent attention").

params: {"w_q": [D, H (d_nope + d_rope)]} or {"w_q_a": [D, q_lora_rank], "gamma_q_a":
[q_lora_rank], "w_q_b": [q_lora_rank, H (d_nope + d_rope)]}; "w_kv_a": [D, r + d_rope],
"gamma_kv_a": [r], "w_kv_b": [r, H (d_nope + d_v)], "w_o": [H d_v, D]; optional biases
"b_q_a", "b_kv_a", "b_o" (DeepSeek's attention_bias). RoPE is rotate-half (minattn.apply_rope);
DeepSeek's interleaved layout becomes rotate-half by permuting weight columns
(minattn.families.deepseek_v3).
"""

import autograd.numpy as np

from .attention import scaled_dot_product_attention
from .engine import checks
from .engine.param_checks import ROPE_BASE
from .heads import merge_heads, split_heads
from .kv_cache import _append
from .linear import linear
from .normalization import rms_norm
from .rope import apply_rope, check_positions
from .rope_scaling import check_rope_scaling

# A decoder block's keywords latent_attention accepts through **others: RoPE's two (read), and
# the block's eps (ignored: the latents' norms take latent_eps). Any other must be None.
_BLOCK_KEYWORDS = ("rope_base", "rope_scaling", "eps")


def latent_attention(params, x, mask=None, *, n_heads, qk_nope_head_dim, qk_rope_head_dim,
                     v_head_dim, positions, latent_eps=1e-6, cache=None, absorb=False, **others):
    """Multi-head latent attention of x [..., L, D] over its cached latents and its own:
    -> (output [..., L, D], new cache {"c_kv": [..., L_past + L, r], "k_rope": [..., L_past + L,
    d_rope]}). positions: int RoPE positions broadcasting to [..., L]; mask covers all
    L_past + L keys. absorb=True computes the absorbed form. Scores are scaled by
    1/sqrt(d_nope + d_rope). The RoPE part takes rope_base (default 10000.0) and rope_scaling
    (default None: a schedule of minattn.rope_scaling, DeepSeek-V3's YaRN), as apply_rope's base
    and scaling. eps (a decoder block's, for its own norms) is not used: the latents' norms take
    latent_eps. Other keywords a decoder block passes (n_kv_heads, d_k, window, head_mask, ...)
    must be None: MLA has none of them (causal_lm's head_mask scales w_o's rows instead:
    minattn.head_mask)."""
    # [..., L, D] -> [..., L, D]; the cache grows by L along its token axis.
    params, x, mask, positions, rope = _check_latent_attention(
        params, x, mask, n_heads, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, positions,
        latent_eps, cache, others)
    d_nope, r = qk_nope_head_dim, params["gamma_kv_a"].shape[0]
    q = split_heads(_queries(params, x, latent_eps), n_heads)  # [..., H, L, d_nope + d_rope]
    q_nope, q_rope = q[..., :d_nope], apply_rope(q[..., d_nope:], _per_head(positions), **rope)
    latent = _linear(params, x, "kv_a")  # [..., L, r + d_rope]
    c_kv = rms_norm(latent[..., :r], params["gamma_kv_a"], latent_eps)  # [..., L, r]
    k_rope = apply_rope(latent[..., r:], positions, **rope)  # [..., L, d_rope], one head
    if cache is not None:  # the past's latents: r + d_rope numbers per token
        c_kv, k_rope = _append(cache.get("c_kv"), c_kv), _append(cache.get("k_rope"), k_rope)
    w_uk, w_uv = _up_projections(params["w_kv_b"], n_heads, d_nope)  # [H, r, d_nope], [H, r, d_v]
    attend = _absorbed if absorb else _naive
    heads = attend(q_nope, q_rope, c_kv, k_rope, w_uk, w_uv, mask)  # [..., H, L, d_v]
    return _linear(params, merge_heads(heads), "o"), {"c_kv": c_kv, "k_rope": k_rope}


def _per_head(positions):
    # [..., L] -> [..., 1, L]: the queries' RoPE positions against their head axis ([L]
    # broadcasts as it is).
    return positions[..., None, :] if positions.ndim > 1 else positions


def _up_projections(w_kv_b, n_heads, d_nope):
    # W_kv_b [r, H (d_nope + d_v)] -> W_UK [H, r, d_nope], W_UV [H, r, d_v]: each head's columns
    # are its key part, then its value part.
    r, width = w_kv_b.shape[0], w_kv_b.shape[1] // n_heads  # width: d_nope + d_v
    w_kv_b = np.reshape(w_kv_b, (r, n_heads, width))  # [r, H, d_nope + d_v]
    return np.swapaxes(w_kv_b[..., :d_nope], 0, 1), np.swapaxes(w_kv_b[..., d_nope:], 0, 1)


def _naive(q_nope, q_rope, c_kv, k_rope, w_uk, w_uv, mask):
    # Decompress every head's keys and values from the latent, then attend as usual.
    k_nope = c_kv[..., None, :, :] @ w_uk  # [..., H, L_k, d_nope]
    v = c_kv[..., None, :, :] @ w_uv  # [..., H, L_k, d_v]
    k_rope = np.broadcast_to(k_rope[..., None, :, :], k_nope.shape[:-1] + k_rope.shape[-1:])
    q = np.concatenate([q_nope, q_rope], axis=-1)  # [..., H, L, d_nope + d_rope]
    k = np.concatenate([k_nope, k_rope], axis=-1)  # [..., H, L_k, d_nope + d_rope]
    return scaled_dot_product_attention(q, k, v, mask)[0]


def _absorbed(q_nope, q_rope, c_kv, k_rope, w_uk, w_uv, mask):
    # q_nope · (c_kv W_UK)ᵀ = (q_nope W_UKᵀ) · c_kv: attend over the latent (one key and value
    # head shared by all: multi-query), then decompress the output with W_UV.
    d_qk = q_nope.shape[-1] + q_rope.shape[-1]
    q_latent = q_nope @ np.swapaxes(w_uk, -1, -2)  # [..., H, L, r]
    q = np.concatenate([q_latent, q_rope], axis=-1)  # [..., H, L, r + d_rope]
    k = np.concatenate([c_kv, k_rope], axis=-1)[..., None, :, :]  # [..., 1, L_k, r + d_rope]
    heads = scaled_dot_product_attention(q, k, c_kv[..., None, :, :], mask,
                                         scale=d_qk ** -0.5)[0]  # [..., H, L, r]
    return heads @ w_uv  # [..., H, L, d_v]


def _queries(params, x, eps):
    # [..., L, D] -> [..., L, H (d_nope + d_rope)], through the low-rank bottleneck if present.
    if "w_q_a" in params:
        return rms_norm(_linear(params, x, "q_a"), params["gamma_q_a"], eps) @ params["w_q_b"]
    return x @ params["w_q"]


def _linear(params, x, name):
    return linear(x, params[f"w_{name}"], params.get(f"b_{name}"))


def init_latent_attention(rng, d_model, n_heads, *, kv_lora_rank, qk_nope_head_dim,
                          qk_rope_head_dim, v_head_dim, q_lora_rank=None, bias=False,
                          dtype=np.float64):
    """-> latent_attention's params (module docstring), weights U(±1/sqrt(d_in)), norms' gamma 1,
    zero biases; q_lora_rank=None: no query bottleneck (DeepSeek-V2-Lite)."""
    dtype = checks.check_init(rng, dtype)
    d_q = n_heads * (qk_nope_head_dim + qk_rope_head_dim)
    shapes = {"kv_a": (d_model, kv_lora_rank + qk_rope_head_dim),
              "kv_b": (kv_lora_rank, n_heads * (qk_nope_head_dim + v_head_dim)),
              "o": (n_heads * v_head_dim, d_model)}
    shapes.update({"q": (d_model, d_q)} if q_lora_rank is None else
                  {"q_a": (d_model, q_lora_rank), "q_b": (q_lora_rank, d_q)})
    params = {f"w_{name}": rng.uniform(-1, 1, size=shape) / np.sqrt(shape[0])
              for name, shape in shapes.items()}
    params.update({"gamma_kv_a": np.ones(kv_lora_rank)} if q_lora_rank is None else
                  {"gamma_kv_a": np.ones(kv_lora_rank), "gamma_q_a": np.ones(q_lora_rank)})
    if bias:
        params.update({f"b_{name}": np.zeros(shapes[name][1])
                       for name in ("q_a", "kv_a", "o") if name in shapes})
    return {name: a.astype(dtype) for name, a in params.items()}


def empty_latent_cache(x, kv_lora_rank, qk_rope_head_dim):
    """-> {"c_kv": [..., 0, r], "k_rope": [..., 0, d_rope]} in x's dtype and array library, for
    x [..., L, D]."""
    lead = x.shape[:-2]
    return {"c_kv": np.zeros_like(x, shape=lead + (0, kv_lora_rank)),
            "k_rope": np.zeros_like(x, shape=lead + (0, qk_rope_head_dim))}


def _check_latent_attention(params, x, mask, n_heads, d_nope, d_rope, d_v, positions, eps, cache,
                            others):
    # -> params, x, mask, positions and the RoPE keywords {"base", "scaling"} for apply_rope.
    rope_base, rope_scaling = others.get("rope_base", ROPE_BASE), others.get("rope_scaling")
    checks.check_unused_keywords("latent_attention", {
        key: value for key, value in others.items() if key not in _BLOCK_KEYWORDS})
    if isinstance(params, checks.DICT_TYPES) and "sinks" in params:  # never silently ignored
        raise ValueError("latent_attention does not support attention sinks (params['sinks'])")
    x = checks.as_float_array("x", x)
    checks.check_min_ndim("x", x, 2, "(..., L, d_model)")
    d_model = x.shape[-1]
    n_heads = checks.check_size("n_heads", n_heads)
    d_nope = checks.check_size("qk_nope_head_dim", d_nope, minimum=0)
    d_rope = checks.check_size("qk_rope_head_dim", d_rope)
    d_v = checks.check_size("v_head_dim", d_v)
    if d_rope % 2:
        raise ValueError(f"qk_rope_head_dim must be even (RoPE rotates pairs), got {d_rope}")
    checks.check_positive_real("latent_eps", eps, allow_zero=True)
    checks.check_positive_real("rope_base", rope_base, allow_inf=True)  # as apply_rope's base
    check_rope_scaling(rope_scaling)
    checks.check_params(params, {}, "params")
    if "gamma_kv_a" not in params:
        raise ValueError("params is missing key 'gamma_kv_a' (the latent's RMSNorm, "
                         "[kv_lora_rank])")
    r = checks.check_shape("params['gamma_kv_a']", params["gamma_kv_a"], ("kv_lora_rank",)).shape[0]
    d_q = n_heads * (d_nope + d_rope)
    shapes = {"w_kv_a": (d_model, r + d_rope), "gamma_kv_a": (r,),
              "w_kv_b": (r, n_heads * (d_nope + d_v)), "w_o": (n_heads * d_v, d_model)}
    if "w_q_a" in params:
        rank = checks.check_shape("params['w_q_a']", params["w_q_a"], (d_model, "q_lora_rank"))
        shapes.update({"w_q_a": (d_model, rank.shape[1]), "gamma_q_a": (rank.shape[1],),
                       "w_q_b": (rank.shape[1], d_q)})
    else:
        shapes["w_q"] = (d_model, d_q)
    outs = {"q_a": shapes.get("w_q_a", (0, 0))[1], "kv_a": r + d_rope, "o": d_model}
    shapes.update({f"b_{p}": (n,) for p, n in outs.items() if f"b_{p}" in params})
    params = checks.check_params(params, shapes, "params", x.dtype)
    positions = check_positions(positions, x)
    past = 0
    if cache is not None and not (isinstance(cache, checks.DICT_TYPES) and not cache):  # {}: empty
        if not isinstance(cache, checks.DICT_TYPES) or "c_kv" not in cache or "k_rope" not in cache:
            raise TypeError("cache must be a dict {'c_kv': [..., L_past, kv_lora_rank], "
                            f"'k_rope': [..., L_past, qk_rope_head_dim]}}, got "
                            f"{type(cache).__name__}")
        lead = tuple(x.shape[:-2])
        for key, width in (("c_kv", r), ("k_rope", d_rope)):
            shape = tuple(cache[key].shape)
            if shape[:-2] != lead or shape[-1] != width or shape[-2] != cache["c_kv"].shape[-2]:
                raise ValueError(f"cache[{key!r}] has shape {shape}, expected "
                                 f"{lead + ('L_past', width)}: a cache from another model or "
                                 "batch?")
        past = cache["c_kv"].shape[-2]
    scores = x.shape[:-2] + (n_heads, x.shape[-2], past + x.shape[-2])
    mask = checks.check_mask(mask, scores, "the per-head scores (..., H, L, L_past + L)")
    checks.check_mask_has_head_axis(mask, scores)
    return params, x, mask, positions, {"base": rope_base, "scaling": rope_scaling}
