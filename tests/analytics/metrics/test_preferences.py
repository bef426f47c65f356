"""Tests of analytics.metrics.preferences: Amidei's tables, brute-force oracles, scipy fits."""

from __future__ import annotations

import math
from itertools import combinations, pairwise, permutations, product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import null_space
from scipy.optimize import minimize
from scipy.special import log_expit

from analytics.metrics.preferences import (
    absolute_scale,
    audit_contradictions,
    bradley_terry,
    count_scores,
    refine_ranking,
    reliability_weight,
    side_bias,
    transitivity_chance,
    transitivity_kappa,
    transitivity_kappa_from_counts,
    transitivity_kappa_upper,
    triplet_counts,
)

# --------------------------------------------------------------------------- oracles


def naive_triplet_counts(judgements):
    """Triplet counts straight from the definition (latest judgement of a pair wins)."""
    latest = {}
    for a, b, outcome in judgements:
        latest[frozenset((a, b))] = (a, b, outcome)
    at_least = set()
    for a, b, outcome in latest.values():
        if outcome >= 0:
            at_least.add((a, b))
        if outcome <= 0:
            at_least.add((b, a))
    items = sorted({x for pair in latest for x in pair}, key=repr)
    n_transitive = n_complete = 0
    for triplet in combinations(items, 3):
        if all(frozenset(pair) in latest for pair in combinations(triplet, 2)):
            n_complete += 1
            n_transitive += not any(
                (x, y) in at_least and (y, z) in at_least and (x, z) not in at_least
                for x, y, z in permutations(triplet)
            )
    return n_transitive, n_complete


def bt_log_likelihood(theta, judgements, index):
    """Bradley-Terry log-likelihood with ties as half a win each, written independently."""
    total = 0.0
    for a, b, outcome in judgements:
        d = theta[index[a]] - theta[index[b]]
        if outcome == 1:
            total += log_expit(d)
        elif outcome == -1:
            total += log_expit(-d)
        else:
            total += 0.5 * (log_expit(d) + log_expit(-d))
    return total


judgement = st.tuples(st.integers(0, 6), st.integers(0, 6), st.sampled_from([-1, 0, 1])).filter(
    lambda j: j[0] != j[1]
)


@st.composite
def weak_order_judgements(draw, max_items=9):
    """Judgements on a random subset of pairs of a hidden weak order (random orientation)."""
    n = draw(st.integers(3, max_items))
    levels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    judgements = []
    for a, b in combinations(range(n), 2):
        if draw(st.booleans()):
            outcome = (levels[a] > levels[b]) - (levels[a] < levels[b])
            judgements.append((a, b, outcome) if draw(st.booleans()) else (b, a, -outcome))
    return levels, judgements


# ------------------------------------------------------------------ transitivity kappa

TRANSITIVE = [("x", "y", 1), ("y", "z", 0), ("x", "z", 1)]  # x > y ~ z
CYCLE = [("x", "y", 1), ("y", "z", 1), ("z", "x", 1)]
TIE_BREAK = [("x", "y", 0), ("y", "z", 0), ("x", "z", 1)]  # x ~ y ~ z but x > z


def annotator(*patterns):
    """Judgements of one annotator on the triplets (i1,i2,i3), (i4,i5,i6), (i7,i8,i9)."""
    out = []
    for k, pattern in enumerate(patterns):
        names = {"x": f"i{3 * k + 1}", "y": f"i{3 * k + 2}", "z": f"i{3 * k + 3}"}
        out += [(names[a], names[b], o) for a, b, o in pattern]
    return out


@pytest.mark.parametrize(
    ("patterns", "counts", "kappa"),
    [
        ((TRANSITIVE, TRANSITIVE, TRANSITIVE), (3, 3), 1.0),
        ((TRANSITIVE, CYCLE, TRANSITIVE), (2, 3), 5 / 14),
        ((TIE_BREAK, TRANSITIVE, CYCLE), (1, 3), -4 / 14),
    ],
    ids=["A1", "A2", "A3"],
)
def test_amidei_tables_1_and_2(patterns, counts, kappa):
    judgements = annotator(*patterns)
    assert triplet_counts(judgements) == counts
    assert transitivity_kappa(judgements, chance="amidei") == pytest.approx(kappa)


def test_amidei_a2_is_0357_not_the_printed_034():
    k = transitivity_kappa(annotator(TRANSITIVE, CYCLE, TRANSITIVE), chance="amidei")
    assert round(k, 3) == 0.357


@pytest.mark.parametrize(
    ("strict", "outcomes", "expected"), [(False, (1, 0, -1), 13), (True, (1, -1), 6)]
)
def test_chance_levels_enumerate_the_outcome_combinations(strict, outcomes, expected):
    combos = list(product(outcomes, repeat=3))
    transitive = sum(
        naive_triplet_counts([(0, 1, o1), (0, 2, o2), (1, 2, o3)])[0] for o1, o2, o3 in combos
    )
    assert transitive == expected
    # Answering every combination once gives P(A) = P(E), i.e. K = 0.
    judgements = [(f"{k}a", f"{k}b", o1) for k, (o1, _, _) in enumerate(combos)] + [
        (f"{k}a", f"{k}c", o2) for k, (_, o2, _) in enumerate(combos)
    ]
    judgements += [(f"{k}b", f"{k}c", o3) for k, (_, _, o3) in enumerate(combos)]
    kappa = transitivity_kappa(judgements, strict=strict, chance="amidei")
    assert kappa == pytest.approx(0.0, abs=1e-12)


def test_strict_chance_level_is_three_quarters():
    judgements = annotator(
        [("x", "y", 1), ("y", "z", 1), ("x", "z", 1)], [("x", "y", 1), ("y", "z", 1), ("z", "x", 1)]
    )
    # P(A) = 1/2, P(E) = 3/4: K = (1/2 - 3/4) / (1/4) = -1.
    assert transitivity_kappa(judgements, strict=True) == pytest.approx(-1.0)
    assert transitivity_kappa(judgements, chance="amidei") == pytest.approx(
        (1 / 2 - 13 / 27) / (14 / 27)
    )


def test_strict_rejects_ties():
    with pytest.raises(ValueError, match="strict"):
        transitivity_kappa(TRANSITIVE, strict=True)


def test_no_complete_triplet_is_nan():
    assert math.isnan(transitivity_kappa([]))
    assert math.isnan(transitivity_kappa([("a", "b", 1), ("b", "c", 1)]))


def test_latest_judgement_of_a_repeated_pair_counts():
    judgements = [*CYCLE, ("x", "z", 1)]  # the repeat turns the cycle into x > y > z
    assert triplet_counts(judgements) == (1, 1)
    assert triplet_counts([("x", "z", 1), *CYCLE]) == (0, 1)


@given(st.lists(judgement, max_size=40))
def test_triplet_counts_match_the_definition(judgements):
    assert triplet_counts(judgements) == naive_triplet_counts(judgements)


@given(st.lists(judgement, max_size=40))
def test_kappa_bounds(judgements):
    k = transitivity_kappa(judgements, chance="amidei")
    assert math.isnan(k) or -13 / 14 - 1e-12 <= k <= 1 + 1e-12
    k = transitivity_kappa(judgements)  # K >= -P(E) / (1 - P(E)), P(E) the tie rate's
    assert math.isnan(k) or k <= 1 + 1e-12


@given(weak_order_judgements())
def test_kappa_is_one_for_judgements_consistent_with_a_weak_order(case):
    _, judgements = case
    k = transitivity_kappa(judgements)
    assert math.isnan(k) or k == pytest.approx(1.0)


@given(
    st.lists(judgement, max_size=30),
    st.permutations(range(7)),
    st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_invariant_under_relabelling_and_swapping(judgements, relabel, swap):
    moved = [
        (f"item{relabel[b]}", f"item{relabel[a]}", -o)
        if s
        else (f"item{relabel[a]}", f"item{relabel[b]}", o)
        for (a, b, o), s in zip(judgements, swap, strict=False)
    ]
    assert triplet_counts(moved) == triplet_counts(judgements)


@pytest.mark.parametrize(
    ("judgements", "message"),
    [
        ([("a", "b", 2)], "outcome must be"),
        ([("a", "b", True)], "outcome must be"),
        ([("a", "a", 1)], "with itself"),
        ([("a", "b")], "must be a tuple"),
        ([5], "must be a tuple"),
    ],
)
def test_invalid_judgements(judgements, message):
    with pytest.raises(ValueError, match=message):
        transitivity_kappa(judgements)


def test_kappa_from_counts_validates():
    with pytest.raises(ValueError, match="n_transitive"):
        transitivity_kappa_from_counts(4, 3)
    assert transitivity_kappa_from_counts(3, 3, strict=True) == 1.0
    assert transitivity_kappa_from_counts(0, 3, strict=True) == pytest.approx(-3.0)


def test_audit_contradictions_compares_each_repeat_with_the_previous_one():
    judgements = [("a", "b", 1), ("b", "a", -1), ("a", "b", 0), ("c", "d", 1), ("a", "b", 0)]
    audit = audit_contradictions(judgements)
    assert audit.n_repeats == 3
    assert [(c.index, c.previous, c.outcome) for c in audit.contradictions] == [(2, 1, 0)]


# ---------------------------------------------------------------------- count function


def test_count_function_amidei_example_and_ties():
    assert count_scores([("a", "b", 1), ("a", "c", 1), ("b", "c", 1)]).tolist() == [2, 1, 0]
    assert count_scores([("a", "b", 0), ("b", "c", 1), ("a", "c", 1)]).tolist() == [2, 2, 0]


@given(st.lists(st.integers(0, 3), min_size=2, max_size=9), st.randoms(use_true_random=False))
def test_theorem_1_on_a_complete_weak_order(levels, rnd):
    n = len(levels)
    judgements = []
    for a, b in combinations(range(n), 2):
        outcome = (levels[a] > levels[b]) - (levels[a] < levels[b])
        judgements.append((a, b, outcome) if rnd.random() < 0.5 else (b, a, -outcome))
    f = count_scores(judgements, items=range(n))
    for x, y in permutations(range(n), 2):
        assert (levels[x] >= levels[y]) == (f[x] >= f[y])


@given(st.lists(st.integers(0, 3), min_size=2, max_size=9))
def test_pruned_annotator_scores_equal_the_complete_ones(levels):
    """Judging only neighbours in the sorted order determines the same scores."""
    n = len(levels)
    order = sorted(range(n), key=lambda i: levels[i])
    chain = [(b, a, (levels[b] > levels[a]) - (levels[b] < levels[a])) for a, b in pairwise(order)]
    complete = [
        (a, b, (levels[a] > levels[b]) - (levels[a] < levels[b]))
        for a, b in combinations(range(n), 2)
    ]
    np.testing.assert_array_equal(
        count_scores(chain, items=range(n)), count_scores(complete, items=range(n))
    )


def test_count_scores_cycle_ties_and_unjudged_items():
    scores = count_scores([*CYCLE, ("z", "w", 1)], items=["w", "x", "y", "z", "v"])
    assert scores[:4].tolist() == [0, 3, 3, 3]
    assert math.isnan(scores[4])
    with pytest.raises(ValueError, match="not in items"):
        count_scores(CYCLE, items=["x", "y"])
    with pytest.raises(ValueError, match="unique"):
        count_scores(CYCLE, items=["x", "y", "z", "x"])


def test_absolute_scale():
    assert absolute_scale([2, 1, 0]).tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="at least 2"):
        absolute_scale([0, np.nan])
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        absolute_scale([3, 1, 0])
    with pytest.raises(ValueError, match="1-D"):
        absolute_scale([[1, 0]])


# ------------------------------------------------------------------------ Bradley-Terry


def random_connected_judgements(rng, n_items, n_extra):
    """A cycle (so the graph is strongly connected) plus random judgements with ties."""
    judgements = [(k, (k + 1) % n_items, 1) for k in range(n_items)]
    for _ in range(n_extra):
        a, b = rng.choice(n_items, size=2, replace=False)
        judgements.append((int(a), int(b), int(rng.choice([-1, 0, 1]))))
    return judgements


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_bradley_terry_matches_a_direct_scipy_fit(seed, alpha):
    rng = np.random.default_rng(seed)
    judgements = random_connected_judgements(rng, 6, 60)
    fit = bradley_terry(judgements, items=range(6), alpha=alpha)
    index = {i: i for i in range(6)}

    def objective(theta):
        return -bt_log_likelihood(theta, judgements, index) + 0.5 * alpha * theta @ theta

    if alpha == 0:  # fix the gauge by theta_0 = 0, then centre
        res = minimize(lambda t: objective(np.r_[0.0, t]), np.zeros(5), method="BFGS", tol=1e-12)
        expected = np.r_[0.0, res.x] - np.r_[0.0, res.x].mean()
    else:  # the penalty fixes the gauge itself
        res = minimize(objective, np.zeros(6), method="BFGS", tol=1e-12)
        expected = res.x
    np.testing.assert_allclose(fit.log_strengths, expected, atol=1e-5)
    assert fit.log_strengths.sum() == pytest.approx(0.0, abs=1e-12)
    assert fit.log_likelihood == pytest.approx(
        bt_log_likelihood(fit.log_strengths, judgements, index)
    )
    np.testing.assert_allclose(fit.strengths, np.exp(fit.log_strengths))


@pytest.mark.parametrize("seed", range(3))
def test_standard_errors_match_the_numerical_inverse_hessian(seed):
    rng = np.random.default_rng(seed)
    judgements = random_connected_judgements(rng, 5, 80)
    fit = bradley_terry(judgements, items=range(5))
    index = {i: i for i in range(5)}
    basis = null_space(np.ones((1, 5)))  # orthonormal basis of the sum-zero gauge
    h = 1e-4

    def f(phi):
        return -bt_log_likelihood(fit.log_strengths + basis @ phi, judgements, index)

    m = basis.shape[1]
    hessian = np.empty((m, m))
    eye = np.eye(m) * h
    for i in range(m):
        for j in range(m):
            hessian[i, j] = (
                f(eye[i] + eye[j]) - f(eye[i] - eye[j]) - f(-eye[i] + eye[j]) + f(-eye[i] - eye[j])
            ) / (4 * h * h)
    covariance = basis @ np.linalg.inv(hessian) @ basis.T
    assert fit.se_exact
    np.testing.assert_allclose(fit.se, np.sqrt(np.diag(covariance)), rtol=1e-4)


def test_bradley_terry_recovers_known_strengths():
    rng = np.random.default_rng(2004)
    theta = np.array([1.0, 0.5, 0.0, -0.5, -1.0])
    judgements = []
    for a, b in combinations(range(5), 2):
        p = 1 / (1 + np.exp(theta[b] - theta[a]))
        wins = rng.random(300) < p
        judgements += [(a, b, 1 if w else -1) for w in wins]
    fit = bradley_terry(judgements, items=range(5))
    assert np.all(np.abs(fit.log_strengths - theta) < 4 * fit.se)
    assert np.all(fit.se < 0.1)


def test_bradley_terry_input_forms_and_ties():
    by_annotator = {"ann1": [("a", "b", 1), ("b", "c", 0)], "ann2": [("c", "a", 1), ("b", "a", 0)]}
    pooled = [j for js in by_annotator.values() for j in js]
    np.testing.assert_allclose(
        bradley_terry(by_annotator).log_strengths, bradley_terry(pooled).log_strengths
    )
    # Without the ties only a > b and c > a remain: not strongly connected.
    with pytest.raises(ValueError, match="strongly connected"):
        bradley_terry(pooled, ties="ignore")
    with pytest.raises(ValueError, match="ties"):
        bradley_terry(pooled, ties="drop")
    with pytest.raises(ValueError, match="alpha"):
        bradley_terry(pooled, alpha=-1)
    with pytest.raises(ValueError, match="no comparison"):
        bradley_terry([("a", "b", 0)], ties="ignore")


def test_bradley_terry_disconnected_graph_and_uncompared_items():
    judgements = [("a", "b", 1), ("b", "a", 1), ("a", "b", 1), ("c", "d", 1), ("d", "c", 1)]
    with pytest.raises(ValueError, match="2 strongly connected groups"):
        bradley_terry(judgements)
    fit = bradley_terry(judgements, items=["a", "b", "c", "d", "e"], alpha=0.01)
    assert np.all(np.isfinite(fit.log_strengths[:4]))
    assert fit.log_strengths[0] > fit.log_strengths[1]
    assert fit.log_strengths[2] == pytest.approx(fit.log_strengths[3])
    assert math.isnan(fit.log_strengths[4])
    assert math.isnan(fit.se[4])
    with pytest.raises(ValueError, match="strongly connected"):
        bradley_terry([("a", "b", 1)])


def dense_bradley_terry(judgements, weight, n, alpha):
    """The items x items Newton fit this module used before it went sparse (oracle)."""
    wins = np.zeros((n, n))
    for (a, b, outcome), w in zip(judgements, weight, strict=True):
        if outcome == 0:
            wins[a, b] += w / 2
            wins[b, a] += w / 2
        else:
            wins[(a, b) if outcome == 1 else (b, a)] += w
    counts, centre, theta = wins + wins.T, np.full((n, n), 1 / n), np.zeros(n)
    for _ in range(100):
        p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))
        information = np.diag((counts * p * p.T).sum(1) + alpha) - counts * p * p.T
        gradient = wins.sum(1) - (counts * p).sum(1) - alpha * theta
        if np.max(np.abs(gradient)) < 1e-12:
            break
        theta = theta + np.linalg.solve(information + centre, gradient)
    projector = np.eye(n) - centre
    covariance = projector @ np.linalg.inv(information + centre) @ projector
    return theta, np.sqrt(np.diag(covariance))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.0, 0.01])
def test_sparse_bradley_terry_matches_the_dense_fit(seed, alpha):
    rng = np.random.default_rng(seed)
    n = 40
    judgements = random_connected_judgements(rng, n, 400)
    weight = rng.uniform(0.2, 1.0, size=2)
    by_annotator = {"x": judgements[::2], "y": judgements[1::2]}
    fit = bradley_terry(
        by_annotator, items=range(n), alpha=alpha, weights={"x": weight[0], "y": weight[1]}
    )
    theta, se = dense_bradley_terry(
        judgements[::2] + judgements[1::2],
        [weight[0]] * len(judgements[::2]) + [weight[1]] * len(judgements[1::2]),
        n,
        alpha,
    )
    np.testing.assert_allclose(fit.log_strengths, theta, atol=1e-6)
    np.testing.assert_allclose(fit.se, se, atol=1e-6)


@pytest.mark.parametrize("degree", [6, 10, 30])
def test_approximate_standard_errors_stay_near_the_exact_ones(degree):
    rng = np.random.default_rng(7)
    n = 1000
    theta = rng.normal(size=n)
    a = rng.integers(0, n, size=n * degree // 2)
    b = (a + rng.integers(1, n, size=a.size)) % n
    outcome = np.where(rng.random(a.size) < 1 / (1 + np.exp(theta[b] - theta[a])), 1, -1)
    judgements = list(zip(a.tolist(), b.tolist(), outcome.tolist(), strict=True))
    exact = bradley_terry(judgements, items=range(n), alpha=0.01)
    approximate = bradley_terry(judgements, items=range(n), alpha=0.01, exact_se_max=0)
    assert exact.se_exact
    assert not approximate.se_exact
    np.testing.assert_allclose(approximate.log_strengths, exact.log_strengths, atol=1e-6)
    compared = ~np.isnan(exact.se)
    np.testing.assert_allclose(approximate.se[compared], exact.se[compared], rtol=0.02)


@settings(max_examples=30, deadline=None)
@given(st.lists(judgement, min_size=1, max_size=30))
def test_bradley_terry_regularised_is_finite_and_centred(judgements):
    fit = bradley_terry(judgements, alpha=0.01)
    assert np.all(np.isfinite(fit.log_strengths))
    assert np.all(fit.se > 0)
    assert fit.log_strengths.sum() == pytest.approx(0.0, abs=1e-9)


# --- chance level of transitivity kappa from the annotator's own tie rate ---------------------


@pytest.mark.parametrize("tie_rate", [0.0, 0.1, 1 / 3, 0.55, 0.9])
def test_transitivity_chance_equals_brute_force_enumeration(tie_rate):
    # every outcome combination of a triplet's three pairs, weighted by its probability
    q = (1 - tie_rate) / 2
    prob = {1: q, -1: q, 0: tie_rate}
    total = 0.0
    for outcomes in product((1, -1, 0), repeat=3):
        judgements = [("x", "y", outcomes[0]), ("y", "z", outcomes[1]), ("x", "z", outcomes[2])]
        transitive, complete = triplet_counts(judgements)
        assert complete == 1
        total += transitive * np.prod([prob[o] for o in outcomes])
    assert transitivity_chance(tie_rate) == pytest.approx(total, abs=1e-12)


@pytest.mark.parametrize("tie_rate", [0.0, 0.15, 1 / 3, 0.6])
def test_a_random_annotator_sits_near_zero_whatever_their_tie_rate(tie_rate):
    # simulation: random answers on every pair of 14 items (364 triplets), sides at random
    rng = np.random.default_rng(7)
    observed, amidei = [], []
    for _ in range(200):
        judgements = []
        for a, b in combinations(range(14), 2):
            outcome = 0 if rng.random() < tie_rate else int(rng.choice([1, -1]))
            judgements.append((a, b, outcome) if rng.random() < 0.5 else (b, a, -outcome))
        observed.append(transitivity_kappa(judgements))  # the default is the dashboard's
        amidei.append(transitivity_kappa(judgements, chance="amidei"))
    assert abs(np.mean(observed)) < 0.03
    if tie_rate == 0.0:  # the defect: never pressing "equal" scored about 0.52 against 13/27
        assert np.mean(amidei) == pytest.approx(0.52, abs=0.03)


def test_transitivity_chance_bad_input_and_all_ties():
    with pytest.raises(ValueError, match=r"tie_rate must be in \[0, 1\]"):
        transitivity_chance(1.5)
    with pytest.raises(ValueError, match="chance must be"):
        transitivity_kappa([("a", "b", 1)], chance="uniform")
    all_ties = [("a", "b", 0), ("b", "c", 0), ("a", "c", 0)]
    # issue 23: the library's default call gave an all-ties annotator 1.0, the dashboard nan
    assert np.isnan(transitivity_kappa(all_ties))  # P(E) = 1: the dashboard's reading
    assert transitivity_kappa(all_ties, chance="amidei") == 1.0


# ------------------------------------------------------------------ adaptive scheduling


def kemeny_cost(groups, judgements):
    """Disagreements |outcome - relation| of a weak order with the judgements (oracle)."""
    rank = {item: r for r, group in enumerate(groups) for item in group}
    return sum(abs(o - ((rank[a] < rank[b]) - (rank[a] > rank[b]))) for a, b, o in judgements)


def test_refine_ranking_pulls_a_misplaced_item_back():
    # 0 > 1 > ... > 5 truly; one wrong answer put 5 on top, later answers say otherwise.
    judgements = [(5, 0, 1), (1, 5, 1), (2, 5, 1), (3, 5, 1), (4, 5, 1), (0, 1, 1), (1, 2, 1)]
    judgements += [(2, 3, 1), (3, 4, 1)]
    start = [[5], [0], [1], [2], [3], [4]]
    refined = refine_ranking(start, judgements)
    assert refined == [[0], [1], [2], [3], [4], [5]]
    assert kemeny_cost(refined, judgements) < kemeny_cost(start, judgements)


def test_refine_ranking_keeps_ties_and_weights():
    assert refine_ranking([["a", "b"], ["c"]], [("a", "b", 0), ("b", "c", 1)]) == [
        ["a", "b"],
        ["c"],
    ]
    judgements = [("a", "b", 1), ("b", "a", 1)]
    assert refine_ranking([["a"], ["b"]], judgements, weights=[1, 3]) == [["b"], ["a"]]
    assert refine_ranking([["a"], ["b"]], judgements, weights=[3, 1]) == [["a"], ["b"]]


@settings(max_examples=60, deadline=None)
@given(
    st.permutations(range(6)),
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5), st.sampled_from([1, 0, -1])),
        max_size=25,
    ),
)
def test_refine_ranking_never_disagrees_more_than_its_start(order, raw):
    judgements = [(a, b, o) for a, b, o in raw if a != b]
    start = [[item] for item in order]
    refined = refine_ranking(start, judgements)
    assert sorted(i for group in refined for i in group) == list(range(6))
    assert kemeny_cost(refined, judgements) <= kemeny_cost(start, judgements)


def test_kappa_upper_bound_covers_the_estimate_and_narrows():
    point = transitivity_kappa_from_counts(30, 40, tie_rate=0.2)
    small = transitivity_kappa_upper(30, 40, tie_rate=0.2)
    large = transitivity_kappa_upper(300, 400, tie_rate=0.2)
    assert point < large < small <= 1
    assert transitivity_kappa_upper(30, 40, tie_rate=0.2, level=0.5) == pytest.approx(
        point, abs=0.02
    )
    with pytest.raises(ValueError, match="level"):
        transitivity_kappa_upper(1, 2, level=1.0)


def test_bradley_terry_weights_count_judgements_that_many_times():
    first = [("a", "b", 1), ("b", "c", 1), ("c", "a", 1), ("a", "c", 0)]
    second = [("b", "a", 1), ("c", "b", 1), ("a", "c", 1)]
    doubled = bradley_terry({"x": first + first, "y": second})
    weighted = bradley_terry({"x": first, "y": second}, weights={"x": 2.0, "y": 1.0})
    np.testing.assert_allclose(weighted.log_strengths, doubled.log_strengths, atol=1e-8)
    np.testing.assert_allclose(weighted.se, doubled.se, atol=1e-8)
    extra = [*second, ("a", "b", 1)]
    alone = bradley_terry({"y": extra}, items=["a", "b", "c"])
    silenced = bradley_terry(
        {"x": first, "y": extra}, items=["a", "b", "c"], weights={"x": 0.0, "y": 1.0}
    )
    np.testing.assert_allclose(silenced.log_strengths, alone.log_strengths, atol=1e-8)
    with pytest.raises(ValueError, match="mapping"):
        bradley_terry(first, weights={"x": 1.0})
    with pytest.raises(ValueError, match=">= 0"):
        bradley_terry({"x": first}, weights={"x": -1.0})


def test_reliability_weight():
    assert reliability_weight(0.0) == 1.0
    assert reliability_weight(0.1) == pytest.approx(0.64)
    assert reliability_weight(0.5) == reliability_weight(0.9) == 0.0
    with pytest.raises(ValueError, match="error_rate"):
        reliability_weight(1.5)


def test_side_bias():
    assert side_bias(50, 50).p_value == pytest.approx(1.0)
    assert side_bias(80, 20).share_a == 0.8
    assert side_bias(80, 20).p_value < 1e-8
    assert math.isnan(side_bias(0, 0).share_a)


def test_bradley_terry_newton_steps_run_with_one_blas_thread(monkeypatch):
    # Vector products of O(items) each: OpenBLAS's thread pool made the fit 4-7x slower on a
    # loaded machine (benchmarks/pair_crowd.py); the fit runs them on one thread whatever
    # the process's setting, and gives the process its setting back
    from threadpoolctl import threadpool_info, threadpool_limits

    from analytics.metrics import preferences

    def blas_threads() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    seen: list[set[int]] = []
    solve = preferences._solve_gauged

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return solve(*args, **kwargs)

    monkeypatch.setattr(preferences, "_solve_gauged", spy)
    rng = np.random.default_rng(4)
    judgements = [(int(a), int(b), 1) for a, b in rng.integers(0, 30, size=(300, 2)) if a != b]
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        bradley_terry(judgements, alpha=0.01)
        assert blas_threads() == before
    assert before == {2}
    assert seen
    assert all(threads == {1} for threads in seen)
