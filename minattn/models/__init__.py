"""Whole models, trained here or loaded, and the bridges to PyTorch and Hugging Face.

    count_task.py   a tiny encoder that learns to count (the tour; trained with training/optimizer.py)
    sorting_lm.py   a causal LM that learns to sort digit strings
    induction.py    a two-layer attention-only model that grows an induction head
    char_gpt.py     nanoGPT's baby GPT, trained on Shakespeare character by character
    pretrained.py   all-MiniLM-L6-v2 as minattn functions (load_sentence_encoder)
    interop.py      from_torch, from_hf, mask_from_torch (needs torch)
    chat_model.py   SmolLM2 (or Llama, Mistral, Qwen 2/3, Gemma 2/3, Phi-3, SmolLM3, OLMo 2)
                    from a GGUF file or a save_pretrained folder, with its tokenizer and chat
                    template (load_language_model; no torch)
    checkpoints/    one module per family: transformers' tensor names and config.json, and
                    llama.cpp's GGUF names and keys, to minattn's params and config (no torch)
    gguf_header.py  a GGUF file's header read in milliseconds, its tensors checked inside the file
    adapter_files.py  a LoRA adapter checked against a model from both files' headers
    llama_layout.py the Llama name map, shared by the GGUF, safetensors and from_hf paths
    extras.py       the optional packages a loader needs, imported when used (require)
    heads_of_a_model.py  previous-token and induction heads of a loaded LM, scored and ablated

Built on the concepts; the concepts never import it.
"""
