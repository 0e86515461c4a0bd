"""The loader's edges that its mutants showed untested (tests/MUTANTS.md): models/llama_layout.py's
refusals with their whole messages (a layer's tensors without a prefix, a model's own tensors),
and linear_weight's memory order for an input that is not row-major; models/chat_model.py's
and models/conversation.py's below. References: the layouts as the docstrings state them."""
import numpy as np
import pytest

from minattn.models import llama_layout

LAYER_NAMES = ("self_attn.q_proj.weight, self_attn.k_proj.weight, self_attn.v_proj.weight, "
               "self_attn.o_proj.weight, input_layernorm.weight, mlp.gate_proj.weight, "
               "mlp.up_proj.weight, mlp.down_proj.weight, post_attention_layernorm.weight")


def _layer(prefix=""):
    # every required tensor of one layer, as a file holds them: [d_out, d_in] and [d]
    rng = np.random.default_rng(0)
    shapes = {"self_attn.q_proj.weight": (4, 4), "self_attn.k_proj.weight": (2, 4),
              "self_attn.v_proj.weight": (2, 4), "self_attn.o_proj.weight": (4, 4),
              "input_layernorm.weight": (4,), "mlp.gate_proj.weight": (6, 4),
              "mlp.up_proj.weight": (6, 4), "mlp.down_proj.weight": (4, 6),
              "post_attention_layernorm.weight": (4,)}
    return {prefix + name: rng.normal(size=shape) for name, shape in shapes.items()}


def test_a_layer_without_a_prefix_and_its_refusal_in_full():
    tensors = _layer()
    params = llama_layout.layer_params(tensors.get)  # transformers' names, no prefix
    np.testing.assert_array_equal(params["self_attention"]["w_q"],
                                  tensors["self_attn.q_proj.weight"].T)
    np.testing.assert_array_equal(params["feed_forward_norm"]["gamma"],
                                  tensors["post_attention_layernorm.weight"])
    with pytest.raises(ValueError) as info:
        llama_layout.layer_params({}.get)
    assert str(info.value) == ("no tensor 'self_attn.q_proj.weight': a Llama-layout layer needs "
                               + LAYER_NAMES)


def test_a_model_without_its_embedding_is_refused_in_full():
    tensors = _layer("model.layers.0.")
    with pytest.raises(ValueError) as info:
        llama_layout.llama_params(tensors.get, 1)
    assert str(info.value) == ("no tensor 'model.embed_tokens.weight': a Llama-layout model "
                               "needs model.embed_tokens.weight, model.norm.weight")


@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_linear_weight_is_fortran_ordered_whatever_the_input_order(order):
    w = np.arange(12.0).reshape(3, 4)  # [d_out, d_in]
    given = {"C": w, "F": np.asfortranarray(w), "strided": np.arange(24.0).reshape(3, 8)[:, ::2]}[order]
    got = llama_layout.linear_weight(given)
    np.testing.assert_array_equal(got, given.T)
    assert got.flags.f_contiguous and not np.shares_memory(got, given)
    for column in range(got.shape[1]):  # each output's weights: one contiguous run
        assert got[:, column].flags.c_contiguous


def test_packed_lays_a_strided_array_out_row_major():
    # neither C- nor F-contiguous (a slice): packed copies it in row-major order, as NumPy would
    # copy it; only a Fortran-ordered array keeps Fortran order (linear_weight's)
    strided = np.arange(48.0).reshape(6, 8)[::2, ::2]  # [3, 4]
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    tree = {"a": strided, "b": fortran}
    llama_layout.packed(tree)
    np.testing.assert_array_equal(tree["a"], np.arange(48.0).reshape(6, 8)[::2, ::2])
    assert tree["a"].flags.c_contiguous and not tree["a"].flags.f_contiguous
    assert tree["b"].flags.f_contiguous and not tree["b"].flags.c_contiguous


# ---- models/conversation.py's ChatCache: what a turn keeps and reads (no model needed) ----

def _held(ids):
    # a ChatCache holding ids, with a KV cache of as many positions (one layer, one head)
    from minattn.models.conversation import ChatCache

    chat = ChatCache()
    chat.ids = list(ids)
    kv = np.arange(len(ids) * 2.0).reshape(1, 1, len(ids), 2)
    chat.cache = ({"k": kv, "v": -kv},)
    return chat


def test_a_new_chat_cache_holds_nothing_and_has_read_nothing():
    from minattn.models.conversation import ChatCache

    chat = ChatCache()
    assert (chat.ids, chat.cache, chat.n_cached, chat.n_read) == ([], None, 0, 0)


def test_a_turn_of_the_ids_already_held_reads_only_the_last_again():
    chat = _held([1, 2, 3])
    assert chat.start([1, 2, 3]) == [3]  # the logits after 3 are needed: 3 is read again
    assert (chat.n_cached, chat.n_read, chat.ids) == (2, 1, [1, 2])
    assert chat.cache[0]["k"].shape == (1, 1, 2, 2)


def test_a_turn_that_differs_after_one_id_keeps_that_one():
    chat = _held([1, 2, 3])
    assert chat.start([1, 9, 9]) == [9, 9]
    assert (chat.n_cached, chat.n_read, chat.ids) == (1, 2, [1])
    np.testing.assert_array_equal(chat.cache[0]["k"], [[[[0.0, 1.0]]]])  # position 0's keys
    np.testing.assert_array_equal(chat.cache[0]["v"], [[[[-0.0, -1.0]]]])
