"""minattn: Transformer attention as small, exact, pure NumPy functions.

Read the modules in the order the math builds; walkthrough.md follows the same path (its
section numbers in brackets):

Part I, attention, and the start of Part II, the block:
    attention.py      softmax, scaled_dot_product_attention                    [2, 3]
    masks.py          causal_mask, padding_mask   (True = may attend)          [4, 5]
    heads.py          split_heads, merge_heads                                 [5]
    linear.py         linear (x @ w + b);  multi_head.py  multi_head_attention [5]
    normalization.py  layer_norm, rms_norm                                     [6, 8]
    position_wise.py  feed_forward;  dropout.py  dropout (second reading)      [6]
    transformer_encoder.py  encoder_block, encoder                             [6]
    positional.py     positional_encoding                                      [7]
Part II, the decoder and the language model (and the second reading's grouped queries):
    multi_head.py     grouped_attention, n_kv_heads=  (grouped-query attention) [15]
    rope.py           apply_rope  (rotary position embedding, rotate-half)     [7, 16]
    kv_cache.py       self_attention (a KV cache; causal_mask(align=, window=)) [9]
    position_wise.py  gated_feed_forward (SwiGLU)                              [8]
    transformer_decoder.py  decoder_block, decoder                             [8]
    language_model.py causal_lm;  loss.py  cross_entropy                       [8]
    generation.py     generate  (greedy, temperature, top-k, top-p)            [10]
    models/char_gpt.py  nanoGPT's baby GPT trained on Shakespeare, character by character
                      (python -m minattn shakespeare; "Train it: a GPT that learns to write")
The variants, each in its own file, answering the calls that select them, in the order of the
priority each states (engine/variants.py; variants.trace lists the variants a call runs):
    rope_scaling.py   rope_frequencies (long-context RoPE schedules; long_context.py puts them in
                      self_attention);  softcap.py  soft_cap, capped_attention (Gemma 2) [23]
    mla.py            latent_attention  (DeepSeek's multi-head latent attention) [24]
    sinks.py          attention_with_sinks (sinks=, gpt-oss), streaming_cache (StreamingLLM)
    differential.py   differential_attention  (Differential Transformer, DiffLlama) [24]
    head_mask.py      scale_heads  (head_mask=: a head switched off, as its rows of w_o)
    lora.py           init_lora, merge, save_adapter, load_adapter  (lora=: LoRA, low-rank
                      adapters on the projections, as PEFT computes them; PEFT's files:
                      lora_files.py)
    hooks.py          hooks=: read and replace any activation (run_with_cache, replaced;
                      models/patching.py: the logit lens, activation and attribution patching)
Attention and recurrence (a state of fixed size in place of the KV cache):
    causal_linear_attention.py  linear_attention  (attention without the softmax)
    gated_delta_rule.py  delta_rule, l2_normalize  (the gated delta rule: DeltaNet, Qwen3-Next)
    gated_deltanet.py gated_deltanet  (Qwen3-Next's recurrent layer; causal_conv1d, gated_rms_norm)
    gated_attention.py  gated_attention  (Qwen3-Next's attention layers; rope.apply_partial_rope)
Parts III and IV, learning and cost:
    the hand-written gradients sit beside their forwards                       [11, 17]
    models/           count_task (a model that learns) [12], induction (what it learns) [13],
                      heads_of_a_model (what a real model's heads do: minattn.pretrained)
    blockwise.py      blockwise_attention  (FlashAttention's online softmax)   [22]

Around the concepts, each in a sub-package named for what it holds. The engine room is what the
concepts import; the families, the course, the models and the display import the concepts, never
the other way round, and are imported only when used (but for minattn.swap, which is light, and
the family files whose blocks answer calls of the shared functions):
    families/         one file per model family (llama, qwen3, gemma, olmo, gpt2, neox, phi,
                      stablelm, cohere, smollm3, phi3, granite, deepseek_v3, diffllama,
                      qwen3_next): what the family changes, written with the concepts, and its
                      converter from transformers; FAMILIES, the model_type table from_hf reads
    engine/           the engine room: argument checks (checks.py; decoder_checks.py for the
                      decoder side; param_checks.py, the sublayers' the blocks share), the
                      variants' dispatch (variants.py) and the policies a concept function
                      carries as labels:
                      float16_in_float32 (dtypes.py), gradient_by_hand (autograd_rules.py),
                      one_blas_thread and threads_chosen_by_timing (threads.py), attention by query blocks
                      (query_blocks.py), tables built once per value (memo.py),
                      arrays on another array's device (devices.py), autograd on CuPy
    course/           exercises/, properties/, grader.py (python -m minattn check), pitfalls.py,
                      swap.py (minattn.swap: use your own function wherever minattn calls one),
                      teaching.py (the walkthrough's plain forms, tested equal to the concepts)
    models/           count_task.py, sorting_lm.py, char_gpt.py (trained here), pretrained.py
                      (MiniLM),
                      interop.py (from_torch, mask_from_torch; from_hf, the dispatch to
                      families/; needs torch)
    training/         fine-tuning a real model: AdamW, clipping, the schedule (optimizer.py),
                      chat examples and the assistant-only loss (chat_data.py), the loop with
                      its checkpoints (loop.py); python -m minattn finetune; the text a
                      character-level model trains on (text_data.py)
    display/          terminal.py (heatmaps as text), plot.py (PNG figures, needs matplotlib)
    cli/              python -m minattn (one module per command)
minattn.interop and minattn.pretrained are the modules in models/, under their documented names.

Shape letters, used in every shape comment:
    B  batch size                 L  sequence length (L_q queries, L_k keys)
    D  d_model, the model width   H  n_heads
    d_k = D / H, the width of one head (d_v for values when it differs)
    F  d_ff, the hidden width of the feed-forward network

Conventions: params are nested dicts of arrays (weights stored [d_in, d_out], so y = x @ w + b);
configuration is keyword arguments; init_* functions take an explicit np.random.Generator.
Everything is written with autograd.numpy, so autograd.grad differentiates it, and NumPy's
dispatch protocols let CuPy arrays run through the same code (gradients too:
engine/cupy_autograd.py).
"""
from .attention import scaled_dot_product_attention, softmax
from .blockwise import blockwise_attention
from .heads import merge_heads, split_heads
from .masks import causal_mask, padding_mask
from .multi_head import grouped_attention, init_multi_head_attention, multi_head_attention
from .normalization import init_layer_norm, layer_norm, rms_norm
from .position_wise import feed_forward, gated_feed_forward, init_feed_forward, init_gated_feed_forward
from .positional import positional_encoding
from .rope import apply_rope
from .transformer_encoder import encoder, encoder_block, init_encoder, init_encoder_block
from .kv_cache import self_attention
from .transformer_decoder import decoder, decoder_block, init_decoder, init_decoder_block
from .language_model import causal_lm, init_causal_lm
from .generation import generate
from .loss import cross_entropy
from .causal_linear_attention import linear_attention
from .gated_delta_rule import delta_rule, l2_normalize
# The variants: each registers the calls it answers (engine/variants.py); the order in which they
# run is the priority each states, not the order of these imports.
from .families import neox as _neox, olmo as _olmo, gemma as _gemma, smollm3 as _smollm3  # noqa
from . import lora  # noqa: E402
from . import head_mask, long_context, sinks, softcap  # noqa: E402
from . import hooks  # noqa: E402
from .course.swap import swap  # a tool, not a concept: kept out of __all__

__version__ = "0.1.0"

if "cupy" in __import__("sys").modules:  # CuPy already loaded: let autograd differentiate it
    from .engine import cupy_autograd

    cupy_autograd.register()



def __getattr__(name):
    # minattn.pretrained and minattn.interop without importing them first (PEP 562): imported
    # when first used, so that `import minattn` stays free of their optional dependencies.
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LAZY_MODULES = ("pretrained", "interop")

__all__ = [
    "softmax", "scaled_dot_product_attention",
    "causal_mask", "padding_mask",
    "split_heads", "merge_heads",
    "init_multi_head_attention", "multi_head_attention", "grouped_attention",
    "init_layer_norm", "layer_norm", "rms_norm",
    "init_feed_forward", "feed_forward",
    "init_encoder_block", "encoder_block", "init_encoder", "encoder",
    "positional_encoding",
    "blockwise_attention",
    "apply_rope", "init_gated_feed_forward", "gated_feed_forward",
    "self_attention", "init_decoder_block", "decoder_block", "init_decoder", "decoder",
    "init_causal_lm", "causal_lm", "generate",
    "cross_entropy",
    "linear_attention", "delta_rule", "l2_normalize",
]
