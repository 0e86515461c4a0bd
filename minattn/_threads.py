"""The one place where minattn controls BLAS threads.

The attention core multiplies many small matrices (one [L_q, d_k] x [d_k, L_k] product per batch
and head). With two BLAS threads each of those products wakes and joins a second thread; when
other processes compete for the cores, every one of them waits for its thread, and the core
slows down ten-fold or more (benchmarks/bench_encoder.py --busy 2, README). One thread is barely
slower on a quiet machine. So the small products run under `one_blas_thread()`; the large
projections keep every thread. Uses threadpoolctl; a no-op if it is not installed.
"""
import contextlib

_controller = None


@contextlib.contextmanager
def one_blas_thread():
    """Context manager (or decorator): BLAS (OpenBLAS, MKL, ...) on one thread inside the
    block, the previous limits restored after it."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:
            _controller = ThreadpoolController()  # inspects the loaded libraries once
    if _controller is False:
        yield
        return
    limiter = _controller.limit(limits=1, user_api="blas")
    try:
        yield
    finally:
        limiter.restore_original_limits()
