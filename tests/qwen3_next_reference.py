"""transformers' own torch functions of Qwen3-Next's gated delta rule, stock and in float64.

Stock transformers casts q, k, v, β and g to float32 inside torch_chunk_gated_delta_rule and
torch_recurrent_gated_delta_rule (the FLA kernels compute in float32), whatever the model's
dtype, so its outputs agree with an exact float64 computation only to about 1e-7. `in_float64`
runs the same functions with every float32 request answered in float64 (tests/float64_peers.py:
torch's public TorchFunctionMode, nothing of the source read or rewritten); test_delta_rule.py
checks that it agrees with the stock function at float32 tolerance, so it is still
transformers' computation.

The two functions are named in transformers' model file, not in its documentation: no public entry
point takes the delta rule alone with its own chunk size and initial state (the model reaches both
through Qwen3NextForCausalLM, which tests/test_qwen3_next.py compares as a whole), so they are read
through tests/peers.py's `undocumented`, at the version the lock holds.
"""
import pytest

from .peers import undocumented

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
MODELING = "transformers.models.qwen3_next.modeling_qwen3_next"


def stock(name):
    """transformers' function (float32 inside; on the CPU, its torch implementation)."""
    return undocumented(MODELING, name)


def in_float64(name):
    """The same function, computing in float64."""
    from .float64_peers import float64_throughout

    def function(*args, **kwargs):
        with float64_throughout():
            return stock(name)(*args, **kwargs)

    return function


def call(function, q, k, v, beta, g, initial_state=None, **kwargs):
    """minattn's layout [B, H, L, d] and [B, H, L] in, transformers' [B, L, H, d] through, and
    (output [B, H, L, d_v], final state [B, H, d_k, d_v]) as NumPy arrays out."""
    t = lambda x: torch.from_numpy(x).transpose(1, 2)  # noqa: E731
    state = None if initial_state is None else torch.from_numpy(initial_state)
    out, final = function(t(q), t(k), t(v), t(g), t(beta), initial_state=state,
                          output_final_state=True, **kwargs)
    return out.transpose(1, 2).numpy(), final.numpy()
