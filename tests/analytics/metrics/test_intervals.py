"""The per-kind interval entry points and the analytic intervals they add (issue #11)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from analytics.metrics import (
    fleiss_kappa,
    icc,
    kappa_sda,
    kappa_sda_from_counts,
    kappa_sda_with_others_bootstrap,
    kappa_with_others,
    kappa_with_others_bootstrap,
    pairwise_kappa,
    remove_lags,
    shift_trace,
)
from analytics.metrics.intervals import (
    fleiss_kappa_interval,
    fleiss_kappa_null_se,
    indicator_intervals_categorical,
    indicator_intervals_pairwise,
    indicator_intervals_traces,
    kappa_sda_hac_interval,
    kappa_with_others_interval,
    retest_kappa_interval,
    retest_tables,
)
from analytics.metrics.uncertainty import complete_triplets, kappa_interval, kappa_standard_error

from .test_uncertainty import SIGN_JOINT, _latent_class_population, _persistent_traces


def _latent_class_ratings(rng, m, n, accuracy, prior=(0.5, 0.3, 0.2), missing=0.0):
    truth = rng.choice(len(prior), n, p=prior)
    keep = rng.random((m, n)) < accuracy
    ratings = np.where(keep, truth, rng.integers(0, len(prior), (m, n))).astype(float)
    ratings[rng.random((m, n)) < missing] = np.nan
    return ratings


# --- Fleiss' kappa: analytic variances ------------------------------------------------------------


@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_fleiss_interval_estimate_and_jackknife_agreement(missing):
    """The linearisation variance is the first-order jackknife variance: they agree closely."""
    ratings = _latent_class_ratings(np.random.default_rng(1), 5, 300, 0.6, missing=missing)
    res = fleiss_kappa_interval(ratings)
    assert res.estimate == pytest.approx(fleiss_kappa(ratings), abs=1e-12)
    kept = np.flatnonzero((~np.isnan(ratings)).sum(axis=0) >= 2)
    assert res.n == kept.size
    leave_one_out = np.array(
        [fleiss_kappa(np.delete(ratings[:, kept], i, axis=1)) for i in range(kept.size)]
    )
    n = kept.size
    se_jack = math.sqrt((n - 1) / n * np.sum((leave_one_out - leave_one_out.mean()) ** 2))
    se = (res.high - res.low) / (2 * 1.959964)
    assert se == pytest.approx(se_jack, rel=0.02)


def test_fleiss_interval_covers_the_population_kappa():
    """300 studies of 4 raters x 150 items (10 % missing): the 95 % interval covers."""
    rng = np.random.default_rng(30)
    prior, accuracy = np.array([0.5, 0.3, 0.2]), 0.6
    true = _latent_class_population(prior, accuracy, 3)
    covered = 0
    for _ in range(300):
        res = fleiss_kappa_interval(_latent_class_ratings(rng, 4, 150, accuracy, missing=0.1))
        covered += res.low <= true <= res.high
    assert 0.92 <= covered / 300 <= 0.98


def test_fleiss_null_se_matches_the_spread_under_chance():
    """Under the null (random labels) the SD of kappa over studies is Fleiss-Nee-Landis'."""
    rng = np.random.default_rng(31)
    p = np.array([0.6, 0.3, 0.1])
    studies = [rng.choice(3, size=(4, 100), p=p).astype(float) for _ in range(2000)]
    spread = np.std([fleiss_kappa(r) for r in studies])
    assert np.mean([fleiss_kappa_null_se(r) for r in studies]) == pytest.approx(spread, rel=0.05)


def test_fleiss_null_se_by_hand():
    """Eq. 12 of Fleiss, Nee & Landis (1979) on a 2-item, 3-rater table."""
    ratings = [[0, 1], [0, 1], [1, 1]]  # counts: item 1 (2, 1), item 2 (0, 3)
    p = np.array([2 / 6, 4 / 6])
    pq = p * (1 - p)
    expected = math.sqrt(
        2 / (2 * 3 * 2) * (pq.sum() ** 2 - np.sum(pq * (1 - 2 * p))) / pq.sum() ** 2
    )
    assert fleiss_kappa_null_se(ratings) == pytest.approx(expected, abs=1e-12)
    assert math.isnan(fleiss_kappa_null_se([[0, 0], [0, 0]]))
    perfect = fleiss_kappa_interval([[0, 1], [0, 1]])
    assert (perfect.estimate, perfect.low, perfect.high) == (1.0, 1.0, 1.0)  # se 0
    assert fleiss_kappa_interval([[0], [1]]).n == 1


# --- kappa with others: delta method -------------------------------------------------------------


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_with_others_interval_matches_the_bootstrap_spread(weights):
    rng = np.random.default_rng(10)
    truth = rng.integers(0, 4, 300)
    accuracy = [[0.9], [0.8], [0.7], [0.5], [0.3]]
    ratings = np.where(rng.random((5, 300)) < accuracy, truth, rng.integers(0, 4, (5, 300)))
    ratings = ratings.astype(float)
    ratings[rng.random(ratings.shape) < 0.2] = np.nan
    res = kappa_with_others_interval(ratings, weights=weights)
    boot = kappa_with_others_bootstrap(ratings, weights=weights, n_boot=2000, seed=1)
    np.testing.assert_allclose(res.estimate, boot.estimate, atol=1e-12)
    se = (res.high - res.low) / (2 * 1.959964)
    np.testing.assert_allclose(se, np.std(boot.replicates, axis=0), rtol=0.06)
    np.testing.assert_array_equal(res.n, (~np.isnan(ratings)).sum(axis=1))


@pytest.mark.parametrize("weights", [None, "linear"])
def test_kappa_with_others_interval_of_a_pair_is_fleiss_cohen_everitt(weights):
    rng = np.random.default_rng(11)
    table = rng.integers(1, 30, (4, 4)) + np.diag([40, 30, 30, 40])
    a, b = np.divmod(np.repeat(np.arange(16), table.ravel()), 4)
    pair = np.vstack([a, b]).astype(float)
    res = kappa_with_others_interval(pair, weights=weights, variance="delta")
    se = (res.high - res.low) / (2 * 1.959964)
    expected = kappa_standard_error(table, weights=weights)
    np.testing.assert_allclose(se, [expected, expected], rtol=1e-6)  # z to 7 digits
    # the jackknife (the default) agrees with it to first order on 600 items
    res = kappa_with_others_interval(pair, weights=weights)
    se = (res.high - res.low) / (2 * 1.959964)
    np.testing.assert_allclose(se, [expected, expected], rtol=0.02)


def _sklearn_with_others(ratings, k, weights):
    """Kappa with others of annotator k from scikit-learn's pair kappas (the oracle)."""
    total = weight = 0.0
    for other in range(ratings.shape[0]):
        both = ~np.isnan(ratings[k]) & ~np.isnan(ratings[other])
        if other == k or both.sum() < 2:
            continue
        x, y = ratings[k, both], ratings[other, both]
        if np.unique(np.concatenate([x, y])).size < 2:
            continue
        total += both.sum() * cohen_kappa_score(x, y, weights=weights)
        weight += both.sum()
    return total / weight


@pytest.mark.parametrize("weights", [None, "linear"])
@pytest.mark.parametrize("grouped", [False, True])
def test_kappa_with_others_jackknife_equals_deleting_each_item_with_sklearn(weights, grouped):
    """The closed-form delete-one-item (unit) jackknife equals recomputing every pair kappa
    with scikit-learn after deleting each item (or each unit of two columns) in turn."""
    rng = np.random.default_rng(21)
    truth = rng.integers(0, 3, 40)
    ratings = np.where(rng.random((4, 40)) < 0.7, truth, rng.integers(0, 3, (4, 40)))
    ratings = ratings.astype(float)
    ratings[rng.random(ratings.shape) < 0.3] = np.nan
    units = np.arange(40) // 2 if grouped else np.arange(40)
    res = kappa_with_others_interval(ratings, weights=weights, units=units, min_items=1)
    for k in range(4):
        rated = ~np.isnan(ratings[k])
        shared = [
            u
            for u in np.unique(units)
            if ((units == u) & rated & (~np.isnan(np.delete(ratings, k, axis=0))).any(axis=0)).any()
        ]
        reps = np.array([_sklearn_with_others(ratings[:, units != u], k, weights) for u in shared])
        n = len(shared)
        expected = math.sqrt((n - 1) / n * ((reps - reps.mean()) ** 2).sum())
        se = (res.high[k] - res.low[k]) / (2 * 1.959964)
        assert se == pytest.approx(expected, rel=1e-6)
        assert res.estimate[k] == pytest.approx(_sklearn_with_others(ratings, k, weights))


def test_kappa_with_others_interval_covers_in_a_sparse_crowd():
    """Issue 23: 10 exchangeable annotators x 200 items, 3 answers per item: the delta
    method covered the population kappa in about 91 % of studies (pairs share a dozen items,
    the linearisation is too narrow there); the jackknife covers at the nominal rate."""
    rng = np.random.default_rng(23)
    prior, accuracy = np.array([0.5, 0.3, 0.2]), 0.6
    true = _latent_class_population(prior, accuracy, 3)
    covered = dict.fromkeys(["jackknife", "delta"], 0)
    studies = 400
    for _ in range(studies):
        ratings = _latent_class_ratings(rng, 10, 200, accuracy)
        keep = np.argsort(rng.random(ratings.shape), axis=0) < 3
        ratings[~keep] = np.nan
        for variance in covered:
            res = kappa_with_others_interval(ratings, variance=variance)
            covered[variance] += res.low[0] <= true <= res.high[0]
    assert covered["delta"] / studies < 0.935  # the defect, reproduced
    assert 0.935 <= covered["jackknife"] / studies <= 0.975


def test_kappa_with_others_interval_covers_the_population_value():
    """300 studies of 4 exchangeable raters x 150 items (10 % missing): every rater's
    kappa with others estimates the population pair kappa."""
    rng = np.random.default_rng(12)
    prior, accuracy = np.array([0.5, 0.3, 0.2]), 0.6
    true = _latent_class_population(prior, accuracy, 3)
    covered = 0
    for _ in range(300):
        res = kappa_with_others_interval(_latent_class_ratings(rng, 4, 150, accuracy, missing=0.1))
        covered += res.low[0] <= true <= res.high[0]
    assert 0.92 <= covered / 300 <= 0.98


# --- test-retest ----------------------------------------------------------------------------------


def test_retest_tables_equal_a_loop():
    rng = np.random.default_rng(2)
    first = rng.integers(0, 4, (3, 40)).astype(float)
    second = np.where(rng.random((3, 40)) < 0.3, first, np.nan)
    second[rng.random((3, 40)) < 0.1] = 2.0
    first[0, :5] = np.nan
    tables, values = retest_tables(first, second)
    assert values.tolist() == [0.0, 1.0, 2.0, 3.0]
    expected = np.zeros((3, 4, 4))
    for k in range(3):
        for i in range(40):
            if not (np.isnan(first[k, i]) or np.isnan(second[k, i])):
                expected[k, int(first[k, i]), int(second[k, i])] += 1
    np.testing.assert_array_equal(tables, expected)
    with pytest.raises(ValueError, match="shape"):
        retest_tables(first, second[:, :3])


def test_retest_kappa_too_few_repeats_is_no_value():
    tables = np.array([[[1, 0], [0, 0]], [[20, 5], [3, 22]], [[4, 1], [0, 4]]], dtype=float)
    res = retest_kappa_interval(tables, min_repeats=10)
    full = kappa_interval(tables)
    assert res.n.tolist() == [1, 50, 9]
    assert np.isnan(res.estimate[[0, 2]]).all()
    assert np.isnan(res.low[[0, 2]]).all()
    assert res.estimate[1] == full.estimate[1]
    assert res.low[1] == full.low[1]
    one = retest_kappa_interval(tables[0], min_repeats=2)
    assert math.isnan(one.estimate)
    assert one.n == 1
    assert retest_kappa_interval(tables[1]).estimate == pytest.approx(full.estimate[1])
    with pytest.raises(ValueError, match="min_repeats"):
        retest_kappa_interval(tables, min_repeats=2.5)


# --- categorical entry point ----------------------------------------------------------------------


def test_categorical_entry_point_nominal():
    rng = np.random.default_rng(3)
    ratings = _latent_class_ratings(rng, 5, 150, 0.7, missing=0.2)
    retest = np.where(rng.random(ratings.shape) < 0.1, ratings, np.nan)
    retest[0] = np.nan
    retest[0, :3] = ratings[0, :3]
    out = indicator_intervals_categorical(ratings, retest=retest, n_boot=200, seed=0)
    assert set(out) == {"kappa", "aad", "alpha", "fleiss_kappa", "retest_kappa"}
    np.testing.assert_allclose(out["kappa"].estimate, kappa_with_others(ratings), atol=1e-12)
    assert out["fleiss_kappa"].estimate == pytest.approx(fleiss_kappa(ratings))
    # nominal AAD: two different labels are 1 apart, whatever their codes
    shared = ~np.isnan(ratings[0]) & ~np.isnan(ratings[1:])
    differ = (ratings[0] != ratings[1:]) & shared
    assert out["aad"].estimate[0] == pytest.approx(differ.sum() / shared.sum())
    assert math.isnan(out["retest_kappa"].estimate[0])
    assert out["retest_kappa"].n[0] <= 3
    for key, interval in out.items():
        assert interval.replicates is None, key
        ok = ~np.isnan(np.asarray(interval.estimate, dtype=float))
        assert np.all(np.asarray(interval.low)[ok] <= np.asarray(interval.estimate)[ok] + 1e-9)
        assert np.all(np.asarray(interval.estimate)[ok] <= np.asarray(interval.high)[ok] + 1e-9)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_categorical_entry_point_ordered_uses_weighted_kappa(weights):
    """On an ordered scale kappa with others is the overlap-weighted mean of weighted pair
    kappas, each equal to sklearn's cohen_kappa_score(weights=...)."""
    rng = np.random.default_rng(4)
    truth = rng.integers(0, 5, 120)
    ratings = np.clip(truth + rng.integers(-1, 2, (4, 120)), 0, 4).astype(float)
    out = indicator_intervals_categorical(ratings, ordered=True, weights=weights, n_boot=50, seed=0)
    assert "fleiss_kappa" not in out
    pair = pairwise_kappa(ratings, weights=weights)
    assert pair[0, 1] == pytest.approx(
        cohen_kappa_score(ratings[0], ratings[1], weights=weights, labels=np.arange(5))
    )
    np.testing.assert_allclose(out["kappa"].estimate, (pair.sum(axis=1) - 1) / 3, atol=1e-12)
    unweighted = indicator_intervals_categorical(ratings, n_boot=50, seed=0)
    assert not np.allclose(out["kappa"].estimate, unweighted["kappa"].estimate)
    # AAD on scale positions
    assert out["aad"].estimate[0] == pytest.approx(np.mean(np.abs(ratings[0] - ratings[1:])))
    with pytest.raises(ValueError, match="weights"):
        indicator_intervals_categorical(ratings, ordered=True, weights="cubic")  # type: ignore[arg-type]
    # None: unweighted pair kappas on the ordered scale (the dashboard's live figure)
    plain = indicator_intervals_categorical(ratings, ordered=True, weights=None, n_boot=50, seed=0)
    np.testing.assert_allclose(plain["kappa"].estimate, unweighted["kappa"].estimate, atol=1e-12)


# --- traces: HAC interval, lag removal, tolerance -------------------------------------------------


def test_hac_estimates_equal_the_pooled_kappa_sda():
    rng = np.random.default_rng(5)
    items = []
    for n in (120, 200):
        signal = np.cumsum(rng.choice([-1, 0, 1], n))
        items.append(
            np.vstack(
                [signal + np.cumsum(rng.choice([-1, 0, 1], n, p=[0.2, 0.6, 0.2])) for _ in range(4)]
            ).astype(float)
        )
    items[1][2] = np.nan  # annotator 2 did not trace item 1
    pair = kappa_sda_hac_interval([items[0][[0, 1]]])
    assert pair.estimate[0] == pytest.approx(kappa_sda(items[0][0], items[0][1]), abs=1e-12)
    with_others = kappa_sda_hac_interval(
        items,
        targets=[(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)],
        combine=[[1, 1, 1, 0, 0, 0], [1, 0, 0, 1, 1, 0], [0, 1, 0, 1, 0, 1], [0, 0, 1, 0, 1, 1]],
    )
    reference = kappa_sda_with_others_bootstrap(items, n_boot=1, seed=0).estimate
    np.testing.assert_allclose(with_others.estimate, reference, atol=1e-12)
    assert with_others.n.tolist() == [318, 318, 119, 318]
    with pytest.raises(ValueError, match="targets"):
        kappa_sda_hac_interval(items, targets=[(0, 0)])


def test_hac_effective_samples_fall_with_persistence():
    rng = np.random.default_rng(6)
    iid = kappa_sda_hac_interval([np.vstack(_persistent_traces(rng, 2000, 0.0))])
    persistent = kappa_sda_hac_interval([np.vstack(_persistent_traces(rng, 2000, 0.8))])
    assert iid.n_effective[0] > 1500  # independent steps are worth about themselves
    # a state kept 5 steps on average: (1 - 0.8) / (1 + 0.8) = 0.11 of the steps
    assert 100 < persistent.n_effective[0] < 500
    assert persistent.high[0] - persistent.low[0] > 2 * (iid.high[0] - iid.low[0])


def test_hac_interval_covers_persistent_traces():
    """300 pairs of 1,001-sample traces whose sign state persists 5 steps on average: the
    95 % HAC interval covers the true kappa_SDA (the block bootstrap covers 89-91 %)."""
    rng = np.random.default_rng(20)
    true = kappa_sda_from_counts(SIGN_JOINT)
    covered = 0
    for _ in range(300):
        res = kappa_sda_hac_interval([np.vstack(_persistent_traces(rng, 1000, 0.8))])
        covered += res.low[0] <= true <= res.high[0]
    assert 0.92 <= covered / 300 <= 0.98


def test_remove_lags_drops_padded_samples():
    rng = np.random.default_rng(7)
    base = np.cumsum(rng.standard_normal(230))
    truth = base[15:215]
    traces = np.vstack([base[15 - lag : 215 - lag] for lag in (2, 5, -1)] + [np.full(200, np.nan)])
    out = remove_lags(traces, truth=truth, max_lag=8, rate_hz=1)
    assert out.lags.tolist() == [2, 5, -1, 0]
    assert (out.start, out.stop) == (1, 195)
    np.testing.assert_array_equal(out.aligned[:3], np.tile(truth[1:195], (3, 1)))
    assert np.isnan(out.aligned[3]).all()
    # shift_trace would have padded the last 5 samples of row 1 with a repeated value
    padded = shift_trace(traces[1], 5)
    assert np.all(padded[-5:] == padded[-6])
    # without a truth: lags against the consensus (lags relative to it)
    relative = remove_lags(traces[:3], max_lag=8, rate_hz=1)
    assert np.ptp(relative.aligned - relative.aligned.mean(axis=0)) < 1e-9


def test_a_truth_shorter_than_the_traces_rests_only_the_truth_figures_on_its_samples():
    """A gold signal covering the first 100 of 200 samples: the lags are found on those 100,
    the traces are aligned over their whole length, kappa_SDA against the truth uses the
    shared samples and the between-annotator figures do not depend on the truth at all."""
    rng = np.random.default_rng(17)
    base = np.cumsum(rng.standard_normal(230))
    truth = base[15:115]
    traces = np.vstack([base[15 - lag : 215 - lag] for lag in (2, 5, -1)])
    out = remove_lags(traces, truth=truth, max_lag=8, rate_hz=1)
    assert out.lags.tolist() == [2, 5, -1]
    assert (out.start, out.stop) == (1, 195)
    np.testing.assert_array_equal(out.aligned, np.tile(base[16:210], (3, 1)))
    gold = indicator_intervals_traces([traces], rate_hz=1, truths=[truth], max_lag=8)
    plain = indicator_intervals_traces([traces], rate_hz=1, max_lag=8)
    for key in ("kappa_sda", "pooled_kappa_sda"):
        np.testing.assert_allclose(gold[key].estimate, plain[key].estimate, atol=1e-12)
        np.testing.assert_array_equal(gold[key].n, plain[key].n)
    assert gold["kappa_sda"].n.tolist() == [199] * 3
    # each row's real samples within the truth's 100: lags 2 and 5 lose the end, -1 the start
    assert gold["kappa_truth"].n.tolist() == [97, 94, 98]
    np.testing.assert_allclose(gold["kappa_truth"].estimate, 1.0)


def test_kappa_with_truth_is_the_mean_over_gold_items_of_each_traces_real_samples():
    """kappa_SDA against the truth over several gold items: the plain mean of the items'
    kappa_SDA (the live figure's average), each trace shifted by its lag on the samples it
    really has (``kappa_sda`` on the cut arrays as the oracle), ``n`` = every item's steps."""
    rng = np.random.default_rng(23)
    items, truths, expected, steps = [], [], [[], []], [0, 0]
    for n, lags in ((160, (2, -3)), (90, (4, 1))):
        base = np.round(np.cumsum(rng.choice([-1, 0, 0, 1], n + 20)), 6)
        truth = base[10 : 10 + n]
        rows = [base[10 - lag : 10 - lag + n] + rng.normal(0, 0.4, n) for lag in lags]
        items.append(np.vstack(rows))
        truths.append(truth)
        for k, (row, lag) in enumerate(zip(rows, lags, strict=True)):
            start, stop = max(0, -lag), n - max(0, lag)
            expected[k].append(kappa_sda(row[start + lag : stop + lag], truth[start:stop]))
            steps[k] += stop - start - 1
    out = indicator_intervals_traces(items, rate_hz=1, truths=truths, max_lag=6)["kappa_truth"]
    np.testing.assert_allclose(out.estimate, np.mean(expected, axis=1), atol=1e-12)
    assert out.n.tolist() == steps
    assert np.all((out.low < out.estimate) & (out.estimate < out.high))
    # the two items' kappas differ: a pooled table would not give their mean
    assert abs(expected[0][0] - expected[0][1]) > 0.02


def test_traces_entry_point_raw_aligned_and_truth():
    rng = np.random.default_rng(8)
    items, truths = [], []
    for n in (300, 260):
        base = np.round(np.cumsum(rng.choice([-1, 0, 0, 1], n + 20)) * 0.1, 6)
        items.append(np.vstack([base[10 - lag : 10 - lag + n] for lag in (0, 2, 4)]))
        truths.append(base[10 : 10 + n])
    out = indicator_intervals_traces(items, rate_hz=1, truths=[truths[0], None], max_lag=6)
    assert np.all(out["kappa_sda_aligned"].estimate > out["kappa_sda"].estimate + 0.3)
    np.testing.assert_allclose(out["kappa_sda_aligned"].estimate, 1.0)
    np.testing.assert_allclose(out["kappa_truth"].estimate, 1.0)
    # gold item only, each trace on its own real samples: 299 steps less its lag
    assert out["kappa_truth"].n.tolist() == [299, 297, 295]
    for interval in out.values():
        assert not np.any(interval.n_effective > interval.n)  # nan: perfect agreement, no spread
    removed = [
        remove_lags(mat, truth=truth, max_lag=6, rate_hz=1)
        for mat, truth in zip(items, [truths[0], None], strict=True)
    ]
    assert out["icc"].estimate == pytest.approx(np.mean([icc(r.aligned) for r in removed]))
    assert out["icc"].n == sum(r.aligned.shape[1] for r in removed)
    assert 1 <= out["icc"].n_effective < out["icc"].n / 10  # random walks: few independent samples
    assert out["icc"].low <= out["icc"].estimate <= out["icc"].high
    none = indicator_intervals_traces(items, rate_hz=1)
    assert np.isnan(none["kappa_truth"].estimate).all()
    assert none["kappa_truth"].n.tolist() == [0] * 3


def test_dead_band_applies_to_annotators_not_to_the_truth():
    """A truth that moves by less than the annotators' tolerance still moves."""
    t = np.arange(200)
    truth = 0.001 * np.sin(t / 7)  # every step below tol = 0.005
    item = np.vstack([truth, truth])
    out = indicator_intervals_traces([item], rate_hz=1, truths=[truth], tol=0.005, max_lag=0)
    # the annotators' jitter-sized moves count as no change; the truth's do not
    assert out["kappa_truth"].estimate == pytest.approx(
        [kappa_sda_from_counts([[0, 0, 0], [97, 0, 102], [0, 0, 0]])] * 2, nan_ok=True
    )
    blunt = kappa_sda_hac_interval([np.vstack([truth, truth])], tol=0.005)
    assert math.isnan(blunt.estimate[0])  # the same tolerance on both would erase the signal


# --- pairwise entry point -------------------------------------------------------------------------


def test_pairwise_entry_point():
    rng = np.random.default_rng(9)
    score = rng.standard_normal(12)
    noisy = [
        (a, b, 1 if score[a] - score[b] + rng.normal(0, 1.5) > 0 else -1)
        for a in range(12)
        for b in range(a)
    ]
    counted = [complete_triplets(noisy), complete_triplets(noisy[:3])]
    out = indicator_intervals_pairwise(counted, min_items=4)["transitivity_kappa"]
    assert out.n.tolist() == [12, 3]
    assert out.low[0] < out.estimate[0] < out.high[0]
    assert np.isnan([out.estimate[1], out.low[1], out.high[1]]).all()


# --- study figures: pooled transitivity kappa (jackknife) and pooled kappa_SDA (HAC) ------------


def _weak_order_chance(tie_rate: float) -> float:
    """P(E) by enumerating the 27 outcome combinations of a triplet's three pairs (tie with
    probability t, each direction (1 - t) / 2) and summing those that form a weak order."""
    prob = {1: (1 - tie_rate) / 2, 0: tie_rate, -1: (1 - tie_rate) / 2}
    total = 0.0
    for ab, bc, ac in itertools.product((1, 0, -1), repeat=3):
        if _is_weak_order({(0, 1): ab, (1, 2): bc, (0, 2): ac}, (0, 1, 2)):
            total += prob[ab] * prob[bc] * prob[ac]
    return total


def _is_weak_order(outcome: dict[tuple[int, int], int], items: tuple[int, ...]) -> bool:
    """No x, y, z of the triplet with x >= y and y >= z but not x >= z."""

    def at_least(x: int, y: int) -> bool:
        if (x, y) in outcome:
            return outcome[(x, y)] >= 0
        return outcome[(y, x)] <= 0

    return all(
        not (at_least(x, y) and at_least(y, z)) or at_least(x, z)
        for x, y, z in itertools.permutations(items)
    )


def _brute_pooled_kappa(
    annotators: list[dict[tuple[int, int], int]], left_out: int | None = None
) -> float:
    """The pooled transitivity kappa counted directly: every triplet of items each annotator
    judged all three pairs of (item ``left_out`` dropped), ties over all judged pairs."""
    transitive = complete = ties = pairs = 0
    for judged in annotators:
        kept = {p: o for p, o in judged.items() if left_out not in p}
        items = sorted({i for p in kept for i in p})
        for triplet in itertools.combinations(items, 3):
            sides = list(itertools.combinations(triplet, 2))
            if all(p in kept or p[::-1] in kept for p in sides):
                complete += 1
                transitive += _is_weak_order(kept, triplet)
        ties += sum(o == 0 for o in kept.values())
        pairs += len(kept)
    chance = _weak_order_chance(ties / pairs)
    return (transitive / complete - chance) / (1 - chance) if complete else math.nan


def _random_annotators(
    rng: np.random.Generator, n_items: int, noise: float, share: float
) -> list[dict[tuple[int, int], int]]:
    """Three annotators judging a random share of the pairs of items with latent scores
    (Thurstone), a tie when the noisy difference is small."""
    score = rng.standard_normal(n_items)
    out = []
    for _ in range(3):
        judged = {}
        for a, b in itertools.combinations(range(n_items), 2):
            if rng.random() < share:
                d = score[a] - score[b] + rng.normal(0, noise)
                judged[(a, b)] = 0 if abs(d) < 0.3 else (1 if d > 0 else -1)
        out.append(judged)
    return out


def _listed(judged: dict[tuple[int, int], int]) -> list[tuple[int, int, int]]:
    return [(a, b, o) for (a, b), o in judged.items()]


def test_pooled_transitivity_jackknife_equals_leave_one_item_out_by_hand():
    rng = np.random.default_rng(31)
    annotators = _random_annotators(rng, 9, noise=1.2, share=0.8)
    counted = [complete_triplets(_listed(j), items=range(9)) for j in annotators]
    out = indicator_intervals_pairwise(counted)["pooled_transitivity_kappa"]
    whole = _brute_pooled_kappa(annotators)
    items = sorted({i for judged in annotators for p in judged for i in p})
    replicates = np.array([_brute_pooled_kappa(annotators, left_out=i) for i in items])
    n = len(replicates)
    se = math.sqrt((n - 1) / n * np.sum((replicates - replicates.mean()) ** 2))
    ties = sum(o == 0 for j in annotators for o in j.values())
    chance = _weak_order_chance(ties / sum(len(j) for j in annotators))
    floor = -chance / (1 - chance)
    assert out.estimate == pytest.approx(whole, abs=1e-12)
    assert out.low == pytest.approx(max(whole - 1.959964 * se, floor), abs=1e-5)
    assert out.high == pytest.approx(min(whole + 1.959964 * se, 1.0), abs=1e-5)
    assert out.low < out.estimate < out.high
    assert out.n == sum(len(c.triplets) for c in counted)  # evidence: complete triplets


def test_pooled_transitivity_below_minimum_items_has_no_bounds():
    counted = [complete_triplets([(0, 1, 1), (1, 2, 1), (0, 2, 1)])] * 2
    out = indicator_intervals_pairwise(counted, min_items=4)["pooled_transitivity_kappa"]
    assert out.estimate == pytest.approx(1.0)  # the live figure stays, with its evidence
    assert math.isnan(out.low)
    assert math.isnan(out.high)
    assert out.n == 2
    empty = indicator_intervals_pairwise([])["pooled_transitivity_kappa"]
    assert math.isnan(empty.estimate)
    assert empty.n == 0


def test_pooled_transitivity_interval_covers_the_mean_pooled_kappa():
    """200 simulated studies (3 Thurstone annotators, 10 items, 80 % of pairs judged): the 95 %
    jackknife interval covers the mean pooled kappa in a sane share of studies (the jackknife
    variance errs on the wide side)."""
    rng = np.random.default_rng(32)
    found = []
    for _ in range(200):
        annotators = _random_annotators(rng, 10, noise=1.0, share=0.8)
        counted = [complete_triplets(_listed(j), items=range(10)) for j in annotators]
        found.append(indicator_intervals_pairwise(counted)["pooled_transitivity_kappa"])
    truth = np.mean([r.estimate for r in found])
    coverage = np.mean([r.low <= truth <= r.high for r in found])
    assert 0.90 <= coverage <= 0.995


def _pooled_sign_traces(
    rng: np.random.Generator, m: int, n_steps: int, persistence: float, accuracy: float
) -> tuple[np.ndarray, np.ndarray]:
    """m annotators' traces: at each step a latent sign, each annotator moves with it with
    probability ``accuracy`` (else a uniform random sign); the whole joint state is kept with
    probability ``persistence`` (serially correlated steps). Returns the traces and the
    population joint distribution of one pair's signs (every pair alike)."""
    latent_p = np.array([0.3, 0.4, 0.3])
    own = accuracy * np.eye(3) + (1 - accuracy) / 3  # own[z, s]: P(sign s | latent z)
    joint = np.einsum("z,zs,zu->su", latent_p, own, own)
    latent = rng.choice(3, size=n_steps, p=latent_p)
    signs = np.where(rng.random((m, n_steps)) < accuracy, latent, rng.integers(0, 3, (m, n_steps)))
    fresh = rng.random(n_steps) >= persistence
    fresh[0] = True
    signs = signs[:, np.maximum.accumulate(np.where(fresh, np.arange(n_steps), 0))]
    traces = np.hstack([np.zeros((m, 1)), np.cumsum(signs - 1, axis=1)]).astype(float)
    return traces, joint


def test_pooled_kappa_sda_is_the_summed_tables_kappa_with_time_steps_as_evidence():
    rng = np.random.default_rng(33)
    items = [_pooled_sign_traces(rng, 4, n, 0.6, 0.7)[0] for n in (150, 220)]
    items[1][3] = np.nan  # annotator 3 did not trace item 1
    out = indicator_intervals_traces(items, rate_hz=1, max_lag=0)["pooled_kappa_sda"]
    tables = np.zeros((3, 3))
    for mat in items:
        traced = [row for row in mat if not np.isnan(row).all()]
        for x, y in itertools.permutations(traced, 2):  # both orders: the dashboard's sum
            tables += np.histogram2d(np.sign(np.diff(x)), np.sign(np.diff(y)), bins=3)[0]
    assert out.estimate == pytest.approx(kappa_sda_from_counts(tables), abs=1e-12)
    assert out.n == 150 + 220  # time steps, each once however many pairs share it
    assert out.low < out.estimate < out.high
    assert 1 < out.n_effective < out.n  # persistent moves: fewer independent steps
    alone = indicator_intervals_traces([items[0][:1]], rate_hz=1)["pooled_kappa_sda"]
    assert math.isnan(alone.estimate)
    assert alone.n == 0
    with pytest.raises(ValueError, match="combine"):
        kappa_sda_hac_interval(items, pool=True, combine=[[1, 1, 1, 1, 1, 1]])


def test_pooled_kappa_sda_interval_covers_the_population_value():
    """200 studies of 4 annotators (2 items of 400 steps, moves persisting 2.5 steps on
    average): the 95 % HAC interval covers the population pooled kappa_SDA; the steps of
    different pairs at one instant are correlated, so treating them as independent would
    not."""
    rng = np.random.default_rng(34)
    covered, joint = 0, None
    for _ in range(200):
        items = []
        for _ in range(2):
            traces, joint = _pooled_sign_traces(rng, 4, 400, 0.6, 0.6)
            items.append(traces)
        out = kappa_sda_hac_interval(items, targets=np.argwhere(~np.eye(4, dtype=bool)), pool=True)
        covered += out.low[0] <= kappa_sda_from_counts(joint) <= out.high[0]
    assert 0.91 <= covered / 200 <= 0.99


def test_kappa_with_others_interval_never_has_zero_width_on_few_items():
    """Issue 23: two items that happen to agree gave low = high = estimate = 1."""
    nan = np.nan
    found = kappa_with_others_interval([[0, 1, nan], [0, 1, 2], [nan, 2, 2]])
    assert np.isnan(found.low).all()
    assert np.isnan(found.high).all()
    assert found.estimate[0] == 1.0  # the figure stays, its interval reads "too few"
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 3, 200)
    ratings = np.where(rng.random((10, 200)) < 0.7, truth, rng.integers(0, 3, (10, 200)))
    ratings = ratings.astype(float)
    ratings[rng.random(ratings.shape) < 0.7] = nan  # about 3 answers per item
    found = kappa_with_others_interval(ratings)
    shown = ~np.isnan(found.low)
    assert shown.all()
    assert np.all(found.high[shown] - found.low[shown] > 0.05)


def test_rows_agreement_is_the_dashboards_alpha_and_fleiss_with_its_rows():
    """Issue 23: one function for the study figures of a set of rows; its alpha is
    Krippendorff's (the ``krippendorff`` package as oracle) and its Fleiss kappa statsmodels'
    on complete rows, and it counts what it rests on."""
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    from analytics.metrics.intervals import item_bootstrap_seed, rows_agreement

    rng = np.random.default_rng(40)
    ratings = _latent_class_ratings(rng, 5, 60, 0.7)
    found = rows_agreement(ratings, n_boot=200, seed=1)
    assert found.alpha.estimate == pytest.approx(
        krippendorff.alpha(reliability_data=ratings, level_of_measurement="nominal"), abs=1e-9
    )
    table, _ = aggregate_raters(ratings.T.astype(int))
    assert found.fleiss_kappa.estimate == pytest.approx(sm_fleiss(table), abs=1e-9)
    assert (found.annotators, found.answers, found.items) == (5, 300, 60)
    ratings[0] = np.nan
    ratings[1, :50] = np.nan
    fewer = rows_agreement(ratings, ordered=True, n_boot=200, seed=1)
    assert (fewer.annotators, fewer.answers, fewer.items, fewer.level) == (4, 190, 60, "ordinal")
    dashboard = indicator_intervals_categorical(ratings, ordered=True, n_boot=200, seed=7)
    same = rows_agreement(ratings, ordered=True, n_boot=200, seed=item_bootstrap_seed(7))
    assert tuple(same.alpha)[:4] == tuple(dashboard["alpha"])[:4]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_kappa_with_others_jackknife_is_invariant_to_the_order_of_items_and_annotators(seed):
    rng = np.random.default_rng(seed)
    ratings = _latent_class_ratings(rng, 4, 25, 0.7, missing=0.3)
    res = kappa_with_others_interval(ratings, min_items=1)
    items, people = rng.permutation(25), rng.permutation(4)
    moved = kappa_with_others_interval(ratings[people][:, items], min_items=1)
    np.testing.assert_allclose(moved.estimate, res.estimate[people], atol=1e-12)
    np.testing.assert_allclose(moved.high - moved.low, (res.high - res.low)[people], atol=1e-9)
