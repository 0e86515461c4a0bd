"""The engine room: what production code needs around the math, each policy defined once here.

    checks.py          argument checks: every public function's one `checks.check_*` line
    threads.py         BLAS thread limits and worker threads (one_blas_thread, in_threads)
    autograd_rules.py  autograd rules that keep a gradient's dtype and device (where)
    cupy_autograd.py   autograd on CuPy arrays (loaded only with CuPy)

The concepts import from here; nothing here imports a concept.
"""
