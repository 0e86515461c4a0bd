"""The model families: one file each, composing minattn's canonical concepts and writing out
only what the family changes (its norms, its attention, its block), with its converter from
transformers. A reader learns what a family is by reading one short file; the concept
functions (attention.py, kv_cache.py, transformer_decoder.py, language_model.py, ...) name no
family.

    llama.py        Llama, Mistral, Qwen2: the canonical block (and the reader the others share)
    qwen3.py        Qwen3: QK-norm
    phi3.py         Phi-3: Llama's block, fused projections
    granite.py      Granite: Llama's block, four multipliers folded into weights
    smollm3.py      SmolLM3: Llama's block, some layers without RoPE (NoPE)
    olmo.py         OLMo 2, 3: norms after the sublayers only, QK-norm over all heads
    gemma.py        Gemma 1, 2, 3: (1 + w) RMSNorm, sandwich norms, GEGLU, scaled and
                    soft-capped attention, local and global layers
    gpt2.py         GPT-2: the canonical pre-norm LayerNorm block, learned positions
    neox.py         GPT-NeoX (Pythia): partial RoPE, parallel residual
    phi.py          Phi 1, 1.5, 2: NeoX's parallel block under one LayerNorm, a biased head
    stablelm.py     StableLM: LayerNorm, partial RoPE, optional parallel residual
    cohere.py       Cohere (Command R): parallel block, interleaved RoPE, logit scale
    deepseek_v3.py  DeepSeek-V3: multi-head latent attention (minattn.mla)
    diffllama.py    DiffLlama: differential attention (minattn.differential)
    qwen3_next.py   Qwen3-Next: Gated DeltaNet and gated attention layers
    hf.py           what every converter reads from a transformers model (tensors, RoPE, windows)

FAMILIES maps a transformers config.model_type to its family's module; minattn.interop.from_hf
is that dispatch. Importing this package imports no family (and never torch): converter(t)
imports the one asked for. `import minattn` imports the families whose block or model answers
calls of the shared functions (neox, olmo, gemma, smollm3: engine/variants.py); their
converters import torch only through the model they are given.
"""
import importlib

# config.model_type -> the module (in this package) whose CONVERTERS[model_type] converts it.
FAMILIES = {
    "llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "qwen3", "phi3": "phi3",
    "granite": "granite", "smollm3": "smollm3", "olmo2": "olmo", "olmo3": "olmo",
    "gemma": "gemma", "gemma2": "gemma", "gemma3_text": "gemma", "gpt2": "gpt2",
    "gpt_neox": "neox", "phi": "phi", "stablelm": "stablelm", "cohere": "cohere",
    "deepseek_v3": "deepseek_v3", "diffllama": "diffllama", "qwen3_next": "qwen3_next",
}


def converter(model_type):
    """-> the from_hf converter of the family of config.model_type (a KeyError if none)."""
    module = importlib.import_module(f"{__name__}.{FAMILIES[model_type]}")
    return module.CONVERTERS[model_type]
