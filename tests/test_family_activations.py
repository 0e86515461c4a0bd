"""The families' activation table (families/hf.py): transformers' names to minattn's, an
unknown one refused by name (GPT-2's activation_function, NeoX's and Phi's hidden_act)."""
from types import SimpleNamespace

import pytest

from minattn.families import hf


@pytest.mark.parametrize("name, expected", [("gelu", "gelu"), ("gelu_new", "gelu_tanh"),
                                            ("gelu_pytorch_tanh", "gelu_tanh"), ("relu", "relu")])
def test_transformers_activation_names_map_to_minattns(name, expected):
    assert hf.activation(SimpleNamespace(hidden_act=name)) == expected
    assert hf.activation(SimpleNamespace(activation_function=name), "activation_function") == \
        expected


@pytest.mark.parametrize("key", ["hidden_act", "activation_function"])
def test_an_unknown_activation_is_refused_naming_the_key(key):
    with pytest.raises(ValueError, match=rf"{key}='quick_gelu' is not supported"):
        hf.activation(SimpleNamespace(**{key: "quick_gelu"}), key)
