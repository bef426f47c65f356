"""Batches: annotators of a large pairwise question each rank an overlapping batch of items."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from analytics.pipeline import AFTER_UPDATE_HOOKS
from apps.preferences.models import PairPool, PairSession, clean_pairwise_settings
from apps.preferences.scheduling import batch_draw
from apps.preferences.selectors import (
    batch_evidence,
    batch_uncertainty,
    judgement_progress,
    question_scores,
)
from apps.preferences.services import pair_next, pair_pool_after_update, pair_pool_refit
from apps.studies.models import Question
from benchmarks.pair_budget import adaptive_batches, crowd_errors
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


def draw_rounds(n: int, size: int, annotators: int, seed: int = 0) -> list[list[int]]:
    """Batches drawn one annotator after another, each seeing the coverage so far."""
    rng = np.random.default_rng(seed)
    coverage: Counter[int] = Counter()
    batches = []
    for _ in range(annotators):
        batch = batch_draw(range(n), size=size, coverage=coverage, uncertainty={}, rng=rng)
        coverage.update(batch)
        batches.append(batch)
        assert max(coverage[i] for i in range(n)) - min(coverage[i] for i in range(n)) <= 1
    return batches


def test_batches_cover_every_item_evenly():
    batches = draw_rounds(60, 20, 12)
    assert all(len(set(batch)) == 20 for batch in batches)
    assert set(Counter(item for batch in batches for item in batch).values()) == {4}


def test_later_batches_straddle_the_earlier_ones():
    batches = draw_rounds(60, 20, 6, seed=3)
    first_round = batches[:3]
    assert sorted(item for batch in first_round for item in batch) == list(range(60))
    for batch in batches[3:]:  # each joins items of every first-round batch
        assert all(set(batch) & set(earlier) for earlier in first_round)


def test_equally_covered_items_go_least_certain_first():
    uncertainty = {item: 0.1 * item for item in range(10)} | {4: float("nan")}  # 4 never compared
    coverage = dict.fromkeys(range(10), 1) | {0: 0}
    chosen = batch_draw(
        range(10),
        size=4,
        coverage=coverage,
        uncertainty=uncertainty,
        rng=np.random.default_rng(0),
    )
    assert chosen == [0, 4, 8, 9]  # the uncovered item, then the least certain, queue order


def test_ties_in_uncertainty_are_drawn_at_random_and_the_draw_is_linear_in_the_pool():
    # 100,000 items: a fifth in no batch yet, uncertainty in three levels (ties at the end)
    rng = np.random.default_rng(1)
    n = 100_000
    coverage = dict(enumerate((rng.random(n) > 0.2).astype(int).tolist()))
    uncertainty = dict(enumerate(rng.choice([0.1, 0.5, 1.0], size=n).tolist()))
    batches = [
        batch_draw(range(n), size=40_000, coverage=coverage, uncertainty=uncertainty, rng=rng)
        for _ in range(2)
    ]
    uncovered = [i for i in range(n) if coverage[i] == 0]
    for batch in batches:
        assert len(set(batch)) == 40_000
        assert batch == sorted(batch)  # queue order
        assert set(uncovered) <= set(batch)  # coverage first
        extra = [i for i in batch if coverage[i] == 1]
        levels = Counter(uncertainty[i] for i in extra)
        assert set(levels) == {1.0}  # then the least certain
    assert batches[0] != batches[1]  # ties at the threshold drawn at random


def test_the_pooled_ranking_over_batches_recovers_the_true_order():
    # 12 annotators (0-15 % of answers flipped, one answering every pair reversed) rank
    # batches of 20 of 60 items; the weighted pooled Bradley-Terry ranking merges them
    rng = np.random.default_rng(5)
    truth = rng.permutation(60).astype(float)
    curve, _ = adaptive_batches(truth, batch=20, errors=crowd_errors(12, rng), rng=rng)
    assert curve[-1][1] >= 0.85
    assert curve[-1][1] > curve[2][1]  # more batches, better ranking


def test_batch_size_setting_is_checked():
    assert clean_pairwise_settings({}).batch_size == 0
    assert clean_pairwise_settings({"batch_size": 50}).batch_size == 50
    for bad in (1, -3, 2.5, True, "20"):
        with pytest.raises(ValidationError) as caught:
            clean_pairwise_settings({"batch_size": bad})
        assert "batch_size" in caught.value.message_dict


def test_each_annotator_ranks_a_batch_and_progress_counts_the_batch(db):
    setup = make_pairwise_study(
        n_items=12, n_annotators=4, settings={"batch_size": 6, "calibration_triplets": 2}
    )
    # the home card's estimate before the first visit is the batch's, as the page's after it
    expected = judgement_progress(question=setup.question, annotator=setup.annotators[0])
    whole = make_pairwise_study(n_items=12, n_annotators=1, settings={"calibration_triplets": 2})
    assert (
        expected["total"]
        < judgement_progress(question=whole.question, annotator=whole.annotators[0])["total"]
    )
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    for annotator in setup.annotators:
        state = pair_next(question=setup.question, annotator=annotator)
        assert len(state.scheduler.items) == 6
        assert state.progress["total"] == expected["total"]
        answer_all(setup.question, annotator, by_level(levels))
    sessions = PairSession.objects.filter(question=setup.question)
    coverage = Counter(item for session in sessions for item in session.items)
    assert set(coverage.values()) == {2}  # 4 batches of 6 over 12 items: each item twice
    assert set(coverage) == set(levels)


def store_fit(question: Question, se: dict[int, float], *, alpha: float = 0.0) -> None:
    """Store a pooled fit with these standard errors, as :func:`pair_pool_refit` does."""
    PairPool.objects.update_or_create(
        question=question,
        defaults={
            "items": np.array(list(se), dtype=np.int64).tobytes(),
            "se": np.array(list(se.values()), dtype=np.float64).tobytes(),
            "n_judgements": 10,
            "alpha": alpha,
            "fitted_at": timezone.now(),
        },
    )


def test_the_next_batch_takes_the_items_whose_stored_pooled_position_is_least_certain(
    db, pinned_pair_seed
):
    setup = make_pairwise_study(
        n_items=12, n_annotators=4, settings={"batch_size": 4, "calibration_triplets": 0}
    )
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    for annotator in setup.annotators[:3]:  # 3 batches of 4: every item in one
        answer_all(setup.question, annotator, by_level(levels))
    _, comparisons = batch_evidence(question=setup.question)
    # the most compared items are the least certain in the stored fit (say, compared only
    # by an annotator of low weight)
    uncertain = sorted(sorted(levels, key=lambda item: -comparisons[item])[:4])
    store_fit(setup.question, {item: 2.0 if item in uncertain else 0.3 for item in levels})
    state = pair_next(question=setup.question, annotator=setup.annotators[3])
    assert sorted(state.session.items) == uncertain
    assert PairPool.objects.get(question=setup.question).draws == 4


def test_without_a_stored_unregularised_fit_the_draw_favours_the_least_compared(db):
    setup = make_pairwise_study(n_items=6, n_annotators=1, settings={"batch_size": 3})
    comparisons = {setup.items[0].pk: 4, setup.items[1].pk: 1}
    expected = {setup.items[0].pk: 0.5, setup.items[1].pk: 1.0}
    assert batch_uncertainty(question=setup.question, comparisons=comparisons) == expected
    # a regularised fit (graph not strongly connected): its errors are the prior's, not read
    store_fit(setup.question, {setup.items[0].pk: 9.0}, alpha=0.01)
    assert batch_uncertainty(question=setup.question, comparisons=comparisons) == expected
    store_fit(setup.question, {setup.items[0].pk: 9.0, setup.items[1].pk: float("nan")})
    assert batch_uncertainty(question=setup.question, comparisons=comparisons) == {
        setup.items[0].pk: 9.0,
        setup.items[1].pk: float("inf"),  # in the fit's items but never compared
    }


def test_the_pooled_fit_is_stored_after_quality_updates_when_due(db):
    assert pair_pool_after_update in AFTER_UPDATE_HOOKS
    setup = make_pairwise_study(
        n_items=8, n_annotators=2, settings={"batch_size": 5, "calibration_triplets": 0}
    )
    levels = {item.pk: k % 3 for k, item in enumerate(setup.items)}
    for annotator in setup.annotators:
        answer_all(setup.question, annotator, by_level(levels))
    pair_pool_after_update(setup.question.pk)
    pool = PairPool.objects.get(question=setup.question)
    scores = question_scores(question=setup.question)
    assert pool.fitted_at is not None
    assert pool.n_judgements == scores.n_judgements > 0
    ids, se = np.frombuffer(pool.items, dtype=np.int64), np.frombuffer(pool.se)
    stored = dict(zip(ids.tolist(), se.tolist(), strict=True))
    assert stored == pytest.approx({row.item.pk: row.se for row in scores.rows}, nan_ok=True)
    assert pool.alpha == scores.alpha
    assert not pair_pool_refit(question=setup.question)  # not due: no judgement since
    assert pair_pool_refit(question=setup.question, force=True)
    unbatched = make_pairwise_study(n_items=4, n_annotators=1)
    assert not pair_pool_refit(question=unbatched.question, force=True)
