"""minattn: Transformer attention as small, exact, pure NumPy functions.

Read the modules in the order the math builds (walkthrough.md follows the same path):

    attention.py      softmax, scaled_dot_product_attention
    masks.py          causal_mask, padding_mask            (True = may attend)
    heads.py          split_heads, merge_heads
    multi_head.py     init_multi_head_attention, multi_head_attention
    normalization.py  layer_norm, rms_norm
    position_wise.py  feed_forward
    encoder.py        encoder_block, encoder
    positional.py     positional_encoding
    blockwise.py      blockwise_attention        (FlashAttention's online softmax, same output)
    swap.py           swap: use your own function wherever minattn calls one (exercises)

The decoder (walkthrough.md, Part II):
    masks.py          causal_mask(n_q, n_k, align="bottom_right", window=w)  (a KV cache)
    rope.py           apply_rope                 (rotary position embedding, rotate-half)
    multi_head.py     n_kv_heads=                (grouped-query / multi-query attention)
    normalization.py  rms_norm;  position_wise.py  gated_feed_forward (SwiGLU)
    decoder.py        self_attention (KV cache), decoder_block, decoder, causal_lm, generate

Attention after Llama (walkthrough.md, end of Part II; imported when used):
    mla.py            latent_attention           (DeepSeek's multi-head latent attention)
    attention.py      sinks=;  sinks.py  streaming_cache   (attention sinks, StreamingLLM)
    differential.py   differential_attention     (Differential Transformer, DiffLlama)

Built on the core, imported only when used:
    train.py          a tiny encoder that learns (Adam, cross-entropy, the count task)
    pitfalls.py       classic mistakes as buggy variants, for the exercises in walkthrough.md
    interop.py        from_torch, mask_from_torch             (needs torch)
    pretrained.py     load_sentence_encoder, similarity_matrix (needs the extra '.[pretrained]')
    cli.py            python -m minattn
    check.py, properties.py, exercises/   the grader and the exercise stubs (needs hypothesis)
    cupy_autograd.py  autograd on CuPy arrays (loaded only with CuPy)

Shape letters, used in every shape comment:
    B  batch size                 L  sequence length (L_q queries, L_k keys)
    D  d_model, the model width   H  n_heads
    d_k = D / H, the width of one head (d_v for values when it differs)
    F  d_ff, the hidden width of the feed-forward network

Conventions: params are nested dicts of arrays (weights stored [d_in, d_out], so y = x @ w + b);
configuration is keyword arguments; init_* functions take an explicit np.random.Generator.
Everything is written with autograd.numpy, so autograd.grad differentiates it, and NumPy's
dispatch protocols let CuPy arrays run through the same code (gradients too: cupy_autograd.py).
"""
from .attention import scaled_dot_product_attention, softmax
from .blockwise import blockwise_attention
from .encoder import encoder, encoder_block, init_encoder, init_encoder_block
from .heads import merge_heads, split_heads
from .masks import causal_mask, padding_mask
from .multi_head import init_multi_head_attention, multi_head_attention
from .normalization import init_layer_norm, layer_norm, rms_norm
from .position_wise import feed_forward, gated_feed_forward, init_feed_forward, init_gated_feed_forward
from .positional import positional_encoding
from .rope import apply_rope
from .decoder import (causal_lm, decoder, decoder_block, generate, init_causal_lm, init_decoder,
                      init_decoder_block, self_attention)
from .course.swap import swap  # a tool, not a concept: kept out of __all__

__version__ = "0.1.0"

if "cupy" in __import__("sys").modules:  # CuPy already loaded: let autograd differentiate it
    from .engine import cupy_autograd

    cupy_autograd.register()

__all__ = [
    "softmax", "scaled_dot_product_attention",
    "causal_mask", "padding_mask",
    "split_heads", "merge_heads",
    "init_multi_head_attention", "multi_head_attention",
    "init_layer_norm", "layer_norm", "rms_norm",
    "init_feed_forward", "feed_forward",
    "init_encoder_block", "encoder_block", "init_encoder", "encoder",
    "positional_encoding",
    "blockwise_attention",
    "apply_rope", "init_gated_feed_forward", "gated_feed_forward",
    "self_attention", "init_decoder_block", "decoder_block", "init_decoder", "decoder",
    "init_causal_lm", "causal_lm", "generate",
]
