"""Per-item aggregates: majority with ties, Dawid-Skene on the full code axis, AAD-RMSE."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analytics.metrics.aad import aad_rmse_per_item
from analytics.metrics.dawid_skene import dawid_skene
from apps.adjudication.aggregation import aggregate_items, majority_votes
from benchmarks.report_rzhetsky import DATA_DIR, load_ratings

NAN = np.nan


def test_majority_marks_ties_and_unanswered_items():
    ratings = [[0, 1, NAN, 2], [0, 2, NAN, 2], [1, NAN, NAN, 0]]
    votes, majority, tied = majority_votes(ratings, n_values=3)
    assert votes.tolist() == [[2, 1, 0], [0, 1, 1], [0, 0, 0], [1, 0, 2]]
    assert majority.tolist() == [0, -1, -1, 2]
    assert tied.tolist() == [False, True, False, False]


def test_codes_nobody_used_get_posterior_zero_and_keep_their_column():
    ratings = [[0, 2, 2, NAN], [0, 2, 0, NAN], [0, 2, 2, NAN]]  # code 1 never used
    agg = aggregate_items(ratings, points=np.eye(3) / np.sqrt(2))
    fit = dawid_skene(ratings)
    np.testing.assert_allclose(agg.posteriors[:3][:, [0, 2]], fit.posteriors[:3])
    assert (agg.posteriors[:3, 1] == 0).all()
    assert np.isnan(agg.posteriors[3]).all()
    assert agg.ds_label.tolist() == [0, 2, 2, -1]
    assert agg.n_answers.tolist() == [3, 3, 3, 0]


def test_disagreement_is_aad_rmse_in_the_label_space():
    ratings = np.array([[0, 1, 2, 0], [2, 1, 2, NAN], [1, 1, NAN, NAN]])
    points = np.array([[-1.0, 0.0], [0.0, 0.0], [1.0, 0.5]])
    agg = aggregate_items(ratings, points=points)
    coordinates = {float(c): tuple(p) for c, p in enumerate(points)}
    np.testing.assert_allclose(
        agg.disagreement, aad_rmse_per_item(ratings, coordinates=coordinates), equal_nan=True
    )
    assert agg.disagreement[1] == 0
    assert np.isnan(agg.disagreement[3])


@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=5, max_size=5),
        min_size=1,
        max_size=6,
    )
)
def test_majority_agrees_with_counting(rows):
    ratings = np.array([[NAN if v is None else v for v in row] for row in rows], dtype=float)
    votes, majority, tied = majority_votes(ratings, n_values=4)
    for i in range(ratings.shape[1]):
        column = ratings[:, i][~np.isnan(ratings[:, i])].astype(int)
        counts = np.bincount(column, minlength=4)
        np.testing.assert_array_equal(votes[i], counts)
        winners = np.flatnonzero(counts == counts.max()) if column.size else []
        assert tied[i] == (len(winners) > 1)
        assert majority[i] == (winners[0] if len(winners) == 1 else -1)


@pytest.mark.slow
@pytest.mark.skipif(
    not (DATA_DIR / "annotations.csv").exists(), reason=f"no data set at {DATA_DIR}"
)
def test_dawid_skene_matches_crowd_kit_on_rzhetsky():
    """Outside oracle: crowd-kit's DawidSkene (test-only dependency) on 15,521 items x 8
    annotators, 50 EM iterations each; crowd-kit clips probabilities at 1e-10, so the
    smoothing here is 1e-10 too. (The export's fit runs to convergence: after 50 iterations
    about 5 % of these labels still change.)"""
    aggregation = pytest.importorskip("crowdkit.aggregation")
    pd = pytest.importorskip("pandas")
    ratings = load_ratings() - 1  # codes 0..4
    annotator, item = np.nonzero(~np.isnan(ratings))
    frame = pd.DataFrame({"worker": annotator, "task": item, "label": ratings[annotator, item]})
    frame["label"] = frame["label"].astype(int)
    theirs = aggregation.DawidSkene(n_iter=50, tol=-np.inf).fit(frame)
    ours = dawid_skene(ratings, max_iter=50, tol=-np.inf, smoothing=1e-10, accelerate=False)
    posteriors = theirs.probas_.sort_index()[sorted(theirs.probas_.columns)].to_numpy()
    np.testing.assert_allclose(ours.posteriors, posteriors, atol=1e-6)
    labels = theirs.labels_.sort_index().to_numpy()
    assert (ours.values[np.argmax(ours.posteriors, axis=1)] == labels).mean() > 0.9999
