"""The engine room: what production code needs around the math, each policy defined once here.

    checks.py          argument checks: every public function's one `checks.check_*` line
    recurrence_checks.py  the checks of the recurrent layers (linear_attention, delta_rule,
                       gated_deltanet); hybrid_checks.py: gated_attention's
    decoder_checks.py  the decoder side's checks: self_attention, decoder_block, decoder,
                       causal_lm, generate (each function's one `_check_<name>` line)
    hook_checks.py     the hooks' checks (minattn.hooks); lora_checks.py: an adapter against
                       its model, and LoRA's targets (WEIGHTS: sublayer, weight, PEFT's module)
    threads.py         BLAS thread limits, a decode step's thread count chosen by timing,
                       worker threads (one_blas_thread, threads_chosen_by_timing, in_threads)
    processes.py       a training run's row pieces on a forked worker process, no GIL shared
                       (worker_processes: training/loop.py's steps, Linux)
    memo.py            tables built once per value of their arguments (by_value: RoPE's cos, sin)
    query_blocks.py    attention by blocks of queries, each over the keys it may see
    plain_core.py      the attention core's forward on NumPy itself, in fewer passes (the
                       canonical bits where the weights are returned; a prompt's unread
                       weights: the output divided by the sums)
    reductions.py      a max along short rows, taken down the columns of a transposed copy
                       of a block of rows (row_max: the shift of softmax and log-sum-exp), the
                       same max, faster;
                       row_dot, each row's dot product, without the product array
    fused_products.py  several weights of one input in one product, where they lie side by side;
                       bias_in_place: linear's bias added into its product where nothing
                       is recorded
    autograd_rules.py  autograd rules: gradients by hand (gradient_by_hand, and reads: what the
                       tape keeps for them; gradient_with_the_value: a loss's gradient computed
                       with it), and where, which keeps a gradient's dtype and device
    cupy_autograd.py   autograd on CuPy arrays (loaded only with CuPy)
    files.py           a run's files written under another name, then renamed, with the mode
                       the umask gives (write_replacing: adapters, checkpoints, losses)

The concepts import from here; nothing here imports a concept, but for decoder_checks.py, which
checks a block's sublayers with their own param checks (multi_head, position_wise, rope,
rope_scaling: the concepts below the decoder).
"""
