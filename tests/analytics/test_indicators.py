"""Indicators derived from the sufficient statistics equal the metrics on the full ratings."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from analytics.metrics import (
    aad_histogram,
    annotator_mean_aad,
    label_skew,
    pairwise_kappa,
    transitivity_chance,
)
from analytics.sufficient_stats import CategoricalStats, PairwiseStats
from apps.categorical.indicators import LabelScale, derive_categorical
from apps.preferences.quality import derive_pairwise

LABELS = [
    {"key": "negative", "name": "Negative", "valence": -1.0, "arousal": 0.5},
    {"key": "neutral", "name": "Neutral", "valence": 0.0, "arousal": 0.0},
    {"key": "positive", "name": "Positive", "valence": 1.0, "arousal": 0.5},
]


def _study(seed: int, *, m: int = 6, n: int = 120, v: int = 3):
    """Round-1 ratings (some missing), round-2 repeats, times; and the stats built item by
    item through the same incremental path as the pipeline."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(v, size=n)
    noise = rng.random((m, n)) < np.linspace(0.1, 0.6, m)[:, None]
    first = np.where(noise, rng.integers(v, size=(m, n)), truth).astype(float)
    first[rng.random((m, n)) < 0.25] = np.nan
    second = np.where(
        ~np.isnan(first) & (rng.random((m, n)) < 0.3),
        np.where(rng.random((m, n)) < 0.8, first, rng.integers(v, size=(m, n))),
        np.nan,
    )
    ms = rng.integers(500, 5000, size=(m, n))
    stats = CategoricalStats(m, v)
    for i in range(n):
        view = {}
        for k in range(m):
            if not np.isnan(first[k, i]):
                view[(k, 1)] = (int(first[k, i]), int(ms[k, i]))
            if not np.isnan(second[k, i]):
                view[(k, 2)] = (int(second[k, i]), None)
        stats.add_item(view)
    return first, second, ms, stats


@pytest.mark.parametrize("ordered", [True, False])
def test_indicators_equal_metrics_on_full_matrix(ordered):
    first, second, ms, stats = _study(3)
    m = first.shape[0]
    scale = LabelScale.from_labels([lab["key"] for lab in LABELS], LABELS, ordered=ordered)
    derived = derive_categorical(stats, annotators=list(range(m)), scale=scale, min_overlap=5)
    values = {k: np.array(v, dtype=float) for k, v in derived.indicators.items()}

    done = (~np.isnan(first)).sum(axis=1)
    np.testing.assert_array_equal(values["items_done"], done)
    timed = np.where(np.isnan(first), np.nan, ms)
    np.testing.assert_allclose(
        values["seconds_per_item"], np.nanmean(timed, axis=1) / 1000, atol=1e-6
    )

    kappa = pairwise_kappa(first, min_overlap=5)
    np.testing.assert_allclose(np.array(derived.matrices["kappa"], float), kappa, atol=1e-6)
    both = (~np.isnan(first)).astype(float)
    overlap = both @ both.T
    np.fill_diagonal(overlap, 0)
    weights = np.where(np.isnan(kappa), 0, overlap)
    expected = (weights * np.nan_to_num(kappa)).sum(axis=1) / weights.sum(axis=1)
    np.testing.assert_allclose(values["cohen_kappa"], expected, atol=1e-6)

    level = "ordinal" if ordered else "nominal"
    oracle = krippendorff.alpha(reliability_data=first, level_of_measurement=level)
    assert derived.study["alpha"] == pytest.approx(oracle, abs=1e-6)

    coordinates = {float(c): (lab["valence"], lab["arousal"]) for c, lab in enumerate(LABELS)}
    np.testing.assert_allclose(
        values["aad"], annotator_mean_aad(first, coordinates=coordinates), atol=1e-6
    )
    _, pair_counts = aad_histogram(first, coordinates=coordinates)
    idx = np.arange(m)
    pair_counts[idx, idx] = 0
    np.testing.assert_allclose(
        np.array(derived.matrices["aad_counts"]), pair_counts.sum(axis=1), atol=1e-9
    )
    np.testing.assert_allclose(values["skew"], label_skew(first), atol=1e-6)

    for k in range(m):
        rated = ~np.isnan(first[k]) & ~np.isnan(second[k])
        expected_k = cohen_kappa_score(first[k, rated], second[k, rated], labels=[0, 1, 2])
        assert derived.evidence["repeats"][k] == rated.sum()
        assert values["retest_kappa"][k] == pytest.approx(expected_k, abs=1e-6)

    assert len(derived.matrices["order"]) == m
    assert all(point is not None for point in derived.matrices["mds"])


def test_nominal_scale_without_coordinates_counts_disagreements():
    labels = [{**lab, "valence": None, "arousal": None} for lab in LABELS]
    scale = LabelScale.from_labels([lab["key"] for lab in labels], labels, ordered=False)
    np.testing.assert_allclose(scale.distances(), 1 - np.eye(3))
    ordered = LabelScale.from_labels([lab["key"] for lab in labels], labels, ordered=True)
    np.testing.assert_allclose(ordered.distances(), [[0, 1, 2], [1, 0, 1], [2, 1, 0]])


def test_members_without_answers_have_no_row_in_the_matrices():
    # the emotions demo's ann1 answered nothing: the heatmap and the map leave them out and
    # the kappa matrix equals the metrics library's, whose diagonal is nan for them
    first, _, _, _ = _study(5, m=5)
    idle = CategoricalStats(6, 3)
    for i in range(first.shape[1]):
        idle.add_item(
            {(k, 1): (int(first[k, i]), 1000) for k in range(5) if not np.isnan(first[k, i])}
        )
    scale = LabelScale.from_labels([lab["key"] for lab in LABELS], LABELS, ordered=False)
    derived = derive_categorical(idle, annotators=list(range(6)), scale=scale, min_overlap=5)
    padded = np.vstack([first, np.full(first.shape[1], np.nan)])
    np.testing.assert_allclose(
        np.array(derived.matrices["kappa"], float), pairwise_kappa(padded, min_overlap=5), atol=1e-6
    )
    assert sorted(derived.matrices["order"]) == [0, 1, 2, 3, 4]
    assert derived.matrices["mds"][5] is None


def test_transitivity_kappa_uses_each_annotators_own_tie_rate():
    # two annotators, each transitive on 75 of 100 triplets: chance for one who never ties
    # (P(E) = 3/4), well above chance for one who ties a third of the time (P(E) = 13/27)
    stats = PairwiseStats(2)
    stats.column("n_transitive")[:] = 75
    stats.column("n_complete")[:] = 100
    stats.column("judgements")[:] = 90
    stats.pairs.confusion[0, 0] = np.diag([45.0, 0.0, 45.0])  # no tie
    stats.pairs.confusion[1, 1] = np.diag([30.0, 30.0, 30.0])  # a third ties
    derived = derive_pairwise(stats, annotators=[1, 2], strict=False, min_overlap=5)
    never_ties, ties = derived.indicators["transitivity_kappa"]
    assert never_ties == pytest.approx(0.0, abs=1e-12)  # Amidei's 13/27 gave 0.518
    assert ties == pytest.approx((0.75 - 13 / 27) / (14 / 27))
    pooled = derived.study["pooled_transitivity_kappa"]
    p_e = transitivity_chance(30 / 180)
    assert pooled == pytest.approx((0.75 - p_e) / (1 - p_e))
