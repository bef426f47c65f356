"""The anchoring effect (analytics.metrics.anchoring) against statsmodels' Newcombe and Wilson
intervals, plus properties: bounds, and swapping the groups negates the difference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from analytics.metrics import (
    anchoring_by_annotator,
    anchoring_effect,
    anchoring_flag,
    anchoring_study,
    newcombe_difference,
)
from analytics.metrics.anchoring import wilson_bounds


@st.composite
def two_groups(draw):
    n1 = draw(st.integers(1, 300))
    n2 = draw(st.integers(1, 300))
    return draw(st.integers(0, n1)), n1, draw(st.integers(0, n2)), n2


@given(two_groups())
def test_newcombe_equals_statsmodels(groups):
    k1, n1, k2, n2 = groups
    d, low, high = newcombe_difference(k1, n1, k2, n2)
    expected = confint_proportions_2indep(k1, n1, k2, n2, method="newcomb", compare="diff")
    assert d == pytest.approx(k1 / n1 - k2 / n2)
    assert (low, high) == pytest.approx(expected, abs=1e-10)


@given(st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_equals_statsmodels(counts):
    k, n = counts
    assert wilson_bounds(k, n) == pytest.approx(
        proportion_confint(k, n, method="wilson"), abs=1e-10
    )


@given(two_groups(), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_the_interval_holds_the_difference_within_minus_one_and_one(groups, confidence):
    d, low, high = newcombe_difference(*groups, confidence=confidence)
    assert -1.0 - 1e-12 <= low <= d <= high <= 1.0 + 1e-12


@given(two_groups())
def test_swapping_the_groups_negates_the_difference_and_mirrors_the_interval(groups):
    k1, n1, k2, n2 = groups
    d, low, high = newcombe_difference(k1, n1, k2, n2)
    d2, low2, high2 = newcombe_difference(k2, n2, k1, n1)
    assert d2 == pytest.approx(-d)
    assert (low2, high2) == pytest.approx((-high, -low), abs=1e-12)


def test_a_wider_confidence_gives_a_wider_interval():
    _, low95, high95 = newcombe_difference(30, 40, 10, 20)
    _, low99, high99 = newcombe_difference(30, 40, 10, 20, confidence=0.99)
    assert low99 < low95
    assert high99 > high95


def test_an_empty_group_gives_nan_and_bad_counts_are_refused():
    assert np.isnan(newcombe_difference(3, 5, 0, 0)).all()
    with pytest.raises(ValueError, match="0 <= k <= n"):
        newcombe_difference(6, 5, 1, 2)
    with pytest.raises(ValueError, match="same length"):
        anchoring_effect([1, 0], [1])


def test_anchoring_effect_counts_shown_and_held_out_answers():
    agree = [1, 1, 1, 0, 1, 0, 0, 0]
    shown = [1, 1, 1, 1, 0, 0, 0, 0]
    seconds = [2, 3, 4, 100, 5, 6, 7, 8]
    effect = anchoring_effect(agree, shown, seconds=seconds)
    assert (effect.n_shown, effect.n_held_out) == (4, 4)
    assert (effect.agreement_shown, effect.agreement_held_out) == (0.75, 0.25)
    assert effect.acceptance == effect.agreement_shown
    assert effect.difference == pytest.approx(0.5)
    expected = confint_proportions_2indep(3, 4, 1, 4, method="newcomb", compare="diff")
    assert (effect.low, effect.high) == pytest.approx(expected)
    assert (effect.seconds_shown, effect.seconds_held_out) == (3.5, 6.5)


def test_per_annotator_figures_are_each_annotators_own():
    who = np.array(["a"] * 6 + ["b"] * 6)
    agree = np.array([1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0])
    shown = np.array([1, 1, 1, 0, 0, 0] * 2)
    found = anchoring_by_annotator(who, agree, shown)
    assert list(found) == ["a", "b"]
    assert found["a"].difference == 1.0
    assert found["b"].difference == pytest.approx(2 / 3 - 1 / 3)
    np.testing.assert_equal(found["a"].__dict__, anchoring_effect(agree[:6], shown[:6]).__dict__)


@given(st.integers(0, 2**32 - 1))
def test_the_study_bootstrap_interval_holds_the_pooled_difference(seed):
    rng = np.random.default_rng(seed)
    n = 300
    items = rng.integers(0, 60, n)
    shown = rng.random(n) < 0.8
    agree = rng.random(n) < np.where(shown, 0.8, 0.55)
    effect = anchoring_study(items, agree, shown, n_boot=300, seed=1)
    point = anchoring_effect(agree, shown)
    assert effect.difference == point.difference
    assert -1 <= effect.low <= effect.high <= 1
    if point.n_held_out >= 10:
        assert effect.low <= effect.difference <= effect.high


def test_the_study_bootstrap_agrees_with_newcombe_when_answers_are_independent():
    """One answer per item: the item bootstrap is an ordinary bootstrap of the answers, whose
    interval should be close to Newcombe's (within a few points)."""
    rng = np.random.default_rng(7)
    n = 2000
    shown = rng.random(n) < 0.8
    agree = rng.random(n) < np.where(shown, 0.75, 0.6)
    boot = anchoring_study(np.arange(n), agree, shown, n_boot=4000, seed=3)
    newcombe = anchoring_effect(agree, shown)
    assert boot.low == pytest.approx(newcombe.low, abs=0.015)
    assert boot.high == pytest.approx(newcombe.high, abs=0.015)


def test_the_study_bootstrap_is_reproducible_with_its_seed():
    rng = np.random.default_rng(0)
    items, agree, shown = rng.integers(0, 30, 200), rng.random(200) < 0.7, rng.random(200) < 0.8
    first = anchoring_study(items, agree, shown, seed=5)
    np.testing.assert_equal(first.__dict__, anchoring_study(items, agree, shown, seed=5).__dict__)
    assert first.low != anchoring_study(items, agree, shown, seed=6).low


def test_the_flag_needs_near_total_acceptance_and_less_time_with_the_suggestion():
    fast = anchoring_effect(
        [1] * 40 + [1, 0, 0, 0], [1] * 40 + [0] * 4, seconds=[2.0] * 40 + [6.0] * 4
    )
    reason = anchoring_flag(fast)
    assert reason is not None
    assert "accepts 100% of suggestions" in reason
    assert "2.0 s" in reason
    slow = anchoring_effect(
        [1] * 40 + [1, 0, 0, 0], [1] * 40 + [0] * 4, seconds=[6.0] * 40 + [6.0] * 4
    )
    assert anchoring_flag(slow) is None  # takes the suggestion but not less time
    few = anchoring_effect([1] * 8 + [0, 0, 0], [1] * 8 + [0] * 3, seconds=[1.0] * 8 + [5.0] * 3)
    assert anchoring_flag(few) is None  # acceptance interval [68%, 100%] is not above 0.9
    critical = anchoring_effect(
        [1] * 30 + [0] * 10 + [0] * 4, [1] * 40 + [0] * 4, seconds=[2.0] * 40 + [6.0] * 4
    )
    assert anchoring_flag(critical) is None


def test_the_study_interval_never_has_zero_width_for_answers_without_spread():
    """Nobody agrees with the model: every bootstrap replicate gives 0; the study row falls
    back on Newcombe's interval instead of [0, 0] (seen on the dashboard card)."""
    items = np.repeat(np.arange(10), 2)
    shown = np.tile([True, False], 10)
    effect = anchoring_study(items, np.zeros(20, bool), shown, n_boot=200)
    expected = confint_proportions_2indep(0, 10, 0, 10, method="newcomb", compare="diff")
    assert effect.difference == 0.0
    assert (effect.low, effect.high) == pytest.approx(expected)
