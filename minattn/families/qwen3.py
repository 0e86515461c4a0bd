"""Qwen3 (Yang et al. 2025, "Qwen3 Technical Report"). Tested against transformers'
models/qwen3/modeling_qwen3.py (tests/test_hf_families.py).

What the family changes: Llama's block with QK-norm. Each head of q and k is RMS-normalised
(its own gamma [d_k], shared by the heads) before RoPE, so the scores stay bounded:
    q = rms_norm(split_heads(x @ w_q)) * gamma_q,  k likewise,  then RoPE, then attention
The norms travel in the attention params as {"q_norm", "k_norm": {"gamma": [d_k]}}, which
minattn.kv_cache.self_attention applies where they are present; the tensors are read through
Llama's layout (models/llama_layout.py names q_norm and k_norm).
"""
from . import llama

def from_hf(model):
    # Llama's converter: its layout holds q_norm and k_norm where the model has them.
    return llama.from_hf(model)


# model_type -> this family's converter (the table in minattn/families/__init__.py reads it).
CONVERTERS = {"qwen3": from_hf}
