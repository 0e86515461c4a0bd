"""The Gated DeltaNet layer (Yang et al. 2025, "Gated Delta Networks"; Qwen3-Next's
`linear_attention` layers): the gated delta rule (gated_delta_rule.py) as a token mixer, in
place of self-attention, with the projections and the short convolution around it.

    q, k, v = silu(causal_conv1d(x W_qkv))           a depthwise convolution over the last K tokens
    q, k = l2_normalize(q), l2_normalize(k);  β = sigmoid(x W_b);  g = −exp(A_log) · softplus(x W_a + dt_bias)
    o = delta_rule(q, k, v, β, g)                     per value head; key head h // (H_v / H_k)
    out = (rms_norm(o) · silu(x W_z)) W_out           the gated RMSNorm, per head

Its cache is {"conv": the last K − 1 inputs of the convolution [..., K − 1, C], "state": the
delta rule's state [..., H_v, d_k, d_v]}: the same size at every length, where attention's KV
cache grows by a key and a value a token (walkthrough.md, "Attention and recurrence").
"""
import autograd.numpy as np

from .engine.autograd_rules import where
from .engine.devices import concatenate
from .engine.recurrence_checks import _check_causal_conv1d, _check_gated_deltanet
from .gated_delta_rule import delta_rule, l2_normalize
from .heads import merge_heads, split_heads
from .normalization import rms_norm
from .position_wise import sigmoid, silu


def causal_conv1d(x, weight, state=None):
    """Depthwise causal convolution along time: out_t = Σ_j weight[j] · x_{t − (K − 1) + j}, one
    kernel per channel, x [..., L, C], weight [K, C], state [..., K − 1, C] (the inputs before
    x; None: zeros, a new sequence) -> (out [..., L, C], new state: the last K − 1 inputs)."""
    # [..., L, C], [K, C] -> [..., L, C], [..., K - 1, C]
    x, weight, state = _check_causal_conv1d(x, weight, state)
    window = weight.shape[0]
    padded = concatenate([state, x], axis=-2)  # [..., K - 1 + L, C]
    out = sum(padded[..., j:j + x.shape[-2], :] * weight[j] for j in range(window))
    return out, padded[..., padded.shape[-2] - (window - 1):, :]


def softplus(x):
    # log(1 + e^x), and x itself above 20, as torch's softplus (its threshold: the two differ by
    # less than 2.1e-9 there)
    return where(x > 20, x, np.logaddexp(0.0, np.minimum(x, 20)))


def gated_rms_norm(x, gamma, gate, eps=1e-6):
    """rms_norm(x, gamma, eps) · silu(gate): the output norm of Gated DeltaNet, x, gate [..., d]."""
    # [..., d], [d], [..., d] -> [..., d]
    return rms_norm(x, gamma, eps) * silu(gate)


def gated_deltanet(params, x, mask=None, *, n_key_heads, n_value_heads, eps=1e-6,
                   chunk_size=64, cache=None, **attention_layers_config):
    """The Gated DeltaNet token mixer of x [..., L, D] -> (output [..., L, D], new cache {"conv",
    "state"}). params: "w_qkv" [D, 2 H_k d_k + H_v d_v] (q, k and v side by side, the channels of
    the convolution), "conv" [K, 2 H_k d_k + H_v d_v], "w_z" [D, H_v d_v], "w_b", "w_a" [D, H_v],
    "dt_bias", "A_log" [H_v], "gamma" [d_v], "w_out" [H_v d_v, D]. mask: causal_lm's (True = may
    attend): a token whose query may not attend to itself is padding, and its input is zeroed
    (so it writes nothing), as transformers does. cache: None, {} (a new sequence) or what the
    previous call returned. A decoder passes every layer the attention layers' keywords
    (n_heads, d_k, positions, rope_base, ...): attention_layers_config, not used here."""
    # [..., L, D] -> [..., L, D]
    params, x, real, conv_state, state, d_k, d_v = _check_gated_deltanet(
        params, x, mask, n_key_heads, n_value_heads, eps, chunk_size, cache)
    x = x * real[..., None]  # padding writes nothing
    qkv, conv_state = causal_conv1d(x @ params["w_qkv"], params["conv"], conv_state)
    qkv = silu(qkv)  # [..., L, 2 H_k d_k + H_v d_v]
    q, k, v = _heads(qkv, n_key_heads, n_value_heads, d_k)  # [..., H_v, L, d_k] x 2, d_v
    beta = np.swapaxes(sigmoid(x @ params["w_b"]), -1, -2)  # write strength in (0, 1) [..., H_v, L]
    a = np.swapaxes(x @ params["w_a"], -1, -2) + params["dt_bias"][:, None]
    g = -np.exp(params["A_log"])[:, None] * softplus(a)  # log decay <= 0 [..., H_v, L]
    out, state = delta_rule(q, k, v, beta, g, initial_state=state, chunk_size=chunk_size,
                            return_state=True)  # [..., H_v, L, d_v]
    z = split_heads(x @ params["w_z"], n_value_heads)  # the output gate [..., H_v, L, d_v]
    out = merge_heads(gated_rms_norm(out, params["gamma"], z, eps))  # [..., L, H_v d_v]
    return out @ params["w_out"], {"conv": conv_state, "state": state}


def _heads(qkv, n_key_heads, n_value_heads, d_k):
    # [..., L, 2 H_k d_k + H_v d_v] -> q, k [..., H_v, L, d_k] (L2-normalised, each key head
    # repeated for the value heads it serves), v [..., H_v, L, d_v]
    width = n_key_heads * d_k
    q, k = (split_heads(qkv[..., i * width:(i + 1) * width], n_key_heads) for i in (0, 1))
    group = n_value_heads // n_key_heads  # value head h reads key head h // group
    # (axis counted from the front: autograd's gradient of np.repeat mishandles a negative one)
    q, k = (np.repeat(l2_normalize(t), group, axis=t.ndim - 3) for t in (q, k))  # [.., H_v, L, d_k]
    return q, k, split_heads(qkv[..., 2 * width:], n_value_heads)
