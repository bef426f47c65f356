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
    bootstrap_weights,
    cosine_similarity_matrix,
    dic,
    dic_bae_bootstrap,
    dic_bae_bootstrap_sda,
    dic_consensus_baseline,
    dic_random_baseline,
    mds_embedding,
    mean_accuracy_bootstrap,
    paired_difference,
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
    # counts as the farthest value of kappa's range, -1, a difference of 1.3; the diagonal
    # (1 = 1 for every annotator) takes no part
    defined = ~np.isnan(m) & ~np.eye(3, dtype=bool)
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
    if np.linalg.norm(m[~np.eye(m.shape[0], dtype=bool)]) > 0:  # DIC: off the diagonal
        assert dic(m, m) == 0.0
    if np.linalg.norm(m) > 0:
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
    # random labels: kappa ~ 0 off the diagonal, so DIC ~ ||M_off|| / ||M_off|| = 1
    expected = np.linalg.norm(truth[off]) / np.linalg.norm(truth[off])
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


def test_dic_leaves_the_diagonal_out():
    # the diagonal of ones is no relation between annotators: counting it in the norm pulled
    # every DIC towards 0 (here 0.27 instead of 0.6)
    m = [[1.0, 0.5], [0.5, 1.0]]
    assert dic(m, [[1.0, 0.2], [0.2, 1.0]]) == pytest.approx(0.6)
    assert dic(m, [[0.3, 0.5], [0.5, 7.0]]) == 0.0


def test_dic_reference_rows_read_as_documented_at_low_agreement():
    """Issue 23: six annotators of accuracy .6-.4 (mean pair kappa about 0.1): Consensus 1.443
    against Random 0.504 with the diagonal counted. Random reproduces no relation (DIC about
    1 at every agreement level); Consensus makes every pair agree perfectly, so its DIC is
    ||M - 1|| / ||M|| off the diagonal, below Random only above a mean kappa of about 0.5."""
    for accuracy, consensus_first in (
        ((0.6, 0.55, 0.5, 0.5, 0.45, 0.4), False),
        ((0.95,) * 6, True),
    ):
        rng = np.random.default_rng(0)
        z = rng.choice(3, 300, p=[0.5, 0.3, 0.2])
        right = rng.random((6, 300)) < np.array(accuracy)[:, None]
        ratings = np.where(right, z, rng.integers(0, 3, (6, 300))).astype(float)
        m = pairwise_kappa(ratings)
        off = ~np.eye(6, dtype=bool)
        random = dic_random_baseline(ratings)
        consensus = dic_consensus_baseline(ratings)
        assert random == pytest.approx(1.0, abs=0.15)
        assert consensus == pytest.approx(
            np.linalg.norm(m[off] - 1.0) / np.linalg.norm(m[off]), rel=1e-9
        )
        assert (consensus < random) == consensus_first == (m[off].mean() > 0.5)


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


# ------------------------------------------------------------- DIC / BAE item bootstrap


def _run(rng, n_annotators=5, n_items=120, p_missing=0.3):
    """Human ratings and a noisy model's predictions on the same cells."""
    human = _study(rng, n_annotators=n_annotators, n_items=n_items, p_missing=p_missing)
    noisy = np.where(rng.random(human.shape) < 0.7, human, rng.integers(0, 3, human.shape))
    return human, np.where(np.isnan(human), np.nan, noisy)


def test_dic_bae_bootstrap_estimate_is_dic_and_bae_of_the_full_data():
    rng = np.random.default_rng(3)
    human, model = _run(rng)
    model[0, :10] = np.nan  # the model leaves cells out: only the shared cells count
    both = ~np.isnan(human) & ~np.isnan(model)
    m_true = pairwise_kappa(np.where(both, human, np.nan), min_overlap=5)
    m_pred = pairwise_kappa(np.where(both, model, np.nan), min_overlap=5)
    s = cosine_similarity_matrix(rng.random((5, 8)))
    res = dic_bae_bootstrap(human, model, s_model={"feature": s}, min_overlap=5, n_boot=200, seed=0)
    assert res.dic.estimate == pytest.approx(dic(m_true, m_pred), abs=1e-12)
    assert res.bae["feature"].estimate == pytest.approx(bae(s, m_true), abs=1e-12)
    assert res.n_cells == int(both.sum())
    assert res.n_items == res.dic.n == int(both.any(axis=0).sum())
    for interval in (res.dic, res.bae["feature"]):
        assert interval.low <= interval.estimate <= interval.high
        assert interval.replicates.shape == (200,)


def test_dic_bae_bootstrap_replicate_equals_dic_of_the_duplicated_items():
    # outside oracle: the replicate with multiplicities w must be DIC/BAE computed from
    # scratch on the data where item i is written out w_i times, M from sklearn's kappa
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(7)
    human, model = _run(rng, n_annotators=4, n_items=40, p_missing=0.2)
    s = cosine_similarity_matrix(rng.random((4, 5)))
    res = dic_bae_bootstrap(human, model, s_model={"f": s}, n_boot=5, seed=11)
    weights = bootstrap_weights(40, n_boot=5, seed=11)
    for b in range(5):
        repeat = weights[b].astype(int)
        h, p = np.repeat(human, repeat, axis=1), np.repeat(model, repeat, axis=1)
        m_true = np.eye(4)
        for k in range(4):
            for l in range(k + 1, 4):
                shared = ~np.isnan(h[k]) & ~np.isnan(h[l])
                m_true[k, l] = m_true[l, k] = cohen_kappa_score(h[k, shared], h[l, shared])
        np.testing.assert_allclose(m_true, pairwise_kappa(h), atol=1e-12)
        m_pred = pairwise_kappa(p)
        assert res.dic.replicates[b] == pytest.approx(dic(m_true, m_pred), abs=1e-12)
        assert res.bae["f"].replicates[b] == pytest.approx(bae(s, m_true), abs=1e-12)


def test_dic_bae_bootstrap_keeps_the_constant_model_penalty():
    rng = np.random.default_rng(0)
    human, _ = _run(rng, p_missing=0.0)
    constant = np.zeros_like(human)
    res = dic_bae_bootstrap(human, constant, n_boot=100, seed=0)
    assert res.dic.estimate == pytest.approx(dic(pairwise_kappa(human), pairwise_kappa(constant)))
    assert res.dic.estimate > dic_random_baseline(human)
    # every replicate leaves the predicted pairs undefined: each is penalised, none is nan
    assert np.isfinite(res.dic.replicates).all()
    assert res.dic.low > dic_random_baseline(human)


def test_dic_bae_bootstrap_interval_narrows_with_more_items():
    rng = np.random.default_rng(5)
    widths = []
    for n_items in (100, 1600):
        human, model = _run(rng, n_items=n_items, p_missing=0.0)
        res = dic_bae_bootstrap(human, model, n_boot=300, seed=1)
        assert res.dic.low <= res.dic.estimate <= res.dic.high
        widths.append(res.dic.high - res.dic.low)
    assert widths[1] < widths[0] / 2


def test_dic_bae_bootstrap_without_shared_cells_and_bad_input():
    human = np.array([[0.0, 1.0, np.nan], [1.0, np.nan, 0.0]])
    none = dic_bae_bootstrap(human, np.full_like(human, np.nan), s_model={"f": np.eye(2)})
    assert np.isnan(none.dic.estimate)
    assert np.isnan(none.bae["f"].low)
    assert (none.n_items, none.n_cells) == (0, 0)
    with pytest.raises(ValueError, match="differ in shape"):
        dic_bae_bootstrap(human, human[:, :2])
    with pytest.raises(ValueError, match=r"s_model\['f'\] must be 2 x 2"):
        dic_bae_bootstrap(human, human, s_model={"f": np.eye(3)})
    with pytest.raises(ValueError, match="n_boot must be a positive integer"):
        dic_bae_bootstrap(human, human, n_boot=0)


def test_dic_bae_bootstrap_sda_takes_pairs_in_either_order_and_checks_input():
    rng = np.random.default_rng(2)
    tables = rng.integers(0, 9, (6, 3, 3)).astype(float)
    model = rng.integers(0, 9, (6, 3, 3)).astype(float)
    item = np.repeat([10, 20], 3)
    first, second = np.tile([0, 0, 1], 2), np.tile([1, 2, 2], 2)
    traced = (np.repeat([10, 20], 3), np.tile([0, 1, 2], 2))
    kw = {"traced": traced, "n_annotators": 3, "n_boot": 50, "seed": 0}
    res = dic_bae_bootstrap_sda(item, first, second, tables, model, **kw)
    flipped = dic_bae_bootstrap_sda(
        item, second, first, tables.transpose(0, 2, 1), model.transpose(0, 2, 1), **kw
    )
    assert flipped.dic.estimate == pytest.approx(res.dic.estimate)
    np.testing.assert_allclose(flipped.dic.replicates, res.dic.replicates)
    assert (res.n_items, res.n_cells) == (2, 6)
    with pytest.raises(ValueError, match=r"different indices in 0\.\.2"):
        dic_bae_bootstrap_sda(item, first, first, tables, model, **kw)
    with pytest.raises(ValueError, match="among the traced items"):
        dic_bae_bootstrap_sda(item + 1, first, second, tables, model, **kw)
    with pytest.raises(ValueError, match="one row per item and pair"):
        dic_bae_bootstrap_sda(item, first, second, tables[:5], model, **kw)
    with pytest.raises(ValueError, match="min_items must be a positive integer"):
        dic_bae_bootstrap_sda(item, first, second, tables, model, min_items=0, **kw)


def test_paired_difference_of_two_runs_on_the_same_resamples():
    rng = np.random.default_rng(8)
    human, good = _run(rng, n_items=300, p_missing=0.0)
    worse = np.where(rng.random(human.shape) < 0.3, rng.integers(0, 3, human.shape), good)
    a = dic_bae_bootstrap(human, good, n_boot=300, seed=4)
    b = dic_bae_bootstrap(human, worse, n_boot=300, seed=4)
    d = paired_difference(
        a.dic.replicates, b.dic.replicates, estimate_a=a.dic.estimate, estimate_b=b.dic.estimate
    )
    assert d.estimate == pytest.approx(a.dic.estimate - b.dic.estimate)
    assert d.n == 300
    assert d.low <= d.estimate <= d.high
    np.testing.assert_allclose(
        [d.low, d.high], np.quantile(a.dic.replicates - b.dic.replicates, [0.025, 0.975])
    )
    same = paired_difference(a.dic.replicates, a.dic.replicates, estimate_a=0.5, estimate_b=0.5)
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="one non-empty length"):
        paired_difference([0.1, 0.2], [0.1], estimate_a=0.1, estimate_b=0.1)


def test_mean_accuracy_bootstrap_replicate_equals_accuracy_of_the_duplicated_items():
    # outside oracle: replicate b is sklearn's accuracy_score per annotator on the data where
    # item i is written out w_i times (w: the weights dic_bae_bootstrap draws), averaged
    from sklearn.metrics import accuracy_score

    rng = np.random.default_rng(3)
    human, model = _run(rng, n_annotators=4, n_items=40, p_missing=0.3)
    model[:, 0] = np.nan  # an item without a cell is not resampled
    res = mean_accuracy_bootstrap(human, model, n_boot=6, seed=5)
    columns = np.flatnonzero((~np.isnan(human) & ~np.isnan(model)).any(axis=0))
    assert res.n == columns.size == 39
    weights = bootstrap_weights(39, n_boot=6, seed=5)

    def mean_accuracy(h, p):
        scores = []
        for k in range(h.shape[0]):
            both = ~np.isnan(h[k]) & ~np.isnan(p[k])
            if both.any():
                scores.append(accuracy_score(h[k, both], p[k, both]))
        return np.mean(scores)

    assert res.estimate == pytest.approx(mean_accuracy(human, model), abs=1e-12)
    for b in range(6):
        repeat = weights[b].astype(int)
        h = np.repeat(human[:, columns], repeat, axis=1)
        p = np.repeat(model[:, columns], repeat, axis=1)
        assert res.replicates[b] == pytest.approx(mean_accuracy(h, p), abs=1e-12)
    # the same items as DIC's replicates: the replicates pair
    dic_res = dic_bae_bootstrap(human, model, n_boot=6, seed=5)
    assert dic_res.n_items == res.n


def test_mean_accuracy_bootstrap_perfect_model_none_shared_and_bad_input():
    rng = np.random.default_rng(0)
    human, _ = _run(rng, n_annotators=3, n_items=30, p_missing=0.2)
    perfect = mean_accuracy_bootstrap(human, human, n_boot=50, seed=0)
    assert (perfect.estimate, perfect.low, perfect.high) == (1.0, 1.0, 1.0)
    empty = mean_accuracy_bootstrap(human, np.full_like(human, np.nan), n_boot=10, seed=0)
    assert np.isnan(empty.estimate)
    assert empty.n == 0
    with pytest.raises(ValueError, match="shape"):
        mean_accuracy_bootstrap(human, human[:, :5])
