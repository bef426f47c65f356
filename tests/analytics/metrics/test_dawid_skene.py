"""Dawid-Skene EM against a plain loop implementation and on data with known error rates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.metrics import dawid_skene
from benchmarks.report_rzhetsky import DATA_DIR, load_ratings


def _simulate(rng, n_annotators=12, n_items=3000, n_labels=4, per_item=5):
    prevalence = np.linspace(1, 2, n_labels)
    truth = rng.choice(n_labels, n_items, p=prevalence / prevalence.sum())
    accuracy = rng.uniform(0.35, 0.95, n_annotators)
    ratings = np.full((n_annotators, n_items), np.nan)
    raters = np.argsort(rng.random((n_items, n_annotators)), axis=1)[:, :per_item]
    for column in raters.T:
        correct = rng.random(n_items) < accuracy[column]
        wrong = (truth + rng.integers(1, n_labels, n_items)) % n_labels
        ratings[column, np.arange(n_items)] = np.where(correct, truth, wrong)
    return ratings, truth, accuracy


def _reference_em(ratings, n_iter, smoothing):
    """Textbook EM with explicit loops over ratings (the test oracle)."""
    values = np.unique(ratings[~np.isnan(ratings)])
    n_annotators, n_items = ratings.shape
    c = values.size
    triples = [
        (k, i, int(np.searchsorted(values, ratings[k, i])))
        for k in range(n_annotators)
        for i in range(n_items)
        if not np.isnan(ratings[k, i])
    ]
    rated = sorted({i for _, i, _ in triples})
    row = {item: r for r, item in enumerate(rated)}
    t = np.zeros((len(rated), c))
    for _, i, label in triples:
        t[row[i], label] += 1
    t /= t.sum(axis=1, keepdims=True)
    for _ in range(n_iter):
        priors = t.mean(axis=0)
        counts = np.full((n_annotators, c, c), smoothing)
        for k, i, label in triples:
            counts[k, :, label] += t[row[i]]
        pi = counts / counts.sum(axis=2, keepdims=True)
        log_t = np.tile(np.log(priors), (len(rated), 1))
        for k, i, label in triples:
            log_t[row[i]] += np.log(pi[k, :, label])
        t = np.exp(log_t - log_t.max(axis=1, keepdims=True))
        t /= t.sum(axis=1, keepdims=True)
    return pi, priors, t, rated


@pytest.mark.parametrize("seed", range(3))
def test_equals_loop_reference(seed):
    rng = np.random.default_rng(seed)
    ratings, _, _ = _simulate(rng, n_annotators=5, n_items=60, n_labels=3, per_item=3)
    ratings[:, 7] = np.nan  # an item nobody rated
    fit = dawid_skene(ratings, max_iter=25, tol=0.0, smoothing=0.5, accelerate=False)
    pi, priors, t, rated = _reference_em(ratings, fit.n_iter, smoothing=0.5)
    np.testing.assert_allclose(fit.confusion, pi, atol=1e-12)
    np.testing.assert_allclose(fit.priors, priors, atol=1e-12)
    np.testing.assert_allclose(fit.posteriors[rated], t, atol=1e-12)
    np.testing.assert_allclose(fit.posteriors[7], fit.priors)


def test_recovers_known_error_rates():
    rng = np.random.default_rng(42)
    ratings, truth, accuracy = _simulate(rng)
    fit = dawid_skene(ratings)
    assert fit.converged
    np.testing.assert_allclose(fit.competence, accuracy, atol=0.05)
    counts = np.stack([(ratings == v).sum(axis=0) for v in range(4)], axis=1)
    majority_accuracy = np.mean(np.argmax(counts, axis=1) == truth)
    assert np.mean(fit.labels == truth) > majority_accuracy


def test_result_shapes_and_normalisation():
    rng = np.random.default_rng(5)
    ratings, _, _ = _simulate(rng, n_annotators=6, n_items=200)
    ratings[5] = np.nan  # an annotator without ratings
    fit = dawid_skene(ratings)
    assert fit.confusion.shape == (6, 4, 4)
    assert fit.posteriors.shape == (200, 4)
    np.testing.assert_allclose(fit.posteriors.sum(axis=1), 1.0)
    np.testing.assert_allclose(fit.confusion[:5].sum(axis=2), 1.0)
    np.testing.assert_allclose(fit.priors.sum(), 1.0)
    assert np.isnan(fit.confusion[5]).all()
    assert np.isnan(fit.competence[5])
    assert np.all((fit.competence[:5] > 0) & (fit.competence[:5] <= 1))
    assert np.isfinite(fit.log_likelihood)


def test_bad_input():
    with pytest.raises(ValueError, match="max_iter must be at least 1"):
        dawid_skene([[0, 1]], max_iter=0)
    with pytest.raises(ValueError, match="smoothing must be positive"):
        dawid_skene([[0, 1]], smoothing=0)
    with pytest.raises(ValueError, match="ratings hold no label"):
        dawid_skene(np.full((2, 3), np.nan))
    with pytest.raises(ValueError, match="integer label codes"):
        dawid_skene([[0.5, 1]])
    with pytest.raises(ValueError, match="must be 2-D"):
        dawid_skene([0, 1, 2])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.permutations([0, 1, 2]))
def test_relabelling_permutes_the_fit(seed, permutation):
    rng = np.random.default_rng(seed)
    ratings, _, _ = _simulate(rng, n_annotators=4, n_items=40, n_labels=3, per_item=3)
    perm = np.array(permutation)
    relabelled = np.where(np.isnan(ratings), np.nan, perm[np.nan_to_num(ratings).astype(int)])
    fit, refit = dawid_skene(ratings), dawid_skene(relabelled)
    np.testing.assert_allclose(refit.posteriors[:, perm], fit.posteriors, atol=1e-9)
    np.testing.assert_allclose(refit.competence, fit.competence, atol=1e-9)


@pytest.mark.slow  # seconds of simulated studies (CI: the PostgreSQL pass)
@pytest.mark.parametrize("seed", range(3))
def test_default_fit_is_the_converged_fit(seed):
    # a run to exhaustion (no tolerance) is the reference: the default stopping rule must land
    # within 1e-6 of it, not merely where the log-likelihood gain became small
    rng = np.random.default_rng(seed)
    ratings, _, _ = _simulate(rng, n_annotators=6, n_items=300, n_labels=4, per_item=3)
    fit = dawid_skene(ratings)
    exhausted = dawid_skene(ratings, max_iter=20_000, tol=0.0)
    assert fit.converged
    assert fit.n_iter < 2000
    np.testing.assert_allclose(fit.competence, exhausted.competence, atol=1e-6)
    np.testing.assert_allclose(fit.posteriors, exhausted.posteriors, atol=1e-5)


def test_reports_when_it_did_not_converge():
    rng = np.random.default_rng(0)
    ratings, _, _ = _simulate(rng, n_annotators=6, n_items=300, n_labels=4, per_item=3)
    fit = dawid_skene(ratings, max_iter=3)
    assert fit.n_iter == 3
    assert not fit.converged


@pytest.mark.parametrize("seed", range(3))
def test_accelerated_fit_is_the_plain_converged_fit(seed):
    # SQUAREM changes the path, not the fixed point or the stopping rule: the same fit, within
    # the tolerance both runs stop at, in a fraction of the EM steps
    rng = np.random.default_rng(seed)
    ratings, _, _ = _simulate(rng, n_annotators=6, n_items=300, n_labels=4, per_item=3)
    plain = dawid_skene(ratings, accelerate=False)
    fast = dawid_skene(ratings)
    assert plain.converged
    assert fast.converged
    assert fast.n_iter < plain.n_iter / 3
    np.testing.assert_allclose(fast.competence, plain.competence, atol=1e-6)
    np.testing.assert_allclose(fast.confusion, plain.confusion, atol=1e-6)
    np.testing.assert_allclose(fast.priors, plain.priors, atol=1e-6)
    np.testing.assert_allclose(fast.posteriors, plain.posteriors, atol=1e-5)
    assert fast.log_likelihood == pytest.approx(plain.log_likelihood, abs=1e-6)


@pytest.mark.skipif(not (DATA_DIR / "annotations.csv").exists(), reason=f"no data at {DATA_DIR}")
def test_accelerated_fit_is_the_plain_converged_fit_on_rzhetsky():
    # 8 annotators x 15,521 items, where plain EM needs about 600 steps
    ratings = load_ratings()
    plain = dawid_skene(ratings, accelerate=False)
    fast = dawid_skene(ratings)
    assert plain.converged
    assert fast.converged
    assert plain.n_iter > 500
    assert fast.n_iter < plain.n_iter / 4
    np.testing.assert_allclose(fast.competence, plain.competence, atol=1e-6)
    np.testing.assert_allclose(fast.confusion, plain.confusion, atol=1e-6)
    np.testing.assert_allclose(fast.posteriors, plain.posteriors, atol=1e-5)


@pytest.mark.parametrize("max_iter", [1, 2, 3, 4, 7])
def test_accelerated_fit_counts_every_em_step_against_max_iter(max_iter):
    rng = np.random.default_rng(0)
    ratings, _, _ = _simulate(rng, n_annotators=6, n_items=300, n_labels=4, per_item=3)
    fit = dawid_skene(ratings, max_iter=max_iter)
    assert fit.n_iter == max_iter
    assert not fit.converged


def test_a_class_without_mass_fits_without_a_warning():
    """Every demo load printed "RuntimeWarning: divide by zero encountered in log": in a
    bootstrap replicate a class can have no mass; its log prior is -inf on purpose and the
    accelerated step falls back to plain EM, with nothing printed."""
    import warnings

    from analytics.metrics.uncertainty import dawid_skene_competence_bootstrap

    rng = np.random.default_rng(6)
    truth = rng.integers(0, 3, 20)
    ratings = np.array(
        [np.where(rng.random(20) < 0.8, truth, rng.integers(0, 3, 20)) for _ in range(4)],
        dtype=float,
    )
    ratings[0, 0] = 3  # a label given once
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interval = dawid_skene_competence_bootstrap(ratings, n_boot=50, seed=1)
    assert np.isfinite(interval.estimate).all()
