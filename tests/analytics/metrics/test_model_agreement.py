"""DIC, BAE (Zhang et al. 2025), MDS maps, Procrustes alignment and the baselines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import ortho_group
from sklearn.metrics.pairwise import cosine_similarity

from analytics.metrics import (
    bae,
    bae_random_baseline,
    bae_uniform_baseline,
    cosine_similarity_matrix,
    dic,
    dic_consensus_baseline,
    dic_random_baseline,
    mds_embedding,
    pairwise_kappa,
    procrustes_align,
)


def _study(rng, n_annotators=6, n_items=300, n_labels=3, p_missing=0.3):
    truth = rng.integers(0, n_labels, n_items)
    keep = rng.random((n_annotators, n_items)) < rng.uniform(0.5, 0.95, (n_annotators, 1))
    ratings = np.where(keep, truth, rng.integers(0, n_labels, (n_annotators, n_items))).astype(
        float
    )
    ratings[rng.random(ratings.shape) < p_missing] = np.nan
    return ratings


def test_dic_and_bae_formulas_with_nan_rule():
    m = np.array([[1.0, 0.6, np.nan], [0.6, 1.0, 0.3], [np.nan, 0.3, 1.0]])
    m_pred = np.array([[1.0, 0.2, 0.5], [0.2, 1.0, np.nan], [0.5, np.nan, 1.0]])
    both = ~np.isnan(m) & ~np.isnan(m_pred)  # diagonal and (0, 1), (1, 0)
    expected = np.linalg.norm((m - m_pred)[both]) / np.linalg.norm(m[both])
    assert bae(m_pred, m) == pytest.approx(1 - expected)
    # DIC: (1, 2) and (2, 1) are defined for the humans (0.3) but not for the model: each
    # counts as the farthest value of kappa's range, -1, a difference of 1.3
    defined = ~np.isnan(m)
    penalised = np.where(np.isnan(m_pred), -1.0, m_pred)
    expected_dic = np.linalg.norm((m - penalised)[defined]) / np.linalg.norm(m[defined])
    assert dic(m, m_pred) == pytest.approx(expected_dic)
    assert np.isnan(dic(np.full((2, 2), np.nan), np.eye(2)))
    assert np.isnan(dic(np.zeros((2, 2)), np.eye(2)))


def test_dic_bad_input():
    with pytest.raises(ValueError, match=r"same shape; got \(2, 2\) and \(3, 3\)"):
        dic(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="bound must be positive"):
        dic(np.eye(2), np.eye(2), bound=0)
    with pytest.raises(ValueError, match="m_true must be a square matrix"):
        dic(np.ones((2, 3)), np.eye(2))
    with pytest.raises(ValueError, match="s_model must be a square matrix"):
        bae(np.ones(3), np.eye(3))


square = st.integers(2, 6).flatmap(
    lambda n: arrays(np.float64, (n, n), elements=st.floats(-1, 1, allow_nan=False))
)


@settings(max_examples=60, deadline=None)
@given(square, st.data())
def test_dic_nonnegative_bae_at_most_one_and_identity(m, data):
    other = data.draw(arrays(np.float64, m.shape, elements=st.floats(-1, 1)))
    d = dic(m, other)
    assert np.isnan(d) or d >= 0
    b = bae(other, m)
    assert np.isnan(b) or b <= 1
    if np.linalg.norm(m) > 0:
        assert dic(m, m) == 0.0
        assert bae(m, m) == 1.0


def test_cosine_similarity_matrix_equals_sklearn():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(7, 12))
    np.testing.assert_allclose(cosine_similarity_matrix(vectors), cosine_similarity(vectors))
    with_zero = np.vstack([vectors[:2], np.zeros(12)])
    got = cosine_similarity_matrix(with_zero)
    assert np.isnan(got[2]).all()
    assert np.isnan(got[:, 2]).all()
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        cosine_similarity_matrix([1, 2, 3])
    with pytest.raises(ValueError, match="must be finite"):
        cosine_similarity_matrix([[1, np.nan]])


def test_mds_recovers_a_planar_configuration_and_procrustes_aligns_it():
    rng = np.random.default_rng(1)
    points = rng.uniform(0, 0.5, (6, 2))
    distance = np.linalg.norm(points[:, None] - points[None], axis=-1)
    embedding = mds_embedding(1.0 - distance, seed=3)
    aligned = procrustes_align(embedding, points)
    np.testing.assert_allclose(aligned, points, atol=1e-3)
    np.testing.assert_allclose(mds_embedding(1.0 - distance, seed=3), embedding)


def test_procrustes_undoes_rotation_reflection_and_shift():
    rng = np.random.default_rng(2)
    reference = rng.normal(size=(8, 3))
    rotation = ortho_group.rvs(3, random_state=4)
    moved = reference @ rotation + np.array([5.0, -2.0, 1.0])
    np.testing.assert_allclose(procrustes_align(moved, reference), reference, atol=1e-10)
    with pytest.raises(ValueError, match="2-D of the same shape"):
        procrustes_align(reference, reference[:4])


def test_mds_bad_input():
    with pytest.raises(ValueError, match=r"holds nan \(first at \(0, 1\)\)"):
        mds_embedding([[1, np.nan], [np.nan, 1]])
    with pytest.raises(ValueError, match="at least 2 annotators"):
        mds_embedding([[1.0]])


def test_consensus_baseline_equals_kappa_of_majority_labels():
    rng = np.random.default_rng(3)
    ratings = _study(rng)
    counts = np.stack([(ratings == v).sum(axis=0) for v in range(3)])
    majority = np.argmax(counts, axis=0).astype(float)
    consensus = np.where(np.isnan(ratings), np.nan, majority)
    expected = dic(pairwise_kappa(ratings), pairwise_kappa(consensus))
    assert dic_consensus_baseline(ratings) == pytest.approx(expected)


def test_random_baseline_is_far_and_reproducible():
    rng = np.random.default_rng(4)
    ratings = _study(rng)
    truth = pairwise_kappa(ratings)
    off = ~np.eye(6, dtype=bool)
    # random labels: kappa ~ 0 off the diagonal, so DIC ~ ||M_off|| / ||M||
    expected = np.linalg.norm(truth[off]) / np.linalg.norm(truth)
    got = dic_random_baseline(ratings, seed=1, n_repeats=20)
    assert got == pytest.approx(expected, abs=0.05)
    assert dic_random_baseline(ratings, seed=1, n_repeats=20) == got
    assert dic_random_baseline(ratings, n_labels=3, seed=1) == pytest.approx(got, abs=0.05)
    with pytest.raises(ValueError, match="n_repeats must be at least 1"):
        dic_random_baseline(ratings, n_repeats=0)


def test_bae_baselines():
    s = np.full((6, 6), 0.4) + 0.6 * np.eye(6)
    assert bae_uniform_baseline(s) == pytest.approx(1 - np.sqrt(30 * 0.36) / np.sqrt(6 + 30 * 0.16))
    # random vectors: cosine ~ 0 off the diagonal, 1 on it
    assert bae_random_baseline(s, dim=20000, seed=0) == pytest.approx(
        1 - np.sqrt(30 * 0.16) / np.sqrt(6 + 30 * 0.16), abs=0.01
    )
    with pytest.raises(ValueError, match="dim and n_repeats must be at least 1"):
        bae_random_baseline(s, dim=0)


def test_dic_does_not_reward_a_constant_model():
    # a model giving everyone one label leaves every predicted pair kappa undefined (p_e = 1);
    # dropping those cells scored it DIC 0 and first on the leaderboard
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 200)
    ratings = np.array(
        [np.where(rng.random(200) < 0.8, truth, rng.integers(0, 3, 200)) for _ in range(5)],
        dtype=float,
    )
    m_true = pairwise_kappa(ratings)
    constant = pairwise_kappa(np.zeros_like(ratings))
    assert np.isnan(constant[~np.eye(5, dtype=bool)]).all()
    assert dic(m_true, constant) > dic_random_baseline(ratings)
    # partially constant: two annotators' predictions constant, the rest perfect
    partial = ratings.copy()
    partial[:2] = 0.0
    assert 0 < dic(m_true, pairwise_kappa(partial)) < dic(m_true, constant)


def test_dic_ignores_members_without_labels():
    # the emotions demo's ann1 answered nothing; a row of nan must not move DIC
    rng = np.random.default_rng(1)
    ratings = rng.integers(0, 3, (4, 80)).astype(float)
    predicted = rng.integers(0, 3, (4, 80)).astype(float)
    idle = np.full((1, 80), np.nan)
    plain = dic(pairwise_kappa(ratings), pairwise_kappa(predicted))
    padded = dic(
        pairwise_kappa(np.vstack([ratings, idle])), pairwise_kappa(np.vstack([predicted, idle]))
    )
    assert padded == pytest.approx(plain, abs=1e-15)


def test_mds_embedding_of_dissimilarities_off_the_triangle_inequality():
    """1 - kappa of one pair above the sum of the other two (three annotators on few items):
    the classical start had a negative eigenvalue, its square root nan, and the fit failed."""
    similarity = [[1.0, 1.0, -0.2], [1.0, 1.0, 0.9], [-0.2, 0.9, 1.0]]
    xy = mds_embedding(similarity)
    assert np.isfinite(xy).all()
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    assert d[0, 2] == max(d[0, 1], d[0, 2], d[1, 2])
    assert np.array_equal(mds_embedding(np.ones((3, 3))), np.zeros((3, 2)))
