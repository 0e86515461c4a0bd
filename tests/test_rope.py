"""apply_rope: a rotation of feature pairs whose angle grows with the position."""
import numpy as np
import pytest
from autograd import grad
from autograd.test_util import check_grads
from hypothesis import given
from hypothesis import strategies as st

from minattn.rope import apply_rope

from .strategies import float_arrays, tolerance


def _rope_loop(x, positions, base=10000.0):
    # Independent reference: rotate each pair (x[i], x[i + d/2]) by positions * base^(-2i/d)
    # with an explicit 2x2 rotation matrix, one position and one pair at a time.
    length, d = x.shape
    out = np.empty_like(x)
    for t in range(length):
        for i in range(d // 2):
            theta = positions[t] * base ** (-2.0 * i / d)
            c, s = np.cos(theta), np.sin(theta)
            a, b = x[t, i], x[t, i + d // 2]
            out[t, i], out[t, i + d // 2] = c * a - s * b, s * a + c * b
    return out


@given(st.integers(1, 5), st.integers(1, 4), st.data())
def test_matches_pairwise_rotation_loop(length, half, data):
    x = data.draw(float_arrays((length, 2 * half)))
    positions = np.array(data.draw(st.lists(st.integers(0, 5000), min_size=length,
                                            max_size=length)))
    np.testing.assert_allclose(apply_rope(x, positions), _rope_loop(x, positions),
                               **tolerance(np.float64))


@given(st.integers(1, 4), st.integers(0, 3000), st.integers(0, 3000), st.integers(-500, 500),
       st.data())
def test_scores_depend_only_on_the_position_offset(half, m, n, shift, data):
    # What RoPE is for: q at position m and k at position n score q . R(n - m) k, whatever m is.
    q = data.draw(float_arrays((1, 2 * half)))
    k = data.draw(float_arrays((1, 2 * half)))
    score = lambda a, b: (apply_rope(q, np.array([a])) @ apply_rope(k, np.array([b])).T)[0, 0]
    m2, n2 = m + shift + 500, n + shift + 500  # both shifted by the same amount, kept >= 0
    np.testing.assert_allclose(score(m, n), score(m2, n2), rtol=1e-9, atol=1e-9)


@given(st.integers(1, 4), st.data())
def test_rotation_preserves_norms_and_position_zero_is_identity(half, data):
    x = data.draw(float_arrays((3, 2 * half)))
    rotated = apply_rope(x, np.array([7, 123, 4000]))
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1),
                               **tolerance(np.float64))
    np.testing.assert_array_equal(apply_rope(x, np.zeros(3, dtype=int)), x)


def test_positions_broadcast_over_batch_and_heads():
    x = np.random.default_rng(0).normal(size=(2, 3, 4, 6))  # [B, H, L, d_k]
    positions = np.array([[0, 1, 2, 3], [5, 6, 7, 8]])[:, None, :]  # [B, 1, L]
    out = apply_rope(x, positions)
    for b in range(2):
        for h in range(3):
            np.testing.assert_allclose(out[b, h], _rope_loop(x[b, h], positions[b, 0]),
                                       **tolerance(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved_with_gradients(dtype):
    x = np.random.default_rng(1).normal(size=(3, 4)).astype(dtype)
    positions = np.arange(3)
    assert apply_rope(x, positions).dtype == dtype
    assert grad(lambda x: apply_rope(x, positions).sum())(x).dtype == dtype


def test_gradient_matches_finite_differences():
    x = np.random.default_rng(2).normal(size=(3, 4))
    check_grads(lambda x: apply_rope(x, np.array([0, 3, 9])), modes=["rev"], order=1)(x)


@pytest.mark.parametrize("x, positions, error, match", [
    (np.ones((3, 5)), np.arange(3), ValueError, "even"),
    (np.ones((3, 4)), np.arange(3.0), TypeError, "positions"),
    (np.ones((3, 4)), [0.0, 1.0, 2.0], TypeError, "positions"),
    (np.ones((3, 4)), np.arange(4), ValueError, "positions"),
    (np.ones((3, 4)), np.zeros((2, 3), dtype=int), ValueError, "positions"),
    (np.ones(4), np.arange(1), ValueError, "x"),
])
def test_bad_input_names_the_argument(x, positions, error, match):
    with pytest.raises(error, match=match):
        apply_rope(x, positions)


def test_positions_as_a_list_are_converted_like_an_array():
    # The README's rule for lists (checks.as_array) holds for integer arguments too.
    x = np.random.default_rng(0).normal(size=(3, 4))
    np.testing.assert_array_equal(apply_rope(x, [0, 1, 2]), apply_rope(x, np.arange(3)))
