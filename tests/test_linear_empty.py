"""linear on inputs with no tokens or no input features: the shapes and values of x @ w + b,
as NumPy's own matmul gives them (a reshape to (-1, d_in) cannot infer -1 for an empty x)."""
import numpy as np
import pytest
from autograd import grad

from minattn.linear import linear


@pytest.mark.parametrize("x_shape, w_shape", [((2, 0, 4), (4, 3)), ((0, 4), (4, 3)),
                                              ((2, 5, 0), (0, 3)), ((2, 0), (0, 3))])
def test_linear_of_an_empty_input_is_the_matrix_product(x_shape, w_shape):
    rng = np.random.default_rng(0)
    x, w, b = np.zeros(x_shape), rng.normal(size=w_shape), rng.normal(size=w_shape[1])
    expected = np.matmul(x, w) + b  # the formula, by NumPy's matmul on the unflattened x
    out = linear(x, w, b)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


def test_the_gradient_of_an_empty_input_has_its_shape():
    x, w = np.zeros((2, 0, 4)), np.ones((4, 3))
    assert grad(lambda x: np.sum(linear(x, w)))(x).shape == (2, 0, 4)
    np.testing.assert_array_equal(grad(lambda w: np.sum(linear(x, w)))(w), np.zeros((4, 3)))
