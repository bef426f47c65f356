"""Real data: Rzhetsky et al. (2009), 15,521 items x 8 annotators, 3 ratings per item.

Checked against outside oracles on the whole data set: scikit-learn per pair, the
`krippendorff` package, statsmodels' Fleiss' kappa. Loader shared with
``benchmarks/report_rzhetsky.py``.
"""

from __future__ import annotations

import itertools
import warnings

import krippendorff
import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from analytics.metrics import (
    aad_rmse_per_item,
    dawid_skene,
    fleiss_kappa,
    krippendorff_alpha,
    mean_with_others,
    pairwise_kappa,
)
from benchmarks.report_rzhetsky import DATA_DIR, MIN_OVERLAP, load_ratings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (DATA_DIR / "annotations.csv").exists(), reason=f"no data set at {DATA_DIR}"
    ),
]


@pytest.fixture(scope="module")
def ratings():
    return load_ratings()


def test_shape_and_design(ratings):
    assert ratings.shape == (8, 15_521)
    np.testing.assert_array_equal((~np.isnan(ratings)).sum(axis=0), 3)
    assert set(np.unique(ratings[~np.isnan(ratings)])) <= {1, 2, 3, 4, 5}


@pytest.mark.parametrize("weights", [None, "quadratic"])
def test_pairwise_kappa_equals_sklearn_per_pair(ratings, weights):
    got = pairwise_kappa(ratings, min_overlap=MIN_OVERLAP, weights=weights)
    for k, l in itertools.combinations(range(8), 2):
        both = ~np.isnan(ratings[k]) & ~np.isnan(ratings[l])
        if both.sum() < MIN_OVERLAP:
            assert np.isnan(got[k, l])
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = cohen_kappa_score(
                ratings[k, both], ratings[l, both], weights=weights, labels=[1, 2, 3, 4, 5]
            )
        assert got[k, l] == pytest.approx(expected, abs=1e-12)
    assert np.isnan(got).sum() == 24  # the rotating panel never pairs 12 of the 28 pairs


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha_equals_package(ratings, level):
    expected = krippendorff.alpha(reliability_data=ratings, level_of_measurement=level)
    assert krippendorff_alpha(ratings, level=level) == pytest.approx(expected, abs=1e-12)


def test_fleiss_equals_statsmodels(ratings):
    per_item = np.sort(ratings.T, axis=1)[:, :3].astype(int)
    table, _ = inter_rater.aggregate_raters(per_item)
    expected = inter_rater.fleiss_kappa(table, method="fleiss")
    assert fleiss_kappa(ratings) == pytest.approx(expected, abs=1e-12)


def test_aad_rmse_defined_for_every_item(ratings):
    rmse = aad_rmse_per_item(ratings)
    assert not np.isnan(rmse).any()
    assert np.all((rmse >= 0) & (rmse <= 4 * np.sqrt(2 / 3) + 1e-12))


def test_dawid_skene_competences_are_sane_and_stable(ratings):
    fit = dawid_skene(ratings)
    assert fit.converged
    assert np.all((fit.competence > 0) & (fit.competence <= 1))
    np.testing.assert_allclose(fit.posteriors.sum(axis=1), 1.0)
    # the ranking barely depends on the smoothing and holds on two halves of the items
    smoother = dawid_skene(ratings, smoothing=1.0).competence
    assert spearmanr(fit.competence, smoother).statistic >= 0.9
    half = np.arange(ratings.shape[1]) % 2 == 0
    first = dawid_skene(ratings[:, half]).competence
    second = dawid_skene(ratings[:, ~half]).competence
    assert spearmanr(first, second).statistic >= 0.75
    assert np.argmin(first) == np.argmin(second) == np.argmin(fit.competence)
    # the annotator the model trusts least also agrees least with the others (kappa)
    kappa = pairwise_kappa(ratings, min_overlap=MIN_OVERLAP)
    assert spearmanr(fit.competence, mean_with_others(kappa)).statistic > 0.5


def test_dawid_skene_stops_at_the_converged_fit(ratings):
    # the former rule (log-likelihood gain < 1e-6 |LL|) stopped at iteration 87, up to 0.008
    # away in competence from the converged fit; the reference runs EM to exhaustion
    fit = dawid_skene(ratings)
    exhausted = dawid_skene(ratings, max_iter=3_000, tol=0.0)  # as at 20,000 here
    assert fit.converged
    assert 87 < fit.n_iter < 2000
    np.testing.assert_allclose(fit.competence, exhausted.competence, atol=1e-6)
