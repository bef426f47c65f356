"""The per-kind interval entry points and the analytic intervals they add (issue #11)."""

from __future__ import annotations

import math

import numpy as np
import pytest
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
    res = kappa_with_others_interval(np.vstack([a, b]).astype(float), weights=weights)
    se = (res.high - res.low) / (2 * 1.959964)
    expected = kappa_standard_error(table, weights=weights)
    np.testing.assert_allclose(se, [expected, expected], rtol=1e-6)  # z to 7 digits


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
    assert out["kappa_truth"].n.tolist() == [295, 295, 295]  # gold item only, 4 + 1 dropped
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
