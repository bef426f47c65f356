"""label_entropy against scipy.stats.entropy (the oracle), plus its properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import entropy as scipy_entropy

from analytics.metrics.active_order import label_entropy


def _distributions(draw_rows: int, k: int) -> st.SearchStrategy:
    return arrays(
        np.float64, (draw_rows, k), elements=st.floats(0, 1, allow_nan=False, width=32)
    ).filter(lambda a: (a.sum(axis=1) > 1e-3).all())


@st.composite
def probability_matrices(draw: st.DrawFn) -> np.ndarray:
    n = draw(st.integers(1, 8))
    k = draw(st.integers(2, 7))
    raw = draw(_distributions(n, k))
    return raw / raw.sum(axis=1, keepdims=True)


def test_matches_scipy_row_by_row() -> None:
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(5) * 0.4, size=200)
    p[:10, 1:] = 0.0  # certain rows, with zero probabilities
    p[:10, 0] = 1.0
    expected = np.array([scipy_entropy(row) for row in p])
    assert np.allclose(label_entropy(p), expected)
    assert np.allclose(label_entropy(p, base=2), [scipy_entropy(row, base=2) for row in p])


@settings(max_examples=60, deadline=None)
@given(probability_matrices())
def test_agrees_with_scipy_and_stays_within_zero_and_log_k(p: np.ndarray) -> None:
    h = label_entropy(p)
    assert np.allclose(h, scipy_entropy(p, axis=1), atol=1e-9)
    assert (h >= -1e-12).all()
    assert (h <= np.log(p.shape[1]) + 1e-9).all()


@settings(max_examples=60, deadline=None)
@given(probability_matrices(), st.randoms(use_true_random=False))
def test_a_permutation_of_the_labels_changes_nothing(p: np.ndarray, rnd) -> None:
    order = list(range(p.shape[1]))
    rnd.shuffle(order)
    assert np.allclose(label_entropy(p[:, order]), label_entropy(p))


def test_bounds_are_reached() -> None:
    k = 4
    assert label_entropy(np.full(k, 1 / k))[0] == pytest.approx(np.log(k))
    assert label_entropy(np.eye(k)).tolist() == [0.0] * k


def test_a_nan_row_stays_nan_and_bad_input_is_refused() -> None:
    h = label_entropy([[np.nan, np.nan], [0.5, 0.5]])
    assert np.isnan(h[0])
    assert h[1] == pytest.approx(np.log(2))
    with pytest.raises(ValueError, match="negative"):
        label_entropy([[-0.1, 1.1]])
    with pytest.raises(ValueError, match="base"):
        label_entropy([[0.5, 0.5]], base=1)
