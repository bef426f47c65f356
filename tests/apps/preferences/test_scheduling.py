"""Tests of the Django-free PairScheduler: pruning, calibration, audits, rebuild, rankings."""

from __future__ import annotations

import math
import random
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.metrics.preferences import triplet_counts
from apps.preferences.scheduling import PairScheduler


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def truthful(levels):
    return lambda a, b: sign(levels[a] - levels[b])


def noisy(levels, rate, rnd, *, strict=False):
    """With probability ``rate``, one of the other allowed outcomes instead of the truth."""
    outcomes = (1, -1) if strict else (1, 0, -1)

    def answer(a, b):
        truth = sign(levels[a] - levels[b])
        return rnd.choice([o for o in outcomes if o != truth]) if rnd.random() < rate else truth

    return answer


def run(scheduler, answer, *, max_steps):
    """Drive a scheduler to the end; fail if it asks more than ``max_steps`` pairs."""
    for _ in range(max_steps + 1):
        pair = scheduler.next_pair()
        if pair is None:
            return scheduler
        scheduler.record(*pair, answer(*pair))
    pytest.fail(f"did not terminate within {max_steps} pairs")


def closure(n, judgements):
    """Reflexive-transitive closure of 'at least as good as' (Warshall, independent oracle)."""
    ge = np.eye(n, dtype=bool)
    for a, b, outcome, *_ in judgements:
        ge[a, b] |= outcome >= 0
        ge[b, a] |= outcome <= 0
    for k in range(n):
        ge |= np.outer(ge[:, k], ge[k, :])
    return ge


def expected_groups(levels):
    return [
        sorted(i for i in range(len(levels)) if levels[i] == v)
        for v in sorted(set(levels), reverse=True)
    ]


@st.composite
def sessions(draw, max_items=12, strict=None):
    strict = draw(st.booleans()) if strict is None else strict
    n = draw(st.integers(0, max_items))
    if strict:
        levels = draw(st.permutations(range(n)))
    else:
        levels = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    options = {
        "strict": strict,
        "calibration_triplets": draw(st.integers(0, min(math.comb(n, 3), 5))),
        "audit_rate": draw(st.sampled_from([0.0, 0.25])),
        "seed": draw(st.integers(0, 2**32)),
    }
    return list(levels), options


# ------------------------------------------------------------------ consistent annotators


@settings(max_examples=150, deadline=None)
@given(sessions())
def test_consistent_annotator(session):
    levels, options = session
    n = len(levels)
    s = run(PairScheduler(range(n), **options), truthful(levels), max_steps=n * (n - 1) // 2)

    pairs = [frozenset(j[:2]) for j in s.judgements]
    assert len(pairs) == len(set(pairs)), "a pair was asked twice"
    for k, (a, b, _, kind) in enumerate(s.judgements):
        implied = closure(n, s.judgements[:k])
        known = implied[a, b] or implied[b, a]
        if kind == "sort":
            assert not known, f"sort question {k} ({a}, {b}) was implied"
        elif kind == "audit":
            assert known, f"audit {k} ({a}, {b}) was not implied"

    assert s.ranking() == expected_groups(levels)
    assert s.contradictions == []
    kappa = s.transitivity_kappa()
    assert math.isnan(kappa) or kappa == pytest.approx(1.0)

    calibration = [j[:3] for j in s.judgements if j.kind == "calibration"]
    assert [j.kind for j in s.judgements[: len(calibration)]] == ["calibration"] * len(calibration)
    assert triplet_counts(calibration)[1] >= options["calibration_triplets"]


@pytest.mark.parametrize("ties", [False, True])
def test_ranking_exact_and_pruned_for_a_larger_hidden_order(ties):
    rnd = random.Random(5)
    levels = [rnd.randrange(12) if ties else i for i in range(40)]
    rnd.shuffle(levels)
    s = run(PairScheduler(range(40), seed=3), truthful(levels), max_steps=780)
    assert s.ranking() == expected_groups(levels)
    assert len(s.judgements) <= sum(math.ceil(math.log2(k)) for k in range(1, 41))


def test_mean_asked_at_n100_is_within_3_percent_of_the_bound():
    bound = math.ceil(math.lgamma(101) / math.log(2))
    asked = []
    for seed in range(5):
        levels = list(range(100))
        random.Random(seed).shuffle(levels)
        s = run(PairScheduler(range(100), seed=seed), truthful(levels), max_steps=4950)
        asked.append(len(s.judgements))
    assert np.mean(asked) <= 1.03 * bound


def test_calibration_triplets_are_disjoint_interleaved_and_complete():
    s = PairScheduler(range(12), calibration_triplets=4, seed=11)
    levels = list(range(12))
    first = []
    for _ in range(12):
        pair = s.next_pair()
        first.append(pair)
        s.record(*pair, truthful(levels)(*pair))
    assert [j.kind for j in s.judgements] == ["calibration"] * 12
    assert s.next_pair() is not None
    assert s.judgements[-1].kind == "calibration"
    items = [i for pair in first for i in pair]
    assert len(set(items)) == 12  # 4 item-disjoint triplets cover 12 items
    assert triplet_counts([j[:3] for j in s.judgements]) == (4, 4)
    # Interleaved: the first four pairs belong to four different triplets.
    groups = [frozenset(p) for p in first]
    triplets = {frozenset().union(*(g for g in groups if g & t)) for t in groups}
    assert len(triplets) == 4
    assert len({next(t for t in triplets if g <= t) for g in groups[:4]}) == 4


def test_calibration_is_used_by_the_sort():
    """After calibration, pairs it settles are never asked, and the sort continues from it."""
    levels = list(range(9))
    s = run(PairScheduler(range(9), calibration_triplets=3, seed=2), truthful(levels), max_steps=36)
    calibration = [j for j in s.judgements if j.kind == "calibration"]
    implied = closure(9, calibration)
    for a, b, _, kind in s.judgements[len(calibration) :]:
        assert kind == "sort"
        assert not implied[a, b]
        assert not implied[b, a]


# ------------------------------------------------------------------- noisy annotators


@settings(max_examples=100, deadline=None)
@given(sessions(), st.sampled_from([0.05, 0.2, 1.0]), st.integers(0, 2**32))
def test_noisy_annotators_never_crash(session, rate, answer_seed):
    levels, options = session
    n = len(levels)
    s = PairScheduler(range(n), **options)
    answer = noisy(levels, rate, random.Random(answer_seed), strict=options["strict"])
    run(s, answer, max_steps=n * (n - 1) // 2)

    pairs = [frozenset(j[:2]) for j in s.judgements]
    assert len(pairs) == len(set(pairs))
    ranked = [i for group in s.ranking() for i in group]
    assert sorted(ranked) == list(range(n))
    # The final closure is a weak order: every pair known.
    contradicted = {c.index for c in s.contradictions}
    ge = closure(n, [j for k, j in enumerate(s.judgements) if k not in contradicted])
    assert (ge | ge.T).all()
    position = {i: k for k, group in enumerate(s.ranking()) for i in group}
    for k, (a, b, outcome, _) in enumerate(s.judgements):
        if k not in contradicted:  # every judgement kept in the closure agrees with the ranking
            assert sign(position[b] - position[a]) == outcome
    for c in s.contradictions:
        j = s.judgements[c.index]
        assert j.kind in ("calibration", "audit")
        assert (j.item_a, j.item_b, j.outcome) == (c.item_a, c.item_b, c.outcome)
        assert c.implied != c.outcome
    sort_only = triplet_counts([j[:3] for j in s.judgements if j.kind == "sort"])
    assert sort_only[0] == sort_only[1], "sort-only triplets are transitive by construction"
    kappa = s.transitivity_kappa()
    assert math.isnan(kappa) or -3.0 <= kappa <= 1.0


def test_contradiction_keeps_the_earlier_implied_relation():
    cycle = {("a", "b"): 1, ("b", "c"): 1, ("c", "a"): 1}

    def answer(x, y):
        return cycle[(x, y)] if (x, y) in cycle else -cycle[(y, x)]

    s = run(PairScheduler("abc", calibration_triplets=1, seed=4), answer, max_steps=3)
    assert len(s.judgements) == 3
    assert len(s.contradictions) == 1
    (contradiction,) = s.contradictions
    assert contradiction.index == 2
    first_two = closure(3, [("abc".index(a), "abc".index(b), o) for a, b, o, _ in s.judgements[:2]])
    order = sorted(range(3), key=lambda i: -first_two[i].sum())
    assert s.ranking() == [["abc"[i]] for i in order]
    assert s.transitivity_kappa() == pytest.approx(-13 / 14)


def test_audits_ask_implied_pairs_that_close_triplets():
    levels = list(range(30))
    random.Random(1).shuffle(levels)
    s = run(PairScheduler(range(30), audit_rate=0.3, seed=9), truthful(levels), max_steps=435)
    audits = [k for k, j in enumerate(s.judgements) if j.kind == "audit"]
    assert len(audits) > 5
    for k in audits:  # each audit completes a triplet of pairs asked before it
        a, b = s.judgements[k][:2]
        asked = {frozenset(j[:2]) for j in s.judgements[:k]}
        assert any({frozenset((a, m)), frozenset((m, b))} <= asked for m in range(30))
    assert s.transitivity_kappa() == pytest.approx(1.0)
    assert s.ranking() == expected_groups(levels)


# ------------------------------------------------------------------ rebuild and errors


@settings(max_examples=60, deadline=None)
@given(sessions(max_items=8), st.integers(0, 2**32))
def test_rebuild_from_stored_judgements_gives_the_same_next_pair(session, answer_seed):
    levels, options = session
    n = len(levels)
    s = PairScheduler(range(n), **options)
    rnd = random.Random(answer_seed)
    outcomes = [1, -1] if options["strict"] else [1, 0, -1]
    while True:
        copy = PairScheduler.from_judgements(range(n), s.judgements, **options)
        assert copy.next_pair() == s.next_pair()
        assert copy.remaining_estimate() == s.remaining_estimate()
        pair = s.next_pair()
        if pair is None:
            break
        s.record(*pair, rnd.choice(outcomes))
    assert copy.ranking() == s.ranking()
    assert copy.contradictions == s.contradictions
    assert copy.judgements == s.judgements


def test_rebuild_rejects_a_history_from_other_settings():
    s = PairScheduler(range(6), seed=1)
    levels = list(range(6))
    run(s, truthful(levels), max_steps=15)
    with pytest.raises(ValueError, match="is not the pair"):
        PairScheduler.from_judgements(range(6), s.judgements, calibration_triplets=2, seed=1)
    with pytest.raises(ValueError, match="is not the pair"):
        PairScheduler.from_judgements(range(6), [*s.judgements, (0, 1, 1)], seed=1)


def test_record_accepts_the_swapped_pending_pair():
    s = PairScheduler(["x", "y"], seed=0)
    a, b = s.next_pair()
    assert s.next_pair() == (a, b)  # idempotent while pending
    s.record(b, a, 1)
    assert s.judgements[0][:3] == (a, b, -1)
    assert s.ranking() == [[b], [a]]
    assert s.next_pair() is None
    assert s.remaining_estimate() == 0


def test_record_errors():
    s = PairScheduler(["x", "y", "z"], seed=0)
    with pytest.raises(ValueError, match="no pair is pending"):
        s.record("x", "y", 1)
    a, b = s.next_pair()
    (c,) = {"x", "y", "z"} - {a, b}
    with pytest.raises(ValueError, match="not the pending pair"):
        s.record(a, c, 1)
    with pytest.raises(ValueError, match="not the pending pair"):
        s.record(a, "nope", 1)
    with pytest.raises(ValueError, match="outcome"):
        s.record(a, b, 2)
    assert s.judgements == []
    assert s.next_pair() == (a, b)


def test_strict_mode_rejects_ties_and_keeps_the_pending_pair():
    s = PairScheduler(range(4), strict=True, seed=0)
    pair = s.next_pair()
    with pytest.raises(ValueError, match="ties"):
        s.record(*pair, 0)
    assert s.judgements == []
    assert s.next_pair() == pair


@pytest.mark.parametrize(
    ("items", "options", "message"),
    [
        (["a", "a"], {}, "unique"),
        (range(4), {"calibration_triplets": 5}, "calibration_triplets"),
        (range(4), {"calibration_triplets": -1}, "calibration_triplets"),
        (range(4), {"audit_rate": 1.0}, "audit_rate"),
    ],
)
def test_invalid_settings(items, options, message):
    with pytest.raises(ValueError, match=message):
        PairScheduler(items, **options)


@pytest.mark.parametrize("n", [0, 1])
def test_nothing_to_ask(n):
    s = PairScheduler(range(n))
    assert s.next_pair() is None
    assert s.ranking() == [[0]] * n
    assert math.isnan(s.transitivity_kappa())


def test_remaining_estimate():
    n = 50
    s = PairScheduler(range(n), seed=8)
    start = s.remaining_estimate()
    assert start == round(math.lgamma(n + 1) / math.log(2))  # log2 n!
    levels = list(range(n))
    random.Random(8).shuffle(levels)
    run(s, truthful(levels), max_steps=n * n)
    assert len(s.judgements) == pytest.approx(start, rel=0.05)
    assert s.remaining_estimate() == 0
    with_calibration = PairScheduler(range(n), calibration_triplets=5, audit_rate=0.5, seed=8)
    assert with_calibration.remaining_estimate() == 15 + 2 * start


def test_ranking_before_the_end_is_a_linear_extension():
    s = PairScheduler(range(5), seed=0)
    levels = [4, 3, 2, 1, 0]
    for _ in range(3):
        pair = s.next_pair()
        s.record(*pair, truthful(levels)(*pair))
    ge = closure(5, s.judgements)
    position = {i: k for k, group in enumerate(s.ranking()) for i in group}
    for x, y in combinations(range(5), 2):
        if ge[x, y] and not ge[y, x]:
            assert position[x] < position[y]
