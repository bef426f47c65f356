"""Robust z-scores, outlier flags with reasons, heatmap ordering and Landis-Koch bands."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import median_abs_deviation

from analytics.metrics import (
    agglomerative_order,
    flag_outliers,
    flag_with_intervals,
    landis_koch_band,
    mean_with_others,
    robust_z,
)


def test_robust_z_equals_scipy_mad():
    rng = np.random.default_rng(0)
    values = rng.normal(0.5, 0.1, 40)
    values[[3, 9]] = np.nan
    finite = values[~np.isnan(values)]
    scale = median_abs_deviation(finite, scale="normal")  # 1 / Phi^-1(3/4) = 1.4826
    expected = (values - np.median(finite)) / scale
    np.testing.assert_allclose(robust_z(values), expected, rtol=1e-4)
    assert np.isnan(robust_z(values)[[3, 9]]).all()


def test_robust_z_zero_mad_falls_back_to_mean_absolute_deviation():
    values = np.array([0.5, 0.5, 0.5, 0.5, 0.1])
    # MAD = 0; mean absolute deviation = 0.08 -> z = -0.4 / (1.253314 * 0.08)
    np.testing.assert_allclose(robust_z(values), [0, 0, 0, 0, -0.4 / (1.253314 * 0.08)])
    np.testing.assert_array_equal(robust_z([2.0, 2.0, np.nan]), [0.0, 0.0, np.nan])
    assert np.isnan(robust_z([np.nan, np.nan])).all()
    with pytest.raises(ValueError, match="non-empty 1-D"):
        robust_z([])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(-1000, 1000).map(lambda v: v / 100), min_size=1, max_size=30),
    st.floats(0.1, 10),
    st.floats(-5, 5),
)
def test_robust_z_is_affine_invariant(values, scale, shift):
    x = np.array(values)
    np.testing.assert_allclose(robust_z(x * scale + shift), robust_z(x), atol=1e-6)


def _study_indicators():
    kappa = np.array([0.50, 0.52, 0.55, 0.48, 0.05, 0.51, 0.02, 0.53])
    aad = np.array([0.9, 1.0, 0.8, 1.1, 1.0, 0.95, 1.0, 2.9])
    evidence = np.array([200, 180, 150, 210, 180, 190, 4, 170])
    return kappa, aad, evidence


def test_flags_carry_readable_reasons_and_respect_evidence():
    kappa, aad, evidence = _study_indicators()
    flags = flag_outliers(
        {"kappa": kappa, "aad": aad},
        evidence,
        min_evidence=20,
        z_threshold={"kappa": -3.5, "aad": 3.5},
        names={"kappa": "kappa with others", "aad": "mean AAD to others"},
    )
    assert [(f.annotator, f.indicator) for f in flags] == [(4, "kappa"), (7, "aad")]
    low = flags[0]
    eligible = np.delete(kappa, 6)  # annotator 6 has 4 items: not counted, not flagged
    assert low.median == pytest.approx(np.median(eligible))
    assert low.z == pytest.approx(robust_z(eligible)[4])
    assert low.evidence == 180
    assert low.reason == (
        f"kappa with others 0.05; study median {np.median(eligible):.2f}; "
        f"robust z {low.z:.1f}; 180 items"
    )
    assert flags[1].z > 3.5


def test_floors_flag_a_uniformly_bad_study():
    kappa = np.array([0.10, 0.12, 0.11, 0.09, 0.10])
    flags = flag_outliers(
        {"kappa": kappa}, np.full(5, 100), min_evidence=10, floors={"kappa": 0.11}
    )
    assert [f.annotator for f in flags] == [0, 3, 4]
    assert flags[0].reason.endswith("100 items; below the floor 0.11")
    high = flag_outliers(
        {"skew": [0.1, 0.2, 0.6]},
        [50, 50, 50],
        min_evidence=10,
        z_threshold=3.5,
        floors={"skew": 0.5},
        evidence_unit="ratings",
    )
    assert [f.annotator for f in high] == [2]
    assert high[0].reason.endswith("50 ratings; above the floor 0.50")


def test_flag_outliers_bad_input():
    with pytest.raises(ValueError, match=r"unknown indicator\(s\) \['alpha'\]"):
        flag_outliers({"kappa": [0.5, 0.4]}, [10, 10], min_evidence=1, floors={"alpha": 0.667})
    with pytest.raises(ValueError, match="indicator 'kappa' has shape"):
        flag_outliers({"kappa": [0.5, 0.4, 0.1]}, [10, 10], min_evidence=1)
    with pytest.raises(ValueError, match="must be non-zero"):
        flag_outliers({"kappa": [0.5, 0.4]}, [10, 10], min_evidence=1, z_threshold=0)
    with pytest.raises(ValueError, match="evidence must be a non-empty 1-D array"):
        flag_outliers({}, [], min_evidence=1)
    assert flag_outliers({"kappa": [np.nan, 0.4]}, [10, 1], min_evidence=5) == []


def test_mean_with_others_skips_diagonal_and_nan():
    rng = np.random.default_rng(3)
    matrix = rng.uniform(-0.2, 0.9, (6, 6))
    matrix[rng.random((6, 6)) < 0.3] = np.nan
    matrix[5, :5] = np.nan
    got = mean_with_others(matrix)
    for k in range(5):
        row = np.delete(matrix[k], k)
        assert got[k] == pytest.approx(np.mean(row[~np.isnan(row)]))
    assert np.isnan(got[5])


def test_agglomerative_order_groups_blocks():
    rng = np.random.default_rng(1)
    blocks = np.repeat([0, 1, 2], 4)
    agreement = np.where(blocks[:, None] == blocks[None], 0.8, 0.1) + rng.uniform(0, 0.05, (12, 12))
    np.fill_diagonal(agreement, 1.0)
    shuffle = rng.permutation(12)
    shuffled = agreement[np.ix_(shuffle, shuffle)]
    shuffled[0, 5] = shuffled[5, 0] = np.nan
    order = agglomerative_order(shuffled)
    assert sorted(order) == list(range(12))
    groups = blocks[shuffle][order]
    assert np.count_nonzero(np.diff(groups)) == 2  # each block is contiguous
    np.testing.assert_array_equal(agglomerative_order([[1.0, 0.2], [0.2, 1.0]]), [0, 1])
    with pytest.raises(ValueError, match="square matrix"):
        agglomerative_order(np.ones((2, 3)))


@pytest.mark.parametrize(
    ("kappa", "band"),
    [
        (-0.01, "poor"),
        (0.0, "slight"),
        (0.2, "slight"),
        (0.21, "fair"),
        (0.4, "fair"),
        (0.41, "moderate"),
        (0.61, "substantial"),
        (0.8, "substantial"),
        (0.81, "almost perfect"),
        (1.0, "almost perfect"),
        (np.nan, "undefined"),
    ],
)
def test_landis_koch_bands(kappa, band):
    assert landis_koch_band(kappa) == band


# --- flags as statistical statements (flag_with_intervals) ---------------------------------------


@st.composite
def _team(draw, min_size=2, max_size=14):
    """Annotators' estimates with intervals around them and evidence counts."""
    m = draw(st.integers(min_size, max_size))
    value = st.floats(-0.5, 1.0, allow_nan=False)
    half = st.floats(0.0, 0.4, allow_nan=False)
    estimate = np.array(draw(st.lists(value, min_size=m, max_size=m)))
    below = np.array(draw(st.lists(half, min_size=m, max_size=m)))
    above = np.array(draw(st.lists(half, min_size=m, max_size=m)))
    evidence = np.array(draw(st.lists(st.integers(0, 300), min_size=m, max_size=m)))
    return estimate, estimate - below, estimate + above, evidence


def _flagged(team, **options):
    options = {"min_evidence": 20, "floor": 0.2, **options}
    return {f.annotator: f for f in flag_with_intervals(*team, **options)}


@settings(max_examples=200, deadline=None)
@given(_team(), st.randoms(use_true_random=False))
def test_interval_flags_do_not_depend_on_the_annotators_order(team, random):
    order = list(range(team[0].size))
    random.shuffle(order)
    before = _flagged(team)
    after = _flagged(tuple(part[order] for part in team))
    assert {order[k] for k in after} == set(before)


@settings(max_examples=200, deadline=None)
@given(_team())
def test_interval_flags_need_evidence_and_a_wholly_bad_interval(team):
    _, low, high, evidence = team
    for k, flag in _flagged(team).items():
        assert evidence[k] >= 20
        assert flag.rule in ("floor", "robust_z", "separated")
        if flag.rule == "floor":
            assert high[k] < 0.2
        assert f"[{low[k]:.2f}, {high[k]:.2f}]" in flag.reason


@settings(max_examples=200, deadline=None)
@given(_team(), st.integers(0, 13), st.floats(0.0, 0.5))
def test_a_wider_interval_never_creates_a_flag(team, k, extra):
    """Less certainty about an annotator never makes the evidence against them stronger."""
    estimate, low, high, evidence = team
    k %= estimate.size
    wider = (estimate, low.copy(), high.copy(), evidence)
    wider[1][k] -= extra
    wider[2][k] += extra
    assert k in _flagged(team) or k not in _flagged(wider)


@settings(max_examples=200, deadline=None)
@given(_team())
def test_high_bad_side_mirrors_low(team):
    estimate, low, high, evidence = team
    mirrored = (-estimate, -high, -low, evidence)
    low_side = _flagged(team, floor=0.2)
    high_side = _flagged(mirrored, floor=-0.2, bad_side="high")
    assert {k: f.rule for k, f in low_side.items()} == {k: f.rule for k, f in high_side.items()}


@settings(max_examples=100, deadline=None)
@given(st.integers(3, 7), st.floats(0.3, 0.7), st.floats(1e-4, 4e-3))
def test_small_team_with_overlapping_intervals_is_not_flagged(m, centre, spread):
    """Colleagues who agree almost exactly give a tiny MAD and a huge robust z for anyone a
    little apart (AAD z = 23.4 on 5 annotators); with overlapping intervals nobody is flagged."""
    estimate = centre + spread * np.arange(m)
    estimate[-1] = centre - 0.08  # robust z in the tens
    assert robust_z(estimate)[-1] < -3.5
    flags = flag_with_intervals(
        estimate, estimate - 0.1, estimate + 0.1, np.full(m, 100), min_evidence=20
    )
    assert flags == []
    separated = estimate.copy()
    separated[-1] = centre - 0.3
    flags = flag_with_intervals(
        separated, separated - 0.1, separated + 0.1, np.full(m, 100), min_evidence=20
    )
    assert [(f.annotator, f.rule) for f in flags] == [(m - 1, "separated")]


def test_large_team_uses_robust_z_and_the_others_median():
    rng = np.random.default_rng(5)
    estimate = rng.normal(0.6, 0.03, 12)
    estimate[4] = 0.35
    evidence = np.full(12, 200)
    flags = flag_with_intervals(
        estimate, estimate - 0.08, estimate + 0.08, evidence, min_evidence=20, name="kappa"
    )
    assert [(f.annotator, f.rule) for f in flags] == [(4, "robust_z")]
    assert "robust z" in flags[0].reason
    assert "among 12 annotators" in flags[0].reason
    # the same z with an interval reaching the others' median is not a flag
    wide = flag_with_intervals(estimate, estimate - 0.3, estimate + 0.3, evidence, min_evidence=20)
    assert wide == []
    # AAD: high is bad
    aad = 1.0 - estimate
    flags = flag_with_intervals(
        aad, aad - 0.08, aad + 0.08, evidence, min_evidence=20, bad_side="high", name="AAD"
    )
    assert [(f.annotator, f.rule) for f in flags] == [(4, "robust_z")]
    assert "above the others' median" in flags[0].reason


def test_interval_flag_validation():
    with pytest.raises(ValueError, match="bad_side"):
        flag_with_intervals([1.0], [0.0], [2.0], [5], min_evidence=1, bad_side="up")
    with pytest.raises(ValueError, match="one length"):
        flag_with_intervals([1.0, 2.0], [0.0], [2.0], [5], min_evidence=1)
    with pytest.raises(ValueError, match="z_threshold"):
        flag_with_intervals([1.0], [0.0], [2.0], [5], min_evidence=1, z_threshold=-3.5)


def test_a_figure_without_an_interval_is_judged_on_its_value():
    """One gold trace gives a lag but no interval: the floor still judges the value (as
    without intervals), and the reason says there is no interval; its colleagues' missing
    bounds do not make the separation rule fire or warn."""
    nan = float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flags = flag_with_intervals(
            [5.0, 1.0],
            [nan, nan],
            [nan, nan],
            [1, 1],
            min_evidence=1,
            bad_side="high",
            floor=3.0,
            name="lag",
            evidence_unit="gold items",
        )
    assert [(f.annotator, f.rule, f.low, f.high) for f in flags] == [(0, "floor", 5.0, 5.0)]
    assert flags[0].reason == "lag 5.00 (no interval), above the floor 3.00; 1 gold items"
