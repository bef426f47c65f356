"""Cohen's / Fleiss' kappa against scikit-learn, statsmodels and published tables."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from analytics.metrics import (
    cohen_kappa,
    fleiss_kappa,
    kappa_from_confusion,
    label_distribution,
    label_skew,
    pairwise_confusion,
    pairwise_kappa,
)

WEIGHTS = [None, "linear", "quadratic"]


def _sklearn_kappa(y1, y2, weights=None, labels=None):
    """Oracle: scikit-learn on the items both rated; nan where it is undefined."""
    both = ~np.isnan(y1) & ~np.isnan(y2)
    if not both.any():
        return np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cohen_kappa_score(y1[both], y2[both], weights=weights, labels=labels)


def _random_study(rng, n_annotators, n_items, n_labels, p_missing):
    truth = rng.integers(0, n_labels, n_items)
    noisy = rng.integers(0, n_labels, (n_annotators, n_items))
    keep = rng.random((n_annotators, n_items)) < rng.uniform(0.4, 0.9, (n_annotators, 1))
    ratings = np.where(keep, truth, noisy).astype(float)
    ratings[rng.random((n_annotators, n_items)) < p_missing] = np.nan
    return ratings


# --- Cohen's kappa -----------------------------------------------------------------------------


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("seed", range(5))
def test_cohen_kappa_equals_sklearn_on_shared_items(seed, weights):
    rng = np.random.default_rng(seed)
    y1, y2 = _random_study(rng, 2, 300, 5, p_missing=0.3)
    expected = _sklearn_kappa(y1, y2, weights)
    assert cohen_kappa(y1, y2, weights=weights) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
def test_weighted_kappa_uses_code_distances_not_ranks(weights):
    # codes {0, 1, 3}: code 2 is unused, so scikit-learn's default (ranks of the labels present)
    # puts 1 and 3 next to each other; the codes themselves are 2 apart.
    y1 = np.array([0, 1, 3, 3, 1, 0, 3, 1], dtype=float)
    y2 = np.array([0, 3, 3, 1, 1, 1, 3, 0], dtype=float)
    ours = cohen_kappa(y1, y2, weights=weights)
    assert ours == pytest.approx(cohen_kappa_score(y1, y2, weights=weights, labels=np.arange(4)))
    assert ours != pytest.approx(cohen_kappa_score(y1, y2, weights=weights))


def test_cohen_kappa_published_two_by_two():
    # Cohen (1960)-style 2x2 table: p_o = 0.7, p_e = 0.5 -> kappa = 0.4 (Wikipedia worked example)
    assert kappa_from_confusion([[20, 5], [10, 15]]) == pytest.approx(0.4)


def test_cohen_kappa_undefined_cases():
    assert np.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # p_e = 1
    assert np.isnan(cohen_kappa([1, np.nan], [np.nan, 2]))  # no shared item
    assert np.isnan(cohen_kappa([np.nan, np.nan], [np.nan, np.nan]))
    assert cohen_kappa([0, 1], [0, 1]) == 1.0


def test_cohen_kappa_bad_input():
    with pytest.raises(ValueError, match="same length; got 3 and 2"):
        cohen_kappa([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="must be 1-D"):
        cohen_kappa([[1, 2]], [[1, 2]])
    with pytest.raises(ValueError, match="integer label codes"):
        cohen_kappa([1.5, 2], [1, 2])
    with pytest.raises(ValueError, match="is empty"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="weights must be None, 'linear' or 'quadratic'"):
        cohen_kappa([0, 1], [0, 1], weights="cubic")


# --- kappa from confusion ----------------------------------------------------------------------


def test_kappa_from_confusion_batches_and_values():
    rng = np.random.default_rng(3)
    y1, y2 = rng.integers(0, 4, (2, 200))
    confusion = np.zeros((4, 4))
    np.add.at(confusion, (y1, y2), 1)
    stack = np.stack([confusion, confusion.T, np.zeros((4, 4))])
    got = kappa_from_confusion(stack, weights="quadratic", values=[0, 1, 2, 3])
    expected = cohen_kappa_score(y1, y2, weights="quadratic")
    assert got.shape == (3,)
    np.testing.assert_allclose(got[:2], expected, atol=1e-12)
    assert np.isnan(got[2])


def test_kappa_from_confusion_bad_input():
    with pytest.raises(ValueError, match=r"shape \(\.\.\., n_values, n_values\)"):
        kappa_from_confusion([1, 2, 3])
    with pytest.raises(ValueError, match="non-negative counts"):
        kappa_from_confusion([[1, -1], [0, 2]])
    with pytest.raises(ValueError, match=r"values must have shape \(2,\)"):
        kappa_from_confusion([[1, 0], [0, 1]], values=[1, 2, 3])


# --- pairwise kappa ----------------------------------------------------------------------------


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("seed", range(3))
def test_pairwise_kappa_equals_loop_of_sklearn(seed, weights):
    rng = np.random.default_rng(seed)
    ratings = _random_study(rng, 7, 120, 4, p_missing=0.6)
    ratings[6, 3:] = np.nan  # one annotator with too little overlap
    min_overlap = 10
    got = pairwise_kappa(ratings, min_overlap=min_overlap, weights=weights)
    for k, l in itertools.permutations(range(7), 2):
        overlap = np.sum(~np.isnan(ratings[k]) & ~np.isnan(ratings[l]))
        if overlap < min_overlap:
            assert np.isnan(got[k, l])
        else:
            labels = np.arange(4)  # code distances (see test_weighted_kappa_uses_code_distances)
            expected = _sklearn_kappa(ratings[k], ratings[l], weights, labels=labels)
            assert got[k, l] == pytest.approx(expected, abs=1e-12, nan_ok=True)
    # the diagonal: 1 for annotators with enough ratings, nan for annotator 6 (3 ratings)
    np.testing.assert_array_equal(np.diag(got), [1.0] * 6 + [np.nan])


def test_pairwise_confusion_counts_each_pair_on_its_overlap():
    ratings = np.array([[0, 1, 1, np.nan, 2], [0, 1, 0, 1, np.nan], [np.nan, 2, 2, 2, 2]])
    confusion = pairwise_confusion(ratings)
    assert confusion.shape == (3, 3, 3, 3)
    for k, l in itertools.product(range(3), repeat=2):
        both = ~np.isnan(ratings[k]) & ~np.isnan(ratings[l])
        expected = np.zeros((3, 3))
        np.add.at(expected, (ratings[k, both].astype(int), ratings[l, both].astype(int)), 1)
        np.testing.assert_array_equal(confusion[k, l], expected)
    fixed = pairwise_confusion(ratings, values=[0, 1, 2, 3])
    assert fixed.shape == (3, 3, 4, 4)
    np.testing.assert_array_equal(fixed[..., :3, :3], confusion)
    with pytest.raises(ValueError, match=r"holds 2.0, which is not in values \[0.0, 1.0\]"):
        pairwise_confusion(ratings, values=[0, 1])


def test_pairwise_kappa_degenerate():
    constant = np.array([[1, 1, 1, 1], [0, 1, 0, 1]], dtype=float)
    got = pairwise_kappa(constant)
    assert got[0, 1] == pytest.approx(0.0)  # one constant rater: p_o = p_e
    both_constant = np.ones((2, 4))
    assert np.isnan(pairwise_kappa(both_constant)[0, 1])
    disjoint = np.array([[0, 1, np.nan, np.nan], [np.nan, np.nan, 0, 1]])
    assert np.isnan(pairwise_kappa(disjoint)[0, 1])
    one_item = np.array([[0.0], [1.0]])
    assert np.isnan(pairwise_kappa(one_item)).all()  # under min_overlap, self included
    np.testing.assert_array_equal(pairwise_kappa(one_item, min_overlap=1), [[1.0, 0.0], [0.0, 1.0]])
    nothing = np.full((3, 4), np.nan)
    assert np.isnan(pairwise_kappa(nothing)).all()


def test_pairwise_kappa_leaves_out_members_without_labels():
    # a member who labelled nothing has no row: not even self-agreement on the diagonal
    rng = np.random.default_rng(3)
    ratings = _random_study(rng, 4, 50, 3, p_missing=0.2)
    with_idle = np.vstack([ratings, np.full(50, np.nan)])
    got = pairwise_kappa(with_idle)
    np.testing.assert_array_equal(got[:4, :4], pairwise_kappa(ratings))
    assert np.isnan(got[4]).all()
    assert np.isnan(got[:, 4]).all()


def test_sparse_and_negative_codes_give_the_same_kappas():
    # codes far apart go through the sorting encoder, small ranges through the counting one
    rng = np.random.default_rng(11)
    ratings = _random_study(rng, 5, 60, 3, p_missing=0.3)
    spread = np.where(
        np.isnan(ratings), np.nan, np.array([-7.0, 10**6, 42.0])[np.nan_to_num(ratings).astype(int)]
    )
    np.testing.assert_allclose(pairwise_kappa(spread), pairwise_kappa(ratings), atol=1e-12)
    assert label_distribution(spread)[0].tolist() == [-7.0, 42.0, 10**6]


def test_pairwise_kappa_bad_input():
    with pytest.raises(ValueError, match=r"must be 2-D \(n_annotators, n_items\)"):
        pairwise_kappa([1, 2, 3])
    with pytest.raises(ValueError, match="is empty"):
        pairwise_kappa(np.empty((0, 3)))
    with pytest.raises(ValueError, match="infinite"):
        pairwise_kappa([[1, np.inf], [1, 2]])
    with pytest.raises(ValueError, match="min_overlap must be an integer"):
        pairwise_kappa([[1, 2], [1, 2]], min_overlap=2.5)


# --- Fleiss' kappa -----------------------------------------------------------------------------


def _ratings_from_table(table):
    """(items, categories) count table -> ratings matrix (max raters, items), nan-padded."""
    table = np.asarray(table, dtype=int)
    ratings = np.full((table.sum(axis=1).max(), table.shape[0]), np.nan)
    for i, row in enumerate(table):
        labels = np.repeat(np.arange(table.shape[1]), row)
        ratings[: labels.size, i] = labels
    return ratings


def test_fleiss_wikipedia_table():
    # Wikipedia "Fleiss' kappa" worked example: 10 subjects, 14 raters, 5 categories -> 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(_ratings_from_table(table)) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_1971_diagnoses():
    # Fleiss (1971), Table 1: 30 patients, 6 psychiatrists, 5 diagnoses -> kappa = 0.430
    # (raw ratings as distributed with R's irr package, `diagnoses`)
    diagnoses = np.array(
        [
            [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5],
            [2, 2, 2, 4, 4, 4], [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4],
            [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5], [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4],
            [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5], [3, 3, 3, 3, 3, 5],
            [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
            [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4],
            [1, 4, 4, 4, 4, 5], [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4],
            [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
        ]
    )  # fmt: skip
    assert fleiss_kappa(diagnoses.T) == pytest.approx(0.430, abs=5e-4)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_equals_statsmodels_with_equal_counts(seed):
    rng = np.random.default_rng(seed)
    n_annotators, n_items, per_item = 8, 200, 3
    ratings = _random_study(rng, n_annotators, n_items, 4, p_missing=0.0)
    chosen = np.argsort(rng.random((n_items, n_annotators)), axis=1)[:, :per_item]
    mask = np.zeros_like(ratings, dtype=bool)
    mask[chosen.T, np.arange(n_items)] = True
    ratings[~mask] = np.nan
    per_item_labels = np.sort(ratings.T, axis=1)[:, :per_item]  # (items, raters)
    table, _ = inter_rater.aggregate_raters(per_item_labels.astype(int))
    expected = inter_rater.fleiss_kappa(table, method="fleiss")
    assert fleiss_kappa(ratings) == pytest.approx(expected, abs=1e-12)


def _fleiss_unequal_reference(ratings):
    """Loop reference of the documented generalisation (per-item P_i, pooled p_j)."""
    p_items, pooled = [], {}
    for column in ratings.T:
        labels = column[~np.isnan(column)]
        if labels.size < 2:
            continue
        values, counts = np.unique(labels, return_counts=True)
        p_items.append(np.sum(counts * (counts - 1)) / (labels.size * (labels.size - 1)))
        for v, c in zip(values, counts, strict=True):
            pooled[v] = pooled.get(v, 0) + c
    shares = np.array(list(pooled.values())) / sum(pooled.values())
    p_e = np.sum(shares**2)
    return (np.mean(p_items) - p_e) / (1 - p_e)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_unequal_counts_matches_reference(seed):
    rng = np.random.default_rng(seed)
    ratings = _random_study(rng, 6, 80, 3, p_missing=0.5)
    assert fleiss_kappa(ratings) == pytest.approx(_fleiss_unequal_reference(ratings), abs=1e-12)


def test_fleiss_degenerate():
    assert np.isnan(fleiss_kappa([[1, np.nan], [np.nan, 2]]))  # no item with 2 ratings
    assert np.isnan(fleiss_kappa([[1, 1], [1, 1]]))  # one label: P_e = 1
    # one-item study, labels (0, 0, 1): P = 1/3, P_e = 5/9 -> -0.5
    assert fleiss_kappa([[0], [0], [1]]) == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="must be 2-D"):
        fleiss_kappa([0, 1, 2])


# --- label distribution and skew ---------------------------------------------------------------


def test_label_distribution_and_skew_against_loops():
    rng = np.random.default_rng(7)
    ratings = _random_study(rng, 5, 60, 3, p_missing=0.4)
    ratings[4] = np.where(np.isnan(ratings[4]), np.nan, 2.0)  # a skewed annotator
    values, shares = label_distribution(ratings)
    np.testing.assert_array_equal(values, [0, 1, 2])
    skew = label_skew(ratings)
    for k in range(5):
        own = ratings[k][~np.isnan(ratings[k])]
        np.testing.assert_allclose(shares[k], [np.mean(own == v) for v in values])
        items = ~np.isnan(ratings[k])
        others = np.delete(ratings, k, axis=0)[:, items]
        others = others[~np.isnan(others)]
        q = [np.sum(others == v) for v in values]
        assert skew[k] == pytest.approx(jensenshannon(shares[k], q, base=2))
    assert skew[4] == skew.max()


def test_label_skew_degenerate():
    skew = label_skew([[0, 1, np.nan], [0, 1, np.nan], [np.nan, np.nan, 1], [np.nan] * 3])
    assert skew[0] == pytest.approx(0.0)
    assert np.isnan(skew[2])  # nobody else rated its item
    assert np.isnan(skew[3])  # no rating at all
    _, shares = label_distribution([[0, 1], [np.nan, np.nan]])
    assert np.isnan(shares[1]).all()


# --- properties --------------------------------------------------------------------------------

codes = st.lists(st.integers(0, 3), min_size=2, max_size=40)


@st.composite
def rating_pairs(draw):
    y1 = draw(codes)
    y2 = draw(st.lists(st.integers(0, 3), min_size=len(y1), max_size=len(y1)))
    return np.array(y1, dtype=float), np.array(y2, dtype=float)


@settings(max_examples=60, deadline=None)
@given(rating_pairs(), st.sampled_from(WEIGHTS))
def test_cohen_kappa_symmetric_and_bounded(pair, weights):
    y1, y2 = pair
    k12, k21 = cohen_kappa(y1, y2, weights=weights), cohen_kappa(y2, y1, weights=weights)
    assert k12 == pytest.approx(k21, nan_ok=True)
    assert np.isnan(k12) or k12 <= 1 + 1e-12


@settings(max_examples=40, deadline=None)
@given(rating_pairs(), st.permutations([0, 1, 2, 3]))
def test_nominal_kappa_invariant_under_relabelling(pair, permutation):
    y1, y2 = pair
    relabel = np.array(permutation, dtype=float)
    original = cohen_kappa(y1, y2)
    assert cohen_kappa(relabel[y1.astype(int)], relabel[y2.astype(int)]) == pytest.approx(
        original, nan_ok=True
    )


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.permutations([0, 1, 2, 3]),
    st.sampled_from(WEIGHTS),
)
def test_pairwise_symmetric_bounded_and_fleiss_relabelling(seed, permutation, weights):
    rng = np.random.default_rng(seed)
    ratings = _random_study(rng, 5, 30, 4, p_missing=0.4)
    got = pairwise_kappa(ratings, weights=weights)
    np.testing.assert_allclose(got, got.T, atol=1e-12)
    assert np.all(np.isnan(got) | (got <= 1 + 1e-12))
    relabel = np.array(permutation, dtype=float)
    relabelled = np.where(np.isnan(ratings), np.nan, relabel[np.nan_to_num(ratings).astype(int)])
    np.testing.assert_allclose(pairwise_kappa(relabelled), pairwise_kappa(ratings), atol=1e-12)
    assert fleiss_kappa(relabelled) == pytest.approx(fleiss_kappa(ratings), nan_ok=True)
