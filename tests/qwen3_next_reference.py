"""transformers' own torch functions of Qwen3-Next's gated delta rule, run in float64.

Stock transformers casts q, k, v, β and g to float32 inside torch_chunk_gated_delta_rule and
torch_recurrent_gated_delta_rule (the FLA kernels compute in float32), whatever the model's
dtype, so its outputs agree with an exact float64 computation only to about 1e-7. To compare
in float64 we run the same source with that one cast changed: the function's text is read with
inspect (the plain function under transformers' kernel-hub decorator, `__wrapped__`), the single
`torch.float32` replaced by `torch.float64`, and executed in the module's namespace. Nothing
else changes; test_delta_rule.py checks that the float64 copy agrees with the stock float32
function at float32 tolerance, so it is still transformers' computation.
"""
import inspect
import textwrap

import pytest

torch = pytest.importorskip("torch")
modeling = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")


def stock(name):
    """The stock function (float32 inside), without the kernel-hub wrapper."""
    function = getattr(modeling, name)
    return getattr(function, "__wrapped__", function)


def in_float64(name):
    """The same function, computing in float64."""
    source = textwrap.dedent(inspect.getsource(stock(name)))
    source = "\n".join(line for line in source.splitlines() if not line.startswith("@"))
    assert source.count("torch.float32") == 1, "transformers' function changed: re-read it"
    namespace = dict(vars(modeling))
    exec(source.replace("torch.float32", "torch.float64"), namespace)  # noqa: S102
    return namespace[name]


def call(function, q, k, v, beta, g, initial_state=None, **kwargs):
    """minattn's layout [B, H, L, d] and [B, H, L] in, transformers' [B, L, H, d] through, and
    (output [B, H, L, d_v], final state [B, H, d_k, d_v]) as NumPy arrays out."""
    t = lambda x: torch.from_numpy(x).transpose(1, 2)  # noqa: E731
    state = None if initial_state is None else torch.from_numpy(initial_state)
    out, final = function(t(q), t(k), t(v), t(g), t(beta), initial_state=state,
                          output_final_state=True, **kwargs)
    return out.transpose(1, 2).numpy(), final.numpy()
