"""Intervals of the agreement indicators: outside oracles, reference loops, properties, coverage.

Oracles: statsmodels for the Cohen/Fleiss-Cohen-Everitt standard error and Wilson's interval;
naive loops (resample the columns of the ratings matrix, concatenate trace blocks, recompute
with the library's point estimators) for every bootstrap with the same weights; and coverage
by simulation: 95 % intervals must cover a known true value in 93-97 % of 1,000 studies.
"""

from __future__ import annotations

import math
import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from scipy.spatial.distance import jensenshannon
from statsmodels.stats import inter_rater
from statsmodels.stats.proportion import proportion_confint

from analytics.metrics import (
    alpha_bootstrap,
    annotator_mean_aad,
    annotator_mean_aad_bootstrap,
    block_bootstrap_weights,
    bootstrap_weights,
    dawid_skene,
    dawid_skene_competence_bootstrap,
    effective_sample_size,
    fleiss_kappa,
    fleiss_kappa_bootstrap,
    kappa_from_confusion,
    kappa_interval,
    kappa_sda_bootstrap,
    kappa_sda_from_counts,
    kappa_sda_with_others_bootstrap,
    kappa_standard_error,
    kappa_with_others,
    kappa_with_others_bootstrap,
    krippendorff_alpha,
    label_skew_bootstrap,
    mean_bootstrap,
    mean_t_interval,
    median_interval,
    normal_interval,
    pairwise_confusion,
    pairwise_kappa,
    sign_coincidence_matrix,
    transitivity_kappa,
    transitivity_kappa_from_counts,
    transitivity_kappa_interval,
    transitivity_kappa_jackknife,
    triplet_counts,
    wilson_interval,
)

LEVELS = ["nominal", "ordinal", "interval", "ratio"]

#: Two raters' joint label distribution with a known population kappa (about 0.56).
JOINT = np.array([[0.30, 0.05, 0.02], [0.06, 0.20, 0.04], [0.03, 0.05, 0.25]])


def _study(rng, n_annotators, n_items, n_labels=3, p_missing=0.2):
    """Annotators who copy a hidden truth with their own reliability, else guess."""
    truth = rng.integers(0, n_labels, n_items)
    keep = rng.random((n_annotators, n_items)) < rng.uniform(0.3, 0.9, (n_annotators, 1))
    ratings = np.where(keep, truth, rng.integers(0, n_labels, (n_annotators, n_items)))
    ratings = ratings.astype(float)
    ratings[rng.random((n_annotators, n_items)) < p_missing] = np.nan
    return ratings


def _resample(ratings, weights):
    """The ratings matrix with column i repeated weights[i] times (the naive bootstrap)."""
    return np.repeat(ratings, weights.astype(int), axis=1)


def _two_raters(table):
    """A 2 x n ratings matrix whose confusion table is ``table``."""
    a, b = np.divmod(np.repeat(np.arange(table.size), table.ravel()), table.shape[1])
    return np.vstack([a, b]).astype(float)


# --- Cohen's kappa: analytic standard error -----------------------------------------------------


def _statsmodels_se(table, weights=None, values=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if weights is None:
            return inter_rater.cohens_kappa(table).std_kappa
        return inter_rater.cohens_kappa(table, wt=weights, weights=values).std_kappa


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", range(4))
def test_kappa_standard_error_equals_statsmodels(seed, weights):
    rng = np.random.default_rng(seed)
    v = int(rng.integers(2, 6))
    table = rng.integers(0, 25, (v, v)) + np.diag(rng.integers(10, 50, v))
    expected = _statsmodels_se(table, weights)
    assert kappa_standard_error(table, weights=weights) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_weighted_standard_error_uses_code_distances(weights):
    # codes 0, 1, 3, 7: statsmodels' `weights` are the scores whose differences weigh
    table = np.array([[20, 4, 1, 0], [5, 15, 3, 1], [1, 4, 12, 3], [0, 1, 2, 9]])
    values = np.array([0.0, 1.0, 3.0, 7.0])
    ours = kappa_standard_error(table, weights=weights, values=values)
    assert ours == pytest.approx(_statsmodels_se(table, weights, values), rel=1e-12)
    assert ours != pytest.approx(kappa_standard_error(table, weights=weights), rel=1e-3)


def test_standard_error_broadcasts_over_the_dashboards_pair_confusions():
    rng = np.random.default_rng(5)
    ratings = _study(rng, 5, 120, p_missing=0.3)
    confusion = pairwise_confusion(ratings, values=[0, 1, 2])
    se = kappa_standard_error(confusion)
    assert se.shape == (5, 5)
    for k in range(5):
        for l in range(5):
            if k != l:
                assert se[k, l] == pytest.approx(_statsmodels_se(confusion[k, l]), rel=1e-10)
    np.testing.assert_allclose(se, se.T)
    retest = confusion[np.arange(5), np.roll(np.arange(5), 1)]  # any (M, V, V) stack
    assert kappa_standard_error(retest).shape == (5,)


def test_standard_error_edge_cases():
    assert kappa_standard_error([[10, 0], [0, 5]]) == 0.0  # perfect agreement
    assert np.isnan(kappa_standard_error([[7, 0], [0, 0]]))  # p_e = 1
    assert np.isnan(kappa_standard_error(np.zeros((3, 3))))  # no items
    perfect = kappa_interval([[10, 0], [0, 5]])
    assert (perfect.estimate, perfect.low, perfect.high, perfect.n) == (1.0, 1.0, 1.0, 15)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 4).flatmap(
        lambda v: st.lists(st.integers(0, 30), min_size=v * v, max_size=v * v).map(
            lambda cells: np.array(cells).reshape(v, v)
        )
    ),
    st.sampled_from([None, "linear", "quadratic"]),
)
def test_interval_properties(table, weights):
    table = table + np.eye(table.shape[0], dtype=int)  # every label used by both
    se = kappa_standard_error(table, weights=weights)
    # symmetric in the two raters
    assert kappa_standard_error(table.T, weights=weights) == pytest.approx(se, abs=1e-12)
    # four times the items with the same proportions: half the standard error
    assert kappa_standard_error(4 * table, weights=weights) == pytest.approx(se / 2, abs=1e-12)
    interval = kappa_interval(table, weights=weights)
    assert interval.low <= interval.estimate + 1e-12 <= interval.high + 2e-12
    assert -1.0 <= interval.low <= interval.high <= 1.0
    wider = kappa_interval(table, weights=weights, confidence=0.99)
    assert wider.low <= interval.low
    assert wider.high >= interval.high


def test_normal_interval_clips_to_the_range():
    low, high = normal_interval([0.5, 0.98, -0.99], [0.1, 0.05, 0.05])
    np.testing.assert_allclose(low, [0.5 - 1.959964 * 0.1, 0.98 - 1.959964 * 0.05, -1.0])
    np.testing.assert_allclose(high, [0.5 + 1.959964 * 0.1, 1.0, -0.99 + 1.959964 * 0.05])
    with pytest.raises(ValueError, match="confidence"):
        normal_interval(0.5, 0.1, confidence=1.0)


def test_wald_interval_covers_the_true_kappa_in_95_percent_of_studies():
    """1,000 studies of 200 items drawn from JOINT: the 95 % interval covers its kappa."""
    rng = np.random.default_rng(20261124)
    true = kappa_from_confusion(JOINT)
    tables = rng.multinomial(200, JOINT.ravel(), size=1000).reshape(1000, 3, 3)
    interval = kappa_interval(tables)
    coverage = np.mean((interval.low <= true) & (true <= interval.high))
    assert 0.93 <= coverage <= 0.97


# --- item bootstrap: weights, reference loops -----------------------------------------------------


def test_bootstrap_weights_are_reproducible_resampling_counts():
    w = bootstrap_weights(50, n_boot=200, seed=3)
    assert w.shape == (200, 50)
    assert (w.sum(axis=1) == 50).all()
    np.testing.assert_array_equal(w, bootstrap_weights(50, n_boot=200, seed=3))
    assert not np.array_equal(w, bootstrap_weights(50, n_boot=200, seed=4))
    # each item is drawn once per replicate on average
    assert w.mean() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_weights(5, n_boot=0)


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_bootstrap_replicates_equal_a_reference_loop(level):
    rng = np.random.default_rng(11)
    ratings = _study(rng, 4, 40, n_labels=4, p_missing=0.3) + 1.0
    ratings[:, :3] = np.nan  # unpairable items are not resampled
    ratings[0, 3] = 1.0
    result = alpha_bootstrap(ratings, level=level, n_boot=30, seed=9)
    pairable = ratings[:, (~np.isnan(ratings)).sum(axis=0) >= 2]
    assert result.n == pairable.shape[1]
    expected_alpha = krippendorff.alpha(reliability_data=ratings, level_of_measurement=level)
    assert result.estimate == pytest.approx(expected_alpha, abs=1e-12)
    weights = bootstrap_weights(result.n, n_boot=30, seed=9)
    naive = [krippendorff_alpha(_resample(pairable, w), level=level) for w in weights]
    np.testing.assert_allclose(result.replicates, naive, atol=1e-12)
    assert result.low <= result.estimate <= result.high


def test_fleiss_bootstrap_replicates_equal_a_reference_loop():
    rng = np.random.default_rng(12)
    ratings = _study(rng, 5, 60, p_missing=0.3)
    result = fleiss_kappa_bootstrap(ratings, n_boot=30, seed=2)
    kept = ratings[:, (~np.isnan(ratings)).sum(axis=0) >= 2]
    assert result.estimate == pytest.approx(fleiss_kappa(ratings), abs=1e-12)
    weights = bootstrap_weights(result.n, n_boot=30, seed=2)
    naive = [fleiss_kappa(_resample(kept, w)) for w in weights]
    np.testing.assert_allclose(result.replicates, naive, atol=1e-12)


def test_fleiss_bootstrap_estimate_equals_statsmodels_with_equal_counts():
    rng = np.random.default_rng(13)
    ratings = _study(rng, 4, 80, p_missing=0.0)
    table, _ = inter_rater.aggregate_raters(ratings.T.astype(int))
    expected = inter_rater.fleiss_kappa(table, method="fleiss")
    assert fleiss_kappa_bootstrap(ratings, n_boot=10, seed=0).estimate == pytest.approx(expected)


def _naive_with_others(ratings, min_overlap, weights=None):
    kappa = pairwise_kappa(ratings, min_overlap=min_overlap, weights=weights)
    known = ~np.isnan(ratings)
    overlap = known.astype(float) @ known.T.astype(float)
    np.fill_diagonal(kappa, np.nan)
    w = np.where(np.isnan(kappa), 0.0, overlap)
    with np.errstate(invalid="ignore"):
        return (w * np.nan_to_num(kappa)).sum(axis=1) / w.sum(axis=1)


@pytest.mark.parametrize("weights", [None, "quadratic"])
def test_kappa_with_others_bootstrap_replicates_equal_a_reference_loop(weights):
    rng = np.random.default_rng(14)
    ratings = _study(rng, 5, 50, p_missing=0.4)
    ratings[4, :46] = np.nan  # a newcomer with 4 items: often below min_overlap
    result = kappa_with_others_bootstrap(ratings, min_overlap=3, weights=weights, n_boot=25, seed=6)
    np.testing.assert_allclose(result.estimate, _naive_with_others(ratings, 3, weights))
    np.testing.assert_array_equal(result.n, (~np.isnan(ratings)).sum(axis=1))
    naive = [
        _naive_with_others(_resample(ratings, w), 3, weights)
        for w in bootstrap_weights(50, n_boot=25, seed=6)
    ]
    np.testing.assert_allclose(result.replicates, naive, atol=1e-12)


def test_kappa_with_others_matches_the_pairwise_kappa_row_mean():
    r = [[0, 1, 1, 0, np.nan], [0, 1, 0, 0, 1], [np.nan, np.nan, np.nan, 1, 1]]
    np.testing.assert_allclose(kappa_with_others(r), [0.5, (4 * 0.5 + 2 * 0.0) / 6, 0.0])
    alone = kappa_with_others([[0, 1, np.nan], [np.nan, np.nan, 1]])
    assert np.isnan(alone).all()


def test_kappa_with_others_bootstrap_is_symmetric_for_two_raters():
    rng = np.random.default_rng(15)
    table = rng.multinomial(120, JOINT.ravel()).reshape(3, 3)
    ratings = _two_raters(table)
    result = kappa_with_others_bootstrap(ratings, n_boot=200, seed=1)
    swapped = kappa_with_others_bootstrap(ratings[::-1], n_boot=200, seed=1)
    assert result.estimate[0] == pytest.approx(kappa_from_confusion(table))
    np.testing.assert_allclose(result.replicates[:, 0], result.replicates[:, 1])
    np.testing.assert_allclose(result.replicates, swapped.replicates, atol=1e-12)
    assert result.low[0] <= result.estimate[0] <= result.high[0]


def test_bootstrap_interval_shrinks_with_more_items():
    rng = np.random.default_rng(16)
    widths = []
    for n_items in (50, 200, 800):
        table = rng.multinomial(n_items, JOINT.ravel()).reshape(3, 3)
        result = kappa_with_others_bootstrap(_two_raters(table), n_boot=400, seed=0)
        widths.append(result.high[0] - result.low[0])
    assert widths[0] > widths[1] > widths[2]
    # about 1/sqrt(n): quadrupling the items halves the width
    assert widths[1] / widths[2] == pytest.approx(2.0, rel=0.25)


def test_mean_aad_bootstrap_replicates_equal_a_reference_loop():
    rng = np.random.default_rng(17)
    ratings = _study(rng, 4, 30, n_labels=5, p_missing=0.3)
    result = annotator_mean_aad_bootstrap(ratings, n_boot=20, seed=5)
    np.testing.assert_allclose(result.estimate, annotator_mean_aad(ratings))
    naive = [
        annotator_mean_aad(_resample(ratings, w)) for w in bootstrap_weights(30, n_boot=20, seed=5)
    ]
    np.testing.assert_allclose(result.replicates, naive, atol=1e-12)


def test_dawid_skene_bootstrap_replicates_refit_the_resampled_items():
    rng = np.random.default_rng(27)
    ratings = _study(rng, 4, 60, p_missing=0.2)
    result = dawid_skene_competence_bootstrap(ratings, n_boot=8, seed=4)
    np.testing.assert_allclose(result.estimate, dawid_skene(ratings).competence)
    for w, replicate in zip(
        bootstrap_weights(60, n_boot=8, seed=4), result.replicates, strict=True
    ):
        np.testing.assert_allclose(replicate, dawid_skene(_resample(ratings, w)).competence)


def test_dawid_skene_bootstrap_covers_known_competences():
    rng = np.random.default_rng(28)
    accuracy = np.array([0.95, 0.85, 0.75, 0.6, 0.45, 0.3])
    true = accuracy + (1 - accuracy) / 3  # uniform guesses over 3 labels, equal priors
    widths = []
    for n_items in (150, 600):
        truth = rng.integers(0, 3, n_items)
        keep = rng.random((6, n_items)) < accuracy[:, None]
        ratings = np.where(keep, truth, rng.integers(0, 3, (6, n_items))).astype(float)
        result = dawid_skene_competence_bootstrap(ratings, n_boot=200, seed=n_items)
        assert np.sum((result.low <= true) & (true <= result.high)) >= 5
        widths.append(np.mean(result.high - result.low))
    assert widths[1] < 0.7 * widths[0]


def test_undefined_statistics_give_nan_intervals():
    one_rating_per_item = [[0, np.nan], [np.nan, 1]]
    assert math.isnan(alpha_bootstrap(one_rating_per_item, seed=0).estimate)
    assert fleiss_kappa_bootstrap(one_rating_per_item, seed=0).n == 0
    constant = np.zeros((2, 10))  # p_e = 1 in every replicate
    result = kappa_with_others_bootstrap(constant, n_boot=20, seed=0)
    assert np.isnan(result.estimate).all()
    assert np.isnan(result.low).all()


# --- coverage by simulation -----------------------------------------------------------------------


@pytest.mark.slow
def test_item_bootstrap_covers_the_true_kappa_in_95_percent_of_studies():
    """1,000 two-rater studies of 200 items from JOINT, 500 replicates each."""
    rng = np.random.default_rng(20261125)
    true = kappa_from_confusion(JOINT)
    covered = 0
    for study in range(1000):
        table = rng.multinomial(200, JOINT.ravel()).reshape(3, 3)
        result = kappa_with_others_bootstrap(_two_raters(table), n_boot=500, seed=study)
        covered += result.low[0] <= true <= result.high[0]
    assert 0.93 <= covered / 1000 <= 0.97


def _latent_class_population(prior, accuracy, n_labels):
    """Population Fleiss' kappa / alpha of raters who report the true class with probability
    ``accuracy`` and a uniform label otherwise (pairwise agreement vs pooled marginals)."""
    report = accuracy * np.eye(n_labels) + (1 - accuracy) / n_labels  # P(label | class)
    p_o = float(prior @ (report**2).sum(axis=1))
    marginal = prior @ report
    p_e = float(marginal @ marginal)
    return (p_o - p_e) / (1 - p_e)


@pytest.mark.slow
@pytest.mark.parametrize("statistic", ["alpha", "fleiss"])
def test_multi_rater_bootstrap_covers_the_population_value(statistic):
    """1,000 studies of 4 raters x 150 items (10 % missing) from a latent-class model."""
    rng = np.random.default_rng(7 if statistic == "alpha" else 8)
    prior, accuracy = np.array([0.5, 0.3, 0.2]), 0.6
    true = _latent_class_population(prior, accuracy, 3)
    covered = 0
    for study in range(1000):
        truth = rng.choice(3, 150, p=prior)
        keep = rng.random((4, 150)) < accuracy
        ratings = np.where(keep, truth, rng.integers(0, 3, (4, 150))).astype(float)
        ratings[rng.random((4, 150)) < 0.1] = np.nan
        if statistic == "alpha":
            result = alpha_bootstrap(ratings, n_boot=1000, seed=study)
        else:
            result = fleiss_kappa_bootstrap(ratings, n_boot=1000, seed=study)
        covered += result.low <= true <= result.high
    assert 0.93 <= covered / 1000 <= 0.97


# --- traces: block bootstrap and effective sample size --------------------------------------------

#: Joint distribution of the two traces' step signs (-1, 0, +1) in the trace simulation.
SIGN_JOINT = np.array([[0.15, 0.08, 0.02], [0.06, 0.30, 0.06], [0.02, 0.08, 0.23]])


def _persistent_traces(rng, n_steps, persistence):
    """Two traces whose joint step state is redrawn from SIGN_JOINT with probability
    ``1 - persistence`` and kept otherwise (runs of 1 / (1 - persistence) steps)."""
    states = rng.choice(9, size=n_steps, p=SIGN_JOINT.ravel() / SIGN_JOINT.sum())
    fresh = rng.random(n_steps) >= persistence
    fresh[0] = True
    states = states[np.maximum.accumulate(np.where(fresh, np.arange(n_steps), 0))]
    sx, sy = np.divmod(states, 3)
    x = np.concatenate([[0], np.cumsum(sx - 1)]).astype(float)
    y = np.concatenate([[0], np.cumsum(sy - 1)]).astype(float)
    return x, y


def test_block_bootstrap_replicates_equal_concatenated_blocks():
    rng = np.random.default_rng(18)
    x, y = _persistent_traces(rng, 60, 0.5)
    block, n_boot = 7, 15
    result = kappa_sda_bootstrap(x, y, block=block, n_boot=n_boot, seed=4)
    sx, sy = np.sign(np.diff(x)).astype(int) + 1, np.sign(np.diff(y)).astype(int) + 1
    starts = np.random.default_rng(4).integers(0, 60, size=(n_boot, math.ceil(60 / block)))
    weights = block_bootstrap_weights(60, block=block, n_boot=n_boot, seed=4)
    for b in range(n_boot):
        steps = ((starts[b][:, None] + np.arange(block)) % 60).ravel()  # blocks wrap around
        table = np.zeros((3, 3))
        np.add.at(table, (sx[steps], sy[steps]), 1)
        assert result.replicates[b] == pytest.approx(kappa_sda_from_counts(table), abs=1e-12)
        np.testing.assert_array_equal(weights[b], np.bincount(steps, minlength=60))
    assert result.n == 60


def test_block_bootstrap_defaults_and_validation():
    x, y = _persistent_traces(np.random.default_rng(19), 99, 0.5)
    default = kappa_sda_bootstrap(x, y, n_boot=50, seed=0)
    explicit = kappa_sda_bootstrap(x, y, block=10, n_boot=50, seed=0)  # ceil(sqrt(99))
    np.testing.assert_array_equal(default.replicates, explicit.replicates)
    assert block_bootstrap_weights(10, block=3, n_boot=4, seed=0).sum(axis=1).tolist() == [12] * 4
    with pytest.raises(ValueError, match="block"):
        kappa_sda_bootstrap(x, y, block=200)
    with pytest.raises(ValueError, match="block"):
        block_bootstrap_weights(10, block=0)


@pytest.mark.slow
def test_block_bootstrap_covers_persistent_traces_where_single_steps_do_not():
    """500 pairs of 1,001-sample traces whose sign state persists 5 steps on average."""
    rng = np.random.default_rng(20)
    true = kappa_sda_from_counts(SIGN_JOINT)
    covered = {1: 0, None: 0}
    for study in range(500):
        x, y = _persistent_traces(rng, 1000, 0.8)
        for block in covered:
            result = kappa_sda_bootstrap(x, y, block=block, n_boot=500, seed=study)
            covered[block] += result.low <= true <= result.high
    # blocks of sqrt(n) = 32 steps: 89 % (the percentile block bootstrap stays a bit narrow)
    assert covered[None] / 500 >= 0.86
    assert covered[1] / 500 < 0.6  # independent steps overstate precision: 46 %


def _with_others_of_tables(tables):
    """Reference: per-annotator steps-weighted mean of pooled pair kappa_SDA."""
    m = tables.shape[0]
    kappa = kappa_sda_from_counts(tables)
    steps = tables.sum(axis=(2, 3)).astype(float)
    off = ~np.eye(m, dtype=bool) & ~np.isnan(kappa) & (steps > 0)
    w = np.where(off, steps, 0.0)
    with np.errstate(invalid="ignore"):
        return (w * np.nan_to_num(kappa)).sum(axis=1) / w.sum(axis=1)


def _trace_items(rng, m, lengths, missing=()):
    """Items of m persistent traces sharing a common signal; (annotator, item) in missing
    did not trace."""
    items = []
    for i, n in enumerate(lengths):
        signal = np.cumsum(rng.choice([-1, 0, 1], n))
        mat = np.vstack(
            [signal + np.cumsum(rng.choice([-1, 0, 1], n, p=[0.1, 0.8, 0.1])) * k for k in range(m)]
        ).astype(float)
        for annotator, item in missing:
            if item == i:
                mat[annotator] = np.nan
        items.append(mat)
    return items


def test_trace_with_others_bootstrap_of_one_pair_is_the_pair_bootstrap():
    x, y = _persistent_traces(np.random.default_rng(25), 150, 0.6)
    pair = kappa_sda_bootstrap(x, y, block=8, n_boot=40, seed=3)
    both = kappa_sda_with_others_bootstrap([np.vstack([x, y])], block=8, n_boot=40, seed=3)
    np.testing.assert_allclose(both.replicates[:, 0], pair.replicates, atol=1e-12)
    np.testing.assert_allclose(both.replicates[:, 1], pair.replicates, atol=1e-12)
    assert both.estimate[0] == pytest.approx(pair.estimate)


def test_trace_with_others_bootstrap_equals_a_reference_loop():
    rng = np.random.default_rng(26)
    items = _trace_items(rng, 4, [40, 55, 30], missing=[(3, 0), (1, 2)])
    block, n_boot = 6, 12
    result = kappa_sda_with_others_bootstrap(items, block=block, n_boot=n_boot, seed=8)
    pooled = sum(
        np.where(
            np.isnan(item).all(axis=1)[:, None, None, None]
            | np.isnan(item).all(axis=1)[None, :, None, None],
            0,
            sign_coincidence_matrix(np.nan_to_num(item)),
        )
        for item in items
    )
    np.testing.assert_allclose(result.estimate, _with_others_of_tables(pooled))
    np.testing.assert_array_equal(result.n, [39 + 54 + 29, 39 + 54, 39 + 54 + 29, 54 + 29])
    draws = np.random.default_rng(8)
    starts = [
        draws.integers(0, n - 1, size=(n_boot, math.ceil((n - 1) / block))) for n in (40, 55, 30)
    ]
    for b in range(n_boot):
        tables = np.zeros((4, 4, 3, 3))
        for item, drawn in zip(items, starts, strict=True):
            n_steps = item.shape[1] - 1
            steps = ((drawn[b][:, None] + np.arange(block)) % n_steps).ravel()
            signs = np.sign(np.diff(np.nan_to_num(item), axis=1))[:, steps]
            traced = ~np.isnan(item).all(axis=1)
            onehot = (signs[:, None, :] == np.array([-1, 0, 1])[None, :, None]).astype(float)
            table = np.einsum("kat,lbt->klab", onehot, onehot)
            tables += np.where((traced[:, None] & traced[None, :])[:, :, None, None], table, 0)
        np.testing.assert_allclose(result.replicates[b], _with_others_of_tables(tables), atol=1e-12)


def test_effective_sample_size():
    rng = np.random.default_rng(21)
    noise = rng.standard_normal(50_000)
    assert effective_sample_size(noise) == pytest.approx(50_000, rel=0.03)
    ar = np.zeros(50_000)
    for t in range(1, ar.size):
        ar[t] = 0.8 * ar[t - 1] + noise[t]
    assert effective_sample_size(ar) == pytest.approx(50_000 * 0.2 / 1.8, rel=0.1)
    alternating = np.tile([0.0, 1.0], 50)  # negative r1: no more than n
    assert effective_sample_size(alternating) == 100.0
    assert math.isnan(effective_sample_size(np.ones(10)))
    with pytest.raises(ValueError, match="1-D"):
        effective_sample_size(np.ones((2, 2)))


def test_effective_sample_size_of_persistent_sign_agreement():
    x, y = _persistent_traces(np.random.default_rng(22), 20_000, 0.8)
    agree = (np.sign(np.diff(x)) == np.sign(np.diff(y))).astype(float)
    # runs of 5 steps: r1 = 0.8, n_eff = n (0.2 / 1.8)
    assert effective_sample_size(agree) == pytest.approx(20_000 / 9, rel=0.15)


# --- Wilson's interval of a proportion ---------------------------------------------------------


@given(n=st.integers(1, 500), data=st.data(), confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_wilson_interval_matches_statsmodels(n, data, confidence):
    successes = data.draw(st.integers(0, n))
    result = wilson_interval(successes, n, confidence=confidence)
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    assert math.isclose(result.low, low, abs_tol=1e-12)
    assert math.isclose(result.high, high, abs_tol=1e-12)
    assert result.low <= result.estimate <= result.high


def test_wilson_interval_without_answers_and_bad_counts():
    assert math.isnan(wilson_interval(0, 0).estimate)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


@given(data=st.data())
def test_wilson_interval_is_vectorised_over_annotators(data):
    n = np.array(data.draw(st.lists(st.integers(0, 200), min_size=1, max_size=8)))
    s = np.array([data.draw(st.integers(0, k)) for k in n])
    together = wilson_interval(s, n)
    for k in range(n.size):
        one = wilson_interval(int(s[k]), int(n[k]))
        for part in range(3):
            assert np.isclose(together[part][k], one[part], equal_nan=True)
    assert together.n.tolist() == n.tolist()


# --- transitivity kappa: Wilson interval ----------------------------------------------------------


@pytest.mark.parametrize(("n_t", "n_c"), [(90, 100), (3, 4), (0, 12), (50, 50), (700, 1000)])
@pytest.mark.parametrize("tie_rate", [None, 0.0, 0.3])
def test_transitivity_interval_maps_statsmodels_wilson(n_t, n_c, tie_rate):
    result = transitivity_kappa_interval(n_t, n_c, tie_rate=tie_rate)
    low_p, high_p = proportion_confint(n_t, n_c, alpha=0.05, method="wilson")
    kappa_at = [
        transitivity_kappa_from_counts(n_t, n_c, tie_rate=tie_rate),
        transitivity_kappa_from_counts(0, 1, tie_rate=tie_rate),
    ]
    scale = 1.0 - kappa_at[1]
    assert result.estimate == pytest.approx(kappa_at[0])
    assert result.low == pytest.approx(kappa_at[1] + low_p * scale)
    assert result.high == pytest.approx(kappa_at[1] + high_p * scale)
    assert result.n == n_c


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 2000), st.floats(0, 1), st.sampled_from([None, 0.0, 0.2, 0.6]))
def test_transitivity_interval_properties(n_complete, share, tie_rate):
    n_transitive = round(share * n_complete)
    result = transitivity_kappa_interval(n_transitive, n_complete, tie_rate=tie_rate)
    assert result.low <= result.estimate + 1e-12 <= result.high + 2e-12
    assert result.high <= 1.0 + 1e-12
    more = transitivity_kappa_interval(4 * n_transitive, 4 * n_complete, tie_rate=tie_rate)
    assert more.high - more.low < result.high - result.low


def test_transitivity_interval_undefined():
    assert math.isnan(transitivity_kappa_interval(0, 0).estimate)
    assert math.isnan(transitivity_kappa_interval(5, 5, tie_rate=1.0).low)


# --- transitivity kappa: jackknife over items -------------------------------------------------


def _thurstone_judgements(rng, n_items, *, noise=1.5, tie_band=0.0, share=1.0):
    """One annotator judging pairs of items with latent scores plus Gaussian noise; a noisy
    difference within ``tie_band`` is a tie; each pair is judged with probability ``share``."""
    score = rng.standard_normal(n_items)
    judgements = []
    for a in range(n_items):
        for b in range(a + 1, n_items):
            if rng.random() < share:
                d = score[a] - score[b] + rng.normal(0, noise)
                judgements.append((a, b, 0 if abs(d) <= tie_band else (1 if d > 0 else -1)))
    return judgements


@pytest.mark.parametrize("chance", ["amidei", "observed"])
def test_jackknife_replicates_equal_leaving_each_item_out(chance):
    rng = np.random.default_rng(23)
    judgements = _thurstone_judgements(rng, 9, tie_band=0.4, share=0.8)
    judgements += [(judgements[0][0], judgements[0][1], -judgements[0][2] or 1)]  # a repeat
    result = transitivity_kappa_jackknife(judgements, chance=chance)
    assert result.estimate == pytest.approx(transitivity_kappa(judgements, chance=chance))
    items = sorted({x for a, b, _ in judgements for x in (a, b)})
    assert result.n == len(items)
    for i, item in enumerate(items):
        rest = [j for j in judgements if item not in j[:2]]
        expected = transitivity_kappa(rest, chance=chance)
        assert result.replicates[i] == pytest.approx(expected, nan_ok=True)
    assert result.low <= result.estimate <= result.high


def test_jackknife_undefined_and_range():
    assert math.isnan(transitivity_kappa_jackknife([("a", "b", 1)]).low)
    cyclic = [(1, 2, 1), (2, 3, 1), (3, 1, 1), (1, 4, 1), (2, 4, 1), (3, 4, 1)]
    result = transitivity_kappa_jackknife(cyclic, strict=True)
    assert result.low >= -3.0  # K >= -P(E) / (1 - P(E)) = -3 for strict preferences
    assert result.high <= 1.0


def test_jackknife_covers_where_the_wilson_interval_is_too_narrow():
    """1,000 Thurstone annotators judging all pairs of 12 items (220 triplets each)."""
    rng = np.random.default_rng(24)
    estimates, jackknife, wilson = [], [], []
    for _ in range(1000):
        judgements = _thurstone_judgements(rng, 12)
        result = transitivity_kappa_jackknife(judgements, chance="observed")
        n_t, n_c = triplet_counts(judgements)
        estimates.append(result.estimate)
        jackknife.append((result.low, result.high))
        wilson.append(transitivity_kappa_interval(n_t, n_c, tie_rate=0.0)[1:3])
    true = np.mean(estimates)  # the annotator model's expected kappa
    cover = [np.mean([lo <= true <= hi for lo, hi in bounds]) for bounds in (jackknife, wilson)]
    assert cover[0] >= 0.93  # the jackknife errs on the wide side (Efron & Stein)
    assert cover[1] < 0.8  # triplets sharing pairs are not independent


def test_warm_started_competence_bootstrap_matches_the_cold_one():
    """Replicates warm-started from the full fit with a bounded number of EM iterations give
    the interval of fully converged cold replicates (same resampled items)."""
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 3, 400)
    accuracy = np.array([[0.9], [0.8], [0.7], [0.5], [0.4]])
    r = np.where(rng.random((5, 400)) < accuracy, truth, rng.integers(0, 3, (5, 400)))
    cold = dawid_skene_competence_bootstrap(r, n_boot=60, seed=3)
    warm = dawid_skene_competence_bootstrap(r, n_boot=60, seed=3, warm=True, replicate_iter=100)
    assert warm.estimate == pytest.approx(cold.estimate)
    assert warm.low == pytest.approx(cold.low, abs=0.01)
    assert warm.high == pytest.approx(cold.high, abs=0.01)


def test_accelerated_competence_bootstrap_is_the_plain_converged_one():
    """SQUAREM refits run to convergence land where plain EM refits do: the same interval."""
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 4, 300)
    accuracy = np.array([[0.7], [0.6], [0.5], [0.4], [0.35]])
    r = np.where(rng.random((5, 300)) < accuracy, truth, rng.integers(0, 4, (5, 300)))
    plain = dawid_skene_competence_bootstrap(r, n_boot=20, seed=2, warm=True, accelerate=False)
    fast = dawid_skene_competence_bootstrap(r, n_boot=20, seed=2, warm=True)
    np.testing.assert_allclose(fast.replicates, plain.replicates, atol=1e-5)
    np.testing.assert_allclose(fast.low, plain.low, atol=1e-5)
    np.testing.assert_allclose(fast.high, plain.high, atol=1e-5)


# --- Student's t interval of a mean, per group ---------------------------------------------------


@given(
    data=st.data(),
    n_groups=st.integers(1, 5),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_mean_t_interval_matches_scipy_per_group(data, n_groups, confidence):
    values = np.array(
        data.draw(st.lists(st.floats(0, 1e5, allow_nan=False), min_size=0, max_size=40))
    )
    groups = np.array(
        data.draw(
            st.lists(st.integers(0, n_groups - 1), min_size=values.size, max_size=values.size)
        ),
        dtype=np.intp,
    )
    result = mean_t_interval(values, groups, n_groups=n_groups, confidence=confidence)
    for k in range(n_groups):
        mine = values[groups == k]
        assert result.n[k] == mine.size
        if mine.size < 2:
            assert math.isnan(result.low[k])
            assert math.isnan(result.high[k])
            assert math.isnan(result.estimate[k]) == (mine.size == 0)
            continue
        sem = scipy_stats.sem(mine)
        assert math.isclose(result.estimate[k], mine.mean(), rel_tol=1e-9, abs_tol=1e-9)
        if sem > 0:
            low, high = scipy_stats.t.interval(confidence, mine.size - 1, mine.mean(), sem)
            assert math.isclose(result.low[k], low, rel_tol=1e-7, abs_tol=1e-6)
            assert math.isclose(result.high[k], high, rel_tol=1e-7, abs_tol=1e-6)
        assert result.low[k] <= result.estimate[k] + 1e-9 <= result.high[k] + 2e-9


def test_mean_bootstrap_agrees_with_scipy_and_resamples_within_groups():
    """Percentile intervals of each group's mean match scipy's bootstrap (its own draws,
    so to Monte Carlo precision); a group with one unit has no bounds."""
    rng = np.random.default_rng(4)
    values = np.concatenate([rng.gamma(2.0, 1.0, 30), rng.normal(5.0, 0.5, 12), [7.0]])
    groups = np.repeat([0, 1, 2], [30, 12, 1])
    result = mean_bootstrap(values, groups, n_groups=4, n_boot=4000, seed=1)
    for k in (0, 1):
        mine = values[groups == k]
        ref = scipy_stats.bootstrap(
            (mine,), np.mean, n_resamples=4000, method="percentile", random_state=2
        ).confidence_interval
        assert result.estimate[k] == pytest.approx(mine.mean())
        assert result.low[k] == pytest.approx(ref.low, abs=0.1 * mine.std())
        assert result.high[k] == pytest.approx(ref.high, abs=0.1 * mine.std())
        assert mine.min() <= result.low[k] < result.estimate[k] < result.high[k] <= mine.max()
    assert result.estimate[2] == 7.0
    assert np.isnan(result.low[2])
    assert np.isnan(result.estimate[3])
    assert list(result.n) == [30, 12, 1, 0]


def _skew_direct(ratings: np.ndarray, n_values: int) -> np.ndarray:
    """Label skew of each annotator computed plainly: own labels against the others' labels
    on the items the annotator rated (scipy's Jensen-Shannon distance, base 2)."""
    out = np.full(ratings.shape[0], np.nan)
    for k in range(ratings.shape[0]):
        mine = ~np.isnan(ratings[k])
        own = np.bincount(ratings[k, mine].astype(int), minlength=n_values)
        others = np.delete(ratings[:, mine], k, axis=0)
        theirs = np.bincount(others[~np.isnan(others)].astype(int), minlength=n_values)
        if own.sum() and theirs.sum():
            out[k] = jensenshannon(own, theirs, base=2)
    return out


def test_label_skew_bootstrap_replicates_are_the_skew_of_resampled_items():
    rng = np.random.default_rng(8)
    ratings = rng.integers(0, 3, size=(4, 25)).astype(float)
    ratings[3] = np.where(rng.random(25) < 0.7, 0, ratings[3])  # a skewed annotator
    ratings[rng.random((4, 25)) < 0.2] = np.nan
    result = label_skew_bootstrap(ratings, n_values=3, n_boot=50, seed=3)
    np.testing.assert_allclose(result.estimate, _skew_direct(ratings, 3), atol=1e-12)
    weights = bootstrap_weights(25, n_boot=50, seed=3)
    for b in (0, 17):
        resampled = np.repeat(ratings, weights[b].astype(int), axis=1)
        np.testing.assert_allclose(
            result.replicates[b], _skew_direct(resampled, 3), atol=1e-12, equal_nan=True
        )
    assert result.low[3] > result.high[0]  # the skewed annotator stands apart


# --- median of a sample: order-statistic interval -------------------------------------------------


def test_median_interval_takes_the_order_statistics_a_binomial_count_allows():
    """Against the definition counted by hand: the largest k with 1 - 2 P(Bin(n, 1/2) <= k-1)
    >= 0.95 (exact binomial sums), bounds x_(k) and x_(n-k+1); none below 6 values."""
    rng = np.random.default_rng(40)
    for n in range(1, 31):
        x = rng.standard_normal(n)
        x[rng.random(n) < 0.1] = np.nan
        kept = np.sort(x[~np.isnan(x)])
        m = kept.size
        res = median_interval(x)
        assert res.n == m
        if m == 0:
            assert math.isnan(res.estimate)
            continue
        assert res.estimate == pytest.approx(float(np.median(kept)))
        fine = [
            k
            for k in range(1, m // 2 + 1)
            if 1 - 2 * sum(math.comb(m, j) for j in range(k)) / 2**m >= 0.95
        ]
        if not fine:
            assert m < 6
            assert math.isnan(res.low)
            assert math.isnan(res.high)
        else:
            assert (res.low, res.high) == (kept[max(fine) - 1], kept[m - max(fine)])


def test_median_interval_covers_the_population_median_of_a_skewed_sample():
    """2,000 samples of 20 from a lognormal: k = 6 gives 95.9 % coverage by the binomial."""
    rng = np.random.default_rng(41)
    hits = 0
    for _ in range(2000):
        res = median_interval(rng.lognormal(0.0, 1.0, 20))
        hits += res.low <= 1.0 <= res.high  # the population median is e^0 = 1
    assert 0.945 <= hits / 2000 <= 0.972


def test_transitivity_jackknife_gives_no_zero_width_interval():
    """Issue 23: a fully transitive sample of few items gave [1.0, 1.0]; the truth is not
    certain, so the interval is absent ("too few") rather than of zero width."""
    judgements = [(a, b, 1) for a in range(6) for b in range(a + 1, 6)]
    res = transitivity_kappa_jackknife(judgements)
    assert res.estimate == 1.0
    assert math.isnan(res.low)
    assert math.isnan(res.high)
