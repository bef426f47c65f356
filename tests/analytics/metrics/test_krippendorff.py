"""Krippendorff's alpha against Krippendorff (2011) and the `krippendorff` package (oracle only)."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.metrics import alpha_from_coincidences, coincidence_matrix, krippendorff_alpha

LEVELS = ["nominal", "ordinal", "interval", "ratio"]

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 coders x 12
# units with missing values (also in the `krippendorff` package's docstring).
CANONICAL = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
    [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan],
]

# Wikipedia / the package's README example: 3 coders x 15 units.
WIKIPEDIA = [
    [np.nan, np.nan, np.nan, np.nan, np.nan, 3, 4, 1, 2, 1, 1, 3, 3, np.nan, 3],
    [1, np.nan, 2, 1, 3, 3, 4, 3, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
    [np.nan, np.nan, 2, 1, 3, 4, 4, np.nan, 2, 1, 1, 3, 3, np.nan, 4],
]


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_canonical_example_krippendorff_2011(level, published):
    assert krippendorff_alpha(CANONICAL, level=level) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize(("level", "published"), [("nominal", 0.691358), ("interval", 0.810845)])
def test_wikipedia_example(level, published):
    assert krippendorff_alpha(WIKIPEDIA, level=level) == pytest.approx(published, abs=5e-7)


def _random_reliability_data(rng, n_coders, n_units, values, p_missing):
    truth = rng.choice(values, n_units)
    noise = rng.choice(values, (n_coders, n_units))
    data = np.where(rng.random((n_coders, n_units)) < 0.6, truth, noise).astype(float)
    data[rng.random((n_coders, n_units)) < p_missing] = np.nan
    return data


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("seed", range(6))
def test_equals_krippendorff_package_with_missing_data(seed, level):
    rng = np.random.default_rng(seed)
    values = [1, 2, 3, 5, 8] if seed % 2 else [0.5, 1.25, 2.0, 4.75]
    data = _random_reliability_data(rng, rng.integers(2, 7), 80, values, p_missing=0.4)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert krippendorff_alpha(data, level=level) == pytest.approx(expected, abs=1e-12)


def test_coincidence_matrix_hand_computed():
    # unit 1: (1, 1) -> o11 += 2; unit 2: (2, 2, 2) -> o22 += 3; unit 3: (1, 2, 1) -> o11 += 1,
    # o12 = o21 += 1; unit 4 has one value and adds nothing.
    data = [[1, 2, 1, 2], [1, 2, 2, np.nan], [np.nan, 2, 1, np.nan]]
    np.testing.assert_allclose(coincidence_matrix(data), [[3, 1], [1, 3]])


def test_coincidences_add_up_over_items_with_a_fixed_domain():
    rng = np.random.default_rng(4)
    data = _random_reliability_data(rng, 4, 60, [1, 2, 3], p_missing=0.3)
    domain = [1, 2, 3, 4]
    whole = coincidence_matrix(data, values=domain)
    parts = coincidence_matrix(data[:, :25], values=domain) + coincidence_matrix(
        data[:, 25:], values=domain
    )
    np.testing.assert_allclose(whole, parts)
    assert whole.shape == (4, 4)
    for level in LEVELS:
        assert alpha_from_coincidences(whole, domain, level=level) == pytest.approx(
            krippendorff_alpha(data, level=level), abs=1e-12
        )


def test_degenerate_cases():
    assert np.isnan(krippendorff_alpha([[1, 1, 1], [1, 1, 1]]))  # one value: D_e = 0
    assert np.isnan(krippendorff_alpha([[1, np.nan], [np.nan, 2]]))  # nothing pairable
    assert np.isnan(krippendorff_alpha(np.full((2, 3), np.nan)))
    assert krippendorff_alpha([[1, 2, 3], [1, 2, 3]]) == pytest.approx(1.0)
    one_unit = krippendorff_alpha([[1], [2]])
    assert one_unit == pytest.approx(
        krippendorff.alpha(reliability_data=[[1], [2]], level_of_measurement="nominal")
    )


def test_bad_input():
    with pytest.raises(ValueError, match="must be 2-D"):
        krippendorff_alpha([1, 2, 3])
    with pytest.raises(ValueError, match="is empty"):
        krippendorff_alpha(np.empty((2, 0)))
    with pytest.raises(ValueError, match="level must be 'nominal', 'ordinal', 'interval'"):
        krippendorff_alpha([[1, 2], [1, 2]], level="cardinal")
    with pytest.raises(ValueError, match=r"values must have shape \(2,\)"):
        alpha_from_coincidences([[1, 0], [0, 1]], [1, 2, 3])
    with pytest.raises(ValueError, match="square matrix"):
        alpha_from_coincidences([[1, 0, 0]], [1, 2, 3])
    with pytest.raises(ValueError, match="non-negative"):
        alpha_from_coincidences([[1, -1], [-1, 1]], [1, 2])
    with pytest.raises(ValueError, match="strictly increasing"):
        coincidence_matrix([[1, 2]], values=[2, 1])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(LEVELS), st.permutations([1, 2, 3, 4]))
def test_alpha_bounded_and_nominal_relabelling_invariant(seed, level, permutation):
    rng = np.random.default_rng(seed)
    data = _random_reliability_data(rng, 3, 20, [1, 2, 3, 4], p_missing=0.3)
    alpha = krippendorff_alpha(data, level=level)
    assert np.isnan(alpha) or alpha <= 1 + 1e-12
    mapping = np.array([np.nan, *permutation], dtype=float)
    relabelled = np.where(np.isnan(data), np.nan, mapping[np.nan_to_num(data).astype(int)])
    assert krippendorff_alpha(relabelled) == pytest.approx(krippendorff_alpha(data), nan_ok=True)
