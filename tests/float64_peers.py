"""The test peers' own code run in float64 all through, for the 1e-10 comparisons.

transformers computes parts of a float64 model in float32: RMSNorm and LayerNorm variants cast
their input to float32, the RoPE frequencies and cos/sin are built in float32, the eager
attention's softmax and DiffLlama's λ take `dtype=torch.float32`, Qwen3-Next's gated delta rule
casts q, k, v, β and g to float32. The stock model then lands about 1e-7 from any exact float64
computation, too far for a 1e-10 comparison.

`float64_throughout()` runs the peer's code unchanged, with every request for float32 (a
`torch.float32` argument, `Tensor.float()`) answered in float64, through torch's public
`torch.overrides.TorchFunctionMode`, and with torch's default dtype float64 (tensors made without
a dtype, such as dynamic NTK's length ratio). Nothing of a peer's source is read, rewritten or
replaced, and no private name of a peer is touched. Build the model inside it: the buffers made at
construction (RoPE's inv_freq) are then float64 from the start. The `float64_islands` fixture
(tests/conftest.py) wraps a test in it.
"""
import contextlib

import numpy as np
import torch
from torch.overrides import TorchFunctionMode


def _float64(value):
    return torch.float64 if value is torch.float32 else value


class Float32AsFloat64(TorchFunctionMode):
    """Every torch call made inside asks for float64 where its caller asked for float32."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        return func(*map(_float64, args), **{k: _float64(v) for k, v in (kwargs or {}).items()})


@contextlib.contextmanager
def float64_throughout():
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Float32AsFloat64():
            yield
    finally:
        torch.set_default_dtype(default)


def float32_rounded(tensor):
    """A float64 tensor's values rounded to float32 (what a float32 file holds), still float64:
    by NumPy's cast, which the mode leaves alone (inside it, `tensor.float()` is float64)."""
    return torch.from_numpy(tensor.detach().numpy().astype(np.float32).astype(np.float64))
